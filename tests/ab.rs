//! `hookprof ab` end to end: it boots the Debian kernel package under qemu, on both sides, in
//! turn. Run by `cargo xtask test` after the guest tests (this target has `test = false`).
use std::path::Path;

use hookprof::results::Results;
use hookprof_tests::hookprof;
use serde_json::Value;

/// The package the guest tests boot too (cached after the first download).
const KERNEL: &str = "linux-image-amd64";
/// Short runs: under emulation an op costs 30-60x, and a boot's time goes to booting and
/// loading probes more than to samples. Samples of at least 20 ms average a stall of qemu's
/// thread (a busy host) over many ops instead of making one op of a sample 40x slower.
const RUN_OPTIONS: &[&str] = &[
    "--workloads=null_call,open_close",
    "--hooks=security_file_open",
    "--min-sample-ms=20",
];

/// Runs `hookprof ab KERNEL KERNEL` with `args`, JSON on stdout; returns the exit code and the
/// comparison.
fn ab(out_dir: &Path, args: &[&str]) -> (i32, Value) {
    let mut all = vec![
        "ab",
        KERNEL,
        KERNEL,
        "--format=json",
        "--out-dir",
        out_dir.to_str().expect("utf-8 path"),
    ];
    all.extend_from_slice(RUN_OPTIONS);
    all.extend_from_slice(args);
    let out = hookprof(&all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code().expect("hookprof ab exited, not killed");
    assert!(
        matches!(code, 0..=2),
        "hookprof ab exited with {code}:\n{stderr}"
    );
    assert!(
        stderr.contains("warning: the guests run under TCG emulation") || !tcg(),
        "no emulation warning under TCG:\n{stderr}"
    );
    let comparison = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not a comparison ({e}):\n{}\n{stderr}",
            String::from_utf8_lossy(&out.stdout)
        )
    });
    (code, comparison)
}

/// This host cannot give the guests KVM, as hookprof decides it.
fn tcg() -> bool {
    let arch = hookprof_guest::Arch::host().expect("hookprof is built for x86_64 and aarch64");
    !hookprof_guest::kvm_usable(arch).0
}

fn verdict<'a>(comparison: &'a Value, workload: &str) -> &'a str {
    comparison["workloads"]
        .as_array()
        .expect("workloads")
        .iter()
        .find(|w| w["name"] == workload)
        .unwrap_or_else(|| panic!("no {workload} in the comparison: {comparison}"))["verdict"]
        .as_str()
        .expect("verdict")
}

fn load(path: &Path) -> Results {
    Results::load(path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn same_kernel_on_both_sides_boots_alternately_and_shows_no_regression() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("ab");
    // Emulated times are only good for large ratios: two boots of one kernel have differed by
    // 37% in null_call here, boot against boot, on a busy host.
    // Two boots a side, one round each: the boot is the unit.
    let (code, comparison) = ab(
        &out,
        &["--boots=2", "--rounds=1", "--samples=11", "--threshold=100"],
    );

    // One results file per boot, labelled, in the order the guests ran: A B A B.
    let boots: Vec<Results> = [
        "a/boot-1.json",
        "b/boot-1.json",
        "a/boot-2.json",
        "b/boot-2.json",
    ]
    .iter()
    .map(|f| load(&out.join(f)))
    .collect();
    let labels: Vec<&str> = boots.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(labels, ["A1", "B1", "A2", "B2"]);
    let started: Vec<u64> = boots.iter().map(|r| r.environment.started_at).collect();
    assert!(
        started.windows(2).all(|w| w[0] < w[1]),
        "boots did not alternate: started at {started:?}"
    );
    for r in &boots {
        assert!(r.complete, "{}: incomplete run", r.label);
        assert_eq!(r.workloads.len(), 2, "{}: {:?}", r.label, r.workloads);
    }
    assert_eq!(comparison["old_labels"], serde_json::json!(["A1", "A2"]));
    assert_eq!(comparison["new_labels"], serde_json::json!(["B1", "B2"]));

    for workload in ["null_call", "open_close"] {
        assert_ne!(
            verdict(&comparison, workload),
            "regressed",
            "{workload} regressed against itself: {comparison}"
        );
    }
    // Two boots a side: each boot's median is one observation (compare's file unit).
    assert_eq!(
        comparison["workloads"][0]["replication"], "file",
        "{comparison}"
    );
    assert_eq!(code, 0, "{comparison}");
}

#[test]
fn an_injected_cost_on_one_side_is_a_regression_attributed_to_its_hook() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 1 ms a call: far above an emulated open (tens to hundreds of us).
    let (code, comparison) = ab(
        &dir.path().join("ab"),
        &[
            // One boot a side: its rounds are the unit.
            "--boots=1",
            "--rounds=3",
            "--samples=4",
            "--threshold=100",
            "--b-args=--inject file_open=1000000",
        ],
    );
    assert_eq!(
        verdict(&comparison, "open_close"),
        "regressed",
        "{comparison}"
    );
    assert_ne!(
        verdict(&comparison, "null_call"),
        "regressed",
        "{comparison}"
    );
    assert_eq!(code, 1, "{comparison}");

    let open_close = comparison["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "open_close")
        .unwrap();
    let paths = open_close["attribution"]["paths"]
        .as_array()
        .unwrap_or_else(|| panic!("open_close has no attribution: {open_close}"));
    let largest = |filter: &dyn Fn(&Value) -> bool| {
        paths
            .iter()
            .filter(|p| filter(p))
            .max_by(|x, y| {
                x["delta_ns_per_op"]
                    .as_f64()
                    .unwrap()
                    .total_cmp(&y["delta_ns_per_op"].as_f64().unwrap())
            })
            .map(|p| p["name"].as_str().unwrap().to_string())
    };
    assert_eq!(
        largest(&|p| p["kind"] == "hook").as_deref(),
        Some("security_file_open"),
        "{paths:?}"
    );
    assert_eq!(
        largest(&|p| p["kind"] == "lsm" && p["parent"] == "security_file_open").as_deref(),
        Some("bpf_lsm_file_open"),
        "{paths:?}"
    );
}
