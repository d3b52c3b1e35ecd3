//! `hookprof stat [OPTIONS] -- CMD [ARGS...]`: the perf-stat / hyperfine habit with hookprof's
//! attribution. `--runs N` is N runs of the command in all: where probes run, half of them
//! clean (the time) and half probed (where it went), paired and interleaved, dealt over the
//! rounds, one run a sample; the probes count its whole process tree. The results are a run's
//! results with one workload named after the command, so `report`, `compare` and baselines
//! read them unchanged.
use std::{process::ExitCode, time::Duration};

use anyhow::Result;

use super::{
    args::{ProbeChoice, StackPassArgs},
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
    /// Runs of the command in all (as perf stat -r and hyperfine count them): half clean, the
    /// time, and half probed, where it went (an odd N takes one more); all clean with
    /// `--probes none`. Dealt over the rounds, each with two clean runs at least (2 to 100000).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub runs: u32,
    /// Untimed runs before the first timed one (at most 10000; none by default, as perf stat
    /// and hyperfine: every run is a fresh exec, so only the machine's caches would warm up).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=10_000))]
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
    // `--runs N` is N runs in all (perf stat's and hyperfine's sense): each timed sample is a
    // clean run and, where probes run, a probed one beside it.
    let probed = !args.measure.probes.contains(&ProbeChoice::CleanOnly);
    let per_pass = match probed {
        true => args.runs.div_ceil(2),
        false => args.runs,
    };
    // Dealt over the rounds: at most half as many as the clean runs, so that every round
    // pairs two at least.
    let measure = CommonMeasureArgs {
        rounds: args.measure.rounds.min(per_pass / 2).max(1),
        ..args.measure.clone()
    };
    // The probed runs hold the command's stacks; passes for the stacks alone run where the
    // user asks for more (--stack-samples), at the time they cost.
    let (stacks_per_round, stack_pass_period_ns) = args.stack_passes.per_round(measure.rounds, 0);
    let work = Work {
        specs: vec![command.spec()],
        // One op is one whole run of the command: no op count to calibrate, no build jobs.
        sampling: Sampling {
            samples: 0,
            total: Some(per_pass as usize),
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
            runs: Some(u64::from(per_pass) * if probed { 2 } else { 1 }),
            warmup: Some(u64::from(args.warmup)),
            ..args.stack_passes.recorded(0)
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
