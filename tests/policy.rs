//! Security policies applied for real on the running kernel: a Landlock ruleset and a seccomp
//! filter put on a thread of this test, which must be confined (an allowed operation works, a
//! denied one fails) while the test's other threads are not.
use std::path::Path;

use hookprof::policy::Policy;

/// Writes `text` to `dir/name` and returns the policy spec naming it.
fn policy_file(dir: &Path, kind: &str, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    format!("{kind}:{}", path.display())
}

/// Applies `spec` on a fresh thread, runs `f` there, and returns what it returned.
fn confined<T: Send + 'static>(spec: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let policy = Policy::parse(spec).unwrap();
    std::thread::spawn(move || {
        policy.apply().unwrap();
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
