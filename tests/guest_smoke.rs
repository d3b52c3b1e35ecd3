//! A short check of hookprof on a guest kernel of either architecture (`cargo xtask vm-test
//! --smoke`, and the whole of `vm-test --arch arm64` on an x86 host, where the guest is
//! emulated and slow): a run of three workloads counted syscall by syscall (the gate, the
//! syscall table and the registers of the architecture), its hooks timed by fentry where the
//! kernel allows it and named by the sampled profile, nothing left loaded after it; then
//! `stat` of a command that forks and execs.
use std::time::{Duration, Instant};

use hookprof::results::{PathKind, Results, WorkloadResult};
use hookprof_tests::{
    assert_near, assert_task_events, assert_timed, hookprof, require_guest, require_root, row,
    run_to_results, workload,
};

/// Set by the xtask for kernels known to load fentry programs: there a refusal fails the
/// test instead of being reported.
const EXPECT_FENTRY: &str = "HOOKPROF_EXPECT_FENTRY";

#[test]
fn run_counts_times_and_samples_then_leaves_nothing_loaded() {
    require_guest();
    require_root();
    let before = LoadedBpf::now();
    let r = run_to_results(&[
        "--workloads",
        "null_call,open_close,fork_proc",
        "--samples",
        "2",
        "--min-sample-ms",
        "2",
    ]);
    LoadedBpf::assert_back_to(&before);
    // The syscall probes read this architecture's numbers and registers: each op's syscalls
    // are counted by name, once per op.
    for (w, syscall) in [
        ("null_call", "getppid"),
        ("open_close", "openat"),
        ("open_close", "close"),
        ("fork_proc", "clone"),
        ("fork_proc", "wait4"),
    ] {
        let name = format!("{w}: {syscall} calls/op");
        assert_near(&name, row(workload(&r, w), syscall).calls_per_op, 1.0, 0.05);
    }
    let open = workload(&r, "open_close");
    if fentry_refused_on(&r, "security_file_open") {
        return;
    }
    assert_timed(open, "security_file_open", 1.0);
    let lsms = timed_lsm_functions(open, "security_file_open");
    assert!(
        lsms.iter().any(|(lsm, _)| lsm == "bpf"),
        "no BPF LSM function timed under security_file_open: {lsms:?}"
    );
    assert_timed(workload(&r, "fork_proc"), "copy_process", 1.0);
    // The sampled profile names the hook and the LSM functions under it: its stacks were
    // walked and symbolised on this architecture.
    let profile = open
        .profile
        .as_ref()
        .expect("open_close has no sampled profile");
    let sampled = |kind: PathKind, parent: Option<&str>| {
        profile
            .paths
            .iter()
            .filter(|p| p.kind == kind && p.parent.as_deref() == parent && p.inclusive_samples > 0)
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
    };
    assert!(
        sampled(PathKind::Syscall, None).contains(&"openat".to_string()),
        "openat not sampled: {:?}",
        profile.paths
    );
    assert!(
        sampled(PathKind::Hook, None).contains(&"security_file_open".to_string()),
        "security_file_open not sampled ({} samples): {:?}",
        profile.samples,
        profile.paths
    );
    let under = sampled(PathKind::Lsm, Some("security_file_open"));
    assert!(
        !under.is_empty(),
        "no LSM function sampled under security_file_open: {:?}",
        profile.paths
    );
}

/// `stat -- CMD`: the command's process tree, forks and execs included (the gate's spawn
/// counts a child from its execve: that syscall's number is the architecture's). Syscalls and
/// task events only: the run above found and timed the hooks.
#[test]
fn stat_attributes_a_commands_process_tree() {
    require_guest();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stat.json");
    let command = "/bin/true & /bin/true & wait";
    let o = hookprof(&[
        "stat",
        "--runs",
        "2",
        "--probes",
        "syscalls,tasks",
        "-q",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/bin/sh",
        "-c",
        command,
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r = Results::load(&out).unwrap();
    let w = workload(&r, &format!("/bin/sh -c {command}"));
    assert_task_events(w, 3.0);
    assert_near("execve calls/run", row(w, "execve").calls_per_op, 3.0, 0.01);
}

/// Whether the kernel refused the fentry program on `function` (every kernel refuses some
/// functions: those freed after boot, those it does not have); if so, that the run says why in
/// a line naming it, and that this kernel is not one where fentry must load.
fn fentry_refused_on(r: &Results, function: &str) -> bool {
    let refused = r
        .probes
        .refused
        .iter()
        .any(|x| x.kind.name() == "fentry" && x.target == function);
    if refused {
        let lines = hookprof::probes::refusal::lines(&r.probes.refused);
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("fentry") && l.contains(function)),
            "fentry refused on {function} without a line saying why: {lines:?}"
        );
        assert!(
            std::env::var_os(EXPECT_FENTRY).is_none(),
            "this kernel should load fentry programs: {lines:?}"
        );
        eprintln!("fentry refused here, as the run says: {lines:?}");
    }
    refused
}

/// (LSM, function) of each LSM function timed under `hook`, once per op or more.
fn timed_lsm_functions(w: &WorkloadResult, hook: &str) -> Vec<(String, String)> {
    w.attribution
        .iter()
        .filter(|a| a.kind == PathKind::Lsm && a.parent.as_deref() == Some(hook))
        .filter(|a| a.calls_per_op > 0.9 && a.ns_per_call > 0.0)
        .map(|a| (a.lsm.clone().unwrap_or_default(), a.name.clone()))
        .collect()
}

/// The BPF programs, links and maps loaded on this kernel, by id (aya walks the kernel's id
/// lists, as bpftool does).
struct LoadedBpf(Vec<(&'static str, u32, String)>);

impl LoadedBpf {
    fn now() -> LoadedBpf {
        // An object that goes away while the list is walked fails the walk: walk again.
        for _ in 0..10 {
            if let Some(all) = Self::walk() {
                return LoadedBpf(all);
            }
        }
        panic!("the kernel's BPF object lists kept changing while read");
    }

    fn walk() -> Option<Vec<(&'static str, u32, String)>> {
        let mut all = Vec::new();
        for p in aya::programs::loaded_programs() {
            let p = p.ok()?;
            all.push(("prog", p.id(), p.name_as_str().unwrap_or("").to_string()));
        }
        for l in aya::programs::loaded_links() {
            all.push(("link", l.ok()?.id(), String::new()));
        }
        for m in aya::maps::loaded_maps() {
            let m = m.ok()?;
            all.push(("map", m.id(), m.name_as_str().unwrap_or("").to_string()));
        }
        Some(all)
    }

    /// Waits until what was loaded since `before` is gone: the kernel frees a dead process's
    /// objects after an RCU grace period (its maps after the programs that hold them), which
    /// takes seconds under emulation; only a leak outlasts the wait.
    fn assert_back_to(before: &LoadedBpf) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let left = LoadedBpf::now().since(before);
            if left.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "left loaded 60 s after hookprof exited: {left:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn since(&self, before: &LoadedBpf) -> Vec<(&'static str, u32, String)> {
        self.0
            .iter()
            .filter(|o| !before.0.iter().any(|b| b.0 == o.0 && b.1 == o.1))
            .cloned()
            .collect()
    }
}
