//! The kernel matrix's smoke: `cargo xtask vm-matrix` boots each kernel of its matrix (5.10,
//! 6.1, 6.12, the newest) with these tests alone; `cargo xtask test` boots all but the full guest
//! suite's kernel. A short run must measure whatever the kernel allows, fall back where it
//! lacks a feature (saying so in one line), and leave no program behind; without BTF the probes
//! refuse in one line. The run's summary goes to the share (`SUMMARY`) for xtask's table.
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hookprof::probes::{Features, KernelBtf};
use hookprof::results::{PathKind, Results};
use hookprof_tests::cleanup::{BpfObjects, Hookprof};
use hookprof_tests::{
    hookprof, require_guest, require_root, row, run_to_results, workload, STORE_ENV, TINY_RUN,
};

/// Where the smoke leaves its summary: the host's share, which xtask reads after the boot.
const SUMMARY: &str = "/mnt/host/kernel-smoke.json";

#[test]
fn a_short_run_measures_what_this_kernel_allows() {
    require_guest();
    require_root();
    let features = Features::get().expect("probe the kernel's features");
    let before = BpfObjects::now();
    let started = Instant::now();
    let args = [
        "--workloads",
        "null_call,open_close,fork_proc",
        // One round: the smoke asks what the kernel lets hookprof measure, not how precisely.
        "--rounds",
        "1",
        "--samples",
        "2",
        // Long enough that the gate's own time at each end of a sample (counted on the CPU,
        // outside the timed loop) stays a few percent of it under emulation.
        "--min-sample-ms",
        "20",
        "--stack-samples",
        "300",
    ];
    let mut run = Hookprof::start(&args, &[(STORE_ENV, "off")]);
    let status = run.wait(Duration::from_secs(1800));
    let seconds = started.elapsed().as_secs_f64();
    let stderr = run.stderr();
    assert!(status.success(), "hookprof run {args:?}: {stderr}");
    run.assert_left_nothing(&before, "the smoke's run");
    let r = Results::load(&run.output()).expect("results file");

    // What the kernel lacks is said, one line each, and nothing else is.
    for note in features.notes() {
        assert!(stderr.contains(&note), "no note {note:?} in: {stderr}");
    }
    assert_eq!(
        stderr.matches("hookprof: note: no ").count(),
        features.notes().len(),
        "{stderr}"
    );

    // Syscalls, timed.
    let getppid = row(workload(&r, "null_call"), "getppid");
    assert!(
        (0.9..1.1).contains(&getppid.calls_per_op) && getppid.ns_per_call > 0.0,
        "getppid: {getppid:?}"
    );
    // Task events follow the forked children (fork's child gets state from its parent).
    let fork = workload(&r, "fork_proc");
    for event in ["fork", "exit"] {
        let per_op = fork.events_per_op.get(event).copied().unwrap_or(0.0);
        assert!((0.9..1.1).contains(&per_op), "{event} per op: {per_op}");
    }
    // Hooks and task paths, found and timed wherever the kernel takes trampolines.
    let fentry = r.probes.attached.iter().any(|p| p.kind.name() == "fentry");
    let open = workload(&r, "open_close");
    if fentry {
        let file_open = row(open, "security_file_open");
        assert!(
            file_open.calls_per_op > 0.9 && file_open.ns_per_call > 0.0,
            "security_file_open: {file_open:?}"
        );
        assert!(
            open.attribution.iter().any(|a| a.kind == PathKind::Lsm
                && a.parent.as_deref() == Some("security_file_open")
                && a.calls_per_op > 0.9),
            "no LSM function timed under security_file_open: {:?}",
            open.attribution
        );
        let copy_process = row(fork, "copy_process");
        assert!(
            copy_process.calls_per_op > 0.9 && copy_process.ns_per_call > 0.0,
            "copy_process: {copy_process:?}"
        );
        if r.environment.active_lsms.iter().any(|l| l == "bpf") {
            fentry_on_a_bpf_lsm_function_turns_no_call_on();
        } else {
            eprintln!("the BPF LSM is not active: no bpf_lsm_* function to time");
        }
    } else {
        assert!(
            stderr.contains("fentry"),
            "fentry neither attached nor refused: {stderr}"
        );
    }
    // A sampled profile, whose paths include the workload's syscall.
    let profile = open
        .profile
        .as_ref()
        .expect("open_close has no sampled profile");
    assert!(
        profile.own_samples() > 0 && profile.paths.iter().any(|p| p.name == "openat"),
        "open_close's profile: {} samples, paths {:?}",
        profile.samples,
        profile.paths.iter().map(|p| &p.name).collect::<Vec<_>>()
    );
    // The accounting adds up: one task's time on and off its CPU is its op's wall time.
    for name in ["null_call", "open_close"] {
        let a = workload(&r, name)
            .accounting
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no accounting"));
        assert!((0.9..1.1).contains(&a.tasks), "{name}: {a:?}");
    }
    write_summary(&r, features, seconds);
}

/// Timing a BPF LSM function must not change which functions the kernel calls. From Linux
/// 6.12 the kernel calls `bpf_lsm_file_open` only while a BPF LSM program is attached to
/// file_open (its static key is turned on for BPF LSM links alone, `security_toggle_hook`):
/// timed by fentry with none attached, it must see no call, and the run must say why. Before,
/// it is called on every open, as often as its hook.
fn fentry_on_a_bpf_lsm_function_turns_no_call_on() {
    let r = run_to_results(&[
        "--workloads",
        "open_close",
        "--hooks",
        "security_file_open",
        "--probes",
        "syscalls,hooks",
        "--samples",
        "2",
        "--min-sample-ms",
        "20",
    ]);
    let open = workload(&r, "open_close");
    let hook = row(open, "security_file_open");
    let bpf = row(open, "bpf_lsm_file_open");
    let on_demand = KernelBtf::load()
        .expect("the kernel's BTF")
        .has_function("security_toggle_hook");
    eprintln!(
        "bpf_lsm_file_open: {} calls/op beside its hook's {} (called only with a BPF LSM \
         program attached: {on_demand})",
        bpf.calls_per_op, hook.calls_per_op
    );
    if on_demand {
        assert_eq!(bpf.calls_per_op, 0.0, "fentry turned its call on: {bpf:?}");
        assert!(
            open.notes
                .iter()
                .any(|n| n.starts_with("bpf_lsm_file_open: timed and never called")),
            "no note says why: {:?}",
            open.notes
        );
    } else {
        assert!(
            (bpf.calls_per_op - hook.calls_per_op).abs() <= 0.1 * hook.calls_per_op,
            "bpf_lsm_file_open {bpf:?} against its hook {hook:?}"
        );
    }
}

/// The row of the matrix's table: what loaded, what the kernel refused, what was timed.
fn write_summary(r: &Results, features: Features, seconds: f64) {
    let count = |kinds: Vec<&str>| {
        let mut by_kind: BTreeMap<String, usize> = BTreeMap::new();
        for k in kinds {
            *by_kind.entry(k.to_string()).or_default() += 1;
        }
        by_kind
    };
    let timed = |kind: PathKind| {
        let mut names: Vec<&str> = r
            .workloads
            .iter()
            .flat_map(|w| &w.attribution)
            .filter(|a| a.kind == kind && a.calls_per_op > 0.0)
            .map(|a| a.name.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    };
    let samples: u64 = r
        .workloads
        .iter()
        .filter_map(|w| w.profile.as_ref())
        .map(|p| p.samples)
        .sum();
    let summary = serde_json::json!({
        "kernel": r.environment.kernel_release,
        "attached": count(r.probes.attached.iter().map(|p| p.kind.name()).collect()),
        "refused": count(r.probes.refused.iter().map(|p| p.kind.name()).collect()),
        "hooks_timed": timed(PathKind::Hook),
        "lsm_functions_timed": timed(PathKind::Lsm),
        "task_paths_timed": timed(PathKind::TaskPath),
        "stack_samples": samples,
        "fallbacks": features.notes(),
        "run_seconds": seconds,
    });
    if std::path::Path::new("/mnt/host").is_dir() {
        std::fs::write(SUMMARY, format!("{summary:#}\n")).expect("write the smoke's summary");
    }
}

/// Hides /sys/kernel/btf under an empty tmpfs while it lives.
struct WithoutBtf;

impl WithoutBtf {
    fn hide() -> WithoutBtf {
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "none", "/sys/kernel/btf"])
            .status()
            .expect("run mount");
        assert!(status.success(), "mount a tmpfs over /sys/kernel/btf");
        WithoutBtf
    }
}

impl Drop for WithoutBtf {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("/sys/kernel/btf")
            .status();
    }
}

#[test]
fn without_btf_the_probes_refuse_in_one_line_and_clean_timings_run() {
    require_guest();
    require_root();
    let _hidden = WithoutBtf::hide();
    let out = hookprof(&[&["run"], TINY_RUN].concat());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    // The BTF is hidden by a tmpfs over it: the line names that mount, not the kernel, and
    // offers the clean timings.
    assert!(
        lines[0].contains("/sys/kernel/btf/vmlinux is missing")
            && lines[0].contains("is a tmpfs in this mount namespace (mnt:[")
            && lines[0].contains("--probes none")
            && !lines[0].contains("CONFIG_DEBUG_INFO_BTF"),
        "{stderr}"
    );
    // What the line offers works.
    let clean = hookprof(&[&["run", "--probes", "none"], TINY_RUN].concat());
    assert!(
        clean.status.success(),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
}
