//! The options of `run` and `stat`, as clap parses them: what to measure (`MeasureArgs`, which
//! `ab` hands on to the run in each boot, through `to_args`), how (`CommonMeasureArgs`), and
//! where the results go (`SessionArgs`).
use std::path::PathBuf;

use profiler_common::MAX_GATE_OWNERS;

use super::{DEFAULT_ROUNDS, DEFAULT_SAMPLES};
use crate::{
    output::Format,
    policy::Policy,
    probes::injection::Injection,
    results::RunOptions,
    variant::VersusOptions,
    workloads::{Suite, WorkloadSetup},
};

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
    #[arg(long, value_parser = parse_label)]
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
    pub baseline: crate::store::baseline::SaveArgs,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Measure a second variant of the kernel in the same run and compare the two round by
    /// round: OPTIONS (quoted) replace the run's own --policy and/or --inject for it, e.g.
    /// --versus '--inject syscall:getppid=300'. Every round measures each workload in both
    /// variants back to back (in a random order, a fresh runner each), so the comparison pairs
    /// them and the machine's drift cancels. With -o FILE the base variant goes to FILE and
    /// the versus variant beside it (FILE's name with .versus before the extension); stdout
    /// gets the comparison.
    #[arg(long, value_name = "OPTIONS", allow_hyphen_values = true, value_parser = VersusOptions::parse)]
    pub versus: Option<VersusOptions>,
    /// Measure one variant of the kernel per value of a parameter, all in the same rounds as
    /// --versus measures its two, and fit a line per workload and per path: what each step
    /// adds, with its 95% interval and a test of whether the points lie on a line.
    /// landlock-rules=N,... (one Landlock layer allowing all beneath /, plus N rules on
    /// directories made for them), landlock-layers=N,... (N such layers), landlock-depth=N,...
    /// (one such layer, each workload's files N directories deeper), apparmor-rules=N,... (a
    /// profile allowing what the workloads do, plus N file rules; loaded for the run),
    /// seccomp-filters=N,... (N filters, each denying one syscall no workload makes; with
    /// seccomp-filters:SYSCALL each also decides SYSCALL by its argument, so the kernel's action
    /// cache cannot skip the filters for it), seccomp-position:SYSCALL=N,... (one filter with N
    /// rules before SYSCALL's), inject:SYSCALL=NS,... (a busy-wait of NS on the way
    /// out of SYSCALL), copies=N,... (N copies of each workload at once) or
    /// template:KIND:SPEC=N,... (your --policy KIND:SPEC with {N} in its text). Each value's
    /// policy is added to the run's own --policy. With -o FILE the first value's results go to
    /// FILE and each other's beside it (run.seccomp-filters-4.json); stdout gets the sweep.
    #[arg(long, value_name = "PARAMETER=V1,V2,...", conflicts_with = "versus", value_parser = crate::sweep::SweepSpec::parse)]
    pub sweep: Option<crate::sweep::SweepSpec>,
    #[command(flatten)]
    pub store: crate::store::RecordArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct PolicyArgs {
    /// Run the workloads under a security policy, which the runner takes on (after --user's
    /// credentials) before it sets up any workload: landlock:FILE (a JSON ruleset),
    /// seccomp:FILE (a JSON syscall filter) or apparmor:PROFILE (a loaded profile).
    /// Repeatable. The formats are in the manual (docs/src/policy.md).
    #[arg(long, value_name = "KIND:SPEC", value_parser = parse_policy)]
    pub policy: Vec<Policy>,
}

/// `--jobs`: `make -j0` is make's usage error, and more jobs than this are a typo.
fn parse_jobs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n @ 1..=4096) => Ok(n),
        _ => Err(format!("'{s}': give a number of jobs from 1 to 4096")),
    }
}

fn parse_label(s: &str) -> Result<String, String> {
    crate::text::no_controls("--label", s).map(|()| s.to_string())
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::parse(s).map_err(|e| format!("{e:#}"))
}

/// Passes for the stacks alone, after each round's timed passes (`run` and `stat`).
#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct StackPassArgs {
    /// The workload's own stack samples (`--probes stacks`) each workload should hold over its
    /// rounds: where its timed probed samples hold fewer, each round runs probed passes for
    /// the stacks alone (at --stack-sample-hz; for `stat`, more runs of the command, untimed)
    /// until it holds its part or has spent 2 s on them. 2000 (run's default) knows a 5% share
    /// within about +-1 percentage point (95%); 0 (stat's default: its probed runs hold a
    /// command's stacks, and more runs are its time) takes what the timed samples give.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub stack_samples: Option<u64>,
    /// Stack samples per second of a task's CPU time in the passes for the stacks alone
    /// (--stack-samples): none of their time is measured, so they sample faster than the
    /// timed passes' --sample-hz.
    #[arg(long, value_name = "HZ", default_value_t = crate::probes::DEFAULT_STACK_SAMPLE_HZ,
          value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub stack_sample_hz: u64,
}

impl StackPassArgs {
    /// The stack samples asked for, else the command's `default`.
    fn samples_or(&self, default: u64) -> u64 {
        self.stack_samples.unwrap_or(default)
    }

    /// The samples each of `rounds` rounds should hold (`default` in all unless asked), and
    /// the passes' sampling period.
    pub fn per_round(&self, rounds: u32, default: u64) -> (u64, u64) {
        (
            self.samples_or(default).div_ceil(u64::from(rounds)),
            1_000_000_000 / self.stack_sample_hz,
        )
    }

    /// The options as the results record them (`default` where none was asked).
    pub fn recorded(&self, default: u64) -> RunOptions {
        RunOptions {
            stack_samples: Some(self.samples_or(default)),
            stack_sample_hz: Some(self.stack_sample_hz),
            ..RunOptions::default()
        }
    }
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
    /// Samples per pass (clean and probed each) in each round (2 to 100000).
    #[arg(long, default_value_t = DEFAULT_SAMPLES, value_parser = clap::value_parser!(u32).range(2..=100_000))]
    pub samples: u32,
    /// The least time one sample lasts (lmbench's ENOUGH), in milliseconds (1 to 60000: a
    /// minute).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub min_sample_ms: u64,
    #[command(flatten)]
    pub stack_passes: StackPassArgs,
    /// Parallel jobs for the `build` workload (1 to 4096; default: 4 x CPUs, as kernbench's
    /// "optimal").
    #[arg(long, value_parser = parse_jobs)]
    pub jobs: Option<usize>,
    /// Translation units in the `build` workload's generated tree (default: 300, ~60 CPU-seconds
    /// of cc): more on a machine with many CPUs, fewer under emulation.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub build_units: Option<u32>,
}

/// One `--probes` choice; `auto` and `none` stand alone.
#[derive(clap::ValueEnum, serde::Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ProbeChoice {
    Auto,
    #[value(name = "none")]
    #[serde(rename = "none")]
    CleanOnly,
    Syscalls,
    Tasks,
    Hooks,
    Sched,
    Stacks,
}

impl ProbeChoice {
    /// The name `--probes` takes.
    pub fn name(self) -> &'static str {
        match self {
            ProbeChoice::Auto => "auto",
            ProbeChoice::CleanOnly => "none",
            ProbeChoice::Syscalls => "syscalls",
            ProbeChoice::Tasks => "tasks",
            ProbeChoice::Hooks => "hooks",
            ProbeChoice::Sched => "sched",
            ProbeChoice::Stacks => "stacks",
        }
    }
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
    /// of syscalls, tasks, hooks, sched (time on and off a CPU, from sched_switch), stacks
    /// (kernel stacks sampled on the cpu-clock: each hook's share of the CPU time, where
    /// fentry is refused too). Every kind follows the processes a workload forks only with
    /// tasks among them (stat's command is one).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "auto")]
    pub probes: Vec<ProbeChoice>,
    /// Stack samples per second of a task's CPU time in the timed probed passes (`--probes
    /// stacks`): each sample is a timer interrupt whose cost lands in the timed op.
    #[arg(long, value_name = "HZ", default_value_t = crate::probes::DEFAULT_SAMPLE_HZ,
          value_parser = clap::value_parser!(u64).range(10..=100_000))]
    pub sample_hz: u64,
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
    /// Run the workloads as this user (name or uid): the runner drops every id, group and
    /// capability and gets only PATH, the user's HOME, LANG and TMPDIR of the environment; the
    /// profiler keeps root's privileges for its probes. Scratch files are owned by that user.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    /// Measure each workload in R rounds: each round starts a fresh runner for every workload
    /// and takes them in a fresh random order, so CPU placement, memory layout and the
    /// machine's state are drawn anew. A comparison's unit is the round, not the sample.
    #[arg(long, value_name = "R", default_value_t = DEFAULT_ROUNDS,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// A workload (or its discovery burst) still running after this many seconds is stopped
    /// and recorded as failed; the run goes on with the next one (1 to 604800: a week).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600,
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub timeout_per_workload: u64,
}

impl CommonMeasureArgs {
    /// `planned` (the size of the work) with these options' CPUs and copies.
    pub fn workload_setup(&self, planned: &WorkloadSetup) -> WorkloadSetup {
        WorkloadSetup {
            pin: self.pin.clone(),
            copies: self.parallel as usize,
            ..planned.clone()
        }
    }
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
                    sample_hz,
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
            stack_passes:
                StackPassArgs {
                    stack_samples,
                    stack_sample_hz,
                },
            jobs,
            build_units,
        } = self;
        let suite = clap::ValueEnum::to_possible_value(suite).expect("every suite has a name");
        let mut args = vec![
            "--suite".to_string(),
            suite.get_name().to_string(),
            format!("--hooks={}", hooks.join(",")),
            format!(
                "--probes={}",
                probes
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            format!("--sample-hz={sample_hz}"),
            format!("--samples={samples}"),
            format!("--min-sample-ms={min_sample_ms}"),
            format!("--stack-sample-hz={stack_sample_hz}"),
            format!("--parallel={parallel}"),
            format!("--rounds={rounds}"),
            format!("--timeout-per-workload={timeout_per_workload}"),
        ];
        if let Some(w) = workloads {
            args.push(format!("--workloads={}", w.join(",")));
        }
        if let Some(n) = stack_samples {
            args.push(format!("--stack-samples={n}"));
        }
        if !pin.is_empty() {
            let cpus: Vec<String> = pin.iter().map(usize::to_string).collect();
            args.push(format!("--pin={}", cpus.join(",")));
        }
        if let Some(j) = jobs {
            args.push(format!("--jobs={j}"));
        }
        if let Some(u) = build_units {
            args.push(format!("--build-units={u}"));
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

/// The formats `run` and `stat` print their results in (`report` has the others).
pub const RESULTS_PRINTED: &[Format] =
    &[Format::Text, Format::Json, Format::Markdown, Format::Html];

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
                probes: vec![ProbeChoice::Syscalls, ProbeChoice::Hooks],
                sample_hz: 997,
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
            stack_passes: StackPassArgs {
                stack_samples: Some(500),
                stack_sample_hz: 1999,
            },
            jobs: Some(3),
            build_units: Some(30),
        };
        assert_eq!(parse(&every.to_args()), every);
    }
}
