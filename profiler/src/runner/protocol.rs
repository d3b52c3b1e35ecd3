//! What the supervisor and the runner say to each other: one JSON line per request, one per
//! reply, never per op.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::workloads::{Extra, WorkloadSetup};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Request {
    /// Creates the workload (inside the tracking window if `tracked`, so helper processes
    /// it forks are followed), with the runner pinned to `setup.pin[0]`: the registry's
    /// workload of that name, or with `setup.command`, `stat`'s runs of that command.
    Create {
        workload: String,
        setup: WorkloadSetup,
        scratch_dir: PathBuf,
        tracked: bool,
    },
    /// Runs `ops` operations of the workload, then lets it settle. With `start_at_ns`
    /// (CLOCK_MONOTONIC), the run starts at that moment, so parallel copies start together.
    Run {
        ops: u64,
        tracked: bool,
        start_at_ns: Option<u64>,
    },
    /// Drops the workload (its files, sockets and helper processes).
    Drop,
    /// `calls` getppid calls in a loop: the probes' calibration.
    GetppidLoop { calls: u32, tracked: bool },
    /// `calls` calls of `UNASSIGNED_SYSCALL` in a loop: what the syscall probes time around a
    /// syscall that does nothing (`top`'s calibration).
    UnassignedSyscallLoop { calls: u32, tracked: bool },
}

/// A syscall number x86_64 and arm64 leave unassigned (their tables jump to 424, from the 330s
/// and the 290s, so that new syscalls get one number on every architecture): the kernel
/// answers ENOSYS at once.
pub const UNASSIGNED_SYSCALL: i64 = 400;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// The workload is set up; its ops come in rounds of this many
    /// (`Workload::children_count_from_exec` beside).
    Created {
        ops_per_round: u64,
        children_count_from_exec: bool,
    },
    Ran {
        elapsed_ns: u64,
        extras: Vec<Extra>,
        /// When the run started and ended, CLOCK_MONOTONIC ns (one clock for every runner).
        start_ns: u64,
        end_ns: u64,
    },
    /// The runner's peak resident set since the workload was created, in KiB.
    Dropped {
        peak_rss_kib: Option<u64>,
    },
    CalibrationLoop {
        ns_per_call: f64,
    },
    /// The request failed; the runner is still able to serve.
    Failed {
        error: String,
    },
}
