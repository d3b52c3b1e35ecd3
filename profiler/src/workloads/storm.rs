//! A fork/exit storm: many short-lived processes and threads created and reaped in parallel,
//! the load on which task-path hooks (task_alloc, task_free, exit notifiers) show up at scale.
use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::{Duration, Instant},
};

use super::{process::fork_and_reap, Family, Metric, Suite, Workload, WorkloadSpec};

/// Parallel creators, each alternating fork + _exit + waitpid with thread spawn + join.
const CREATORS: u64 = 8;
/// The exit code that proves a storm child ran.
const CHILD_EXIT: i32 = 3;

pub static SPECS: &[WorkloadSpec] = &[WorkloadSpec {
    name: "fork_exit_storm",
    family: Family::Processes,
    metric: Metric::LatencyUs,
    description:
        "8 parallel creators forking/reaping processes and spawning/joining threads; per task",
    suite: Suite::Full,
    create: |_| Ok(Box::new(ForkExitStorm::default())),
}];

#[derive(Default)]
struct ForkExitStorm {
    /// Tasks created and reaped so far (checked by the test).
    tasks: AtomicU64,
}

impl ForkExitStorm {
    fn creator(&self, tasks: u64) -> anyhow::Result<()> {
        for i in 0..tasks {
            if i % 2 == 0 {
                let code = fork_and_reap(|| CHILD_EXIT)?;
                anyhow::ensure!(code == CHILD_EXIT, "storm child exited with {code}");
            } else {
                std::thread::spawn(|| {})
                    .join()
                    .map_err(|_| anyhow::anyhow!("storm thread panicked"))?;
            }
            self.tasks.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

impl Workload for ForkExitStorm {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let this = &*self;
        let start = Instant::now();
        std::thread::scope(|scope| {
            let creators: Vec<_> = (0..CREATORS)
                // Creator c takes every CREATORS-th task, so the shares add up to `ops`.
                .map(|c| {
                    scope
                        .spawn(move || this.creator(ops / CREATORS + u64::from(c < ops % CREATORS)))
                })
                .collect();
            creators
                .into_iter()
                .try_for_each(|c| c.join().map_err(|_| anyhow::anyhow!("creator panicked"))?)
        })?;
        Ok(start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::run_and_drop;

    #[test]
    fn the_storm_creates_and_reaps_every_task() {
        let mut storm = ForkExitStorm::default();
        storm.run(37).unwrap();
        assert_eq!(storm.tasks.load(Ordering::Relaxed), 37);
        run_and_drop("fork_exit_storm", 16);
    }
}
