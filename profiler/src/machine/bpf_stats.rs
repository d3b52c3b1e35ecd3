//! Other tools' BPF programs priced by the kernel's own statistics: each program's runs and
//! run time over one more sample of each round of a workload, untimed and unprobed
//! (`OtherProgramRuns`). The sampled stacks cannot
//! price a program that runs in a tracepoint (the kernel runs no perf_event program, the
//! sampler, on a CPU while a tracepoint's program runs there), and a security agent's
//! programs mostly do. The statistics are on only while that sample runs: no timed sample,
//! clean or probed, pays their two clock reads a run of every program.
use std::os::fd::OwnedFd;

use aya::{
    programs::loaded_programs,
    sys::{enable_stats, Stats},
};
use serde::{Deserialize, Serialize};

use super::other_probes::OtherProgram;

/// Another tool's BPF program over a workload's pricing samples (one a round, untimed and
/// unprobed), from the kernel's BPF statistics (`run_time_ns`, `run_cnt`): every run of it
/// while those samples ran, whichever
/// task ran it (machine-wide; on a machine doing nothing else, the workload's). The sampled
/// stacks cannot price a program that runs in a tracepoint: the kernel runs no perf_event
/// program (the sampler) on a CPU while a tracepoint's program runs there.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OtherProgramRuns {
    /// The kernel's id of the program.
    pub program_id: u32,
    /// Its name as loaded (at most 15 characters; "" when it has none).
    pub name: String,
    /// The process holding it: "COMM (pid N)".
    pub holder: String,
    /// Where it is attached ("raw_tracepoint sys_enter", ...).
    pub attach: String,
    /// Its runs while the pricing samples ran.
    pub runs: u64,
    /// Their time, ns.
    pub run_time_ns: u64,
    /// The ops those samples ran (over all copies).
    pub ops: u64,
}

impl OtherProgramRuns {
    pub fn runs_per_op(&self) -> f64 {
        self.runs as f64 / self.ops.max(1) as f64
    }

    pub fn ns_per_op(&self) -> f64 {
        self.run_time_ns as f64 / self.ops.max(1) as f64
    }
}

/// Where the kernel says whether it keeps the statistics (set by a sysctl, or while a holder
/// of a BPF_ENABLE_STATS fd lives).
const STATS_ENABLED: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// One pass's pricing: the programs' counters when it began, the statistics kept on.
pub struct Pricing<'a> {
    programs: &'a [OtherProgram],
    before: Vec<Counters>,
    /// Keeps the statistics on while it lives (the kernel counts its holders).
    _enabled: Option<OwnedFd>,
}

/// A program's counters: (id, name, run time ns, runs).
type Counters = (u32, String, u64, u64);

impl<'a> Pricing<'a> {
    /// Begins pricing `programs` over a pass: None where none has a kernel id, or where the
    /// kernel keeps no statistics (before 5.8, or it refused to turn them on and the sysctl
    /// has them off): their time would read 0, which is not a price.
    pub fn start(programs: &'a [OtherProgram]) -> Option<Pricing<'a>> {
        if programs.iter().all(|p| p.program_id == 0) {
            return None;
        }
        let enabled = enable_stats(Stats::RunTime).ok();
        let on = enabled.is_some()
            || std::fs::read_to_string(STATS_ENABLED).is_ok_and(|v| v.trim() == "1");
        on.then(|| Pricing {
            programs,
            before: counters(programs),
            _enabled: enabled,
        })
    }

    /// Adds each program's runs and run time since `start`, over the `ops` ops the pass
    /// timed, to `runs` (one entry a program, over every pass of the workload).
    pub fn finish(self, ops: u64, runs: &mut Vec<OtherProgramRuns>) {
        for (id, name, time, count) in counters(self.programs) {
            let Some((_, _, time_before, count_before)) =
                self.before.iter().find(|(b, ..)| *b == id)
            else {
                continue;
            };
            let at = match runs.iter().position(|r| r.program_id == id) {
                Some(at) => at,
                None => {
                    let p = self.programs.iter().find(|p| p.program_id == id);
                    runs.push(OtherProgramRuns {
                        program_id: id,
                        name,
                        holder: p.map(|p| p.holder.clone()).unwrap_or_default(),
                        attach: p.map(|p| p.attach.clone()).unwrap_or_default(),
                        runs: 0,
                        run_time_ns: 0,
                        ops: 0,
                    });
                    runs.len() - 1
                }
            };
            let r = &mut runs[at];
            r.runs += count.saturating_sub(*count_before);
            r.run_time_ns += time.saturating_sub(*time_before);
            r.ops += ops;
        }
    }
}

/// The counters of those of `programs` still loaded.
fn counters(programs: &[OtherProgram]) -> Vec<Counters> {
    loaded_programs()
        .flatten()
        .filter(|info| programs.iter().any(|p| p.program_id == info.id()))
        .map(|info| {
            (
                info.id(),
                info.name_as_str().unwrap_or_default().to_string(),
                u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                info.run_count(),
            )
        })
        .collect()
}
