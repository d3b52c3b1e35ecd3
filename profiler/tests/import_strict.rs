//! `hookprof import` through the binary: the posted LSM 2.4.9 lmbench summary and a kernbench
//! log import whole; a forged cell or field is refused (exit 2, one line naming file:line:col,
//! nothing written) or, with --lenient, dropped with a warning naming it; and whatever import
//! writes, `report` and `compare` read.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

/// The binary under test: `$HOOKPROF_BIN` when set (as `cargo xtask test` does), else the one
/// cargo built for these tests.
fn hookprof(args: &[&str]) -> Output {
    let bin = std::env::var_os("HOOKPROF_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_hookprof")));
    Command::new(bin).args(args).output().expect("run hookprof")
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn load(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The samples of `workload` in an imported results file.
fn samples(results: &serde_json::Value, workload: &str) -> Vec<f64> {
    results["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == workload)
        .unwrap_or_else(|| panic!("{workload} imported"))["clean"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// `report` in every format that reads samples, and `compare` of two files, exit as for good
/// input: 0, or 1 for a regression, never 2.
fn assert_report_and_compare_accept(old: &Path, new: &Path) {
    for format in ["text", "lmbench", "json", "markdown"] {
        let out = hookprof(&["report", "--format", format, path(old), path(new)]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "report {format}: {}",
            stderr(&out)
        );
    }
    let out = hookprof(&["compare", path(old), path(new), "--format", "json"]);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "compare: {:?} {}",
        out.status,
        stderr(&out)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(!c["workloads"].as_array().unwrap().is_empty());
}

/// The fixture with its line `n` (1-based) passed through `edit`, written into `dir`.
fn forged(dir: &Path, n: usize, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(data("lmbench2-summary-lsm-2.4.9.txt")).unwrap();
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i + 1 == n { edit(l) } else { l.to_string() })
        .collect();
    let p = dir.join("forged.txt");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

/// Line 66 of the fixture: 00-base's second run in the Processes table.
const ROW: usize = 66;

#[test]
fn the_posted_summary_imports_every_workload_and_report_and_compare_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = data("lmbench2-summary-lsm-2.4.9.txt");
    let out = hookprof(&["import", "lmbench", path(&fixture), "-o", path(dir.path())]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(stderr(&out), "", "nothing to warn of");
    for label in ["00-base", "01-lsm", "02-cap"] {
        let r = load(&dir.path().join(format!("{label}.json")));
        let workloads = r["workloads"].as_array().unwrap();
        // Every column with data in the posting (TCP conn was never run there).
        assert_eq!(workloads.len(), 42, "{label}");
        for w in workloads {
            assert_eq!(
                w["clean"].as_array().unwrap().len(),
                5,
                "{label} {}",
                w["name"]
            );
        }
    }
    assert_report_and_compare_accept(
        &dir.path().join("00-base.json"),
        &dir.path().join("01-lsm.json"),
    );
}

#[test]
fn one_bad_cell_is_exit_2_naming_file_line_and_column_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    for bad in ["abc", "NaN", "inf", "1e400", "-0.65"] {
        let file = forged(dir.path(), ROW, |l| l.replacen("0.65", bad, 1));
        let out_dir = dir.path().join("out");
        let out = hookprof(&["import", "lmbench", path(&file), "-o", path(&out_dir)]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        // `00-base Linux 2.4.9 866 0.41 ` is 29 characters: the cell starts in column 30.
        assert!(
            err.contains(&format!(
                "{}:66:30: '{bad}' in column null I/O",
                path(&file)
            )),
            "{err}"
        );
        assert!(
            !out_dir.exists(),
            "{bad}: nothing is written for a refused file"
        );
    }
}

#[test]
fn a_cut_row_or_an_extra_number_is_refused_too() {
    let dir = tempfile::tempdir().unwrap();
    for (edit, says) in [
        (
            (|l: &str| l.rsplit_once(' ').unwrap().0.to_string()) as fn(&str) -> String,
            "a cut line",
        ),
        (|l: &str| format!("{l} 6631"), "more cells than columns"),
    ] {
        let file = forged(dir.path(), ROW, edit);
        let out_dir = dir.path().join("out");
        let out = hookprof(&["import", "lmbench", path(&file), "-o", path(&out_dir)]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(":66:") && err.contains(says), "{err}");
        assert!(!out_dir.exists());
    }
}

#[test]
fn lenient_imports_the_rest_with_a_warning_naming_the_dropped_cell() {
    let dir = tempfile::tempdir().unwrap();
    let file = forged(dir.path(), ROW, |l| l.replacen("0.65", "-0.65", 1));
    let out_dir = dir.path().join("out");
    let out = hookprof(&[
        "import",
        "lmbench",
        path(&file),
        "-o",
        path(&out_dir),
        "--lenient",
    ]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "hookprof: warning: {}:66:30: '-0.65' in column null I/O is negative (a time or a \
             rate cannot be); the cell is dropped",
            path(&file)
        )
    );
    let base = load(&out_dir.join("00-base.json"));
    assert_eq!(base["workloads"].as_array().unwrap().len(), 42);
    // The dropped cell is missing, not zero and not negative; its row's other cells stay.
    assert_eq!(samples(&base, "null_io"), [0.64, 0.64, 0.65, 0.66]);
    assert_eq!(samples(&base, "stat"), [3.88, 3.97, 3.92, 3.97, 3.97]);
    assert_report_and_compare_accept(&out_dir.join("00-base.json"), &out_dir.join("01-lsm.json"));
}

#[test]
fn time_logs_are_checked_field_by_field_and_what_import_writes_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read_to_string(data("kernbench-series.log")).unwrap();
    let good = dir.path().join("good");
    let out = hookprof(&[
        "import",
        "time",
        path(&data("kernbench-series.log")),
        "-o",
        path(&good),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_report_and_compare_accept(
        &good.join("2.6.19-rc2_vanilla.json"),
        &good.join("PATCH_10_10_Task_watchers_v2.json"),
    );
    // Sixty-four seconds past the minute: refused where it is, or dropped with --lenient.
    let first = log.lines().position(|l| l.contains("elapsed")).unwrap();
    let line = log.lines().nth(first).unwrap();
    let forged_log = dir.path().join("k.log");
    std::fs::write(
        &forged_log,
        log.replacen(line, &line.replacen(":04.", ":64.", 1), 1),
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    let out = hookprof(&["import", "time", path(&forged_log), "-o", path(&out_dir)]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let at = line.find(" 2:").unwrap() + 2;
    assert!(
        err.contains(&format!(
            "k.log:{}:{at}: elapsed '2:64.29' has 64.29 seconds",
            first + 1
        )),
        "{err}"
    );
    assert!(!out_dir.exists());
    let out = hookprof(&[
        "import",
        "time",
        path(&forged_log),
        "-o",
        path(&out_dir),
        "--lenient",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stderr(&out).contains("the run is dropped"));
    let vanilla = load(&out_dir.join("2.6.19-rc2_vanilla.json"));
    assert_eq!(samples(&vanilla, "build").len(), 2);
    assert_report_and_compare_accept(
        &out_dir.join("2.6.19-rc2_vanilla.json"),
        &out_dir.join("PATCH_10_10_Task_watchers_v2.json"),
    );
}

/// `import lmbench TEXT` into a fresh directory of `dir`: its output and that directory.
fn import_text(dir: &Path, name: &str, text: &str, lenient: bool) -> (Output, PathBuf) {
    let file = dir.join(format!("{name}.txt"));
    std::fs::write(&file, text).unwrap();
    let out_dir = dir.join(format!("{name}-out"));
    let mut args = vec!["import", "lmbench", path(&file), "-o", path(&out_dir)];
    if lenient {
        args.push("--lenient");
    }
    (hookprof(&args), out_dir)
}

/// Every workload's samples in a results file, by name.
fn all_samples(results: &serde_json::Value) -> Vec<(String, Vec<f64>)> {
    let mut all: Vec<(String, Vec<f64>)> = results["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            let name = w["name"].as_str().unwrap().to_string();
            let values = samples(results, &name);
            (name, values)
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[test]
fn an_os_whose_release_reads_as_a_number_is_placed_by_the_count_of_the_columns() {
    let dir = tempfile::tempdir().unwrap();
    let posted = std::fs::read_to_string(data("lmbench2-summary-lsm-2.4.9.txt")).unwrap();
    let (out, original) = import_text(dir.path(), "posted", &posted, false);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // The releases of two configurations read as numbers; the third one's does not.
    let renamed = posted
        .replace("00-base Linux 2.4.9 ", "00-base SunOS 5.8 ")
        .replace("01-lsm Linux 2.4.9-l ", "01-lsm Linux 2.4 ");
    // Alone, the Local Communication table has a blank TCP conn in every row: no row there
    // is full to show where the OS ends.
    let local = {
        let lines: Vec<&str> = renamed.lines().collect();
        let start = lines
            .iter()
            .position(|l| l.starts_with("*Local* Communication latencies"))
            .unwrap();
        let end = start
            + lines[start..]
                .iter()
                .position(|l| l.starts_with("File & VM"))
                .unwrap();
        lines[start..end].join("\n") + "\n"
    };
    // Every configuration with a numeric release, 13 characters wide at most.
    let all_numeric = renamed.replace("02-cap Linux 2.4.9-c ", "02-cap FreeBSD 4.5 ");
    for (name, text, workloads) in [
        ("renamed", &renamed, 42),
        ("local", &local, 6),
        ("all-numeric", &all_numeric, 42),
    ] {
        let (out, out_dir) = import_text(dir.path(), name, text, false);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{name}: nothing to warn of");
        for (label, os) in [("00-base", "SunOS 5.8"), ("01-lsm", "Linux 2.4")] {
            let got = load(&out_dir.join(format!("{label}.json")));
            assert_eq!(got["options"]["lmbench_os"], os, "{name} {label}");
            let want = load(&original.join(format!("{label}.json")));
            let want: Vec<_> = all_samples(&want)
                .into_iter()
                .filter(|(w, _)| all_samples(&got).iter().any(|(g, _)| g == w))
                .collect();
            assert_eq!(want.len(), workloads, "{name} {label}");
            assert_eq!(
                all_samples(&got),
                want,
                "{name} {label}: values in their columns"
            );
        }
    }
    // A row one cell too long is still refused, whatever the OS could take.
    let long = renamed.replacen(
        "00-base SunOS 5.8 866 0.41 0.65 3.97",
        "00-base SunOS 5.8 866 0.41 0.65 0.66 3.97",
        1,
    );
    assert_ne!(long, renamed);
    let (out, _) = import_text(dir.path(), "long", &long, false);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(":66:") && err.contains("more cells than columns"),
        "{err}"
    );
}

#[test]
fn a_new_hosts_row_of_bad_cells_before_the_next_title_is_named_not_taken_for_prose() {
    let dir = tempfile::tempdir().unwrap();
    let posted = std::fs::read_to_string(data("lmbench2-summary-lsm-2.4.9.txt")).unwrap();
    let lines: Vec<&str> = posted.lines().collect();
    let title = lines
        .iter()
        .position(|l| l.starts_with("Context switching"))
        .unwrap();
    let cells = lines[title - 1].split_whitespace().count() - 3;
    for bad in ["abc", "NaN", "-"] {
        let row = format!("03-new SunOS 5.8 {}", vec![bad; cells].join(" "));
        let mut forged = lines.clone();
        forged.insert(title, &row);
        let text = forged.join("\n") + "\n";
        let (out, out_dir) = import_text(dir.path(), "bad-row", &text, false);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        // A host and an OS no row before has: the row is line title + 1, and its first value
        // starts after `03-new SunOS 5.8 `.
        assert!(
            err.contains(&format!(
                "bad-row.txt:{}:18: '{bad}' in column Mhz",
                title + 1
            )),
            "{bad}: {err}"
        );
        assert!(!out_dir.exists());
        let (out, out_dir) = import_text(dir.path(), "bad-row", &text, true);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{bad}: {err}");
        // One warning per cell, each naming it; the host has nothing to import.
        assert_eq!(err.lines().count(), cells, "{err}");
        assert!(err
            .lines()
            .all(|l| l.contains(&format!("bad-row.txt:{}:", title + 1))
                && l.ends_with("the cell is dropped")));
        assert!(!out_dir.join("03-new.json").exists());
        assert!(out_dir.join("00-base.json").exists());
        std::fs::remove_dir_all(&out_dir).unwrap();
    }
}

#[test]
fn a_time_log_cut_inside_its_last_runs_first_field_is_refused_not_taken_for_a_heading() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read_to_string(data("kernbench-series.log")).unwrap();
    let first = log.lines().position(|l| l.contains("elapsed")).unwrap();
    let kept: Vec<&str> = log.lines().take(first).collect();
    let times = log.lines().nth(first).unwrap();
    for cut in [&times[..3], &times[..6], &times[..8]] {
        let file = dir.path().join("cut.log");
        std::fs::write(&file, format!("{}\n{cut}", kept.join("\n"))).unwrap();
        let out_dir = dir.path().join("out");
        let out = hookprof(&["import", "time", path(&file), "-o", path(&out_dir)]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{cut}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("cut.log:{}:", first + 1)) && err.contains("cut"),
            "{cut}: {err}"
        );
        assert!(!out_dir.exists());
    }
}
