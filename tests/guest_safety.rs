//! Safety tests in the guest: hookprof's BPF LSM programs never change a security decision.
//! The programs are attached through the library (as `--stack-noop` and `--inject` attach
//! them), held while a forked child acts as root or as nobody, and every decision must be the
//! one the kernel made with nothing attached, errno for errno.
use std::ffi::CString;

use hookprof::probes::{KernelBtf, ProbePlan, Probes};
use hookprof_tests::{require_guest, require_root};
use profiler_common::event;

const NOBODY: u32 = 65534;

/// What a forked child does, and as whom.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// open(path, O_RDONLY)
    Open(&'static str),
    /// sethostname to the current name: needs CAP_SYS_ADMIN, changes nothing when allowed.
    SetHostname,
    /// chown(path, 0, 0): needs CAP_CHOWN for a file one does not own.
    Chown(&'static str),
}

const SECRET: &str = "/tmp/hookprof-safety-secret";
const PUBLIC: &str = "/tmp/hookprof-safety-public";

/// Every act, as root and as nobody.
fn cases() -> Vec<(Act, u32)> {
    let acts = [
        Act::Open(SECRET),
        Act::Open(PUBLIC),
        Act::SetHostname,
        Act::Chown(PUBLIC),
    ];
    acts.iter().flat_map(|&a| [(a, 0), (a, NOBODY)]).collect()
}

/// Runs `act` in a forked child with uid/gid `uid`; returns 0 if allowed, else the errno.
fn decide(act: Act, uid: u32) -> i32 {
    // Everything the child needs is prepared before fork: it may only make raw syscalls.
    let path = match act {
        Act::Open(p) | Act::Chown(p) => CString::new(p).unwrap(),
        Act::SetHostname => CString::default(),
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let host = host.trim_end().as_bytes().to_vec();
    // SAFETY: the child makes raw syscalls on data prepared above and leaves with _exit.
    match unsafe { libc::fork() } {
        -1 => panic!("fork: {}", std::io::Error::last_os_error()),
        0 => unsafe {
            let errno = || *libc::__errno_location();
            if uid != 0
                && (libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<u32>()) != 0
                    || libc::syscall(libc::SYS_setresgid, uid, uid, uid) != 0
                    || libc::syscall(libc::SYS_setresuid, uid, uid, uid) != 0)
            {
                libc::_exit(200);
            }
            let r = match act {
                Act::Open(_) => {
                    let fd = libc::open(path.as_ptr(), libc::O_RDONLY);
                    if fd >= 0 {
                        libc::close(fd);
                    }
                    fd.min(0)
                }
                Act::SetHostname => libc::sethostname(host.as_ptr().cast(), host.len()),
                Act::Chown(_) => libc::chown(path.as_ptr(), 0, 0),
            };
            libc::_exit(if r == 0 { 0 } else { errno() })
        },
        pid => {
            let mut status = 0;
            // SAFETY: our own child; status is a valid out-pointer.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            assert!(libc::WIFEXITED(status), "{act:?} as {uid}: child killed");
            let code = libc::WEXITSTATUS(status);
            assert_ne!(code, 200, "{act:?}: could not become uid {uid}");
            code
        }
    }
}

fn decisions() -> Vec<i32> {
    cases().into_iter().map(|(a, uid)| decide(a, uid)).collect()
}

fn make_files() {
    use std::os::unix::fs::PermissionsExt;
    for (path, mode) in [(SECRET, 0o600), (PUBLIC, 0o644)] {
        std::fs::write(path, "x").unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

/// Loads hookprof's object with nothing else and attaches LSM programs on `hooks`. Hooks the
/// kernel takes no program on are refused as `--stack-noop` refuses them (said, then left
/// out); the hooks of `REQUIRED` must attach.
fn with_lsm_programs(hooks: &[(&str, u64)]) -> Probes {
    let kernel = KernelBtf::load().expect("kernel BTF");
    let plan = ProbePlan {
        syscalls: false,
        tasks: false,
        functions: Vec::new(),
        entries_only: false,
        ..ProbePlan::default()
    };
    let mut probes = Probes::load(&plan, &kernel).expect("load hookprof's object");
    for &(hook, ns) in hooks {
        match probes.attach_lsm(&kernel, hook, ns) {
            Ok(()) => {}
            Err(e) if !REQUIRED.contains(&hook) => eprintln!("not stacked on {hook}: {e:#}"),
            Err(e) => panic!("attach a BPF LSM program on {hook}: {e:#}"),
        }
    }
    probes
}

/// LSM hooks the default suite's operations call (files, processes, exec, sockets, mmap).
const STACKED: &[&str] = &[
    "file_permission",
    "file_alloc_security",
    "inode_getattr",
    "inode_permission",
    "task_alloc",
    "cred_prepare",
    "bprm_check_security",
    "bprm_creds_for_exec",
    "mmap_file",
    "mmap_addr",
    "socket_sendmsg",
    "socket_recvmsg",
    "socket_create",
    "socket_connect",
    "path_unlink",
    "inode_unlink",
    "inode_create",
    "task_kill",
];

/// The hooks this test's acts go through.
const REQUIRED: &[&str] = &["file_open", "capable", "path_chown", "inode_setattr"];

fn check_unchanged(what: &str, hooks: &[(&str, u64)]) {
    make_files();
    let clean = decisions();
    // The baseline is the kernel's ordinary verdict: some acts denied, some allowed.
    assert!(clean.contains(&0), "{what}: nothing was allowed: {clean:?}");
    assert!(
        clean.contains(&libc::EACCES) && clean.contains(&libc::EPERM),
        "{what}: the denials are not the expected EACCES/EPERM: {clean:?}"
    );
    let probes = with_lsm_programs(hooks);
    let runs_before = probes.snapshot().unwrap().events[event::LSM_RUNS as usize];
    let attached = decisions();
    let runs = probes.snapshot().unwrap().events[event::LSM_RUNS as usize] - runs_before;
    drop(probes);
    assert!(
        runs >= cases().len() as u64,
        "{what}: the LSM programs ran only {runs} times: they were not on the decision path"
    );
    for (((act, uid), before), after) in cases().iter().zip(&clean).zip(&attached) {
        assert_eq!(
            before, after,
            "{what}: {act:?} as uid {uid}: errno {before} without, {after} with the programs"
        );
    }
}

#[test]
fn stack_noop_changes_no_security_decision() {
    require_guest();
    require_root();
    // As `--stack-noop` does: a no-op program on each LSM hook the workloads' operations go
    // through, plus the hooks this test's acts go through.
    let mut hooks: Vec<String> = STACKED.iter().map(|h| h.to_string()).collect();
    for extra in REQUIRED {
        if !hooks.iter().any(|h| h == extra) {
            hooks.push(extra.to_string());
        }
    }
    let hooks: Vec<(&str, u64)> = hooks.iter().map(|h| (h.as_str(), 0)).collect();
    check_unchanged("--stack-noop", &hooks);
}

#[test]
fn inject_changes_no_security_decision() {
    require_guest();
    require_root();
    check_unchanged(
        "--inject file_open=2000,capable=500",
        &[("file_open", 2000), ("capable", 500)],
    );
}

/// Ctrl-C while the discovery pass holds its second eBPF object (a counting fentry on every
/// hook and task path, hundreds of programs) ends the run with 130 and leaves no program,
/// link, map, process or scratch file behind.
#[test]
fn sigint_during_discovery_leaves_nothing_behind() {
    use std::time::{Duration, Instant};

    use hookprof_tests::cleanup::{BpfObjects, Hookprof};

    require_guest();
    require_root();
    let before = BpfObjects::now();
    let mut run = Hookprof::start(
        &["--workloads", "fork_proc,exec_proc", "--samples", "2"],
        &[],
    );
    // The measured run's own object has a few dozen programs at most.
    let deadline = Instant::now() + Duration::from_secs(180);
    while BpfObjects::now().count("prog") < before.count("prog") + 200 {
        assert!(run.running(), "ended before discovery: {}", run.stderr());
        assert!(
            Instant::now() < deadline,
            "the discovery pass never attached its probes"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    run.signal(libc::SIGINT);
    // Under TCG, letting go of hundreds of trampolines takes a while.
    let status = run.wait(Duration::from_secs(90));
    assert_eq!(status.code(), Some(130), "{}", run.stderr());
    run.assert_left_nothing(&before, "SIGINT during discovery");
    assert!(run.scratch_entries().is_empty(), "scratch left");
}
