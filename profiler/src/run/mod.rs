//! `hookprof run` and `stat` (`stat.rs`): the orchestrator, three stages, each taking the
//! plan. `plan` (the arguments checked and parsed once, with `check`, `outputs` and `shape`)
//! -> `measuring` (the supervisor; `probe_setup`: load, discover, calibrate (`probe_cost`),
//! inject (`inject`), into `run_probes`; then `rounds`: each workload per round, through the
//! sampling engine: `engine`'s settings, `session`, `measure`'s loop, `probed_pass`) ->
//! `finish` (write, print, baseline, exit code). A workload that fails is recorded and the
//! run goes on; the exit code says so.
mod args;
mod check;
mod discovery;
pub mod engine;
mod finish;
mod inject;
mod list;
pub mod measure;
mod measuring;
mod outputs;
mod plan;
pub(crate) mod probe_cost;
pub(crate) mod probe_setup;
mod probed_pass;
mod progress;
mod rounds;
mod run_probes;
mod session;
mod shape;
pub mod stat;

use std::{process::ExitCode, time::Duration};

use anyhow::Result;

pub use self::args::{
    CommonMeasureArgs, MeasureArgs, PolicyArgs, ProbeChoice, RunArgs, SessionArgs,
};
use self::{engine::Sampling, plan::Work};
use crate::{
    results::RunOptions,
    workloads::{self, WorkloadSetup},
};

/// Rounds and samples per round by default: chosen from the variance components measured on
/// this kind of noisy 2-CPU machine (README, "How compare decides"): the spread between
/// rounds, not between samples, limits what a comparison can detect, so more rounds of fewer
/// samples.
pub const DEFAULT_ROUNDS: u32 = 4;
pub const DEFAULT_SAMPLES: u32 = 3;
/// Stack samples a workload holds over its rounds by default: a 5% share within about +-1
/// percentage point. Bought with passes for the stacks alone at --stack-sample-hz: the quick
/// suite took 2.0x as long here (72 s against 37 s; at the timed passes' rate, 4.9x).
pub const DEFAULT_STACK_SAMPLES: u64 = 2_000;

pub fn run(run_args: &RunArgs) -> Result<ExitCode> {
    if run_args.list {
        list::print_list()?;
        return Ok(ExitCode::SUCCESS);
    }
    let args = &run_args.measure;
    let (stacks_per_round, stack_pass_period_ns) = args
        .stack_passes
        .per_round(args.common.rounds, DEFAULT_STACK_SAMPLES);
    let work = Work {
        specs: workloads::chosen(args.workloads.as_deref(), args.suite)?,
        sampling: Sampling {
            samples: args.samples as usize,
            total: None,
            warmup: 1,
            warmup_once: false,
            min_sample: Duration::from_millis(args.min_sample_ms),
            stacks_per_round,
            stack_pass_period_ns,
        },
        setup: WorkloadSetup {
            jobs: args.jobs,
            build_units: args.build_units.map(|u| u as usize),
            ..WorkloadSetup::default()
        },
        recorded: RunOptions {
            suite: Some(format!("{:?}", args.suite).to_lowercase()),
            workloads: args.workloads.clone(),
            min_sample_ms: Some(args.min_sample_ms),
            jobs: args.jobs.map(|j| j as u64),
            build_units: args.build_units.map(u64::from),
            ..args.stack_passes.recorded(DEFAULT_STACK_SAMPLES)
        },
    };
    let plan = plan::from_args(&run_args.session, &args.common, work)?;
    let ran = measuring::measure(&plan)?;
    finish::finish(ran, plan)
}
