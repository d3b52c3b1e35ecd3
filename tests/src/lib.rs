//! Helpers shared by hookprof's integration tests. Tests that cannot run where they are must
//! fail with a message saying why: a silently skipped test reads as a passed one.
use std::{
    path::PathBuf,
    process::{Command, Output},
    sync::{Mutex, MutexGuard},
};

use hookprof::results::{AttributionRow, Results, WorkloadResult};

pub mod cleanup;
pub mod figure_lint;
pub mod postgres;

/// Where hookprof records runs (`off`: nowhere). Tests that are not about the results store
/// set it off, so no test writes into the user's data directory; the store's own tests point
/// it at a store of their own.
pub const STORE_ENV: &str = "HOOKPROF_STORE";

/// `run` options for a run of over 100 s (100 samples of at least a second): what a refusal
/// that must come before any measuring is tested against.
pub const LONG_RUN: &[&str] = &[
    "--probes",
    "none",
    "--workloads",
    "null_call",
    "--samples",
    "50",
    "--min-sample-ms",
    "1000",
];

/// `run` options for a run of a fraction of a second: one workload, one round of two samples
/// of at least a millisecond, quiet.
pub const TINY_RUN: &[&str] = &[
    "--workloads",
    "null_call",
    "--rounds",
    "1",
    "--samples",
    "2",
    "--min-sample-ms",
    "1",
    "-q",
];

/// Held by a test while it runs hookprof, so the tests of one file run one at a time: a test's
/// timings would otherwise include another's run (a syscall tracepoint attached by one slows
/// every syscall on the machine), and its leak checks would see another's objects.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Waits for the other tests of this file that hold it to finish (a test that panicked while
/// holding it still lets the next one go).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// The hookprof binary under test: `$HOOKPROF_BIN` (set by `cargo xtask test` and in the
/// guest), else the workspace's release build.
pub fn hookprof_bin() -> PathBuf {
    match std::env::var_os("HOOKPROF_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/hookprof"),
    }
}

/// Panics unless running as root: loading eBPF programs needs it.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test loads eBPF programs and needs root (euid is {euid}): run it with sudo"
    );
}

/// Panics unless running in the qemu guest of `cargo xtask vm-test`, which sets
/// `HOOKPROF_IN_GUEST=1`: guest tests need a kernel that allows fentry/fexit and BPF LSM.
pub fn require_guest() {
    assert!(
        std::env::var("HOOKPROF_IN_GUEST").as_deref() == Ok("1"),
        "this test needs the test guest's kernel: run it with `cargo xtask vm-test`"
    );
}

/// Runs hookprof. `run` and `stat` take one round unless the test asks for more: these tests
/// check what is measured, not how rounds replicate it, and the guest runs ~50x slower.
pub fn hookprof(args: &[&str]) -> Output {
    let bin = hookprof_bin();
    assert!(
        bin.exists(),
        "{} is missing: build it with `cargo xtask build`",
        bin.display()
    );
    Command::new(&bin)
        .args(one_round_unless_asked(args))
        .env(STORE_ENV, "off")
        .output()
        .expect("run hookprof")
}

pub fn one_round_unless_asked<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    let measures = matches!(args.first(), Some(&"run") | Some(&"stat"));
    if measures
        && !args
            .iter()
            .any(|a| a.starts_with("--rounds") || *a == "--list")
    {
        all.insert(1, "--rounds=1");
    }
    all
}

/// Runs hookprof as the unprivileged user nobody (uid and gid 65534, no capabilities).
pub fn hookprof_as_nobody(args: &[&str]) -> Output {
    let bin = hookprof_bin();
    Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(&bin)
        .args(args)
        .env(STORE_ENV, "off")
        .output()
        .expect("run hookprof through setpriv")
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

/// `run_to_results(ARGS --parallel 1)` and then with `--parallel 2`: one copy, then two.
pub fn run_one_copy_then_two(args: &[&str]) -> (Results, Results) {
    let with = |copies| run_to_results(&[args, &["--parallel", copies]].concat());
    (with("1"), with("2"))
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

/// Asserts `path` ran `per_op` times an op (within 10%) and was timed.
pub fn assert_timed(w: &WorkloadResult, path: &str, per_op: f64) {
    let r = row(w, path);
    let what = format!("{}: {path} calls/op", w.name);
    assert_near(&what, r.calls_per_op, per_op, 0.1 * per_op);
    assert!(r.ns_per_call > 0.0, "{}: {path} untimed", w.name);
}

/// Asserts a command forked, exec'd and ended `n` processes a run (`stat`'s task events).
pub fn assert_task_events(w: &WorkloadResult, n: f64) {
    for event in ["fork", "exec", "exit"] {
        let what = format!("{event} events/run");
        assert_near(&what, w.events_per_op[event], n, 0.01);
    }
}

/// Syscalls per op that lmbench's definition of each op implies, a workload or two per family:
/// (workload, syscall, calls per op). Two-process workloads count both ends: a server's
/// syscalls are whole per op only because each run waits for the server to go idle.
pub const FAMILY_SYSCALLS: &[(&str, &str, f64)] = &[
    ("null_io", "read", 0.5),
    ("null_io", "write", 0.5),
    ("stat", "newfstatat", 1.0),
    ("select_tcp", "pselect6", 1.0),
    ("select_file", "pselect6", 1.0),
    ("sig_catch", "rt_sigreturn", 1.0),
    ("lat_pipe", "read", 2.0),
    ("lat_pipe", "write", 2.0),
    ("lat_rpc_udp", "write", 2.0),
    ("lat_rpc_udp", "read", 2.0),
    ("lat_tcp_connect", "connect", 1.0),
    ("lat_tcp_connect", "accept", 1.0),
    ("lat_tcp_connect", "socket", 1.0),
    ("ctx_2p_0k", "write", 1.0),
    ("fs_delete_0k", "unlink", 1.0),
    ("mmap_latency", "mmap", 1.0),
    ("mmap_latency", "munmap", 1.0),
    // One pass reads all 2048 pages of the 8 MB file, then unmaps, maps and msyncs it.
    ("page_fault", "munmap", 1.0 / 2048.0),
    ("page_fault", "msync", 1.0 / 2048.0),
    ("prot_fault", "rt_sigreturn", 1.0),
    // The child closes its stdout; the program, once ld.so has mapped libc, writes its line
    // (to the closed fd, as lmbench's hello) and exits.
    ("exec_proc", "execve", 1.0),
    ("exec_proc", "write", 1.0),
    ("exec_proc", "exit_group", 1.0),
    ("sh_proc", "execve", 2.0),
    ("sh_proc", "write", 1.0),
];

/// Checks `FAMILY_SYSCALLS` (within 5%) for every workload of it that `results` holds.
pub fn assert_family_syscalls(results: &Results) {
    for (w, syscall, per_op, calls) in family_syscalls(results) {
        assert_near(
            &format!("{w}: {syscall} calls/op"),
            calls,
            per_op,
            0.05 * per_op,
        );
    }
}

/// (workload, syscall, expected calls/op, measured calls/op) for the table's workloads present.
fn family_syscalls(results: &Results) -> Vec<(&'static str, &'static str, f64, f64)> {
    FAMILY_SYSCALLS
        .iter()
        .filter_map(|&(name, syscall, per_op)| {
            let w = results.workloads.iter().find(|w| w.name == name)?;
            Some((name, syscall, per_op, row(w, syscall).calls_per_op))
        })
        .collect()
}

/// Checks a `--parallel` run of `workload` against a run of one copy: `copies` copies, each
/// with all its samples, running at the same time (most samples' spans intersect in all
/// copies: a busy machine may hold a copy back now and then, copies run one after the other
/// never intersect), and per op the same calls on `paths` (within 5%) with timed calls.
pub fn assert_parallel_like_one(
    one: &Results,
    many: &Results,
    name: &str,
    copies: usize,
    paths: &[&str],
) {
    assert_eq!(many.parallel(), copies as u64, "parallel recorded");
    assert_eq!(one.parallel(), 1, "parallel recorded");
    let (w1, w) = (workload(one, name), workload(many, name));
    assert!(w1.copies.is_empty(), "{name}: one copy records no copies");
    assert_eq!(w.copies.len(), copies, "{name}: copies recorded");
    for c in &w.copies {
        assert_eq!(
            c.clean.len(),
            w.clean.len(),
            "{name}: clean samples per copy"
        );
        assert_eq!(
            c.probed.len(),
            w.probed.len(),
            "{name}: probed samples per copy"
        );
        assert_eq!(c.clean_spans.len(), c.clean.len(), "{name}: clean spans");
        assert_eq!(c.probed_spans.len(), c.probed.len(), "{name}: probed spans");
    }
    let spans = |copy: &hookprof::results::CopySamples| {
        copy.clean_spans
            .iter()
            .chain(&copy.probed_spans)
            .copied()
            .collect::<Vec<[u64; 2]>>()
    };
    let per_copy: Vec<Vec<[u64; 2]>> = w.copies.iter().map(spans).collect();
    let samples = per_copy[0].len();
    let overlapping = (0..samples)
        .filter(|&i| {
            let start = per_copy.iter().map(|s| s[i][0]).max().unwrap();
            let end = per_copy.iter().map(|s| s[i][1]).min().unwrap();
            start < end
        })
        .count();
    assert!(
        samples > 0 && overlapping * 2 > samples,
        "{name}: only {overlapping} of {samples} samples ran in all {copies} copies at once: {per_copy:?}"
    );
    for path in paths {
        let (r1, r) = (row(w1, path), row(w, path));
        assert_near(
            &format!("{name}: {path} calls/op at --parallel {copies} against 1"),
            r.calls_per_op / r1.calls_per_op,
            1.0,
            0.05,
        );
        assert!(
            r.ns_per_call > 0.0,
            "{name}: {path} ns/call {}",
            r.ns_per_call
        );
    }
}

/// True once process `pid` catches SIGINT (`SigCgt:` in /proc/PID/status, a hex mask).
pub fn catches_sigint(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask & (1 << (libc::SIGINT - 1)) != 0)
}
