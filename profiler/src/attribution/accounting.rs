//! An op's time, whole: the sched_switch totals of the probed samples (CPU time, and time
//! switched out, runnable or blocked, over all the op's tasks) per op, beside the probed op's
//! wall time. Where the stacks were sampled in the same passes, their samples split that CPU
//! time into user, kernel and the probes' own; where they were sampled in passes of their own
//! without the timing probes, the split is theirs (of another op), and what the probes added
//! is the difference of the two ops' CPU times, with its interval. With one task the parts add
//! up to the probed op; `tasks` says by how much several tasks' times exceed it.
use profiler_common::event;

use super::ProbedSample;
use crate::{
    results::{Accounting, Estimate, StackProfile},
    stats,
};

/// The accounting of `samples` (None when sched_switch saw none of the workload's time),
/// `wall_ns_per_op` the probed op's mean wall time, `profile` the samples' split if taken.
pub fn account(
    samples: &[ProbedSample],
    wall_ns_per_op: f64,
    profile: Option<&StackProfile>,
) -> Option<Accounting> {
    let ops: u64 = samples.iter().map(|s| s.ops).sum();
    let per_op = |index: u32| {
        let ns: u64 = samples.iter().map(|s| s.delta.events[index as usize]).sum();
        ns as f64 / ops.max(1) as f64
    };
    let on_cpu = per_op(event::ON_CPU_NS);
    if on_cpu <= 0.0 {
        return None;
    }
    let runnable = per_op(event::OFF_CPU_RUNNABLE_NS);
    let blocked = per_op(event::OFF_CPU_BLOCKED_NS);
    let profile = profile.filter(|p| p.samples > 0);
    let probes_cost = profile
        .filter(|p| p.of_unprobed_op())
        .and_then(|p| probes_cost(samples, p));
    let (user, kernel, probe) = match profile {
        Some(p) if p.of_unprobed_op() => (None, None, None),
        Some(p) => {
            let split = |part: u64| Some(on_cpu * part as f64 / p.samples as f64);
            (
                split(p.user_samples),
                split(p.samples - p.user_samples - p.probe_samples),
                split(p.probe_samples),
            )
        }
        None => (None, None, None),
    };
    Some(Accounting {
        wall_ns_per_op,
        on_cpu_ns_per_op: on_cpu,
        off_cpu_runnable_ns_per_op: runnable,
        off_cpu_blocked_ns_per_op: blocked,
        user_ns_per_op: user,
        kernel_ns_per_op: kernel,
        probe_ns_per_op: probe,
        tasks: if wall_ns_per_op > 0.0 {
            (on_cpu + runnable + blocked) / wall_ns_per_op
        } else {
            0.0
        },
        probes_cost,
    })
}

/// What the probes added to the op's CPU time: the probed samples' CPU time per op (their
/// spread sample to sample) less the unprobed op's own (its samples a count, whose relative
/// error is one over its root), with the 95% half-width of the difference. The timed passes'
/// few samples at their low rate would price the probes far less precisely.
fn probes_cost(samples: &[ProbedSample], p: &StackProfile) -> Option<Estimate> {
    let per_sample: Vec<f64> = samples
        .iter()
        .filter(|s| s.ops > 0)
        .map(|s| s.delta.events[event::ON_CPU_NS as usize] as f64 / s.ops as f64)
        .collect();
    let probed = stats::summarize(&per_sample)?;
    let own = p.own_samples();
    if own == 0 {
        return None;
    }
    let unprobed = p.own_ns_per_op();
    let probed_se2 = probed.stdev.powi(2) / probed.n as f64;
    let unprobed_se2 = unprobed.powi(2) / own as f64;
    Some(Estimate {
        value: probed.mean - unprobed,
        half_width: 1.96 * (probed_se2 + unprobed_se2).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probes::Snapshot;

    fn sample(ops: u64, on: u64, runnable: u64, blocked: u64) -> ProbedSample {
        let mut events = vec![0; event::COUNT as usize];
        events[event::ON_CPU_NS as usize] = on;
        events[event::OFF_CPU_RUNNABLE_NS as usize] = runnable;
        events[event::OFF_CPU_BLOCKED_NS as usize] = blocked;
        ProbedSample {
            delta: Snapshot {
                syscalls: Vec::new(),
                hooks: Vec::new(),
                events,
            }
            .into(),
            ops,
        }
    }

    #[test]
    fn parts_are_per_op_and_a_single_task_adds_up_to_its_wall_time() {
        let samples = [sample(10, 6000, 1000, 3000), sample(30, 18000, 3000, 9000)];
        let a = account(&samples, 1000.0, None).unwrap();
        assert_eq!(
            (
                a.on_cpu_ns_per_op,
                a.off_cpu_runnable_ns_per_op,
                a.off_cpu_blocked_ns_per_op
            ),
            (600.0, 100.0, 300.0)
        );
        assert!((a.tasks - 1.0).abs() < 1e-12);
        assert_eq!(a.user_ns_per_op, None);
    }

    #[test]
    fn the_samples_split_the_cpu_time() {
        let profile = StackProfile {
            period_ns: 1000,
            stack_passes: None,
            samples: 100,
            user_samples: 25,
            probe_samples: 5,
            lost_stacks: 0,
            ops: 10,
            on_cpu_ns_per_op: 0.0,
            round_samples: Vec::new(),
            paths: Vec::new(),
            folded: Vec::new(),
            groups: Vec::new(),
            places: Vec::new(),
        };
        let a = account(&[sample(1, 800, 0, 0)], 800.0, Some(&profile)).unwrap();
        assert_eq!(a.user_ns_per_op, Some(200.0));
        assert_eq!(a.probe_ns_per_op, Some(40.0));
        assert_eq!(a.kernel_ns_per_op, Some(560.0));
    }

    #[test]
    fn an_unprobed_profile_leaves_the_split_to_itself_and_prices_the_probes_with_an_interval() {
        let profile = StackProfile {
            period_ns: 1000,
            stack_passes: Some(crate::results::StackPasses {
                period_ns: 200,
                samples: 98,
                unprobed: true,
                programs: vec!["cpu_sample".into()],
                sampling_cost: Some(0.05),
                sampling_cost_half_width: None,
            }),
            samples: 400,
            user_samples: 100,
            probe_samples: 0,
            lost_stacks: 0,
            ops: 10,
            // The unprobed op's CPU time, as its passes counted it.
            on_cpu_ns_per_op: 300.0,
            round_samples: Vec::new(),
            paths: Vec::new(),
            folded: Vec::new(),
            groups: Vec::new(),
            places: Vec::new(),
        };
        let probed = [
            sample(1, 800, 0, 0),
            sample(1, 820, 0, 0),
            sample(1, 780, 0, 0),
        ];
        let a = account(&probed, 800.0, Some(&profile)).unwrap();
        // The probed op's split would mix two ops: the profile holds it.
        assert_eq!(
            (a.user_ns_per_op, a.kernel_ns_per_op, a.probe_ns_per_op),
            (None, None, None)
        );
        let cost = a.probes_cost.unwrap();
        assert!((cost.value - 500.0).abs() < 1e-9, "{cost:?}");
        // 300 ns by 400 samples: +-15 ns (one over the root); the samples' spread +-20/sqrt 3.
        let expected = 1.96 * ((20.0f64.powi(2) / 3.0) + 15.0f64.powi(2)).sqrt();
        assert!((cost.half_width - expected).abs() < 1e-9, "{cost:?}");
        assert!(!cost.within_noise());
        // Equal ops: within noise, never a cost below zero printed as one.
        let same = [sample(1, 290, 0, 0), sample(1, 310, 0, 0)];
        let a = account(&same, 300.0, Some(&profile)).unwrap();
        assert!(a.probes_cost.unwrap().within_noise());
    }

    #[test]
    fn nothing_seen_is_no_accounting() {
        assert!(account(&[sample(5, 0, 0, 0)], 100.0, None).is_none());
    }
}
