//! `hookprof run`, the orchestrator: options -> workloads -> probes (`probe_setup`) -> the
//! runner, one workload after another (`measure`) -> results file and report. A workload that
//! fails is recorded and the run goes on; the exit code says so.
use std::{io::IsTerminal, path::PathBuf, process::ExitCode, time::Duration};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{seq::SliceRandom, SeedableRng};
use serde_json::json;

use profiler_common::MAX_GATE_OWNERS;

use crate::{
    environment,
    injection::{self, Injection},
    measure::{self, Measured, Overhead, Round, SamplingOptions},
    memory,
    output::{self, Format},
    policy::Policy,
    probe_setup::{inject_syscalls, load_probes, probe_kinds, ProbeSetup},
    probes::Probes,
    results::{Destination, LsmProgramRecord, Results, SCHEMA_VERSION},
    runner::{Credentials, Supervisor, Wait},
    workloads::{self, command::CommandLine, Suite, WorkloadSpec},
};

/// Rounds and samples per round by default: chosen from the variance components measured on
/// this kind of noisy 2-CPU machine (README, "How compare decides"): the spread between
/// rounds, not between samples, limits what a comparison can detect, so more rounds of fewer
/// samples.
pub const DEFAULT_ROUNDS: u32 = 4;
pub const DEFAULT_SAMPLES: u32 = 3;

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Print the workloads with a one-line description and exit.
    #[arg(long)]
    pub list: bool,
    #[command(flatten)]
    pub session: SessionArgs,
}

/// What `run` and `stat` share besides how they measure: the label, where the results go and
/// how they are shown, baselines, and the policies the measured work runs under.
#[derive(clap::Args, Debug)]
pub struct SessionArgs {
    /// Label for this run in reports and comparisons (default: the kernel release).
    #[arg(long)]
    pub label: Option<String>,
    /// Write the results JSON to FILE (atomically).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, default_value = "text", value_parser = Format::parser(RESULTS_PRINTED))]
    pub format: Format,
    /// No progress display.
    #[arg(short, long)]
    pub quiet: bool,
    /// Print the probes' messages from their rare paths (a full stack of open timed calls, an
    /// exit that matches no entry, tracking storage the kernel could not give, gate misuse) as
    /// they happen; the results count these either way.
    #[arg(short, long)]
    pub verbose: bool,
    #[command(flatten)]
    pub baseline: crate::baseline::SaveArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Run the workloads under a security policy, which the runner takes on (after --user's
    /// credentials) before it sets up any workload: landlock:FILE (a JSON ruleset),
    /// seccomp:FILE (a JSON syscall filter) or apparmor:PROFILE (a loaded profile).
    /// Repeatable. The formats are in the README ("Measuring a policy").
    #[arg(long, value_name = "KIND:SPEC", value_parser = parse_policy)]
    pub policy: Vec<Policy>,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::parse(s).map_err(|e| format!("{e:#}"))
}

/// What a run measures and how: the options `hookprof ab` hands on to the run in each boot.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct MeasureArgs {
    /// Which workloads to run when --workloads is not given.
    #[arg(long, value_enum, default_value = "default")]
    pub suite: Suite,
    /// Workloads by name, comma-separated (see --list).
    #[arg(long, value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,
    #[command(flatten)]
    pub common: CommonMeasureArgs,
    /// Samples per pass (clean and probed each) in each round.
    #[arg(long, default_value_t = DEFAULT_SAMPLES, value_parser = clap::value_parser!(u32).range(2..))]
    pub samples: u32,
    /// The least time one sample lasts (lmbench's ENOUGH), in milliseconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_sample_ms: u64,
    /// Parallel jobs for the `build` workload (default: 4 x CPUs, as kernbench's "optimal").
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// How the work is measured, for `run` and `stat` alike: the probes, the CPUs, the copies, the
/// ground truth, the user and the timeout.
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct CommonMeasureArgs {
    /// Kernel functions to time with fentry/fexit: `default` (what each workload calls, found
    /// by a short discovery pass over every security_* hook, task path and active LSM
    /// function; each workload attaches only its own), `all` (every security_* hook, up to
    /// 383), or a comma-separated list (each hook with its LSM functions).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub hooks: Vec<String>,
    /// Probe kinds: `auto` (all), `none` (clean only, no root needed), or a comma-separated list
    /// of syscalls, tasks, hooks.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    pub probes: Vec<String>,
    /// Pin the workload to CPU (a second CPU pins the other end of two-process workloads).
    /// With --parallel, copy i is pinned to CPU (CPU + i) mod the number of CPUs.
    #[arg(long, value_delimiter = ',', num_args = 1..=2)]
    pub pin: Vec<usize>,
    /// Run N copies of each workload at once, each in a process of its own, every sample
    /// started together in all of them (lmbench's -P): per-copy latency (or aggregate
    /// bandwidth) and the attribution summed over the copies, so contention inside a hook
    /// shows as a higher ns/call than at 1.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_GATE_OWNERS)))]
    pub parallel: u32,
    /// Ground truth, a known cost in force for the whole run, clean and probed samples alike.
    /// HOOK=NS (or lsm:HOOK=NS): a BPF LSM program on HOOK busy-waits NS per call (e.g.
    /// file_open=2000); it returns the verdict it was given. syscall:NAME=NS: the workload's
    /// tasks, and no other process, busy-wait NS on their way out of syscall NAME (e.g.
    /// syscall:getppid=2000); needs no BPF LSM. Repeatable.
    #[arg(long, value_name = "[KIND:]TARGET=NS", value_parser = Injection::parse)]
    pub inject: Vec<Injection>,
    /// Attach a no-op BPF LSM program on every hook the workloads use (LSM stacking on one
    /// boot). It returns the verdict it was given.
    #[arg(long)]
    pub stack_noop: bool,
    /// Run the workloads as this user (name or uid); the profiler keeps root's privileges for
    /// its probes. Scratch files are owned by that user.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    /// Measure each workload in R rounds: each round starts a fresh runner for every workload
    /// and takes them in a fresh random order, so CPU placement, memory layout and the
    /// machine's state are drawn anew. A comparison's unit is the round, not the sample.
    #[arg(long, value_name = "R", default_value_t = DEFAULT_ROUNDS,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// A workload (or its discovery burst) still running after this many seconds is stopped
    /// and recorded as failed; the run goes on with the next one.
    #[arg(long, value_name = "SECONDS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_per_workload: u64,
}

impl MeasureArgs {
    /// The command-line options that parse back into these, for a run elsewhere.
    pub fn to_args(&self) -> Vec<String> {
        // Destructured whole, so a new option cannot be forgotten here.
        let MeasureArgs {
            suite,
            workloads,
            common:
                CommonMeasureArgs {
                    hooks,
                    probes,
                    pin,
                    parallel,
                    inject,
                    stack_noop,
                    user,
                    rounds,
                    timeout_per_workload,
                },
            samples,
            min_sample_ms,
            jobs,
        } = self;
        let suite = clap::ValueEnum::to_possible_value(suite).expect("every suite has a name");
        let mut args = vec![
            "--suite".to_string(),
            suite.get_name().to_string(),
            format!("--hooks={}", hooks.join(",")),
            format!("--probes={}", probes.join(",")),
            format!("--samples={samples}"),
            format!("--min-sample-ms={min_sample_ms}"),
            format!("--parallel={parallel}"),
            format!("--rounds={rounds}"),
            format!("--timeout-per-workload={timeout_per_workload}"),
        ];
        if let Some(w) = workloads {
            args.push(format!("--workloads={}", w.join(",")));
        }
        if !pin.is_empty() {
            let cpus: Vec<String> = pin.iter().map(usize::to_string).collect();
            args.push(format!("--pin={}", cpus.join(",")));
        }
        if let Some(j) = jobs {
            args.push(format!("--jobs={j}"));
        }
        for injection in inject {
            args.push(format!("--inject={injection}"));
        }
        if *stack_noop {
            args.push("--stack-noop".into());
        }
        if let Some(u) = user {
            args.push(format!("--user={u}"));
        }
        args
    }
}

/// `--pin` names one CPU or two (the second for the other end of two-process workloads), and
/// only CPUs this process is allowed on (`taskset`, a cpuset), not merely CPUs the machine has.
fn check_pin(pin: &[usize]) -> Result<()> {
    if pin.is_empty() {
        return Ok(());
    }
    if pin.len() > 2 {
        let given: Vec<String> = pin.iter().map(usize::to_string).collect();
        bail!(
            "--pin {}: give one CPU, or two (the second pins the other end of two-process \
             workloads)",
            given.join(",")
        );
    }
    let allowed = workloads::allowed_cpus().context("sched_getaffinity")?;
    if let Some(&cpu) = pin.iter().find(|c| !allowed.contains(c)) {
        let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
        bail!(
            "--pin {cpu}: CPU {cpu} is not one this process may run on ({})",
            list.join(",")
        );
    }
    Ok(())
}

/// What a run measures: its workloads (or `stat`'s command) and how many samples each takes.
pub struct Plan {
    pub specs: Vec<&'static WorkloadSpec>,
    /// Timed samples per pass (clean and probed each).
    pub samples: u32,
    /// Untimed samples before them.
    pub warmup: u32,
    /// The least time one sample lasts (lmbench's ENOUGH).
    pub min_sample: Duration,
    /// Parallel jobs for the `build` workload.
    pub jobs: Option<usize>,
    /// `stat`'s command, the one workload in `specs`.
    pub command: Option<CommandLine>,
    /// The options that chose the work (`run`'s workloads, `stat`'s command), as the results
    /// record them beside the options both share.
    pub recorded: Vec<(&'static str, serde_json::Value)>,
}

pub fn run(run_args: &RunArgs) -> Result<ExitCode> {
    if run_args.list {
        print_list();
        return Ok(ExitCode::SUCCESS);
    }
    let args = &run_args.measure;
    let plan = Plan {
        specs: workloads::select(args.workloads.as_deref(), args.suite)?,
        samples: args.samples,
        warmup: 1,
        min_sample: Duration::from_millis(args.min_sample_ms),
        jobs: args.jobs,
        command: None,
        recorded: vec![
            ("suite", json!(format!("{:?}", args.suite).to_lowercase())),
            ("workloads", json!(args.workloads)),
            ("min_sample_ms", json!(args.min_sample_ms)),
            ("jobs", json!(args.jobs)),
        ],
    };
    measure_plan(&run_args.session, &args.common, &plan)
}

/// Measures `plan` with `args`, then writes and prints the results as `session` says.
pub fn measure_plan(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
) -> Result<ExitCode> {
    let specs = &plan.specs;
    let destination = session
        .output
        .as_deref()
        .map(Destination::prepare)
        .transpose()?;
    let baseline = session.baseline.prepare()?;
    check_pin(&args.pin)?;
    // build runs parallel jobs of its own (--jobs), and its extra metrics are one build's.
    if args.parallel > 1 && specs.iter().any(|s| s.name == "build") {
        bail!(
            "--parallel {}: build runs parallel jobs of its own (--jobs); leave it out of a \
             parallel run",
            args.parallel
        );
    }
    let kinds = probe_kinds(&args.probes)?;
    let lsm_inject = injection::lsm_hooks(&args.inject);
    if kinds.is_none() && (args.stack_noop || !lsm_inject.is_empty()) {
        bail!(
            "--inject HOOK=NS and --stack-noop need probes: they cannot be combined with \
             --probes none (--inject syscall:NAME=NS can)"
        );
    }
    let user = args.user.as_deref().map(Credentials::lookup).transpose()?;
    let bar = progress_bar(session.quiet, specs.len());
    // Set up before loading, so an interrupt at any point ends the run the same way.
    let mut supervisor = Supervisor::new(
        user,
        Duration::from_secs(args.timeout_per_workload),
        bar.clone(),
    )?;
    crate::scratch::remove_stale();
    environment::ensure_securityfs();
    let environment = environment::detect();
    let policies = &session.policy.policy;
    for policy in policies {
        policy.check(&environment.active_lsms)?;
    }
    supervisor.confine(policies.clone());
    let options = SamplingOptions {
        samples: plan.samples as usize,
        min_sample: plan.min_sample,
        pin: args.pin.clone(),
        jobs: plan.jobs,
        user,
        warmup: plan.warmup as usize,
        command: plan.command.clone(),
        parallel: args.parallel as usize,
    };
    let (mut probes, calibration, focus) = match kinds {
        Some(kinds) => {
            let setup = ProbeSetup {
                kinds,
                hooks: &args.hooks,
                inject: &lsm_inject,
                stack_noop: args.stack_noop,
                specs,
                options: &options,
                active_lsms: &environment.active_lsms,
                bar: &bar,
            };
            let Wait::Done(loaded) = load_probes(&setup, &mut supervisor)? else {
                bar.finish_and_clear();
                eprintln!("hookprof: interrupted before measuring");
                return Ok(ExitCode::from(130));
            };
            if session.verbose {
                match loaded.probes.logging_program_id() {
                    Some(id) => supervisor.follow_kernel_log(id)?,
                    None => supervisor.warn("-v: no probe that logs was loaded"),
                }
            }
            (Some(loaded.probes), loaded.calibration, loaded.focus)
        }
        None => (None, None, None),
    };
    // After calibration and discovery: the injection is part of the measured kernel only.
    let Wait::Done(syscall_injection) = inject_syscalls(&args.inject, &mut supervisor)? else {
        bar.finish_and_clear();
        eprintln!("hookprof: interrupted before measuring");
        return Ok(ExitCode::from(130));
    };

    // The kernel's run-time statistics cross-check the ground-truth programs' cost; they are
    // only switched on when such programs are attached (they cost every program a little).
    let _run_stats = (args.stack_noop || !args.inject.is_empty())
        .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime).ok());
    let overhead = Overhead::measure();
    let round_seed: u64 = rand::random();
    let mut results = Results {
        schema_version: SCHEMA_VERSION,
        label: session
            .label
            .clone()
            .unwrap_or_else(|| environment.kernel_release.clone()),
        complete: true,
        source: "hookprof".into(),
        environment,
        options: recorded_options(args, plan, policies, overhead, round_seed),
        probes: probes.as_ref().map(Probes::report).unwrap_or_default(),
        lsm_programs: Vec::new(),
        syscall_injections: Vec::new(),
        pairing: None,
        calibration,
        workloads: Vec::new(),
    };

    let rounds = args.rounds as usize;
    let mut measured: Vec<Measured> = specs.iter().map(|s| Measured::new(s)).collect();
    let mut rng = rand::rngs::StdRng::seed_from_u64(round_seed);
    let per_workload = plan.samples as usize;
    let mut done_workloads = 0;
    'rounds: for round in 0..rounds {
        // A fresh order each round, so no workload always follows the same one.
        let mut order: Vec<usize> = (0..specs.len()).collect();
        if rounds > 1 {
            order.shuffle(&mut rng);
        }
        for i in order {
            let spec = specs[i];
            if measured[i].failed() {
                continue;
            }
            let label = if rounds > 1 {
                format!("{} (round {}/{rounds})", spec.name, round + 1)
            } else {
                spec.name.to_string()
            };
            bar.set_message(label);
            if let (Some(p), Some(focus)) = (probes.as_mut(), &focus) {
                p.focus(Some(focus.functions_of(spec.name)));
            }
            let progress = |done: usize, _total: usize| {
                bar.set_length((specs.len() * rounds * per_workload) as u64);
                bar.set_position((done_workloads * per_workload + done) as u64);
            };
            let interrupted = measure::measure_round(
                spec,
                &options,
                overhead,
                probes.as_mut(),
                &mut supervisor,
                &progress,
                &mut measured[i],
                Round {
                    index: round,
                    of: rounds,
                },
            );
            done_workloads += 1;
            memory::note_phase(&format!("workload {}", spec.name));
            if let Some(failure) = &measured[i].result.failure {
                supervisor.warn(&format!(
                    "workload {} failed in {}: {}",
                    spec.name, failure.phase, failure.error
                ));
                results.complete = false;
            }
            if interrupted {
                results.complete = false;
                break 'rounds;
            }
        }
    }
    for (spec, m) in specs.iter().zip(measured) {
        if let (Some(p), Some(focus)) = (probes.as_mut(), &focus) {
            p.focus(Some(focus.functions_of(spec.name)));
        }
        let result = m.finish(probes.as_ref());
        if !result.clean.is_empty() || result.failure.is_some() {
            results.workloads.push(result);
        }
    }
    bar.finish_and_clear();
    let interrupted = supervisor.interrupted();
    drop(supervisor); // the runner ends with its workload
    if let Some(p) = &probes {
        results.lsm_programs = lsm_program_records(p);
    }
    if let Some(injection) = &syscall_injection {
        results.syscall_injections = injection.records()?;
    }
    // Unloads every program before anything else is printed.
    drop((probes, syscall_injection));
    results.environment.profiler_peak_rss_kib = memory::peak_rss_kib();
    results.environment.profiler_peak_rss_by_phase = memory::phase_peaks();

    // With `-o -` the results file is stdout, and the report goes to stderr.
    let report_to_stderr = destination.as_ref().is_some_and(Destination::is_stdout);
    if let Some(destination) = destination {
        destination.write((results.to_json() + "\n").as_bytes())?;
    }
    print_results(&results, session.format, report_to_stderr)?;
    if let Some(baseline) = baseline.filter(|_| results.complete && !results.workloads.is_empty()) {
        let path = baseline.save(&results)?;
        eprintln!("hookprof: baseline saved in {}", path.display());
    }
    if interrupted {
        eprintln!("hookprof: interrupted; results hold the samples taken so far");
        return Ok(ExitCode::from(130));
    }
    let failed = results.failed_workloads();
    if !failed.is_empty() {
        eprintln!(
            "hookprof: error: {} of {} workloads failed ({}); results hold the others",
            failed.len(),
            specs.len(),
            failed.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    if results.workloads.is_empty() {
        bail!("nothing could be measured");
    }
    Ok(ExitCode::SUCCESS)
}

fn lsm_program_records(probes: &Probes) -> Vec<LsmProgramRecord> {
    probes
        .lsm_programs()
        .iter()
        .map(|l| {
            let (runs, mean_run_ns) = probes.lsm_run_stats(l).unwrap_or((0, 0.0));
            LsmProgramRecord {
                hook: l.hook.clone(),
                busy_ns: l.busy_ns,
                runs,
                mean_run_ns,
            }
        })
        .collect()
}

/// The formats `run` and `stat` print their results in (`report` has the others).
const RESULTS_PRINTED: &[Format] = &[Format::Text, Format::Json, Format::Markdown];

fn print_results(results: &Results, format: Format, to_stderr: bool) -> Result<()> {
    let report = output::render(std::slice::from_ref(results), format)?;
    if to_stderr {
        eprint!("{report}");
    } else {
        print!("{report}");
    }
    Ok(())
}

fn print_list() {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["workload", "family", "unit", "suite", "what it measures"]);
    for spec in workloads::registry() {
        table.add_row([
            spec.name,
            spec.family.key(),
            spec.metric.unit().symbol(),
            &format!("{:?}", spec.suite).to_lowercase(),
            spec.description,
        ]);
    }
    println!("{table}");
}

fn progress_bar(quiet: bool, workloads: usize) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(workloads as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:30} [{bar:30}] {pos}/{len} samples, {elapsed} elapsed, ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

fn recorded_options(
    args: &CommonMeasureArgs,
    plan: &Plan,
    policies: &[Policy],
    overhead: Overhead,
    round_seed: u64,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    [
        ("rounds", json!(args.rounds)),
        // The random workload order of each round follows from it.
        ("round_seed", json!(round_seed)),
        ("hooks", json!(args.hooks)),
        ("probes", json!(args.probes)),
        ("samples", json!(plan.samples)),
        ("pin", json!(args.pin)),
        ("parallel", json!(args.parallel)),
        ("user", json!(args.user)),
        (
            "inject",
            json!(args
                .inject
                .iter()
                .map(Injection::to_string)
                .collect::<Vec<_>>()),
        ),
        ("stack_noop", json!(args.stack_noop)),
        ("timeout_per_workload", json!(args.timeout_per_workload)),
        (
            "policy",
            json!(policies.iter().map(Policy::record).collect::<Vec<_>>()),
        ),
        ("clock_overhead_ns", json!(overhead.clock.as_nanos() as u64)),
        ("loop_overhead_ns", json!(overhead.loop_ns)),
    ]
    .into_iter()
    .chain(plan.recorded.iter().cloned())
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Measure {
        #[command(flatten)]
        measure: MeasureArgs,
    }

    fn parse(args: &[String]) -> MeasureArgs {
        Measure::try_parse_from(std::iter::once("run".to_string()).chain(args.iter().cloned()))
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .measure
    }

    #[test]
    fn measure_options_survive_a_trip_through_the_command_line() {
        let defaults = parse(&[]);
        assert_eq!(parse(&defaults.to_args()), defaults);
        let every = MeasureArgs {
            suite: Suite::Quick,
            workloads: Some(vec!["null_call".into(), "open_close".into()]),
            common: CommonMeasureArgs {
                hooks: vec!["security_file_open".into(), "security_file_free".into()],
                probes: vec!["syscalls".into(), "hooks".into()],
                pin: vec![0, 1],
                parallel: 4,
                inject: [
                    "file_open=2000",
                    "lsm:task_alloc=10",
                    "syscall:getppid=2000",
                ]
                .map(|s| Injection::parse(s).unwrap())
                .to_vec(),
                stack_noop: true,
                user: Some("nobody".into()),
                rounds: 7,
                timeout_per_workload: 60,
            },
            samples: 5,
            min_sample_ms: 2,
            jobs: Some(3),
        };
        assert_eq!(parse(&every.to_args()), every);
    }
}
