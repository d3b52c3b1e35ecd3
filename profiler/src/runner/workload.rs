//! A workload hosted in the runners (one copy per runner with `--parallel`), as the sampling
//! engine sees it.
use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Result};

use super::{
    monotonic_ns,
    protocol::{Extra, Reply, Request},
    Supervisor, Wait,
};
use crate::workloads::{command::CommandLine, WorkloadSpec};

/// How far ahead of sending them parallel copies are told to start: time enough for the
/// supervisor to hand the request to every runner on a busy machine.
const START_AHEAD_NS: u64 = 2_000_000;

/// How one copy of a workload is to be set up.
pub struct WorkloadSetup {
    pub scratch_dir: PathBuf,
    pub pin: Vec<usize>,
    pub jobs: Option<usize>,
    /// `stat`'s command, for its workload.
    pub command: Option<CommandLine>,
    /// Set-up runs inside the tracking window, so the helper processes it forks are followed.
    pub tracked: bool,
}

/// What one copy's run of `ops` operations came to.
#[derive(Debug, Clone)]
pub struct CopyRun {
    pub elapsed: Duration,
    pub extras: Vec<Extra>,
    /// When the runner started and ended the run, CLOCK_MONOTONIC ns (the same clock in every
    /// process, so the copies' runs can be laid side by side).
    pub start_ns: u64,
    pub end_ns: u64,
}

pub struct RemoteWorkload<'s> {
    supervisor: &'s mut Supervisor,
    /// The workload's `ops_per_round`.
    ops_per_round: u64,
    /// The runners' pids when the workload was created, one per copy.
    runner_pids: Vec<u32>,
    dropped: bool,
}

impl<'s> RemoteWorkload<'s> {
    /// Creates one copy of the workload per setup, copy `i` in runner `i` (starting runners as
    /// needed).
    pub fn create(
        supervisor: &'s mut Supervisor,
        spec: &WorkloadSpec,
        setups: Vec<WorkloadSetup>,
    ) -> Result<Wait<RemoteWorkload<'s>>> {
        let runner_pids = supervisor.runner_pids(setups.len())?;
        let tracked_anyway = supervisor.windows_kept_open();
        let requests: Vec<Request> = setups
            .into_iter()
            .map(|setup| Request::Create {
                workload: spec.name.into(),
                command: setup.command,
                scratch_dir: setup.scratch_dir,
                pin: setup.pin,
                jobs: setup.jobs,
                tracked: setup.tracked || tracked_anyway,
            })
            .collect();
        let created = supervisor.request_each(&requests);
        if created.is_err() && runner_pids.iter().all(|&p| supervisor.serves(p)) {
            // The copies that were set up go with their scratch directories.
            let drops = vec![Request::Drop; requests.len()];
            let _ = supervisor.request_each(&drops);
        }
        Ok(match created? {
            Wait::Done(replies) => {
                let mut ops_per_round = 1;
                for reply in replies {
                    match reply {
                        Reply::Created { ops_per_round: n } => ops_per_round = ops_per_round.max(n),
                        other => bail!("unexpected reply from the runner: {other:?}"),
                    }
                }
                Wait::Done(RemoteWorkload {
                    supervisor,
                    ops_per_round,
                    runner_pids,
                    dropped: false,
                })
            }
            Wait::Interrupted => Wait::Interrupted,
        })
    }

    /// The processes whose gate calls must count while this workload runs.
    pub fn runner_pids(&self) -> &[u32] {
        &self.runner_pids
    }

    /// How many copies run at once.
    pub fn copies(&self) -> usize {
        self.runner_pids.len()
    }

    /// The workload's ops come in rounds of this many (see `Workload::ops_per_round`).
    pub fn ops_per_round(&self) -> u64 {
        self.ops_per_round
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
        let Wait::Done(replies) = self.supervisor.request_each(&requests)? else {
            return Ok(Wait::Interrupted);
        };
        let runs = replies
            .into_iter()
            .map(|reply| match reply {
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
