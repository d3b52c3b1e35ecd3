//! A workload session: one round of one workload in its runners, what every phase of it
//! works with and where it is. `measure` runs its phases, `probed_pass` its probed passes;
//! both read and fill the session, neither calls the other back.
use std::fmt;

use super::engine::{Engine, Overhead};
use crate::{
    attribution::Measured,
    machine::other_probes::OtherProgram,
    probes::{Probes, Snapshot},
    runner::{CopyRun, RemoteWorkload},
    workloads::WorkloadSpec,
};

/// Where a workload's round is: a failure is recorded with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Phase {
    SetUp,
    Calibration,
    WarmUp,
    /// Sample `number` (from 1), clean or probed.
    Sample {
        number: usize,
        probed: bool,
    },
    StackSamples,
    TearDown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Phase::SetUp => f.write_str("set-up"),
            Phase::Calibration => f.write_str("calibration"),
            Phase::WarmUp => f.write_str("warm-up"),
            Phase::Sample { number, probed } => {
                let pass = if *probed { "probed" } else { "clean" };
                write!(f, "sample {number} ({pass})")
            }
            Phase::StackSamples => f.write_str("stack samples"),
            Phase::TearDown => f.write_str("tear-down"),
        }
    }
}

/// One round of one workload in its runners: what every phase of it works with, and where it
/// is. The supervisor is the workload's while it lives.
pub(super) struct WorkloadSession<'r, 's> {
    pub engine: Engine<'r>,
    pub spec: &'static WorkloadSpec,
    pub probes: Option<&'r mut Probes>,
    pub workload: RemoteWorkload<'s>,
    /// The runners' pids, one per copy: the probes count their gate calls.
    pub pids: Vec<u32>,
    /// What was taken so far, over the rounds.
    pub measured: &'r mut Measured,
    /// The probes' counters at the end of the last probed pass.
    pub last: Option<Snapshot>,
    /// The ops a sample times (calibrated in the first round).
    pub ops: u64,
    pub phase: Phase,
    /// Other tools' programs, priced over the probed samples (`machine::bpf_stats`).
    pub others: &'r [OtherProgram],
}

/// Each copy's metric of one sample, the timing overhead taken out; each copy's ns per op
/// goes into `ns_per_op`.
pub(super) fn copy_values(
    spec: &WorkloadSpec,
    overhead: Overhead,
    ops: u64,
    runs: &[CopyRun],
    ns_per_op: &mut Vec<f64>,
) -> Vec<f64> {
    runs.iter()
        .map(|run| {
            let elapsed = overhead.take_from(run.elapsed, spec.loop_iterations(ops));
            ns_per_op.push(elapsed.as_nanos() as f64 / ops as f64);
            spec.metric.value(elapsed, ops)
        })
        .collect()
}
