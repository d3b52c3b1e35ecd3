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
    runner, store, top,
};

fn main() -> ExitCode {
    end_quietly_when_stdout_closes();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version exit 0; no command at all prints the command list and exits 2.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        // clap's own rendering, in full: which arguments are missing, the possible values,
        // the usage line.
        Err(e) => {
            let mut rendered = e.render().to_string();
            if let Some(hint) = run_only_hint(&e) {
                let at = rendered.find("\nUsage:").unwrap_or(rendered.len());
                rendered.insert_str(at, &format!("\n  tip: {hint}\n"));
            }
            eprint!("{rendered}");
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
        Err(e) => {
            eprintln!("hookprof: error: {e:#}");
            ExitCode::from(2)
        }
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

/// `hookprof hooks | head`: a reader that stops early ends the output quietly, as it does for
/// other Unix tools, instead of a panic. SIGPIPE itself stays ignored, so a workload's broken
/// pipe or socket is an error it reports, not a silent death. By then the probes are unloaded
/// and any results file is written.
fn end_quietly_when_stdout_closes() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141); // what a shell reports for death by SIGPIPE
        }
        default_hook(info);
    }));
}
