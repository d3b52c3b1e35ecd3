//! Helpers for the integration tests: find the hookprof binary, run it, read its results.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use hookprof::results::{AttributionRow, Results, WorkloadResult};

/// The hookprof binary under test: $HOOKPROF_BIN, else the workspace's release build.
pub fn hookprof_bin() -> PathBuf {
    std::env::var_os("HOOKPROF_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/hookprof"))
}

/// These tests load eBPF programs: without root they cannot say anything, so they fail.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "the kernel-level tests must run as root"
    );
}

pub fn hookprof(args: &[&str]) -> Output {
    let bin = hookprof_bin();
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo xtask build`",
        bin.display()
    );
    Command::new(&bin)
        .args(args)
        .output()
        .expect("run hookprof")
}

/// Runs `hookprof run ARGS -o tmp.json`, asserts success, returns the results.
pub fn run_to_results(args: &[&str]) -> Results {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("r.json");
    let mut all = vec!["run", "--quiet", "-o", out.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let output = hookprof(&all);
    assert!(
        output.status.success(),
        "hookprof {all:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    Results::load(&out).expect("results file")
}

pub fn workload<'a>(results: &'a Results, name: &str) -> &'a WorkloadResult {
    results
        .workload(name)
        .unwrap_or_else(|| panic!("no {name} in results"))
}

pub fn row<'a>(w: &'a WorkloadResult, name: &str) -> &'a AttributionRow {
    w.attribution
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| {
            let names: Vec<_> = w.attribution.iter().map(|r| r.name.as_str()).collect();
            panic!("{}: no attribution row {name}; rows: {names:?}", w.name)
        })
}

/// Asserts `actual` is within `tolerance` of `expected`.
pub fn assert_near(what: &str, actual: f64, expected: f64, tolerance: f64) {
    assert!(
        (actual - expected).abs() <= tolerance,
        "{what}: {actual} is not {expected} ± {tolerance}"
    );
}
