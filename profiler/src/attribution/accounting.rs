//! An op's time, whole: the sched_switch totals of the probed samples (CPU time, and time
//! switched out, runnable or blocked, over all the op's tasks) per op, beside the probed op's
//! wall time, with the CPU time split by the sampled stacks into user, kernel and the probes'
//! own. With one task the parts add up to the probed op; `tasks` says by how much several
//! tasks' times exceed it.
use profiler_common::event;

use super::ProbedSample;
use crate::results::{Accounting, StackProfile};

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
    let (user, kernel, probe) = match profile.filter(|p| p.samples > 0) {
        Some(p) if p.of_unprobed_op() => split_by_unprobed_op(on_cpu, p),
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
    })
}

/// The probed op's CPU time `on_cpu` as (user, kernel, probes), where the profile is of the
/// unprobed op (its samples nearly all from passes without the probes): user and kernel are
/// the unprobed op's own CPU time split by its samples, and the probes' part is what the
/// probed op took beyond it (so it leaves out what the sampling of those passes added to
/// theirs). The timed passes' few samples at their low rate would price the probes far less
/// precisely.
fn split_by_unprobed_op(on_cpu: f64, p: &StackProfile) -> (Option<f64>, Option<f64>, Option<f64>) {
    let own = p.own_ns_per_op();
    let user = own * p.user_samples as f64 / p.own_samples().max(1) as f64;
    (Some(user), Some(own - user), Some(on_cpu - own))
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
        };
        let a = account(&[sample(1, 800, 0, 0)], 800.0, Some(&profile)).unwrap();
        assert_eq!(a.user_ns_per_op, Some(200.0));
        assert_eq!(a.probe_ns_per_op, Some(40.0));
        assert_eq!(a.kernel_ns_per_op, Some(560.0));
    }

    #[test]
    fn an_unprobed_profile_splits_its_own_op_and_the_probes_take_the_rest() {
        let profile = StackProfile {
            period_ns: 1000,
            stack_passes: Some(crate::results::StackPasses {
                period_ns: 200,
                samples: 98,
                unprobed: true,
                programs: vec!["cpu_sample".into()],
                sampling_cost: Some(0.05),
            }),
            samples: 100,
            user_samples: 25,
            probe_samples: 0,
            lost_stacks: 0,
            ops: 10,
            // The unprobed op's CPU time, as its passes counted it.
            on_cpu_ns_per_op: 300.0,
            round_samples: Vec::new(),
            paths: Vec::new(),
            folded: Vec::new(),
            groups: Vec::new(),
        };
        let a = account(&[sample(1, 800, 0, 0)], 800.0, Some(&profile)).unwrap();
        assert_eq!(a.user_ns_per_op, Some(75.0));
        assert_eq!(a.kernel_ns_per_op, Some(225.0));
        assert_eq!(a.probe_ns_per_op, Some(500.0));
    }

    #[test]
    fn nothing_seen_is_no_accounting() {
        assert!(account(&[sample(5, 0, 0, 0)], 100.0, None).is_none());
    }
}
