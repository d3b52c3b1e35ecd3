//! `--policy` on the running kernel: Landlock rulesets and seccomp filters applied for real,
//! first by a thread of this test (the policy module alone), then by hookprof's runner process
//! (`run --probes none`, no probes needed). An allowed operation must work and a denied one
//! fail, and only the confined task may be affected.
use std::{
    path::Path,
    process::{Command, Output},
};

use hookprof::policy::Policy;
use hookprof_tests::{assert_near, hookprof_bin, require_root, row, workload};

/// Writes `text` to `dir/name` and returns the `--policy` spec naming it.
fn policy_file(dir: &Path, kind: &str, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    format!("{kind}:{}", path.display())
}

/// Applies `spec` on a fresh thread, runs `f` there, and returns what it returned.
fn confined<T: Send + 'static>(spec: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let policy = Policy::parse(spec).unwrap();
    std::thread::spawn(move || {
        policy.apply(&[]).unwrap();
        f()
    })
    .join()
    .expect("confined thread")
}

fn open_errno(path: &Path) -> Option<i32> {
    std::fs::File::open(path)
        .err()
        .map(|e| e.raw_os_error().unwrap())
}

/// hookprof with its temp dir (where scratch directories go) set to `tmp`.
fn hookprof_in(tmp: &Path, args: &[&str]) -> Output {
    Command::new(hookprof_bin())
        .args(hookprof_tests::one_round_unless_asked(args))
        .env("TMPDIR", tmp)
        .env(hookprof_tests::STORE_ENV, "off")
        .output()
        .expect("run hookprof")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_landlock_ruleset_confines_the_thread_that_applies_it_and_no_other() {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["allowed", "denied"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
        std::fs::write(dir.path().join(sub).join("f"), "x").unwrap();
    }
    let rules = format!(
        r#"{{"layers": [{{"handled": ["read_file"], "allow": [{{"path": "{}", "access": "read_file"}}]}},
                       {{"handled": "all", "allow": [{{"path": "{}", "access": "all"}}]}}]}}"#,
        dir.path().join("allowed").display(),
        dir.path().display()
    );
    let spec = policy_file(dir.path(), "landlock", "rules.json", &rules);
    let (allowed, denied) = (dir.path().join("allowed/f"), dir.path().join("denied/f"));
    let (a, d) = (allowed.clone(), denied.clone());
    let errnos = confined(&spec, move || (open_errno(&a), open_errno(&d)));
    assert_eq!(errnos, (None, Some(libc::EACCES)), "allowed, denied file");
    assert_eq!(
        open_errno(&denied),
        None,
        "an unconfined thread was confined too"
    );
}

#[test]
fn a_seccomp_deny_list_fails_the_listed_call_with_its_errno() {
    let dir = tempfile::tempdir().unwrap();
    let spec = policy_file(
        dir.path(),
        "seccomp",
        "deny.json",
        r#"{"default_action": "allow", "action": "errno:38", "syscalls": ["getppid"]}"#,
    );
    let call = || {
        // SAFETY: getppid has no preconditions.
        let r = unsafe { libc::syscall(libc::SYS_getppid) };
        (r, std::io::Error::last_os_error().raw_os_error().unwrap())
    };
    let (r, errno) = confined(&spec, call);
    assert_eq!((r, errno), (-1, 38), "getppid under the filter");
    assert!(call().0 > 0, "an unconfined thread was filtered too");
    // A call the filter does not list still works under it.
    // SAFETY: getpid has no preconditions.
    let pid = confined(&spec, || unsafe { libc::syscall(libc::SYS_getpid) });
    assert_eq!(pid, i64::from(std::process::id()));
}

#[test]
fn run_under_a_landlock_ruleset_records_it_and_a_denied_set_up_is_that_workloads_error() {
    let tmp = tempfile::tempdir().unwrap();
    let conf = tempfile::tempdir().unwrap();
    let open_tmp = policy_file(
        conf.path(),
        "landlock",
        "open.json",
        &format!(
            r#"{{"layers": [{{"handled": "all", "allow": [{{"path": "{t}", "access": "all"}}]}},
                           {{"handled": ["read_file", "write_file"], "allow": [{{"path": "{t}", "access": ["read_file", "write_file"]}}]}}]}}"#,
            t = tmp.path().display()
        ),
    );
    let out_file = conf.path().join("r.json");
    let out = hookprof_in(
        tmp.path(),
        &[
            "run",
            "--probes",
            "none",
            "--workloads",
            "open_close,stat",
            "--samples",
            "2",
            "--policy",
            &open_tmp,
            "-q",
            "-o",
            out_file.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let r = hookprof::results::Results::load(&out_file).unwrap();
    assert_eq!(r.policy_summary(), "landlock (2 layers, 2 rules)");
    assert_eq!(workload(&r, "open_close").clean.len(), 2);
    assert!(String::from_utf8_lossy(&out.stdout).contains("policy landlock (2 layers, 2 rules)"));

    // Nothing beneath the temp dir is allowed: creating the workload's file is denied.
    let closed = policy_file(
        conf.path(),
        "landlock",
        "closed.json",
        r#"{"layers": [{"handled": "all", "allow": [{"path": "/usr", "access": "read"}]}]}"#,
    );
    let out = hookprof_in(
        tmp.path(),
        &[
            "run",
            "--probes",
            "none",
            "--workloads",
            "open_close",
            "--samples",
            "2",
            "--policy",
            &closed,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("workload open_close failed in set-up") && e.contains("Permission denied"),
        "{e}"
    );
    assert!(e.lines().all(|l| l.starts_with("hookprof: ")), "{e}");
}

#[test]
fn run_under_a_seccomp_allow_list_works_and_fails_on_a_call_it_leaves_out() {
    let tmp = tempfile::tempdir().unwrap();
    let allow = policy_file(
        tmp.path(),
        "seccomp",
        "allow.json",
        r#"{"default_action": "errno", "syscalls": ["getppid"]}"#,
    );
    let args = |w: &'static str| {
        [
            "run",
            "--probes",
            "none",
            "--samples",
            "2",
            "-q",
            "--policy",
            allow.as_str(),
            "--workloads",
            w,
        ]
    };
    let out = hookprof_in(tmp.path(), &args("null_call"));
    assert!(out.status.success(), "{}", stderr(&out));
    let out = hookprof_in(tmp.path(), &args("open_close"));
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("Operation not permitted"),
        "{}",
        stderr(&out)
    );
}

/// A filter that kills the process on a call it leaves out kills the runner, not hookprof: that
/// workload fails, the run goes on with a fresh runner, and the results hold the others. The
/// workload that lives through it is probed: the runner's own calls between samples (its
/// pipes, the tracking gate) pass the filter, and the gate opens the window (getppid counted).
#[test]
fn a_seccomp_filter_that_kills_the_runner_fails_that_workload_only() {
    require_root();
    let tmp = tempfile::tempdir().unwrap();
    let kill = policy_file(
        tmp.path(),
        "seccomp",
        "kill.json",
        r#"{"default_action": "kill_process", "syscalls": ["getppid"]}"#,
    );
    let out_file = tmp.path().join("r.json");
    let out = hookprof_in(
        tmp.path(),
        &[
            "run",
            "--probes",
            "syscalls",
            "--samples",
            "2",
            "-q",
            "--policy",
            &kill,
            "--workloads",
            "open_close,null_call",
            "-o",
            out_file.to_str().unwrap(),
        ],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("workload open_close failed") && e.contains("Bad system call"),
        "{e}"
    );
    let r = hookprof::results::Results::load(&out_file).unwrap();
    assert!(workload(&r, "open_close").failure.is_some());
    let null_call = workload(&r, "null_call");
    assert_eq!((null_call.clean.len(), null_call.probed.len()), (2, 2));
    assert_near(
        "getppid calls/op under the filter",
        row(null_call, "getppid").calls_per_op,
        1.0,
        0.01,
    );
    assert!(r
        .policy_summary()
        .starts_with("seccomp (allow for 1 syscall, kill_process"));
}

#[test]
fn bad_policies_are_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let bad_json = policy_file(tmp.path(), "landlock", "bad.json", "{ \"layers\": [");
    let bad_call = policy_file(
        tmp.path(),
        "seccomp",
        "bad.json",
        r#"{"default_action": "errno", "syscalls": ["no_such_call"]}"#,
    );
    let missing_path = policy_file(
        tmp.path(),
        "landlock",
        "missing.json",
        r#"{"layers": [{"handled": "all", "allow": [{"path": "/nonexistent/dir", "access": "read"}]}]}"#,
    );
    let cases = [
        ("landlock", "expected KIND:SPEC"),
        ("smack:x", "unknown kind 'smack'"),
        ("landlock:/nonexistent/r.json", "cannot read"),
        (bad_json.as_str(), "not a ruleset"),
        (bad_call.as_str(), "unknown syscall 'no_such_call'"),
        (missing_path.as_str(), "/nonexistent/dir"),
    ];
    for (spec, expected) in cases {
        let out = hookprof_in(
            tmp.path(),
            &[
                "run",
                "--probes",
                "none",
                "--workloads",
                "null_call",
                "--policy",
                spec,
            ],
        );
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "--policy {spec}: {e}");
        // One line naming the problem (clap's rendering adds its pointer to --help below).
        let first = e.lines().next().unwrap_or_default();
        assert!(first.contains(expected), "--policy {spec}: {e}");
        assert!(!e.contains("panicked"), "--policy {spec}: {e}");
    }
}

/// The host boots without AppArmor: a profile cannot be entered, and hookprof says why. (The
/// test guest has it; tests/guest.rs enters a real profile there.)
#[test]
fn an_apparmor_profile_on_a_kernel_without_apparmor_is_a_clear_exit_2() {
    let lsms = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    if lsms.contains("apparmor") {
        println!("skipping test - this kernel has AppArmor ({lsms}); the guest test covers it");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = hookprof_in(
        tmp.path(),
        &[
            "run",
            "--workloads",
            "null_call",
            "--probes",
            "none",
            "--policy",
            "apparmor:hookprof-test",
        ],
    );
    let e = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(e.contains("apparmor is not an active LSM"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
}
