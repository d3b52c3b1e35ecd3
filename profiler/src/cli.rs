//! The command line's definition: every subcommand and its arguments, as clap parses them.
//! The binary parses with it, and the man pages and shell completions are generated from
//! `command()` (examples/dist_assets.rs), so they cannot drift from `--help`.
use clap::{CommandFactory, Parser, Subcommand};

use crate::{
    commands::ab,
    commands::calibrate,
    commands::hooks,
    compare, history, import,
    probes::KERNEL_BTF_COMMAND,
    report,
    run::{self, stat},
    runner, store, top,
};

#[derive(Parser)]
#[command(name = "hookprof", version, about = "What a security or task hook costs", long_about = None)]
#[command(arg_required_else_help = true)]
#[command(after_help = "Exit codes (for CI):\n  \
0    success; compare, ab: no regression (inconclusive workloads only warn)\n  \
1    compare, ab: a workload regressed\n  \
2    bad input or error; run, stat: a workload failed (the results file holds the others,\n       \
with \"complete\": false)\n  \
3    compare, ab with --fail-on inconclusive: a workload could not be decided\n  \
4    output could not be written (stdout full or closed); a run's results are kept in its\n       \
-o file, the store or the spool, or in a file the error names\n  \
130  interrupted (SIGINT, SIGTERM or SIGHUP); the results hold the samples taken so far\n  \
141  stdout's reader went away (a pipe into head), after the results were kept")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Run the workloads clean and probed, and attribute each operation's time.
    Run(Box<run::RunArgs>),
    /// Run a command N times clean and probed, and attribute each run's time over its whole
    /// process tree: `hookprof stat [OPTIONS] -- CMD [ARGS...]`.
    Stat(Box<stat::StatArgs>),
    /// Compare two result sets (files or directories) with statistics and hook attribution.
    Compare(compare::CompareArgs),
    /// Order a series of results by time and find where each metric's level steps.
    History(history::HistoryArgs),
    /// Boot two kernels in turn under qemu, run the workloads in each boot, and compare them.
    Ab(Box<ab::AbArgs>),
    /// List the runs in the results store (all, or those a selector picks), or add files to it.
    Runs(store::runs::RunsArgs),
    /// Print results files as text, an lmbench summary, markdown, JSON, HTML, or for KCIDB,
    /// Bencher (BMF) or Prometheus.
    Report(report::ReportArgs),
    /// Read lmbench summaries or /usr/bin/time logs into results files.
    #[command(subcommand)]
    Import(import::ImportCommand),
    /// What can be probed on this kernel, and what the kernel refused and why.
    Hooks(hooks::HooksArgs),
    /// The probes' own cost on this kernel.
    Calibrate(calibrate::CalibrateArgs),
    /// Live: time in syscalls, security hooks, LSM functions and task paths, per cgroup or
    /// command, each interval (a terminal view, JSON lines, an OpenMetrics endpoint).
    Top(Box<top::TopArgs>),
    /// The process that does the measured work, started by `run` (not for direct use).
    #[command(name = "__runner", hide = true)]
    Runner(runner::serve::RunnerArgs),
    /// Parses the kernel's BTF for the profiler, in a process of its own (not for direct use).
    #[command(name = KERNEL_BTF_COMMAND, hide = true)]
    KernelBtf,
    /// Prints the results document's JSON Schema (the manual's copy is generated from it).
    #[command(name = "__schema", hide = true)]
    Schema,
}

/// The whole command line as clap builds it (what `hookprof --help` prints from).
pub fn command() -> clap::Command {
    Cli::command()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        // clap's own checks (conflicting names, bad defaults, ...), which otherwise run only
        // when a debug build parses.
        super::command().debug_assert();
    }
}
