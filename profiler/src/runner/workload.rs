//! A workload hosted in the runner, as the sampling engine sees it.
use std::{path::PathBuf, time::Duration};

use anyhow::{bail, Result};

use super::{
    protocol::{Extra, Reply, Request},
    Supervisor, Wait,
};
use crate::workloads::{command::CommandLine, WorkloadSpec};

/// How a workload is to be set up.
pub struct WorkloadSetup {
    pub scratch_dir: PathBuf,
    pub pin: Vec<usize>,
    pub jobs: Option<usize>,
    /// `stat`'s command, for its workload.
    pub command: Option<CommandLine>,
    /// Set-up runs inside the tracking window, so the helper processes it forks are followed.
    pub tracked: bool,
}

pub struct RemoteWorkload<'s> {
    supervisor: &'s mut Supervisor,
    /// The workload's `ops_per_round`.
    ops_per_round: u64,
    /// The runner's pid when the workload was created.
    runner_pid: u32,
    dropped: bool,
}

impl<'s> RemoteWorkload<'s> {
    /// Creates the workload in the runner (starting one if there is none).
    pub fn create(
        supervisor: &'s mut Supervisor,
        spec: &WorkloadSpec,
        setup: WorkloadSetup,
    ) -> Result<Wait<RemoteWorkload<'s>>> {
        let runner_pid = supervisor.runner_pid()?;
        let request = Request::Create {
            workload: spec.name.into(),
            command: setup.command,
            scratch_dir: setup.scratch_dir,
            pin: setup.pin,
            jobs: setup.jobs,
            tracked: setup.tracked,
        };
        Ok(match supervisor.request(&request)? {
            Wait::Done(Reply::Created { ops_per_round }) => Wait::Done(RemoteWorkload {
                supervisor,
                ops_per_round: ops_per_round.max(1),
                runner_pid,
                dropped: false,
            }),
            Wait::Done(other) => bail!("unexpected reply from the runner: {other:?}"),
            Wait::Interrupted => Wait::Interrupted,
        })
    }

    /// The process whose gate calls must count while this workload runs.
    pub fn runner_pid(&self) -> u32 {
        self.runner_pid
    }

    /// The workload's ops come in rounds of this many (see `Workload::ops_per_round`).
    pub fn ops_per_round(&self) -> u64 {
        self.ops_per_round
    }

    /// Runs `ops` operations and returns their time and extra metrics.
    pub fn run(&mut self, ops: u64, tracked: bool) -> Result<Wait<(Duration, Vec<Extra>)>> {
        Ok(
            match self.supervisor.request(&Request::Run { ops, tracked })? {
                Wait::Done(Reply::Ran { elapsed_ns, extras }) => {
                    Wait::Done((Duration::from_nanos(elapsed_ns), extras))
                }
                Wait::Done(other) => bail!("unexpected reply from the runner: {other:?}"),
                Wait::Interrupted => Wait::Interrupted,
            },
        )
    }

    /// Drops the workload in the runner; the runner's peak RSS while it hosted it, in KiB.
    pub fn finish(mut self) -> Result<Option<u64>> {
        self.dropped = true;
        Ok(match self.supervisor.request(&Request::Drop)? {
            Wait::Done(Reply::Dropped { peak_rss_kib }) => peak_rss_kib,
            Wait::Done(other) => bail!("unexpected reply from the runner: {other:?}"),
            Wait::Interrupted => None,
        })
    }
}

impl Drop for RemoteWorkload<'_> {
    /// A workload given up on (an error, an interrupt) is dropped too; if the runner cannot
    /// do that, it is killed with everything it forked. A runner already killed took it along.
    fn drop(&mut self) {
        if self.dropped || !self.supervisor.serves(self.runner_pid) {
            return;
        }
        if !matches!(self.supervisor.request(&Request::Drop), Ok(Wait::Done(_))) {
            self.supervisor.kill_runner();
        }
    }
}
