//! `--policy` where the guest's kernel lets it matter: Landlock and AppArmor are active there,
//! so a confined workload takes the LSMs' real paths, which an unconfined one skips. And
//! `stat`, whose exec hooks and task paths need fentry.
use std::path::Path;

use hookprof::results::{PathKind, Results};
use hookprof_tests::{
    assert_near, assert_task_events, hookprof, require_guest, require_root, row, run_to_results,
    workload,
};

/// The LSM function of `lsm` under security_file_open in open_close: its name, calls/op,
/// and its least ns/op over the samples. Under TCG on a loaded host single samples swing by
/// several times (every function at once); the least disturbed sample is what compares.
fn file_open_function(r: &Results, lsm: &str) -> (String, f64, f64) {
    let w = workload(r, "open_close");
    let f = w
        .attribution
        .iter()
        .find(|a| {
            a.kind == PathKind::Lsm
                && a.lsm.as_deref() == Some(lsm)
                && a.parent.as_deref() == Some("security_file_open")
        })
        .unwrap_or_else(|| {
            panic!(
                "no {lsm} function under security_file_open: {:?}",
                w.attribution
            )
        });
    let least = f
        .samples_ns_per_op
        .iter()
        .copied()
        .fold(f64::INFINITY, f64::min);
    (f.name.clone(), f.calls_per_op, least)
}

/// A ruleset in the shape of the Landlock RFC measurement's "typical" one: two layers, 15
/// rules, on system directories that exist here (padded with directories of its own).
fn typical_ruleset(dir: &Path) -> String {
    let system = [
        "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev", "/run",
    ];
    let mut read: Vec<String> = system
        .iter()
        .filter(|p| Path::new(p).exists())
        .map(|p| p.to_string())
        .collect();
    let mut n = 0;
    while read.len() < 11 {
        let pad = dir.join(format!("data{n}"));
        std::fs::create_dir(&pad).unwrap();
        read.push(pad.display().to_string());
        n += 1;
    }
    let tmp = std::env::temp_dir().display().to_string();
    let rule = |p: &str, access: &str| format!(r#"{{"path": "{p}", "access": {access}}}"#);
    let mut first: Vec<String> = read.iter().map(|p| rule(p, r#""read""#)).collect();
    first.push(rule(&tmp, r#""all""#));
    first.push(rule("/dev/null", r#"["read_file", "write_file"]"#));
    let second = [rule("/", r#""read""#), rule(&tmp, r#""all""#)];
    let rules = format!(
        r#"{{"layers": [{{"handled": "all", "allow": [{}]}}, {{"handled": "all", "allow": [{}]}}]}}"#,
        first.join(", "),
        second.join(", ")
    );
    let path = dir.join("landlock.json");
    std::fs::write(&path, rules).unwrap();
    format!("landlock:{}", path.display())
}

/// The Landlock RFC's question on this kernel: under a typical ruleset, what does Landlock's
/// file-open function cost, and does `compare` put the change there.
#[test]
fn a_landlock_ruleset_slows_landlocks_file_open_and_compare_attributes_it() {
    require_guest();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let policy = typical_ruleset(dir.path());
    let (old, new) = (dir.path().join("old.json"), dir.path().join("new.json"));
    let run = |out: &Path, extra: &[&str]| {
        let mut args = vec![
            "run",
            "-q",
            "--workloads",
            "open_close,stat",
            "--hooks",
            "security_file_open,security_inode_getattr",
            "--samples",
            "5",
            "--min-sample-ms",
            "10",
            "--pin",
            "0",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let o = hookprof(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Results::load(out).unwrap()
    };
    let unconfined = run(&old, &[]);
    let confined = run(&new, &["--policy", &policy]);
    assert_eq!(confined.policy_summary(), "landlock (2 layers, 15 rules)");

    let (name, calls_before, before) = file_open_function(&unconfined, "landlock");
    let (_, calls_after, after) = file_open_function(&confined, "landlock");
    assert!((0.9..1.1).contains(&calls_before) && (0.9..1.1).contains(&calls_after));
    // The BPF LSM's empty function under the same hook is the control: what the run's
    // disturbance alone does to a function's time.
    let (_, _, control_before) = file_open_function(&unconfined, "bpf");
    let (_, _, control_after) = file_open_function(&confined, "bpf");
    let (ratio, control) = (after / before, control_after / control_before);
    eprintln!(
        "{name}: {before:.0} -> {after:.0} ns/op (x{ratio:.2}); bpf_lsm_file_open x{control:.2}"
    );
    assert!(
        ratio > 1.5 && ratio > 1.5 * control,
        "{name}: {before:.0} ns/op unconfined, {after:.0} confined (x{ratio:.2}); the control \
         bpf_lsm_file_open changed x{control:.2}"
    );

    let out = hookprof(&[
        "compare",
        old.to_str().unwrap(),
        new.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "compare --format json: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    // The policy is a run option that changes what ran: listed among the options, first.
    let policy_row = c["options"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "policy");
    assert!(
        policy_row.is_some_and(|d| d["new"][0] == "landlock (2 layers, 15 rules)"),
        "{}",
        c["options"]
    );
    let open = c["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "open_close")
        .unwrap();
    let paths = open["attribution"]["paths"]
        .as_array()
        .expect("attribution paths");
    let delta = |p: &serde_json::Value| p["delta_ns_per_op"].as_f64().unwrap();
    let landlock = paths
        .iter()
        .find(|p| p["name"] == name.as_str())
        .expect("landlock's row in compare");
    assert!(delta(landlock) > 0.0, "{landlock}");
}

/// Writes `profile` to a file and loads it with apparmor_parser (copied into the guest).
fn load_apparmor_profile(dir: &Path, profile: &str) {
    let path = dir.join("profile");
    std::fs::write(&path, profile).unwrap();
    let o = std::process::Command::new("apparmor_parser")
        .args(["-r", "-K"])
        .arg(&path)
        .output()
        .expect("run apparmor_parser (package apparmor)");
    assert!(
        o.status.success(),
        "apparmor_parser: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `--sweep apparmor-rules`: hookprof loads a profile per value (all file access allowed, and
/// that many more file rules), runs each value's workloads in it, so AppArmor's file_open
/// works at every value, and unloads them all when the run ends.
#[test]
fn an_apparmor_rule_sweep_loads_a_profile_per_value_and_unloads_them() {
    require_guest();
    require_root();
    let out = hookprof(&[
        "run",
        "--workloads",
        "open_close",
        "--hooks",
        "security_file_open",
        "--rounds",
        "2",
        "--samples",
        "2",
        "--stack-samples",
        "0",
        "--format",
        "json",
        "--no-store",
        "--sweep",
        "apparmor-rules=0,200",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("the sweep as JSON");
    assert_eq!(
        s["variants"],
        serde_json::json!([
            "apparmor (hookprof-sweep-rules-0)",
            "apparmor (hookprof-sweep-rules-200)"
        ])
    );
    let w = &s["workloads"][0];
    assert!(w["op"]["line"]["slope"].is_f64(), "{w}");
    let apparmor = w["paths"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "apparmor_file_open")
        .unwrap_or_else(|| panic!("apparmor_file_open is not among the paths: {w}"));
    assert_eq!(apparmor["method"], "timed", "{apparmor}");
    for p in apparmor["curve"]["points"].as_array().unwrap() {
        assert!(
            p["value"].as_f64().unwrap() > 0.0,
            "confined at every value: {apparmor}"
        );
    }
    let profiles = std::fs::read_to_string("/sys/kernel/security/apparmor/profiles").unwrap();
    assert!(
        !profiles.contains("hookprof-sweep-rules"),
        "left loaded: {profiles}"
    );
}

/// An AppArmor profile makes apparmor_file_open do its work (it returns early for an
/// unconfined task); a profile that denies the workload's files is that workload's error.
#[test]
fn an_apparmor_profile_is_entered_and_a_denial_is_the_workloads_error() {
    require_guest();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    load_apparmor_profile(
        dir.path(),
        "profile hookprof-open {\n  file,\n  capability,\n  signal,\n  unix,\n  network,\n}\n\
         profile hookprof-closed {\n  /** r,\n  capability,\n  signal,\n}\n",
    );
    let args = [
        "--workloads",
        "open_close",
        "--hooks",
        "security_file_open",
        "--samples",
        "3",
        "--min-sample-ms",
        "10",
        "--pin",
        "0",
    ];
    let unconfined = run_to_results(&args);
    let confined = run_to_results(&[&args[..], &["--policy", "apparmor:hookprof-open"]].concat());
    assert_eq!(confined.policy_summary(), "apparmor (hookprof-open)");
    let (name, _, before) = file_open_function(&unconfined, "apparmor");
    let (_, calls, after) = file_open_function(&confined, "apparmor");
    assert!((0.9..1.1).contains(&calls), "{name} calls/op {calls}");
    eprintln!("{name}: {before:.0} -> {after:.0} ns/op");
    assert!(
        after > 1.5 * before,
        "{name}: {before:.0} ns/op unconfined, {after:.0} confined"
    );

    let o = hookprof(&[
        "run",
        "--probes",
        "none",
        "--workloads",
        "open_close",
        "--samples",
        "2",
        "--policy",
        "apparmor:hookprof-closed",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(
        e.contains("workload open_close") && e.contains("Permission denied"),
        "{e}"
    );
    let o = hookprof(&[
        "run",
        "--probes",
        "none",
        "--workloads",
        "null_call",
        "--policy",
        "apparmor:not-loaded",
    ]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("profile 'not-loaded' is not loaded"), "{e}");
}

/// `stat -- /bin/true`: each run of the command is one fork, one exec and one exit, so the
/// exec hook (with the LSM functions under it) and the task paths come out at one call per
/// run. A short `--hooks` list skips the discovery pass, which takes minutes here.
#[test]
fn stat_of_true_attributes_its_exec_hook_and_task_paths_once_per_run() {
    require_guest();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("true.json");
    let o = hookprof(&[
        "stat",
        "-q",
        "--runs",
        "6",
        "--hooks",
        "security_bprm_check,copy_process,bprm_execve",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/bin/true",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = Results::load(&out).unwrap();
    let w = workload(&r, "/bin/true");
    assert_eq!((w.clean.len(), w.probed.len(), w.iterations), (3, 3, 1));
    for path in ["security_bprm_check", "copy_process", "bprm_execve"] {
        assert_near(
            &format!("{path} calls/run"),
            row(w, path).calls_per_op,
            1.0,
            0.05,
        );
        assert!(row(w, path).ns_per_call > 0.0, "{path} was not timed");
    }
    let under_bprm_check: Vec<_> = w
        .attribution
        .iter()
        .filter(|a| a.kind == PathKind::Lsm && a.parent.as_deref() == Some("security_bprm_check"))
        .collect();
    assert!(
        under_bprm_check
            .iter()
            .any(|a| (0.95..1.05).contains(&a.calls_per_op)),
        "no LSM function under security_bprm_check once per run: {under_bprm_check:?}"
    );
    assert_task_events(w, 1.0);
    assert_near("execve calls/run", row(w, "execve").calls_per_op, 1.0, 0.01);
}
