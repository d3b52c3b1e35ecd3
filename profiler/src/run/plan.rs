//! A run's arguments, checked and parsed once into what each later stage takes: the work (the
//! workloads, or `stat`'s command, and how each is sampled), the shape (its variants), what
//! is asked of the probes, who runs the work and for how long, the progress display, the
//! options as the results record them, and where the results go. Bad input fails here, in
//! one line, before anything is loaded or started.
use std::time::Duration;

use anyhow::Result;
use indicatif::ProgressBar;

use super::{
    check, engine::Sampling, outputs::Outputs, probe_setup::ProbeRequest, progress,
    shape::RunShape, CommonMeasureArgs, SessionArgs,
};
use crate::{
    policy::Policy,
    results::RunOptions,
    runner::Credentials,
    workloads::{WorkloadSetup, WorkloadSpec},
};

/// What a run measures: its workloads (or `stat`'s command), how many samples each takes,
/// and the size of the work (`--jobs`, the command); `CommonMeasureArgs` adds how.
pub struct Work {
    pub specs: Vec<&'static WorkloadSpec>,
    pub sampling: Sampling,
    /// `jobs` and `command`; the plan adds the CPUs and copies of the common options.
    pub setup: WorkloadSetup,
    /// The options that chose the work (`run`'s workloads, `stat`'s command), as the results
    /// record them beside the options both share.
    pub recorded: RunOptions,
}

/// Everything the stages after the plan take from the run's arguments.
pub(super) struct RunPlan {
    /// The work, set up with `--pin` and `--parallel`.
    pub work: Work,
    /// The run's variants and where their results go past the first.
    pub shape: RunShape,
    pub probes: ProbeRequest,
    /// `--user`'s credentials, which the runners take on.
    pub user: Option<Credentials>,
    /// `--timeout-per-workload`.
    pub timeout: Duration,
    /// `--rounds`.
    pub rounds: usize,
    /// `--inject` or `--stack-noop`: programs whose cost the kernel's run-time statistics
    /// cross-check.
    pub ground_truth: bool,
    /// `--label` (None: the kernel release).
    pub label: Option<String>,
    /// The options as the results record them; the round seed and the timing overhead are
    /// the measuring stage's.
    pub options: RunOptions,
    pub outputs: Outputs,
    pub bar: ProgressBar,
}

/// The plan of measuring `work` as `args` say, the results going where `session` says.
pub(super) fn from_args(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    work: Work,
) -> Result<RunPlan> {
    let options = recorded_options(args, &work, &session.policy.policy);
    // The runners' status and children are read there, probes or not.
    crate::machine::namespaces::check_proc()?;
    let command = match work.setup.command {
        Some(_) => "stat",
        None => "run",
    };
    let outputs = Outputs::prepare(session, command)?;
    check::pin(&args.pin)?;
    check::temp_dir()?;
    if let Some(command) = &work.setup.command {
        check::executable(&command.argv[0])?;
    }
    check::copies(args, session.sweep.as_ref(), &work.specs)?;
    let probes = check::probes(args, session.verbose)?;
    let user = args.user.as_deref().map(Credentials::lookup).transpose()?;
    let shape = RunShape::build(session, args, &outputs, user)?;
    let bar = progress::progress_bar(session.quiet, work.specs.len());
    let setup = WorkloadSetup {
        pin: args.pin.clone(),
        copies: args.parallel as usize,
        ..work.setup
    };
    Ok(RunPlan {
        work: Work { setup, ..work },
        shape,
        probes,
        user,
        timeout: Duration::from_secs(args.timeout_per_workload),
        rounds: args.rounds as usize,
        ground_truth: args.stack_noop || !args.inject.is_empty(),
        label: session.label.clone(),
        options,
        outputs,
        bar,
    })
}

/// The options of the run as its results record them (the seed and overheads aside).
fn recorded_options(args: &CommonMeasureArgs, work: &Work, policies: &[Policy]) -> RunOptions {
    RunOptions {
        rounds: Some(args.rounds),
        hooks: args.hooks.clone(),
        probes: args.probes.iter().map(|p| p.name().to_string()).collect(),
        // stat records its `--runs` (all rounds' runs) instead.
        samples: work
            .sampling
            .total
            .is_none()
            .then_some(work.sampling.samples as u64),
        pin: args.pin.clone(),
        parallel: Some(u64::from(args.parallel)),
        user: args.user.clone(),
        inject: args.inject.iter().map(ToString::to_string).collect(),
        stack_noop: args.stack_noop,
        sample_hz: Some(args.sample_hz),
        // Where the workloads' files are made: its depth is in every path walk they time.
        tmpdir: Some(std::env::temp_dir().display().to_string()),
        timeout_per_workload: Some(args.timeout_per_workload),
        policy: policies.iter().map(Policy::record).collect(),
        ..work.recorded.clone()
    }
}
