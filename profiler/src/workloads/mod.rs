//! The lmbench-equivalent workloads. Each family has a module; each workload is a
//! [`WorkloadSpec`] in [`REGISTRY`] that creates a [`Workload`]: set-up happens in `create`,
//! teardown in `Drop` (files, sockets and child processes are gone when it is dropped, including
//! on error and on panic unwinding).
//!
//! Families: `syscall`, `select`, `signal`, `process` (+ `storm`), `ctxsw`, `ipc` (+ `rpc`),
//! `fs`, `vm`, `bandwidth`, `memory`, `build`. Shared by them: `peer` (pinning, forked helper
//! processes that are killed and reaped on drop) and `channel` (pipe pairs and loopback
//! socket pairs, exact raw-fd I/O a forked child may use).
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::results::Family;
use crate::results::Unit;

mod bandwidth;
mod build;
mod channel;
pub mod command;
mod ctxsw;
mod fs;
mod ipc;
mod memory;
mod peer;

pub use build::TreeShape;
pub use peer::pin_to;
mod process;
mod rpc;
mod select;
mod setup;
mod signal;
mod storm;
mod syscall;
pub mod tracking_window;
mod vm;

pub use setup::{WorkloadOptions, WorkloadSetup};

/// Suites, smallest first; each includes the workloads tagged for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Suite {
    /// A few workloads per family: a CI smoke test (<= 30 s).
    Quick,
    /// Every lmbench summary column (no `build`).
    Default,
    /// Default plus the kernbench-like `build` and `fork_exit_storm`.
    Full,
}

/// How the workload's elapsed time becomes its metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Time per operation, in microseconds.
    LatencyUs,
    /// Time per operation, in nanoseconds.
    LatencyNs,
    /// Bytes moved per operation -> MB/s (10^6 bytes, as lmbench's lib_timing.c and bw_mem.c).
    Bandwidth { bytes_per_op: u64 },
    /// Seconds per operation (one operation is one whole run, e.g. a build).
    Seconds,
}

impl Metric {
    pub fn unit(self) -> Unit {
        match self {
            Metric::LatencyUs => Unit::Microseconds,
            Metric::LatencyNs => Unit::Nanoseconds,
            Metric::Bandwidth { .. } => Unit::MegabytesPerSecond,
            Metric::Seconds => Unit::Seconds,
        }
    }

    /// The metric of `ops` operations that took `elapsed`.
    pub fn value(self, elapsed: Duration, ops: u64) -> f64 {
        let ns_per_op = elapsed.as_nanos() as f64 / ops.max(1) as f64;
        match self {
            Metric::LatencyUs => ns_per_op / 1e3,
            Metric::LatencyNs => ns_per_op,
            Metric::Bandwidth { bytes_per_op } => bytes_per_op as f64 / 1e6 / (ns_per_op / 1e9),
            Metric::Seconds => ns_per_op / 1e9,
        }
    }
}

/// One extra metric of a run (build: user, system, cpu_percent), as the runner replies it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Extra {
    pub name: String,
    pub unit: Unit,
    pub value: f64,
}

pub trait Workload {
    /// Runs `ops` operations and returns the time they took, with the overhead lmbench
    /// subtracts (loop, clock, a reference operation) already taken out.
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration>;

    /// `run` does its ops in whole rounds of this many (a token ring passes the token all the
    /// way round); callers ask for multiples of it so that events per op come out exact.
    fn ops_per_round(&self) -> u64 {
        1
    }

    /// Called after each `run`, outside the tracking window and before the probes detach:
    /// waits until the workload's helper processes are idle again, so each sample counts
    /// their syscalls for its own ops, whole (default: nothing to wait for).
    fn settle(&mut self) -> anyhow::Result<()> {
        Ok(())
    }

    /// Extra metrics of the last `run` (default: none).
    fn extras(&mut self) -> Vec<Extra> {
        Vec::new()
    }

    /// Whether the programs it starts count from their execve on (`tracking_window::spawning`):
    /// only the syscall gate sees an execve begin, so its passes for the stacks alone keep the
    /// gate program (default: no, every child counts from its fork).
    fn children_count_from_exec(&self) -> bool {
        false
    }
}

/// `ops` rounded up to whole rounds of `per_round` (see `Workload::ops_per_round`).
pub fn whole_rounds(ops: u64, per_round: u64) -> u64 {
    ops.max(1).div_ceil(per_round.max(1)) * per_round.max(1)
}

/// The time of `asked` ops when `done` ops (whole rounds, `done >= asked`) took `timed` and
/// lmbench's reference loop for them took `reference`: the net time per op, times `asked`.
pub(crate) fn net_time(timed: Duration, reference: Duration, done: u64, asked: u64) -> Duration {
    let per_op = timed.saturating_sub(reference).as_secs_f64() / done.max(1) as f64;
    Duration::from_secs_f64(per_op * asked as f64)
}

/// Sums `len` words as lmbench's bread() does with a working set or with data it read: blocks
/// of 128 words, each summed into a sum of its own (one load and one add a word, unrolled)
/// that is then added to the total, so one block's adds may overlap the next block's, as in
/// bread()'s `sum += p[0]+...+p[127]`. Volatile, so the compiler can neither drop the loads
/// nor vectorise them into a loop several times faster than lmbench's -O build.
pub(crate) fn sum_words(words: *const u64, len: usize) -> u64 {
    const BLOCK: usize = 128;
    assert!(words.is_aligned(), "sum_words needs word-aligned memory");
    let load = |i: usize| {
        // SAFETY: callers pass a live, aligned buffer of `len` words; every i here is < len.
        unsafe { words.add(i).read_volatile() }
    };
    let whole = len - len % BLOCK;
    let mut sum = 0u64;
    for base in (0..whole).step_by(BLOCK) {
        let block = (base..base + BLOCK).fold(0u64, |s, i| s.wrapping_add(load(i)));
        sum = sum.wrapping_add(block);
    }
    (whole..len).fold(sum, |s, i| s.wrapping_add(load(i)))
}

/// A fixed-seed xorshift generator: orders that look random to the hardware, the same every run.
pub(crate) struct FixedRng(u64);

impl FixedRng {
    pub(crate) fn new() -> Self {
        FixedRng(0x9e37_79b9_7f4a_7c15)
    }

    /// A number in 0..n (n > 0).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

pub struct WorkloadSpec {
    pub name: &'static str,
    pub family: Family,
    pub metric: Metric,
    /// One line for `hookprof run --list`.
    pub description: &'static str,
    /// The smallest suite that includes it.
    pub suite: Suite,
    pub create: fn(&WorkloadOptions) -> anyhow::Result<Box<dyn Workload>>,
}

impl WorkloadSpec {
    /// How many iterations of the workload's own loop `ops` ops take: the measured loop
    /// overhead is taken out once per iteration, as lmbench does. A memory chain's loop is
    /// unrolled (lmbench's lat_mem_rd: 100 loads an iteration), so a load carries no loop cost
    /// of its own; taking one out per load made mem_l1 read 20% under lmbench's.
    pub fn loop_iterations(&self, ops: u64) -> u64 {
        match self.family {
            Family::MemoryLatency => 0,
            _ => ops,
        }
    }
}

impl std::fmt::Debug for WorkloadSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Every workload, in lmbench summary order.
pub fn registry() -> Vec<&'static WorkloadSpec> {
    [
        syscall::SPECS,
        select::SPECS,
        signal::SPECS,
        process::SPECS,
        ctxsw::SPECS,
        ipc::SPECS,
        fs::SPECS,
        vm::SPECS,
        bandwidth::SPECS,
        memory::SPECS,
        build::SPECS,
        storm::SPECS,
    ]
    .into_iter()
    .flatten()
    .collect()
}

pub fn find(name: &str) -> Option<&'static WorkloadSpec> {
    registry().into_iter().find(|s| s.name == name)
}

#[derive(Debug, thiserror::Error)]
pub enum UnknownWorkload {
    #[error("unknown workload '{name}'; valid workloads: {valid}")]
    Unknown { name: String, valid: String },
    /// One name, one workload: a second copy would be measured twice and collide in every
    /// report and export.
    #[error("--workloads names {name} twice: name each workload once")]
    Twice { name: String },
}

/// The workloads a run uses: the named ones in the order given, else the suite's.
pub fn chosen(
    names: Option<&[String]>,
    suite: Suite,
) -> Result<Vec<&'static WorkloadSpec>, UnknownWorkload> {
    let mut seen = std::collections::HashSet::new();
    if let Some(twice) = names.into_iter().flatten().find(|n| !seen.insert(*n)) {
        return Err(UnknownWorkload::Twice {
            name: twice.clone(),
        });
    }
    match names {
        Some(names) => names
            .iter()
            .map(|n| {
                find(n).ok_or_else(|| UnknownWorkload::Unknown {
                    name: n.clone(),
                    valid: registry()
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            })
            .collect(),
        None => Ok(registry()
            .into_iter()
            .filter(|s| s.suite <= suite)
            .collect()),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Options for a workload under test: scratch files in `dir`, no pinning.
    pub(crate) fn options(dir: &std::path::Path) -> WorkloadOptions {
        WorkloadOptions {
            scratch_dir: dir.to_path_buf(),
            setup: WorkloadSetup::default(),
        }
    }

    /// The calling thread's live children (tests run in parallel threads, so this only sees
    /// what the calling test forked).
    pub(crate) fn my_children() -> Vec<String> {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        std::fs::read_to_string(format!("/proc/self/task/{tid}/children"))
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect()
    }

    /// Creates the workload in a fresh scratch dir, runs `ops` ops, drops it and checks that
    /// no child process or file is left behind; returns the measured time.
    pub(crate) fn run_and_drop(name: &str, ops: u64) -> Duration {
        let dir = tempfile::tempdir().unwrap();
        let spec = find(name).unwrap();
        let mut w = (spec.create)(&options(dir.path())).unwrap();
        let t = w.run(ops).unwrap();
        drop(w);
        assert_eq!(my_children(), Vec::<String>::new(), "{name} left children");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert!(left.is_empty(), "{name} left files: {left:?}");
        t
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<_> = registry().iter().map(|s| s.name).collect();
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    #[test]
    fn the_registry_follows_the_lmbench_summary() {
        let names: Vec<_> = registry().iter().map(|s| s.name).collect();
        let expected = [
            "null_call",
            "null_io",
            "stat",
            "open_close",
            "select_tcp",
            "select_file",
            "sig_install",
            "sig_catch",
            "fork_proc",
            "exec_proc",
            "sh_proc",
            "exec_proc_static",
            "ctx_2p_0k",
            "ctx_2p_16k",
            "ctx_2p_64k",
            "ctx_8p_16k",
            "ctx_8p_64k",
            "ctx_16p_16k",
            "ctx_16p_64k",
            "lat_pipe",
            "lat_unix",
            "lat_udp",
            "lat_rpc_udp",
            "lat_tcp",
            "lat_rpc_tcp",
            "lat_tcp_connect",
            "fs_create_0k",
            "fs_delete_0k",
            "fs_create_10k",
            "fs_delete_10k",
            "mmap_latency",
            "prot_fault",
            "page_fault",
            "bw_pipe",
            "bw_unix",
            "bw_tcp",
            "bw_file_reread",
            "bw_mmap_reread",
            "bw_bcopy_libc",
            "bw_bcopy_hand",
            "bw_mem_read",
            "bw_mem_write",
            "mem_l1",
            "mem_l2",
            "mem_main",
            "mem_rand",
            "build",
            "fork_exit_storm",
        ];
        assert_eq!(names, expected);
        // The default suite is every lmbench column: all but the macro workloads and the
        // static-exec variant of exec_proc.
        let default = chosen(None, Suite::Default).unwrap();
        assert_eq!(default.len(), expected.len() - 3);
    }

    #[test]
    fn sum_words_adds_every_word_unrolled_or_not() {
        let words: Vec<u64> = (1..=300).collect();
        for len in [0, 1, 127, 128, 129, 300] {
            let expected: u64 = words[..len].iter().sum();
            assert_eq!(sum_words(words.as_ptr(), len), expected, "len {len}");
        }
    }

    #[test]
    fn loop_overhead_is_taken_per_loop_iteration_not_per_unrolled_load() {
        assert_eq!(find("null_call").unwrap().loop_iterations(1000), 1000);
        assert_eq!(find("mem_l1").unwrap().loop_iterations(1000), 0);
    }

    /// What one sample (>= 5 ms of timed work) of each workload costs in wall time, with ops
    /// calibrated by doubling as the engine does: `cargo test -- --ignored --nocapture
    /// sample_cost`. `build` is left out (one run is a whole build).
    #[test]
    #[ignore = "measures every workload: about a minute"]
    fn sample_cost_of_every_workload() {
        use std::time::Instant;
        let dir = tempfile::tempdir().unwrap();
        eprintln!(
            "{:<16} {:>9} {:>9} {:>10} {:>9}  metric",
            "workload", "create", "ops", "sample", "timed"
        );
        for spec in registry().into_iter().filter(|s| s.name != "build") {
            let t = Instant::now();
            let mut w = (spec.create)(&options(dir.path())).unwrap();
            let create = t.elapsed();
            let mut ops = 1u64;
            let (wall, timed) = loop {
                let t = Instant::now();
                let timed = w.run(ops).unwrap();
                let wall = t.elapsed();
                if timed >= Duration::from_millis(5) || spec.metric == Metric::Seconds {
                    break (wall, timed);
                }
                ops *= 2;
            };
            drop(w);
            eprintln!(
                "{:<16} {:>7.1}ms {:>9} {:>8.1}ms {:>7.1}ms  {:.3} {}",
                spec.name,
                create.as_secs_f64() * 1e3,
                ops,
                wall.as_secs_f64() * 1e3,
                timed.as_secs_f64() * 1e3,
                spec.metric.value(timed, ops),
                spec.metric.unit().symbol()
            );
        }
    }

    #[test]
    fn unknown_names_list_the_valid_ones() {
        let err = chosen(Some(&["nope".to_string()]), Suite::Quick).unwrap_err();
        assert!(err.to_string().contains("null_call"), "{err}");
    }

    #[test]
    fn a_workload_named_twice_is_refused() {
        let names = ["null_call", "getppid", "null_call"].map(String::from);
        let err = chosen(Some(&names), Suite::Quick).unwrap_err().to_string();
        assert_eq!(
            err,
            "--workloads names null_call twice: name each workload once"
        );
    }

    #[test]
    fn net_time_takes_the_reference_out_per_op() {
        let ms = Duration::from_millis;
        // 10 ops done in 50 ms, reference 20 ms: 3 ms net per op; 8 asked -> 24 ms.
        assert_eq!(net_time(ms(50), ms(20), 10, 8), ms(24));
        // A reference longer than the run (noise) gives zero, not a wrap-around.
        assert_eq!(net_time(ms(5), ms(6), 4, 4), Duration::ZERO);
        assert_eq!(net_time(ms(7), Duration::ZERO, 7, 7), ms(7));
    }

    #[test]
    fn bandwidth_is_lmbench_mb_per_second() {
        // lmbench's MB is 10^6 bytes ("bandwidths are all power of ten").
        let m = Metric::Bandwidth {
            bytes_per_op: 1_000_000,
        };
        assert!((m.value(Duration::from_secs(1), 1) - 1.0).abs() < 1e-9);
        assert!((Metric::LatencyUs.value(Duration::from_micros(10), 5) - 2.0).abs() < 1e-9);
    }
}
