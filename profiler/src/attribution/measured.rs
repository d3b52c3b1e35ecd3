//! What a workload's samples add up to, and what they come to as its result: the attribution
//! of its probed samples, its accounting (on and off CPU), its stack profile with what the
//! passes for the stacks alone cost, and the notes that say what the figures hold. The run's
//! measuring loop (`run::measure`) fills `Taken`; the arithmetic on it lives here, apart from
//! the measuring, as a statistics module lives apart from I/O.
use std::collections::HashMap;

use crate::{
    attribution::{self, attribute, ProbedSample, SampledStacks},
    probes::{
        kallsyms::{Symbol, SymbolTable},
        Probes,
    },
    results::{AttributionRow, Estimate, PathKind, StackPasses, WorkloadResult},
    workloads::WorkloadSpec,
};

/// What the samples so far add up to.
#[derive(Default)]
pub struct Taken {
    pub clean_ns_per_op: Vec<f64>,
    pub probed: Vec<ProbedSample>,
    /// The timed probed passes' time and ops over all copies: the wall time per op the
    /// counters' sums are over.
    pub probed_wall: (f64, u64),
    /// Samples taken in the timed probed passes (the rest in passes for the stacks alone, at
    /// their own rate).
    pub timed_samples: u64,
    /// The sampling period of the passes for the stacks alone, once one ran.
    pub stack_pass_period_ns: Option<u64>,
    /// The programs those passes attached (`Probes::stack_pass_programs`).
    pub stack_pass_programs: Vec<String>,
    /// Those passes' ops over all copies, and the samples they took: their CPU time per op.
    pub stack_pass_ops: u64,
    pub stack_pass_samples: u64,
    /// Their op time, ns, one per pass and copy: beside the clean passes' it says what their
    /// sampling added.
    pub stack_pass_ns_per_op: Vec<f64>,
    /// The slowest copy's op time in the last probed pass, ns: what sizes the next pass.
    pub last_pass_ns_per_op: f64,
    pub stacks: SampledStacks,
    /// The addresses of `stacks` named so far, to count the workload's own samples by
    /// (`Probes::name_addresses`; the profile names them all again when the run ends).
    pub named: HashMap<u64, Symbol>,
    /// Clean and probed samples taken again because a runner was stopped while they ran.
    pub retaken: [usize; 2],
}

/// One workload's samples over the rounds measured so far.
pub struct Measured {
    pub result: WorkloadResult,
    /// What was taken: the figures the result is finished from.
    pub taken: Taken,
}

impl Measured {
    pub fn new(spec: &WorkloadSpec) -> Measured {
        Measured {
            result: WorkloadResult::new(spec.name, spec.family, spec.metric.unit(), Vec::new()),
            taken: Taken::default(),
        }
    }

    pub fn failed(&self) -> bool {
        self.result.failure.is_some()
    }

    /// The result, with the attribution of every round's probed samples (`probes` focused on
    /// this workload) and their stacks named by `symbols` (kallsyms as the run ended).
    pub fn finish(
        self,
        probes: Option<&Probes>,
        symbols: Option<&Result<SymbolTable, String>>,
    ) -> WorkloadResult {
        let Measured { mut result, taken } = self;
        let [clean, probed] = taken.retaken;
        if clean + probed > 0 {
            result.notes.push(format!(
                "{clean} clean and {probed} probed samples were taken again: the runner was \
                 stopped (SIGSTOP or SIGTSTP) and continued while they ran, so their time held \
                 the stop"
            ));
        }
        if let Some(p) = probes {
            if !taken.probed.is_empty() {
                let a = attribute(
                    &taken.probed,
                    &p.focused_functions(),
                    crate::stats::mean(&taken.clean_ns_per_op).unwrap_or(0.0),
                    p.correction(),
                    p.waits_measured(),
                );
                result.attribution = a.rows;
                result.events_per_op = a.events_per_op;
                note_untimed(&mut result);
                if p.bpf_lsm_on_demand() {
                    result
                        .notes
                        .extend(bpf_lsm_on_demand_note(&result.attribution));
                }
                sampled(&mut result, &taken, p, symbols);
            }
        }
        result
    }
}

/// The probed samples' accounting (on and off CPU, where sched_switch was probed) and their
/// stack profile, into `result`.
fn sampled(
    result: &mut WorkloadResult,
    taken: &Taken,
    probes: &Probes,
    symbols: Option<&Result<SymbolTable, String>>,
) {
    let (wall_ns, wall_ops) = taken.probed_wall;
    let wall = wall_ns / wall_ops.max(1) as f64;
    // Without sched_switch the CPU counters hold only what the gate added: no accounting.
    let measured = probes.waits_measured();
    let account = |profile| {
        measured
            .then(|| attribution::account(&taken.probed, wall, profile))
            .flatten()
    };
    let Some(period) = probes.sample_period_ns() else {
        result.accounting = account(None);
        return;
    };
    // The probed op's CPU time is the timed passes' alone: the passes for the stacks alone
    // sample faster, and their interrupts would inflate it.
    let ops: u64 = taken.probed.iter().map(|s| s.ops).sum();
    let probed_on_cpu = account(None).map_or_else(
        || taken.timed_samples as f64 * period as f64 / ops.max(1) as f64,
        |a| a.on_cpu_ns_per_op,
    );
    let unprobed = taken.stack_pass_ops > 0 && probes.stacks_unprobed();
    let sampling_cost = unprobed
        .then(|| sampling_cost(&taken.clean_ns_per_op, &taken.stack_pass_ns_per_op))
        .flatten();
    // Shares from unprobed passes are of the op as the kernel runs it unprobed: their time is
    // that op's CPU time as those passes' own samples count it (each one sampling period of a
    // tracked task's CPU time), not the probed op's, which holds the probes' cost. Their
    // interrupts' cost is in it (`sampling_cost` says how much they added to the op's time):
    // it falls between two samples, in no sample's stack, so the shares are the kernel's own.
    let on_cpu = if unprobed {
        let stack_period = taken.stack_pass_period_ns.unwrap_or(period);
        taken.stack_pass_samples as f64 * stack_period as f64 / taken.stack_pass_ops as f64
    } else {
        probed_on_cpu
    };
    let names = match symbols {
        Some(Ok(table)) => Ok(table.names(&taken.stacks.addresses())),
        Some(Err(e)) => Err(e.clone()),
        None => Err("kallsyms was not read".to_string()),
    };
    match names {
        Ok(names) => {
            let mut profile =
                attribution::profile(&taken.stacks, &names, period, ops, Some(on_cpu));
            profile.stack_passes = taken.stack_pass_period_ns.map(|period_ns| StackPasses {
                period_ns,
                samples: profile.samples - taken.timed_samples,
                unprobed,
                programs: taken.stack_pass_programs.clone(),
                sampling_cost: sampling_cost.map(|e| e.value),
                sampling_cost_half_width: sampling_cost
                    .map(|e| e.half_width)
                    .filter(|h| h.is_finite()),
            });
            attribution::correct_by_samples(&mut result.attribution, &profile);
            result.accounting = account(Some(&profile));
            result.profile = Some(profile);
        }
        Err(e) => {
            result.accounting = account(None);
            result
                .notes
                .push(format!("the sampled stacks could not be named: {e}"));
        }
    }
}

/// What the passes for the stacks alone added to the op's time, as a fraction of the clean
/// op's, with the 95% half-width of that fraction (Welch, their passes against the clean
/// samples): below zero by noise it stays below zero, for the reader to see within noise.
/// None without a clean op to weigh them by.
fn sampling_cost(clean_ns_per_op: &[f64], stack_pass_ns_per_op: &[f64]) -> Option<Estimate> {
    let (clean, stacks) = (
        crate::stats::summarize(clean_ns_per_op)?,
        crate::stats::summarize(stack_pass_ns_per_op)?,
    );
    if clean.mean <= 0.0 {
        return None;
    }
    let half_width = crate::stats::difference_interval(&clean, &stacks)
        .map_or(f64::INFINITY, |(low, high)| (high - low) / 2.0);
    Some(Estimate {
        value: stacks.mean / clean.mean - 1.0,
        half_width: half_width / clean.mean,
    })
}

/// Where the kernel calls BPF LSM functions only with a BPF LSM program on their hook: the
/// timed ones its hooks ran without calling, said once, so a row of 0 calls reads as the
/// kernel's, not as the probes' doing (fentry attaches no BPF LSM program, and turns no call
/// on). With `--stack-noop` or `--inject` the programs hookprof attached are what turn them on.
fn bpf_lsm_on_demand_note(rows: &[AttributionRow]) -> Option<String> {
    let hook_calls = |hook: &str| {
        rows.iter()
            .find(|r| r.kind == PathKind::Hook && r.name == hook)
            .map_or(0.0, |r| r.calls_per_op)
    };
    let uncalled: Vec<&str> = rows
        .iter()
        .filter(|r| r.kind == PathKind::Lsm && r.name.starts_with("bpf_lsm_"))
        .filter(|r| {
            let hook = r.parent.as_deref().unwrap_or_default();
            r.calls_per_op < 0.01 * hook_calls(hook) && hook_calls(hook) > 0.0
        })
        .map(|r| r.name.as_str())
        .collect();
    (!uncalled.is_empty()).then(|| {
        format!(
            "{}: timed and never called: this kernel calls a BPF LSM function only while a \
             BPF LSM program is attached to its hook (static calls, Linux 6.12), and the \
             fentry programs that time it attach none, so they change nothing the kernel calls",
            uncalled.join(", ")
        )
    })
}

fn note_untimed(result: &mut WorkloadResult) {
    for row in &result.attribution {
        // These never return: their calls are counted and can never be timed.
        if ["exit", "exit_group"].contains(&row.name.as_str()) {
            continue;
        }
        let copies = result.copies.len().max(1) as f64;
        let calls =
            row.calls_per_op * result.iterations as f64 * result.probed.len() as f64 * copies;
        if row.untimed_calls > 0 && row.untimed_calls as f64 > 0.01 * calls {
            result.notes.push(format!(
                "{}: {} calls were counted but not timed (the task was preempted or migrated \
                 inside the call); ns/call comes from the timed ones",
                row.name, row.untimed_calls
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::row;

    #[test]
    fn the_sampling_cost_is_the_stack_passes_time_over_the_clean_op_s_with_its_interval() {
        let clean = [99.0, 100.0, 101.0, 100.0];
        let cost = sampling_cost(&clean, &[109.0, 110.0, 111.0, 110.0]).unwrap();
        assert!((cost.value - 0.10).abs() < 1e-12, "{cost:?}");
        assert!(cost.half_width > 0.0 && !cost.within_noise(), "{cost:?}");
        // Below the clean op by noise: kept as measured, and read as within noise.
        let cost = sampling_cost(&clean, &[97.0, 101.0, 99.0, 102.0]).unwrap();
        assert!(cost.value < 0.0 && cost.within_noise(), "{cost:?}");
        assert_eq!(sampling_cost(&[0.0], &[1.0]), None);
        assert_eq!(sampling_cost(&clean, &[]), None);
    }

    #[test]
    fn bpf_lsm_functions_a_hook_ran_without_calling_are_named_once() {
        let hook = "security_file_open";
        let mut rows = vec![
            row(PathKind::Hook, hook, None, 1.0, 400.0),
            row(PathKind::Lsm, "apparmor_file_open", Some(hook), 1.0, 300.0),
            row(PathKind::Lsm, "bpf_lsm_file_open", Some(hook), 0.0, 0.0),
        ];
        let note = bpf_lsm_on_demand_note(&rows).expect("a note");
        assert!(
            note.starts_with("bpf_lsm_file_open: timed and never called"),
            "{note}"
        );
        assert!(!note.contains("apparmor"), "{note}");
        // Called (a BPF LSM program on the hook turned it on): nothing to say.
        rows[2].calls_per_op = 1.0;
        assert_eq!(bpf_lsm_on_demand_note(&rows), None);
    }
}
