//! The `hookprof` command line: parse, dispatch, turn errors into exit codes.
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use hookprof::{
    ab, compare, history, import, in_child, inspect,
    probes::{KernelBtf, KERNEL_BTF_COMMAND},
    report,
    run::{self, stat},
    runner, stdio, store, top,
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
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    Hooks(inspect::HooksArgs),
    /// The probes' own cost on this kernel.
    Calibrate(inspect::CalibrateArgs),
    /// Live: time in syscalls, security hooks, LSM functions and task paths, per cgroup or
    /// command, each interval (a terminal view, JSON lines, an OpenMetrics endpoint).
    Top(Box<top::TopArgs>),
    /// The process that does the measured work, started by `run` (not for direct use).
    #[command(name = "__runner", hide = true)]
    Runner(runner::serve::RunnerArgs),
    /// Parses the kernel's BTF for the profiler, in a process of its own (not for direct use).
    #[command(name = KERNEL_BTF_COMMAND, hide = true)]
    KernelBtf,
}

fn main() -> ExitCode {
    stdio::guard_standard_fds();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // No command at all prints the command list and exits 2.
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            e.exit()
        }
        // --help and --version exit 0, through the checked writer (clap's own drops a failure).
        Err(e) if !e.use_stderr() => {
            use std::io::IsTerminal;
            let rendered = e.render();
            let text = if std::io::stdout().is_terminal() {
                rendered.ansi().to_string()
            } else {
                rendered.to_string()
            };
            return match stdio::print(text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(failed) if failed.is_quiet() => ExitCode::from(stdio::EXIT_BROKEN_PIPE),
                Err(failed) => {
                    hookprof::eprintln!("hookprof: error: {failed}");
                    ExitCode::from(stdio::EXIT_WRITE_FAILED)
                }
            };
        }
        // clap's own rendering, in full: which arguments are missing, the possible values,
        // the usage line.
        Err(e) => {
            let mut rendered = e.render().to_string();
            if let Some(hint) = run_only_hint(&e) {
                let at = rendered.find("\nUsage:").unwrap_or(rendered.len());
                rendered.insert_str(at, &format!("\n  tip: {hint}\n"));
            }
            stdio::eprint(&rendered);
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Runner(args) => return runner::serve::main(&args),
        Command::KernelBtf => return in_child::serve(KernelBtf::load),
        Command::Run(args) => run::run(&args),
        Command::Stat(args) => stat::stat(&args),
        Command::Compare(args) => compare::execute(&args),
        Command::History(args) => history::execute(&args),
        Command::Ab(args) => ab::ab(&args),
        Command::Report(args) => report::execute(&args),
        Command::Runs(args) => store::runs::execute(&args),
        Command::Import(cmd) => import::execute(&cmd),
        Command::Hooks(args) => inspect::hooks(&args),
        Command::Calibrate(args) => inspect::print_calibration(&args),
        Command::Top(args) => top::top(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => match e.downcast_ref::<stdio::WriteFailed>() {
            // A reader that stopped early: everything is kept, nothing to say.
            Some(failed) if failed.is_quiet() => ExitCode::from(stdio::EXIT_BROKEN_PIPE),
            Some(_) => {
                hookprof::eprintln!("hookprof: error: {e:#}");
                ExitCode::from(stdio::EXIT_WRITE_FAILED)
            }
            None => {
                // A message may quote a file's contents: shown, never sent to the terminal.
                let message = format!("{e:#}");
                hookprof::eprintln!("hookprof: error: {}", hookprof::text::escaped(&message));
                ExitCode::from(2)
            }
        },
    }
}

/// For `stat` given one of the options that choose `run`'s workloads: what stat takes instead.
fn run_only_hint(e: &clap::Error) -> Option<&'static str> {
    const RUN_ONLY: &[&str] = &[
        "--samples",
        "--workloads",
        "--suite",
        "--list",
        "--min-sample-ms",
        "--jobs",
        "--build-units",
    ];
    let in_stat = std::env::args().nth(1).as_deref() == Some("stat");
    let unknown = match e.get(clap::error::ContextKind::InvalidArg) {
        Some(clap::error::ContextValue::String(arg)) => arg.split('=').next().unwrap_or_default(),
        _ => "",
    };
    (in_stat && RUN_ONLY.contains(&unknown)).then_some(
        "a `run` option: stat runs the command after -- and takes --runs N for its samples",
    )
}
