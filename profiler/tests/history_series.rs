//! `hookprof history` end to end on imported `/usr/bin/time` logs: a synthetic kernbench series
//! (vanilla and ten patches, three runs each) whose patches 05 to 10 add about 2% elapsed and
//! 4% system time.
use std::{
    path::Path,
    process::{Command, Output},
};

fn hookprof(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hookprof"))
        .args(args)
        .output()
        .expect("run hookprof")
}

fn imported_series() -> tempfile::TempDir {
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernbench-series.log");
    let dir = tempfile::tempdir().unwrap();
    let out = hookprof(&[
        "import",
        "time",
        log.to_str().unwrap(),
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    dir
}

#[test]
fn each_step_of_an_imported_kernbench_series_is_listed_with_size_and_p() {
    let dir = imported_series();
    let out = hookprof(&["history", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // Imported results have no start time: they are ordered by file name, vanilla first.
    assert!(text.contains("    1  2.6.19-rc2 vanilla"), "{text}");
    assert!(
        text.contains("   11  [PATCH 10/10] Task watchers v2"),
        "{text}"
    );
    let step = |metric: &str| -> String {
        let block = text
            .split(&format!("\n{metric} ("))
            .nth(1)
            .unwrap_or_else(|| panic!("{metric} in {text}"));
        block.lines().nth(1).unwrap_or_default().to_string()
    };
    let elapsed = step("build");
    assert!(
        elapsed.starts_with(
            "  step at 6 ([PATCH 05/10] Task watchers v2): 124.3 s -> 127.1 s (+2.2%), p = "
        ),
        "{elapsed}"
    );
    // The step is told apart: its p-value, however it is printed, is below 0.05.
    let p: f64 = elapsed
        .rsplit("p = ")
        .next()
        .and_then(|p| p.split_whitespace().next())
        .and_then(|p| p.trim_end_matches([',', ')']).parse().ok())
        .unwrap_or_else(|| panic!("a p-value in {elapsed}"));
    assert!(p < 0.05, "{elapsed}");
    assert!(step("build.system").contains("(+4.2%)"), "{text}");
    // The flat metric says which step its 11 points could have found.
    assert!(
        text.contains(
            "No change point in 1 metric; what each could have found:\n  build.user: a step of ±"
        ),
        "{text}"
    );
    assert!(
        text.contains("in the middle of these 11 points would be found in 80%"),
        "{text}"
    );

    let json = hookprof(&[
        "history",
        dir.path().to_str().unwrap(),
        "--metric",
        "build",
        "--format",
        "json",
    ]);
    let h: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let steps = h["metrics"][0]["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!(steps[0]["at"], 5);
    let p = steps[0]["p_value"].as_f64().unwrap();
    assert!(p > 0.0 && p < 0.01, "{p}");
}

#[test]
fn history_of_bad_input_is_one_line_and_exit_2() {
    let dir = imported_series();
    let d = dir.path().to_str().unwrap();
    for (args, says) in [
        (
            vec!["history", d, "--metric", "no_such"],
            "--metric no_such",
        ),
        (vec!["history", "/no/such/file.json"], "/no/such/file.json"),
        (vec!["history", d, "--alpha", "2"], "--alpha"),
    ] {
        let out = hookprof(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{err}");
    }
}
