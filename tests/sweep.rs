//! `run --sweep` on the running kernel: every value a variant of one run, measured in the same
//! rounds, a line fitted through them. Checked against a known slope (an injected wait that
//! grows by a set step), and a Landlock rule sweep's made policies and their directories.
use hookprof::results::Results;
use hookprof_tests::{cleanup::BpfObjects, hookprof, hookprof_bin, one_at_a_time, require_root};
use serde_json::Value;

/// `hookprof run ARGS --format json -o DIR/r.json` with its temp dir DIR/tmp: the sweep
/// printed, and each value's file.
fn sweep(args: &[&str], dir: &std::path::Path) -> Value {
    let before = BpfObjects::now();
    let out_file = dir.join("r.json");
    std::fs::create_dir_all(dir.join("tmp")).unwrap();
    let out = std::process::Command::new(hookprof_bin())
        .args(["run", "-q", "--no-store", "--format", "json", "-o"])
        .arg(&out_file)
        .args(args)
        .env("TMPDIR", dir.join("tmp"))
        .output()
        .expect("run hookprof");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {}: {stderr}", out.status);
    // The kernel frees a dead process's objects shortly after it exits, not at once.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let leaked = BpfObjects::now().leaked_since(&before, 0);
        if leaked.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "left behind: {leaked:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"))
}

fn workload<'a>(sweep: &'a Value, name: &str) -> &'a Value {
    sweep["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {sweep}"))
}

/// getppid waits 0, 1,000, 2,000 and 3,000 ns in the four values (null_call's op is a few
/// hundred ns here): the line through null_call's op, fitted within rounds, must find the
/// step, 1 ns per ns injected. On a shared machine a busy-wait that loses its CPU counts the
/// whole stall, so a round's value is its least disturbed sample (as `inject.rs` takes it): the
/// line through those, by the sweep's own fit, within 10% of the step; the printed line,
/// through the rounds' medians, within 30%. Each value's file records its own wait.
#[test]
fn an_injected_step_is_found_as_the_slope() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let values = [0u64, 1000, 2000, 3000];
    let s = sweep(
        &[
            "--workloads",
            "null_call",
            "--probes",
            "none",
            "--rounds",
            "6",
            "--samples",
            "3",
            "--sweep",
            "inject:getppid=0,1000,2000,3000",
        ],
        dir.path(),
    );
    assert_eq!(s["parameter"], "inject:getppid");
    let op = &workload(&s, "null_call")["op"];
    assert_eq!(op["points"].as_array().unwrap().len(), 4, "{op}");
    let printed = op["line"]["slope"].as_f64().unwrap();
    assert!((printed - 1.0).abs() < 0.3, "printed slope {printed}: {op}");
    let mut least_disturbed: Vec<Vec<f64>> = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let file = match i {
            0 => dir.path().join("r.json"),
            _ => dir.path().join(format!("r.inject-getppid-{v}.json")),
        };
        let r = Results::load(&file).expect("each value's results");
        assert_eq!(r.options.inject, [format!("syscall:getppid={v}")]);
        let pairing = r
            .pairing
            .clone()
            .expect("a sweep's value is a variant of the run");
        assert_eq!(pairing.variant, format!("inject:getppid={v}"));
        let w = r.workload("null_call").unwrap();
        let rounds = w.by_round(&w.clean);
        assert_eq!(rounds.len(), 6, "{v}");
        least_disturbed.push(
            rounds
                .iter()
                .map(|r| 1e3 * r.iter().copied().fold(f64::INFINITY, f64::min))
                .collect(),
        );
    }
    let xs: Vec<f64> = values.iter().map(|&v| v as f64).collect();
    let line = hookprof::sweep::fit::blocked(&xs, &least_disturbed).unwrap();
    assert!(
        (line.slope - 1.0).abs() < 0.1,
        "slope {} ns per ns injected through each round's least disturbed sample: {line:?} \
         {least_disturbed:?}",
        line.slope
    );
}

/// Whether Landlock is an active LSM here (said where a test is skipped for it).
fn landlock_active() -> bool {
    let active = std::fs::read_to_string("/sys/kernel/security/lsm")
        .is_ok_and(|l| l.split(',').any(|lsm| lsm == "landlock"));
    if !active {
        eprintln!("skipped: Landlock is not an active LSM on this kernel");
    }
    active
}

/// The sweep of open_close over `sweep` in two rounds of two samples, with a short profile.
fn open_close_sweep(sweep_of: &str, dir: &std::path::Path) -> Value {
    sweep(
        &[
            "--workloads",
            "open_close",
            "--rounds",
            "2",
            "--samples",
            "2",
            "--stack-samples",
            "400",
            "--sweep",
            sweep_of,
        ],
        dir,
    )
}

/// A Landlock rule sweep with the stacks sampled: each value runs under one layer allowing
/// all beneath / plus N rules, Landlock's own function is found under security_file_open at
/// every value with rules, and the rules' directories are gone when the run ends.
#[test]
fn a_landlock_rule_sweep_runs_each_value_under_its_rules_and_names_the_paths() {
    require_root();
    let _serial = one_at_a_time();
    if !landlock_active() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = open_close_sweep("landlock-rules=0,10,100", dir.path());
    let described: Vec<&str> = s["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(
        described,
        [
            "landlock (1 layer, 1 rule)",
            "landlock (1 layer, 11 rules)",
            "landlock (1 layer, 101 rules)"
        ]
    );
    let w = workload(&s, "open_close");
    assert!(w["op"]["line"]["slope"].is_f64(), "{w}");
    let landlock = w["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hook_file_open")
        .unwrap_or_else(|| panic!("Landlock's hook_file_open is not among the paths: {w}"));
    let at: Vec<f64> = landlock["curve"]["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_f64().unwrap())
        .collect();
    assert!(at.iter().all(|&ns| ns > 0.0), "seen at every value: {at:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path().join("tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left in the temp dir: {left:?}");
}

/// Files deeper under one Landlock layer: every open walks each directory back up, in
/// Landlock's hook_file_open, so its time per op grows with the depth, and openat's (which
/// holds it and the kernel's own walk) more.
#[test]
fn a_landlock_depth_sweep_finds_the_walk_in_hook_file_open() {
    require_root();
    let _serial = one_at_a_time();
    if !landlock_active() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let s = open_close_sweep("landlock-depth=0,50,100", dir.path());
    let w = workload(&s, "open_close");
    let slope = |name: &str| -> (f64, f64) {
        let p = w["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no {name} among the paths: {w}"));
        let line = &p["curve"]["line"];
        (
            line["slope"].as_f64().unwrap(),
            line["slope_low"].as_f64().unwrap_or(f64::NAN),
        )
    };
    let (landlock, landlock_low) = slope("hook_file_open");
    let (openat, _) = slope("openat");
    assert!(
        landlock_low > 0.0,
        "hook_file_open per directory: {landlock} ({landlock_low}): {w}"
    );
    assert!(
        openat > landlock,
        "openat {openat} against hook_file_open {landlock}: {w}"
    );
    assert!(w["op"]["line"]["slope"].as_f64().unwrap() > landlock, "{w}");
}

#[test]
fn a_sweep_that_cannot_be_measured_is_refused_before_the_run() {
    for (args, says) in [
        (&["--sweep", "landlock-rules=5"][..], "two or more"),
        (&["--sweep", "rules=1,2"][..], "unknown parameter"),
        (
            &[
                "--sweep",
                "seccomp-filters=0,1",
                "--versus",
                "--inject syscall:getppid=1",
            ][..],
            "cannot be used with",
        ),
        (
            &["--sweep", "seccomp-filters=0,1", "--inject", "file_open=5"][..],
            "every value",
        ),
        (
            &["--sweep", "seccomp-filters=0,1", "-o", "-"][..],
            "give -o FILE",
        ),
    ] {
        let out = hookprof(&[&["run", "--workloads", "null_call"], args].concat());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(stderr.trim().lines().count() <= 4, "{stderr}");
    }
}
