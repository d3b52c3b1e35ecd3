//! Another tool's BPF program priced: with a bpftrace program on the syscall-entry tracepoint
//! (standing in for a security agent), each workload's ns per op in that program, from the
//! kernel's BPF statistics over an untimed sample a round, agrees with the program's mean run over
//! the run times the workload's syscalls per op.
use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use hookprof::results::{PathKind, Results, WorkloadResult};
use hookprof_tests::{hookprof, one_at_a_time, require_root, workload};

const STATS: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// kernel.bpf_stats_enabled, set to 1 while it lives and put back as it was after.
struct StatsOn(String);

impl StatsOn {
    fn new() -> StatsOn {
        let was = std::fs::read_to_string(STATS).expect("read bpf_stats_enabled");
        std::fs::write(STATS, "1").expect("enable BPF statistics");
        StatsOn(was.trim().to_string())
    }
}

impl Drop for StatsOn {
    fn drop(&mut self) {
        let _ = std::fs::write(STATS, &self.0);
    }
}

/// A bpftrace process, killed (by its own pid) when dropped.
struct Bpftrace(Child);

impl Drop for Bpftrace {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// bpftrace's tracepoints need tracefs where it looks for their formats.
fn mount_tracefs() {
    if std::path::Path::new("/sys/kernel/tracing/events").exists() {
        return;
    }
    let status = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .status()
        .expect("run mount");
    assert!(
        status.success(),
        "could not mount tracefs at /sys/kernel/tracing"
    );
}

/// The program `pid` holds open: its tag and (run_time_ns, run_cnt), from its fd's fdinfo.
fn held_program(pid: u32) -> Option<(String, u64, u64)> {
    let dir = std::fs::read_dir(format!("/proc/{pid}/fdinfo")).ok()?;
    dir.flatten().find_map(|fd| {
        let info = std::fs::read_to_string(fd.path()).ok()?;
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_string())
        };
        Some((
            field("prog_tag:")?,
            field("run_time_ns:")?.parse().ok()?,
            field("run_cnt:")?.parse().ok()?,
        ))
    })
}

/// Starts bpftrace on raw_syscalls:sys_enter and waits until its program is loaded.
fn start_bpftrace() -> Bpftrace {
    mount_tracefs();
    let child = Command::new("bpftrace")
        .args([
            "-e",
            "tracepoint:raw_syscalls:sys_enter { @[tid, args->id] = count(); }",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("run bpftrace (install it: apt-get install -y bpftrace)");
    let bpftrace = Bpftrace(child);
    let pid = bpftrace.0.id();
    let started = Instant::now();
    loop {
        if held_program(pid).is_some() {
            return bpftrace;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "bpftrace loaded no program in 30 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The workload's syscalls per op, as the syscall probes counted them.
fn syscalls_per_op(w: &WorkloadResult) -> f64 {
    w.attribution
        .iter()
        .filter(|r| r.kind == PathKind::Syscall)
        .map(|r| r.calls_per_op)
        .sum()
}

/// The kernel runs no perf_event program (the sampler) on a CPU while a tracepoint's program
/// runs there (bpf_prog_active), so no stack sample lands inside bpftrace's program: the run
/// prices it from the kernel's BPF statistics over an untimed sample a round instead, which must
/// agree with the program's mean run over the whole run times the workload's syscalls per op.
#[test]
fn a_bpftrace_program_s_cost_per_op_agrees_with_the_kernel_s_bpf_statistics() {
    require_root();
    let _serial = one_at_a_time();
    let _stats = StatsOn::new();
    let args = [
        "--samples",
        "4",
        "--min-sample-ms",
        "50",
        "--stack-samples",
        "0",
    ];
    let dir = tempfile::tempdir().unwrap();
    let without = dir.path().join("without.json");
    let o = hookprof(
        &[
            &[
                "run",
                "-q",
                "--workloads",
                "null_call",
                "-o",
                without.to_str().unwrap(),
            ][..],
            &args,
        ]
        .concat(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bpftrace = start_bpftrace();
    let pid = bpftrace.0.id();
    // A run a workload: the program's mean run over it is that workload's (its map update
    // costs more for some syscalls than for others).
    for name in ["null_call", "open_close"] {
        let (_, time_before, runs_before) = held_program(pid).expect("bpftrace's program");
        let with = dir.path().join(format!("{name}.json"));
        let o = hookprof(
            &[
                &[
                    "run",
                    "-q",
                    "--workloads",
                    name,
                    "-o",
                    with.to_str().unwrap(),
                ][..],
                &args,
            ]
            .concat(),
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = Results::load(&with).unwrap();
        let (_, time_after, runs_after) = held_program(pid).expect("bpftrace's program");
        // Every syscall on the machine ran it while hookprof ran.
        let ns_per_run =
            (time_after - time_before) as f64 / (runs_after - runs_before).max(1) as f64;
        assert!(ns_per_run > 0.0, "no run time: are BPF statistics on?");
        let w = workload(&r, name);
        let holder = format!("(pid {pid})");
        let priced = w
            .other_programs
            .iter()
            .find(|p| p.holder.ends_with(&holder))
            .unwrap_or_else(|| panic!("{name}: bpftrace's program not priced: {w:?}"));
        let syscalls = syscalls_per_op(w);
        let expected = ns_per_run * syscalls;
        let ratio = priced.ns_per_op() / expected;
        eprintln!(
            "{name}: {} {:.1} ns/op, {:.2} runs/op; statistics {ns_per_run:.1} ns x \
             {syscalls:.2} syscalls/op = {expected:.1} ns/op; ratio {ratio:.2}",
            priced.name,
            priced.ns_per_op(),
            priced.runs_per_op()
        );
        assert!(
            (0.8..=1.2).contains(&ratio),
            "{name}: priced at {:.1} ns/op, its statistics at {expected:.1}",
            priced.ns_per_op()
        );
        // One run a syscall, the workload's and (few) others' on the machine meanwhile.
        let runs = priced.runs_per_op() / syscalls;
        assert!(
            (0.95..=1.3).contains(&runs),
            "{name}: {runs:.2} runs a syscall"
        );
        // The text report says it under the workload.
        let text = hookprof::report::text::render(&r);
        assert!(text.contains("Other BPF program"), "{text}");
    }
    drop(bpftrace);
    // compare without / with it names the program where the op's change went.
    let with = dir.path().join("null_call.json");
    let o = hookprof(&[
        "compare",
        without.to_str().unwrap(),
        with.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let c: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let programs = &c["workloads"][0]["other_programs"];
    assert!(
        programs[0]["holder"] == "bpftrace"
            && programs[0]["old_ns_per_op"] == 0.0
            && programs[0]["new_ns_per_op"]
                .as_f64()
                .is_some_and(|ns| ns > 0.0),
        "{programs}"
    );
}
