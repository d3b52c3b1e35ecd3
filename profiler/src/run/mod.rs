//! `hookprof run` and `stat` (`stat.rs`): the orchestrator, a list of stages. `check` (bad input, the
//! supervisor, the environment) -> `probe_setup` (load, discover, calibrate, inject) ->
//! `rounds` (each workload per round, through the sampling engine: `engine`'s settings,
//! `session`, `measure`'s loop, `probed_pass`) -> `finish` (write, print, baseline, exit
//! code). A workload that fails is recorded and the run goes on; the exit code says so.
mod args;
mod check;
mod discovery;
pub mod engine;
mod finish;
mod list;
pub mod measure;
pub(crate) mod probe_setup;
mod probed_pass;
mod progress;
mod rounds;
mod session;
mod shape;
pub mod stat;

use std::{process::ExitCode, time::Duration};

use anyhow::Result;

pub use self::args::{
    CommonMeasureArgs, MeasureArgs, PolicyArgs, ProbeChoice, RunArgs, SessionArgs,
};
use self::{
    engine::{Engine, Overhead, Sampling},
    finish::{Outputs, Setting},
    probe_setup::ProbeSetup,
    rounds::{Measurer, Rounds, Work},
};
use crate::{
    machine::other_probes,
    results::RunOptions,
    runner::Wait,
    workloads::{self, WorkloadSetup, WorkloadSpec},
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

/// What a run measures: its workloads (or `stat`'s command), how many samples each takes,
/// and the size of the work (`--jobs`, the command); `CommonMeasureArgs` adds how.
pub struct Plan {
    pub specs: Vec<&'static WorkloadSpec>,
    pub sampling: Sampling,
    /// `jobs` and `command`; the CPUs, copies and policies come from the common options.
    pub setup: WorkloadSetup,
    /// The options that chose the work (`run`'s workloads, `stat`'s command), as the results
    /// record them beside the options both share.
    pub recorded: RunOptions,
}

pub fn run(run_args: &RunArgs) -> Result<ExitCode> {
    if run_args.list {
        list::print_list()?;
        return Ok(ExitCode::SUCCESS);
    }
    let args = &run_args.measure;
    let (stacks_per_round, stack_pass_period_ns) = args.stack_passes.per_round(args.common.rounds);
    let plan = Plan {
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
            ..args.stack_passes.recorded()
        },
    };
    measure_plan(&run_args.session, &args.common, &plan)
}

/// Measures `plan` with `args`, then writes and prints the results as `session` says.
pub fn measure_plan(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
) -> Result<ExitCode> {
    let checked = check::check(session, args, plan)?;
    let setup = args.workload_setup(&plan.setup);
    let bar = progress::progress_bar(session.quiet, plan.specs.len());
    let (mut supervisor, environment) = check::supervise(args, &checked, &bar)?;
    let probe_setup = ProbeSetup {
        hooks: &args.hooks,
        inject: &checked.lsm_inject,
        injections: checked
            .shape
            .variants
            .iter()
            .map(|v| v.inject.clone())
            .collect(),
        stack_noop: args.stack_noop,
        specs: &plan.specs,
        setup: &setup,
        active_lsms: &environment.active_lsms,
        verbose: session.verbose,
        bar: &bar,
    };
    let Wait::Done(mut probes) = probe_setup::set_up(checked.kinds, &probe_setup, &mut supervisor)?
    else {
        bar.finish_and_clear();
        eprintln!("hookprof: interrupted before measuring");
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    };
    if let Some(p) = probes.probes.as_mut() {
        p.add_refusals(checked.refused.iter().cloned());
    }

    // The kernel's run-time statistics cross-check the ground-truth programs' cost; they are
    // only switched on when such programs are attached (they cost every program a little).
    let _run_stats = (args.stack_noop || !args.inject.is_empty())
        .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime).ok());
    let engine = Engine {
        sampling: plan.sampling,
        setup: &setup,
        overhead: Overhead::measure(),
    };
    let rounds = Rounds {
        of: args.rounds as usize,
        seed: rand::random(),
    };
    let setting = Setting {
        environment,
        calibration: probes.calibration.take(),
        probes: probes.probes.as_ref(),
    };
    let results = finish::begin(session, args, plan, setting, &engine, rounds);
    let mut results = checked
        .shape
        .results_of(results, &session.policy.policy, rounds.seed);
    let work = Work {
        specs: &plan.specs,
        variants: &checked.shape.variants,
    };
    // Another tool's programs on the paths measured are in every time: said before the
    // workloads run, and again for any that come between them.
    let mut others = other_probes::Watch::default();
    if let Some(note) = crate::machine::namespaces::other_programs_unseen() {
        supervisor.warn(&format!("note: {note}"));
    }
    if let Some(note) = others.look() {
        supervisor.warn(&format!("note: {note}"));
    }
    let load_before = crate::machine::load::Snapshot::now();
    let with = Measurer {
        engine: &engine,
        probes: &mut probes,
        others: &mut others,
        supervisor: &mut supervisor,
        bar: &bar,
    };
    let measuring = rounds::measure_workloads(work, rounds, with)?;
    for (r, workloads) in results.iter_mut().zip(measuring.workloads) {
        r.workloads = workloads;
        r.complete = measuring.complete;
    }
    bar.finish_and_clear();
    let interrupted = supervisor.interrupted();
    drop(supervisor); // the runner ends with its workload
    record_the_machine(load_before, others, &mut results);
    // Unloads every program before anything else is printed.
    probes.unload_into(&mut results)?;
    let outputs = Outputs {
        destination: checked.destination,
        shape: checked.shape,
        baseline: checked.baseline,
        store: checked.store,
        format: session.format,
    };
    finish::finish(results, outputs, interrupted, plan.specs.len())
}

/// What else the machine ran while the workloads were measured (the load since
/// `load_before`, other tools' BPF programs), said when it matters and recorded in `results`.
fn record_the_machine(
    load_before: Option<crate::machine::load::Snapshot>,
    mut others: other_probes::Watch,
    results: &mut [crate::results::Results],
) {
    let machine_load = load_before
        .zip(crate::machine::load::Snapshot::now())
        .and_then(|(before, after)| before.until(&after));
    if let Some(load) = machine_load.filter(|l| !l.quiet()) {
        eprintln!(
            "hookprof: note: the rest of the machine used {:.0}% of its CPU time while this run \
             measured (the hypervisor took {:.0}%): a task that shares the run's CPU stretches \
             its ops, so compare runs made under the same load",
            load.others_busy_percent, load.steal_percent
        );
    }
    if let Some(note) = others.look() {
        eprintln!("hookprof: note: as the workloads ended, {note}");
    }
    let others = others.seen();
    for r in results {
        r.environment.machine_load = machine_load;
        r.environment.other_bpf_programs = Some(others.clone());
    }
}
