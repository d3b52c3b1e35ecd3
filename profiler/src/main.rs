//! The `hookprof` command line: parse, dispatch, turn errors into exit codes.
use std::process::ExitCode;

use clap::Parser;
use hookprof::{
    ab,
    cli::{Cli, Command},
    compare, history, import, in_child, inspect,
    probes::KernelBtf,
    report,
    run::{self, stat},
    runner, stdio, store, top,
};

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
        Command::Schema => {
            let schema = hookprof::results::schema::json_schema();
            println!("{schema:#}");
            return ExitCode::SUCCESS;
        }
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
