//! The discovery pass behind `--hooks default`: which kernel functions each selected workload
//! really calls on this kernel. Every candidate gets a counting fentry (no timing, no fexit);
//! each workload starts, then runs a short burst of ops inside its tracking window; a candidate
//! called at least `MIN_CALLS_PER_OP` times an op is kept for that workload. The measured run
//! then attaches, per workload, only what it calls: tens of pairs, not hundreds.
use std::time::{Duration, Instant};

use anyhow::Result;

use crate::{
    probes::{pair_refusals, KernelBtf, ProbePlan, Probes, Target, USER_SLOTS},
    results::Refusal,
    runner::{RemoteWorkload, Supervisor, Wait},
    workloads::{Metric, WorkloadSetup, WorkloadSpec},
};

/// How long a workload's burst lasts (after one op that sizes it).
const BURST: Duration = Duration::from_millis(20);
/// The most ops a burst runs: enough to see a path taken once every few hundred ops (such as
/// fs_create moving to a fresh directory every 100 files).
const MAX_BURST_OPS: u64 = 2000;
/// Paths taken less often than this contribute nothing measurable to an op.
const MIN_CALLS_PER_OP: f64 = 0.001;

/// What a discovery pass found.
#[derive(Debug)]
pub struct Found {
    /// Per workload (in the order given): the candidates it called.
    pub by_workload: Vec<(&'static str, Vec<Target>)>,
    /// Candidates the kernel would not probe (all of them where trampolines are refused).
    pub refused: Vec<Refusal>,
}

impl Found {
    /// Every candidate some workload called, each once, in first-seen order.
    pub fn union(&self) -> Vec<Target> {
        let mut all: Vec<Target> = Vec::new();
        for (_, targets) in &self.by_workload {
            for t in targets {
                if !all.iter().any(|a| a.function == t.function) {
                    all.push(t.clone());
                }
            }
        }
        all
    }

    /// Adds a later round's findings (same workloads, same order).
    pub fn merge(&mut self, later: Found) {
        for ((_, mine), (_, theirs)) in self.by_workload.iter_mut().zip(later.by_workload) {
            mine.extend(theirs);
        }
        self.refused.extend(later.refused);
    }

    /// The functions `workload` calls.
    pub fn functions_of(&self, workload: &str) -> Vec<String> {
        self.by_workload
            .iter()
            .filter(|(name, _)| *name == workload)
            .flat_map(|(_, targets)| targets.iter().map(|t| t.function.clone()))
            .collect()
    }
}

/// What discovery is asked to do beyond its candidates.
pub struct Discovery<'a> {
    pub kernel: &'a KernelBtf,
    /// The run's task probes: what a workload's children call counts too.
    pub follow_children: bool,
    /// The errno with which the kernel refuses every trampoline, if it does
    /// (`Probes::kernel_refuses_trampolines`): then no batch is loaded, since none could count
    /// anything.
    pub trampolines_refused: Option<i32>,
    pub specs: &'a [&'static WorkloadSpec],
    pub setup: &'a WorkloadSetup,
}

/// Runs each workload's burst with a counting probe on every candidate (in batches of the
/// probe slots there are), reporting each workload's name to `progress` as it starts. A
/// workload whose burst fails is said and left without hooks (its measurement will record the
/// failure); the others go on.
pub fn discover(
    asked: &Discovery,
    candidates: &[Target],
    supervisor: &mut Supervisor,
    progress: &dyn Fn(&str),
) -> Result<Wait<Found>> {
    let Discovery {
        kernel,
        follow_children,
        trampolines_refused,
        specs,
        setup,
    } = *asked;
    let mut found = Found {
        by_workload: specs.iter().map(|s| (s.name, Vec::new())).collect(),
        refused: Vec::new(),
    };
    if trampolines_refused.is_some() {
        found.refused = candidates
            .iter()
            .flat_map(|t| pair_refusals(t, kernel, trampolines_refused))
            .collect();
        return Ok(Wait::Done(found));
    }
    for batch in candidates.chunks(USER_SLOTS) {
        let plan = ProbePlan {
            syscalls: true,
            tasks: follow_children,
            functions: batch.to_vec(),
            entries_only: true,
            ..ProbePlan::default()
        };
        let mut probes = Probes::load(&plan, kernel)?;
        let countable = probes.hook_functions().iter().any(Option::is_some);
        if countable {
            probes.attach()?; // functions that load but do not attach are refused here
        }
        found.refused.extend(probes.report().refused);
        if !countable {
            // Nothing here can be counted (trampolines refused).
            drop(probes);
            crate::peak_rss::release_free_heap(); // the batch's parse
            continue;
        }
        for (spec, (_, called)) in specs.iter().zip(&mut found.by_workload) {
            progress(spec.name);
            supervisor.start_clock();
            let calls_per_op = match burst(spec, setup, &mut probes, supervisor) {
                Ok(Wait::Done(calls_per_op)) => calls_per_op,
                Ok(Wait::Interrupted) => return Ok(Wait::Interrupted),
                Err(e) => {
                    supervisor.warn(&format!(
                        "discovery pass of workload {} failed: {e:#}",
                        spec.name
                    ));
                    continue;
                }
            };
            for (slot, target) in probes.hook_functions().iter().enumerate() {
                if let Some(target) = target {
                    if calls_per_op
                        .get(slot)
                        .is_some_and(|&c| c >= MIN_CALLS_PER_OP)
                    {
                        called.push(target.clone());
                    }
                }
            }
        }
        probes.detach();
        drop(probes);
        crate::peak_rss::release_free_heap(); // the batch's parse
    }
    Ok(Wait::Done(found))
}

/// Starts one copy of `spec` and runs its burst; returns each hook slot's calls per op.
fn burst(
    spec: &'static WorkloadSpec,
    setup: &WorkloadSetup,
    probes: &mut Probes,
    supervisor: &mut Supervisor,
) -> Result<Wait<Vec<f64>>> {
    // The probes stay attached for the whole batch: only the runner's gate counts.
    probes.set_gate_owners(&[supervisor.runner_pid()?])?;
    let one = WorkloadSetup {
        copies: 1,
        ..setup.clone()
    };
    let Wait::Done(mut workload) = RemoteWorkload::start(supervisor, spec, &one, true)? else {
        return Ok(Wait::Interrupted);
    };
    // Set-up calls are not the op's: count from here.
    let before = probes.snapshot()?;
    let t = Instant::now();
    let mut ops = workload.whole_rounds(1);
    if let Wait::Interrupted = workload.run_slowest(ops, true)? {
        return Ok(Wait::Interrupted);
    }
    if spec.metric != Metric::Seconds {
        let more = (BURST.as_secs_f64() / t.elapsed().as_secs_f64().max(1e-9) * ops as f64).ceil();
        let more = workload.whole_rounds((more as u64).clamp(1, MAX_BURST_OPS - ops));
        if let Wait::Interrupted = workload.run_slowest(more, true)? {
            return Ok(Wait::Interrupted);
        }
        ops += more;
    }
    let delta = probes.snapshot()?.since(&before);
    workload.finish()?;
    Ok(Wait::Done(
        delta
            .hooks
            .iter()
            .map(|t| t.calls as f64 / ops as f64)
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(rows: &[(&'static str, &[&str])]) -> Found {
        Found {
            by_workload: rows
                .iter()
                .map(|(w, fs)| (*w, fs.iter().map(|f| Target::top(f)).collect()))
                .collect(),
            refused: Vec::new(),
        }
    }

    #[test]
    fn union_keeps_first_seen_order_once_and_merge_adds_per_workload() {
        let mut f = found(&[
            (
                "stat",
                &["security_inode_getattr", "security_inode_permission"],
            ),
            (
                "open_close",
                &["security_file_open", "security_inode_permission"],
            ),
        ]);
        let names: Vec<String> = f.union().into_iter().map(|t| t.function).collect();
        assert_eq!(
            names,
            [
                "security_inode_getattr",
                "security_inode_permission",
                "security_file_open"
            ]
        );
        f.merge(found(&[
            ("stat", &["apparmor_inode_getattr"]),
            ("open_close", &[]),
        ]));
        assert_eq!(
            f.functions_of("stat"),
            [
                "security_inode_getattr",
                "security_inode_permission",
                "apparmor_inode_getattr"
            ]
        );
        assert_eq!(f.functions_of("open_close").len(), 2);
        assert!(f.functions_of("null_call").is_empty());
    }
}
