//! How a run's workloads are set up, one type from the command line to the runner: the CPUs
//! (`--pin`), the size of the work (`--jobs`, `stat`'s command) and the copies (`--parallel`).
//! The supervisor hands each copy its own (its CPUs moved up) in the runner's create request;
//! the runner pins itself, then creates the workload from it. The policies (`--policy`, and
//! `--versus`'s) go with the run's variants: a runner takes them on its command line, before it
//! serves any request.
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::command::CommandLine;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadSetup {
    /// CPUs to pin to: the workload (and a two-process workload's first end) to the first, the
    /// second end to the second (or the first, if only one is given).
    pub pin: Vec<usize>,
    /// `make -j` for `build`.
    pub jobs: Option<usize>,
    /// Translation units in `build`'s tree (`--build-units`).
    pub build_units: Option<usize>,
    /// `stat`'s command, for its workload.
    pub command: Option<CommandLine>,
    /// Copies that run at once, each in a runner of its own (`--parallel`).
    pub copies: usize,
    /// Directories one inside the next between the scratch directory and the workload's
    /// files (`--sweep landlock-depth`): each a step of every lookup of them.
    #[serde(default)]
    pub scratch_depth: usize,
}

impl Default for WorkloadSetup {
    /// One copy, unpinned.
    fn default() -> Self {
        WorkloadSetup {
            pin: Vec::new(),
            jobs: None,
            build_units: None,
            command: None,
            copies: 1,
            scratch_depth: 0,
        }
    }
}

/// What a workload gets to set itself up: its copy's setup and a scratch directory.
#[derive(Debug, Clone)]
pub struct WorkloadOptions {
    /// A private directory for this workload's files; removed by the profiler once the workload is dropped.
    pub scratch_dir: PathBuf,
    pub setup: WorkloadSetup,
}
