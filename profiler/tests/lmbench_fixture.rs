//! End to end through the `hookprof` binary with the LSM 2.4.9 lmbench posting: import it,
//! print it back as an lmbench summary, compare the base and LSM kernels, and reject bad input.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lmbench2-summary-lsm-2.4.9.txt")
}

fn hookprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookprof"))
        .args(args)
        .output()
        .expect("run hookprof")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Imports the fixture into a fresh directory.
fn imported() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = hookprof(&[
        "import",
        "lmbench",
        fixture().to_str().unwrap(),
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    dir
}

fn collapse(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_copy_matches_the_shared_fixture_when_present() {
    // Dev machines and CI keep the fixture beside the workspace; the copy must not drift.
    let shared = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/fixtures/lmbench2-summary-lsm-2.4.9.txt");
    if let Ok(original) = std::fs::read(&shared) {
        assert_eq!(original, std::fs::read(fixture()).unwrap());
    }
}

#[test]
fn import_gives_three_configurations_of_five_runs() {
    let dir = imported();
    for label in ["00-base", "01-lsm", "02-cap"] {
        let text = std::fs::read_to_string(dir.path().join(format!("{label}.json"))).unwrap();
        let r: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(r["label"], label);
        assert_eq!(r["source"], "import:lmbench");
        let workloads = r["workloads"].as_array().unwrap();
        assert!(!workloads.is_empty());
        for w in workloads {
            assert_eq!(
                w["clean"].as_array().unwrap().len(),
                5,
                "{label} {}",
                w["name"]
            );
        }
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn lmbench_report_reproduces_the_processor_rows() {
    let dir = imported();
    let files: Vec<String> = ["00-base", "01-lsm", "02-cap"]
        .iter()
        .map(|l| dir.path().join(format!("{l}.json")).display().to_string())
        .collect();
    let mut args = vec!["report", "--format", "lmbench"];
    args.extend(files.iter().map(String::as_str));
    let out = hookprof(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    let runs = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Processor, Processes"))
            .skip(1)
            .take_while(|l| !l.starts_with("Context switching"))
            .map(collapse)
            .filter(|l| l.starts_with("0") && !l.contains(" MEAN ") && !l.contains(" STDEV "))
            .collect()
    };
    let fixture_text = std::fs::read_to_string(fixture()).unwrap();
    let expected = runs(&fixture_text);
    assert_eq!(expected.len(), 15);
    assert_eq!(runs(&printed), expected);
}

#[test]
fn compare_flags_stat_and_open_close_as_regressions() {
    let dir = imported();
    let (old, new) = (
        dir.path().join("00-base.json"),
        dir.path().join("01-lsm.json"),
    );
    let out = hookprof(&[
        "compare",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let c: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let workload = |name: &str| {
        c["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("{name} compared"))
            .clone()
    };
    for (name, old_mean, new_mean, change) in [
        ("stat", 3.94, 4.17, 0.059),
        ("open_close", 5.02, 5.28, 0.051),
    ] {
        let w = workload(name);
        assert_eq!(w["verdict"], "regressed", "{name}");
        let near = |v: &serde_json::Value, x: f64, tol: f64| (v.as_f64().unwrap() - x).abs() < tol;
        assert!(
            near(&w["old"]["mean"], old_mean, 0.005),
            "{name}: {}",
            w["old"]["mean"]
        );
        assert!(
            near(&w["new"]["mean"], new_mean, 0.005),
            "{name}: {}",
            w["new"]["mean"]
        );
        assert!(
            near(&w["change"]["relative"], change, 0.0005),
            "{name}: {}",
            w["change"]
        );
    }
    for name in ["null_call", "fork_proc"] {
        assert_eq!(workload(name)["verdict"], "no_change", "{name}");
    }
    // Its interval, at the level Holm's step tests one of 42 workloads at, reaches past 10%
    // both ways: the five runs tell neither a slowdown nor a speedup of that size.
    assert_eq!(workload("select_tcp")["verdict"], "inconclusive");
    // The text form says it the way criterion does, and environment differences come first.
    let text = hookprof(&["compare", old.to_str().unwrap(), new.to_str().unwrap()]);
    let text = stdout(&text);
    assert!(text.contains("kernel: 2.4.9 -> 2.4.9-l"), "{text}");
    let stat = text.split("\nstat\n").nth(1).unwrap();
    assert!(stat.contains("change: [+2.34% +5.89% +9.56%]"), "{stat}");
    assert!(stat.contains("Performance has regressed."), "{stat}");
    // An imported summary's unit is its rows, each one run of lmbench: no runner's rounds.
    assert!(
        text.contains("Unit of replication: the run (each row of an imported summary"),
        "{text}"
    );
    assert!(stat.contains("(n = 5 runs)"), "{stat}");
    assert!(
        stat.contains("spread (sd): runs (rows of the summary) "),
        "{stat}"
    );
    assert!(!text.contains("round"), "{text}");
    assert_eq!(workload("stat")["replication"], "run");
    // --fail-on never reports but does not fail.
    let never = hookprof(&[
        "compare",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--fail-on",
        "never",
    ]);
    assert_eq!(never.status.code(), Some(0));
}

#[test]
fn a_directory_side_counts_each_file_once() {
    let dir = imported();
    let base = dir.path().join("00-base.json");
    // A configuration against itself, two files a side: each file is one observation, the mean
    // of its runs (each imported run is a round of its own).
    let twice = tempfile::tempdir().unwrap();
    for n in ["a.json", "b.json"] {
        std::fs::copy(&base, twice.path().join(n)).unwrap();
    }
    let side = twice.path().to_str().unwrap();
    let out = hookprof(&["compare", side, side, "--format", "markdown"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let md = stdout(&out);
    // stat's five runs: 3.88 3.97 3.92 3.97 3.97, mean 3.942.
    assert!(
        md.contains("| stat | 3.942 us | 3.942 us | +0.00% ["),
        "{md}"
    );
    assert!(md.contains("Unit of replication: the file"), "{md}");
    assert!(md.contains("**0 regressed, 0 improved"), "{md}");
    let text = stdout(&hookprof(&["compare", side, side]));
    assert!(text.contains("(n = 2 files)"), "{text}");
}

#[test]
fn inconclusive_exits_0_with_a_warning_or_3_when_asked() {
    let dir = imported();
    let base = dir.path().join("00-base.json");
    // One run a side (each workload cut to its first run): nothing measures the spread.
    let first_runs = |from: &std::path::Path, to: &std::path::Path| {
        let mut r: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(from).unwrap()).unwrap();
        for w in r["workloads"].as_array_mut().unwrap() {
            let first = w["clean"][0].clone();
            w["clean"] = serde_json::json!([first]);
        }
        std::fs::write(to, r.to_string()).unwrap();
    };
    let single = tempfile::tempdir().unwrap();
    let (one_old, one_new) = (single.path().join("a.json"), single.path().join("b.json"));
    first_runs(&base, &one_old);
    first_runs(&dir.path().join("01-lsm.json"), &one_new);
    let (old, new) = (one_old.to_str().unwrap(), one_new.to_str().unwrap());
    let out = hookprof(&["compare", old, new]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("one run of one round on each side"));
    let warning = stderr(&out);
    assert!(
        warning.starts_with("hookprof: warning: ")
            && warning.contains("inconclusive")
            && warning.contains("--fail-on inconclusive"),
        "{warning}"
    );
    let out = hookprof(&["compare", old, new, "--fail-on", "inconclusive"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // A regression outranks inconclusive workloads: 00-base against 01-lsm exits 1 either way.
    let lsm = dir.path().join("01-lsm.json");
    let out = hookprof(&[
        "compare",
        base.to_str().unwrap(),
        lsm.to_str().unwrap(),
        "--fail-on",
        "inconclusive",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
}

#[test]
fn compare_against_a_named_baseline() {
    let dir = imported();
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("base")).unwrap();
    std::fs::copy(
        dir.path().join("00-base.json"),
        root.path().join("base/r.json"),
    )
    .unwrap();
    let lsm = dir.path().join("01-lsm.json");
    let lsm = lsm.to_str().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_hookprof"))
        .args(["compare", "--baseline", "base", lsm])
        .env("HOOKPROF_BASELINE_DIR", root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stdout(&out).contains("Comparing 00-base (old) with 01-lsm (new)"));
    // The flag overrides the environment; an unknown name says how to save one.
    let out = hookprof(&[
        "compare",
        "--baseline",
        "nightly",
        lsm,
        "--baseline-dir",
        root.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--save-baseline nightly"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn no_arguments_print_the_command_list_and_the_exit_codes() {
    let out = hookprof(&[]);
    assert_eq!(out.status.code(), Some(2));
    let help = stderr(&out);
    for line in ["compare", "report", "import", "Exit codes", "130"] {
        assert!(help.contains(line), "{help}");
    }
}

/// Runs hookprof on bad input: exit 2, one line on stderr naming the file, no panic.
fn assert_rejected(args: &[&str], names: &str, says: &str) {
    let out = hookprof(args);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(names) && err.contains(says), "{err}");
}

#[test]
fn malformed_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let good = imported();
    let base = std::fs::read_to_string(good.path().join("00-base.json")).unwrap();
    let truncated = write("truncated.json", &base[..base.len() / 2]);
    let wrong = write(
        "wrong.json",
        &base.replacen("\"schema_version\": 1", "\"schema_version\": 99", 1),
    );
    let prose = write("prose.txt", "Hello list,\nno numbers here.\n");
    let notime = write("build.log", "make -j8\nall done\n");
    let out = dir.path().join("out").display().to_string();

    assert_rejected(
        &["report", &truncated],
        "truncated.json:",
        "not a hookprof results file",
    );
    assert_rejected(&["compare", &truncated, &wrong], "truncated.json:", "EOF");
    assert_rejected(&["report", &wrong], "wrong.json", "schema_version 99");
    assert_rejected(
        &["import", "lmbench", &prose, "-o", &out],
        "prose.txt",
        "no lmbench summary table",
    );
    assert_rejected(
        &["import", "time", &notime, "-o", &out],
        "build.log",
        "no /usr/bin/time lines",
    );
    assert!(
        !Path::new(&out).exists(),
        "nothing is written for bad input"
    );
}
