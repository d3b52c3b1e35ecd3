//! `hookprof stat [OPTIONS] -- CMD [ARGS...]`: the perf-stat / hyperfine habit with hookprof's
//! attribution. The runner runs CMD `--runs` times clean and as often probed in all, dealt over
//! the rounds, interleaved, one run a sample, after `--warmup` untimed runs in the first round; the probes count its whole process tree. The
//! results are a run's results with one workload named after the command, so `report`,
//! `compare` and baselines read them unchanged.
use std::{process::ExitCode, time::Duration};

use anyhow::Result;

use super::{
    args::StackPassArgs,
    engine::Sampling,
    finish, measuring,
    plan::{self, Work},
    CommonMeasureArgs, SessionArgs,
};
use crate::{
    results::RunOptions,
    workloads::{command::CommandLine, WorkloadSetup},
};

#[derive(clap::Args, Debug)]
pub struct StatArgs {
    /// Runs of the command in all, clean and as many probed, dealt over the rounds (at most
    /// N/2 rounds, so each has two; 2 to 100000).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub runs: u32,
    /// Untimed runs before the first timed one (at most 10000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub warmup: u32,
    /// A shell command run before each run of CMD (warm-up runs included), neither timed nor
    /// attributed: to reset state, drop caches, remove output.
    #[arg(long, value_name = "CMD")]
    pub prepare: Option<String>,
    #[command(flatten)]
    pub measure: CommonMeasureArgs,
    #[command(flatten)]
    pub stack_passes: StackPassArgs,
    #[command(flatten)]
    pub session: SessionArgs,
    /// The command to measure, with its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

pub fn stat(args: &StatArgs) -> Result<ExitCode> {
    use crate::safety::secrets::{masked_argv, masked_text};
    let command = CommandLine {
        argv: args.command.clone(),
        prepare: args.prepare.clone(),
    };
    // `--runs N` is N runs in all (hyperfine's sense), dealt over the rounds: at most N/2 of
    // them, so that every round pairs two runs at least.
    let measure = CommonMeasureArgs {
        rounds: args.measure.rounds.min(args.runs / 2),
        ..args.measure.clone()
    };
    // The timed runs, at --sample-hz, hold few stacks of a short command: more runs of it,
    // untimed, sampled faster, give the profile the precision `run`'s has.
    let (stacks_per_round, stack_pass_period_ns) = args.stack_passes.per_round(measure.rounds);
    let work = Work {
        specs: vec![command.spec()],
        // One op is one whole run of the command: no op count to calibrate, no build jobs.
        sampling: Sampling {
            samples: 0,
            total: Some(args.runs as usize),
            warmup: args.warmup as usize,
            warmup_once: true,
            min_sample: Duration::ZERO,
            stacks_per_round,
            stack_pass_period_ns,
        },
        recorded: RunOptions {
            // Secrets in the command are recorded masked, as on the command line.
            command: masked_argv(&command.argv),
            prepare: command.prepare.as_deref().map(masked_text),
            runs: Some(u64::from(args.runs)),
            warmup: Some(u64::from(args.warmup)),
            ..args.stack_passes.recorded()
        },
        setup: WorkloadSetup {
            command: Some(command),
            ..WorkloadSetup::default()
        },
    };
    let plan = plan::from_args(&args.session, &measure, work)?;
    let ran = measuring::measure(&plan)?;
    finish::finish(ran, plan)
}
