//! A workload hosted in the runners (one copy per runner with `--parallel`), as the sampling
//! engine and the discovery pass see it: started with a scratch directory and CPUs per copy,
//! run, finished.
use std::time::Duration;

use anyhow::{bail, Context, Result};

use super::{
    protocol::{Reply, Request},
    Supervisor, Wait,
};
use crate::{
    machine::clock::monotonic_ns,
    safety::scratch::{self, Scratch},
    workloads::{self, Extra, WorkloadSetup, WorkloadSpec},
};

/// How far ahead of sending them parallel copies are told to start: time enough for the
/// supervisor to hand the request to every runner on a busy machine.
const START_AHEAD_NS: u64 = 2_000_000;

/// What one copy's run of `ops` operations came to.
#[derive(Debug, Clone)]
pub struct CopyRun {
    pub elapsed: Duration,
    pub extras: Vec<Extra>,
    /// When the runner started and ended the run, CLOCK_MONOTONIC ns (the same clock in every
    /// process, so the copies' runs can be laid side by side).
    pub start_ns: u64,
    pub end_ns: u64,
    /// The runner was stopped (SIGSTOP, SIGTSTP) and continued during the run: its time
    /// holds the stop, which is no part of the workload.
    pub stopped: bool,
}

/// A workload in the runners. Fields drop in order: the scratch directories go after the
/// workload (and its files), which `Drop` has the runners drop.
pub struct RemoteWorkload<'s> {
    supervisor: &'s mut Supervisor,
    /// The workload's `ops_per_round`.
    ops_per_round: u64,
    /// `Workload::children_count_from_exec`.
    children_count_from_exec: bool,
    /// The runners' pids when the workload was created, one per copy.
    runner_pids: Vec<u32>,
    dropped: bool,
    _scratch: Vec<Scratch>,
}

impl<'s> RemoteWorkload<'s> {
    /// Creates `setup.copies` copies of the workload, copy `i` in runner `i` (starting
    /// runners as needed; see `Supervisor::runner_pids`), each with a scratch directory of its
    /// own (owned by the run's user) and, with `--pin`, CPUs of its own. With `tracked`,
    /// set-up runs inside the tracking window, so the helper processes it forks are followed.
    pub fn start(
        supervisor: &'s mut Supervisor,
        spec: &WorkloadSpec,
        setup: &WorkloadSetup,
        tracked: bool,
    ) -> Result<Wait<RemoteWorkload<'s>>> {
        let copies = setup.copies;
        let cpus = if setup.pin.is_empty() {
            Vec::new()
        } else {
            crate::environment::allowed_cpus().context("sched_getaffinity")?
        };
        let runner_pids = supervisor.runner_pids(copies)?;
        let tracked = tracked || supervisor.windows_kept_open();
        let mut scratches = Vec::with_capacity(copies);
        let mut requests = Vec::with_capacity(copies);
        for copy in 0..copies {
            let scratch = scratch::create(spec.name, supervisor.user())?;
            let dir = scratch.nested(setup.scratch_depth, supervisor.user())?;
            requests.push(Request::Create {
                workload: spec.name.into(),
                setup: WorkloadSetup {
                    pin: copy_pin(&setup.pin, copy, &cpus),
                    ..setup.clone()
                },
                scratch_dir: dir,
                tracked,
            });
            scratches.push(scratch);
        }
        let created = supervisor.request_each(&requests);
        if created.is_err() && runner_pids.iter().all(|&p| supervisor.serves(p)) {
            // The copies that were set up go with their scratch directories.
            let drops = vec![Request::Drop; requests.len()];
            let _ = supervisor.request_each(&drops);
        }
        Ok(match created? {
            Wait::Done(replies) => {
                let mut ops_per_round = 1;
                let mut children_count_from_exec = false;
                for reply in replies {
                    match reply {
                        Reply::Created {
                            ops_per_round: n,
                            children_count_from_exec: from_exec,
                        } => {
                            ops_per_round = ops_per_round.max(n);
                            children_count_from_exec |= from_exec;
                        }
                        other => bail!("unexpected reply from the runner: {other:?}"),
                    }
                }
                Wait::Done(RemoteWorkload {
                    supervisor,
                    ops_per_round,
                    children_count_from_exec,
                    runner_pids,
                    dropped: false,
                    _scratch: scratches,
                })
            }
            Wait::Interrupted => Wait::Interrupted,
        })
    }

    /// The processes whose gate calls must count while this workload runs.
    pub fn runner_pids(&self) -> &[u32] {
        &self.runner_pids
    }

    /// Whether the programs the workload starts count from their execve on, which only the
    /// syscall gate sees (`Workload::children_count_from_exec`).
    pub fn children_count_from_exec(&self) -> bool {
        self.children_count_from_exec
    }

    /// How many copies run at once.
    pub fn copies(&self) -> usize {
        self.runner_pids.len()
    }

    /// The workload's ops come in rounds of this many (see `Workload::ops_per_round`).
    pub fn ops_per_round(&self) -> u64 {
        self.ops_per_round
    }

    /// `ops` rounded up to the workload's whole rounds.
    pub fn whole_rounds(&self, ops: u64) -> u64 {
        workloads::whole_rounds(ops, self.ops_per_round)
    }

    /// Runs `ops` operations in every copy at once; each copy's time, extra metrics and span.
    pub fn run(&mut self, ops: u64, tracked: bool) -> Result<Wait<Vec<CopyRun>>> {
        // Copies start at one moment, a little ahead: a runner woken by its request would
        // otherwise start at once and could hold the CPU the supervisor needs to wake the next.
        let start_at_ns = (self.copies() > 1).then(|| monotonic_ns() + START_AHEAD_NS);
        let request = Request::Run {
            ops,
            tracked: tracked || self.supervisor.windows_kept_open(),
            start_at_ns,
        };
        let requests = vec![request; self.copies()];
        // A stop and continue before this run is not this run's.
        for &pid in &self.runner_pids {
            Supervisor::continued(pid);
        }
        let Wait::Done(replies) = self.supervisor.request_each(&requests)? else {
            return Ok(Wait::Interrupted);
        };
        let runs = replies
            .into_iter()
            .zip(&self.runner_pids)
            .map(|(reply, &pid)| match reply {
                Reply::Ran {
                    elapsed_ns,
                    extras,
                    start_ns,
                    end_ns,
                } => Ok(CopyRun {
                    elapsed: Duration::from_nanos(elapsed_ns),
                    extras,
                    start_ns,
                    end_ns,
                    stopped: Supervisor::continued(pid),
                }),
                other => bail!("unexpected reply from the runner: {other:?}"),
            })
            .collect::<Result<_>>()?;
        Ok(Wait::Done(runs))
    }

    /// Runs `ops` operations in every copy at once; the slowest copy's time.
    pub fn run_slowest(&mut self, ops: u64, tracked: bool) -> Result<Wait<Duration>> {
        Ok(self.run(ops, tracked)?.map(|runs| {
            runs.iter()
                .map(|r| r.elapsed)
                .max()
                .expect("at least one copy")
        }))
    }

    /// Drops the workload in the runners, which then end: the next workload starts in fresh
    /// ones. The largest peak RSS of a runner while it hosted its copy, in KiB.
    pub fn finish(mut self) -> Result<Option<u64>> {
        self.dropped = true;
        let drops = vec![Request::Drop; self.copies()];
        let dropped = self.supervisor.request_each(&drops);
        self.supervisor.stop_runners();
        Ok(match dropped? {
            Wait::Done(replies) => {
                let mut peak = None;
                for reply in replies {
                    match reply {
                        Reply::Dropped { peak_rss_kib } => peak = peak.max(peak_rss_kib),
                        other => bail!("unexpected reply from the runner: {other:?}"),
                    }
                }
                peak
            }
            Wait::Interrupted => None,
        })
    }
}

impl Drop for RemoteWorkload<'_> {
    /// A workload given up on (an error, an interrupt) is dropped too and its runners end; if
    /// the runners cannot drop it, they are killed with everything they forked. Runners
    /// already killed took it along.
    fn drop(&mut self) {
        let serving = self.runner_pids.iter().all(|&p| self.supervisor.serves(p));
        if self.dropped || !serving {
            return;
        }
        let drops = vec![Request::Drop; self.copies()];
        if matches!(self.supervisor.request_each(&drops), Ok(Wait::Done(_))) {
            self.supervisor.stop_runners();
        } else {
            self.supervisor.kill_runners();
        }
    }
}

/// The CPUs copy `copy` is pinned to: `--pin`'s, moved up by the copy's number through the
/// CPUs this process may run on (`allowed`, in order, wrapping round), so copies run on CPUs
/// of their own while there are enough; copy 0 gets `--pin`'s own.
fn copy_pin(pin: &[usize], copy: usize, allowed: &[usize]) -> Vec<usize> {
    pin.iter()
        .map(|&cpu| match allowed.iter().position(|&a| a == cpu) {
            Some(at) => allowed[(at + copy) % allowed.len()],
            None => cpu,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_move_up_from_the_pinned_cpus_and_wrap() {
        let four = [0, 1, 2, 3];
        assert_eq!(copy_pin(&[], 3, &four), Vec::<usize>::new());
        assert_eq!(copy_pin(&[1], 0, &four), vec![1]);
        assert_eq!(copy_pin(&[1], 1, &four), vec![2]);
        assert_eq!(copy_pin(&[3], 1, &four), vec![0]);
        assert_eq!(copy_pin(&[0, 1], 1, &[0, 1]), vec![1, 0]);
        // Under `taskset -c 1,3` (or a cpuset): only those CPUs, never one outside them.
        assert_eq!(copy_pin(&[1], 0, &[1]), vec![1]);
        assert_eq!(copy_pin(&[1], 1, &[1]), vec![1]);
        assert_eq!(copy_pin(&[3], 1, &[1, 3]), vec![1]);
    }
}
