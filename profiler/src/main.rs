//! The `hookprof` command line: parse, dispatch, turn errors into exit codes.
use std::process::ExitCode;

use clap::Parser;
use hookprof::{
    cli::{Cli, Command},
    commands::ab,
    commands::calibrate,
    commands::hooks,
    compare, exit, history, import,
    probes::in_child,
    probes::KernelBtf,
    report,
    run::{self, stat},
    runner,
    safety::limits,
    stdio, store, top,
};

fn main() -> ExitCode {
    stdio::guard_standard_fds();
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    limits::survive_file_size_limit();
    if let Err(e) = raise_limits(&cli.command) {
        hookprof::eprintln!("hookprof: error: {e:#}");
        return ExitCode::from(exit::ERROR);
    }
    let result = match cli.command {
        Command::Runner(args) => return runner::serve::main(&args),
        Command::KernelBtf => return in_child::serve(KernelBtf::load),
        Command::Schema => {
            let schema = hookprof::results::schema::json_schema();
            return printed(format!("{schema:#}\n"));
        }
        Command::Run(args) => run::run(&args),
        Command::Stat(args) => stat::stat(&args),
        Command::Compare(args) => compare::execute(&args),
        Command::History(args) => history::execute(&args),
        Command::Ab(args) => ab::ab(&args),
        Command::Report(args) if args.sweep => hookprof::sweep::report_files(&args),
        Command::Report(args) => report::execute(&args),
        Command::Runs(args) => store::runs::execute(&args),
        Command::Import(cmd) => import::execute(&cmd),
        Command::Hooks(args) => hooks::hooks(&args),
        Command::Calibrate(args) => calibrate::print_calibration(&args),
        Command::Top(args) => top::top(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => failed(&e),
    }
}

/// The command line, or the exit code of what parsing it printed instead (help, version, a
/// usage error).
fn parse() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
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
            Err(printed(text))
        }
        // Every other usage error is one line, as every other error is: clap's message with
        // its tips, then where the usage is, not its multi-line rendering.
        Err(e) => {
            let line = usage_error_line(&e.render().to_string(), run_only_hint(&e));
            hookprof::eprintln!("hookprof: error: {}", hookprof::text::escaped(&line));
            Err(ExitCode::from(exit::ERROR))
        }
    }
}

/// `text` on stdout through the checked writer, and the exit code that says how it went.
fn printed(text: String) -> ExitCode {
    match stdio::print(text) {
        Ok(()) => ExitCode::SUCCESS,
        Err(failed) if failed.is_quiet() => ExitCode::from(exit::BROKEN_PIPE),
        Err(failed) => {
            hookprof::eprintln!("hookprof: error: {failed}");
            ExitCode::from(exit::WRITE_FAILED)
        }
    }
}

/// Raises the open-file limit to what `command` needs, and checks the file-size limit of the
/// commands that write files or a store.
fn raise_limits(command: &Command) -> anyhow::Result<()> {
    let Some((name, measures)) = open_files_user(command) else {
        return Ok(());
    };
    let needed = limits::open_files_needed(measures);
    // The commands that write files or a store; the others print.
    let writes = matches!(name, "run" | "stat" | "top" | "import" | "runs" | "ab");
    limits::ensure_open_files(name, needed).and_then(|()| match writes {
        true => limits::ensure_file_size(name),
        false => Ok(()),
    })
}

/// A command's error said in one line, and its exit code.
fn failed(e: &anyhow::Error) -> ExitCode {
    match e.downcast_ref::<stdio::WriteFailed>() {
        // A reader that stopped early: everything is kept, nothing to say.
        Some(failed) if failed.is_quiet() => ExitCode::from(exit::BROKEN_PIPE),
        Some(_) => {
            hookprof::eprintln!("hookprof: error: {e:#}");
            ExitCode::from(exit::WRITE_FAILED)
        }
        None if e.is::<hookprof::results::write::NotWritten>() => {
            hookprof::eprintln!(
                "hookprof: error: {}",
                hookprof::text::escaped(&format!("{e:#}"))
            );
            ExitCode::from(exit::WRITE_FAILED)
        }
        None if e.is::<store::Interrupted>() => {
            hookprof::eprintln!("hookprof: interrupted");
            ExitCode::from(exit::INTERRUPTED)
        }
        None => {
            // A message may quote a file's contents: shown, never sent to the terminal.
            let mut message = format!("{e:#}");
            if let Some(limit) = limits::explain_emfile(e) {
                message = format!("{message}; {limit}");
            }
            hookprof::eprintln!("hookprof: error: {}", hookprof::text::escaped(&message));
            ExitCode::from(exit::ERROR)
        }
    }
}

/// The command's name and whether it measures (loads probes or starts runners), for the
/// open-file limit it needs; None for the internal commands, which run inside another.
fn open_files_user(command: &Command) -> Option<(&'static str, bool)> {
    Some(match command {
        Command::Run(args) => ("run", !args.list),
        Command::Stat(_) => ("stat", true),
        Command::Top(_) => ("top", true),
        Command::Calibrate(_) => ("calibrate", true),
        Command::Hooks(_) => ("hooks", true),
        Command::Ab(_) => ("ab", true),
        Command::Compare(_) => ("compare", false),
        Command::History(_) => ("history", false),
        Command::Runs(_) => ("runs", false),
        Command::Report(_) => ("report", false),
        Command::Import(_) => ("import", false),
        Command::Runner(_) | Command::KernelBtf | Command::Schema => return None,
    })
}

/// clap's rendered usage error (`error: ...`, indented details and tips, `Usage: ...`, `For
/// more information ...`) as one line: the message and its details joined, the extra `hint`,
/// and the command whose `--help` tells more.
fn usage_error_line(rendered: &str, hint: Option<&str>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for line in rendered.lines().map(str::trim).filter(|l| !l.is_empty()) {
        // The usage and the pointer to --help are the last paragraphs: --help says it all.
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        match parts.last_mut() {
            // Details under the message (the missing arguments, the possible values).
            Some(last) if !line.starts_with("tip:") => {
                last.push(' ');
                last.push_str(line);
            }
            _ => parts.push(line.strip_prefix("error: ").unwrap_or(line).to_string()),
        }
    }
    parts.extend(hint.map(|h| format!("tip: {h}")));
    parts.push(format!("see '{} --help'", command_path()));
    parts.join("; ")
}

/// `hookprof` and the subcommands the command line names (`hookprof import lmbench`).
fn command_path() -> String {
    let mut command = hookprof::cli::command();
    let mut path = vec!["hookprof".to_string()];
    for arg in std::env::args().skip(1) {
        let Some(sub) = command.find_subcommand(&arg).cloned() else {
            break;
        };
        path.push(arg);
        command = sub;
    }
    path.join(" ")
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// Every option that takes a value, as (subcommand path, long name), hidden ones included:
    /// what a hostile command line can reach.
    fn options_with_values() -> Vec<(Vec<String>, String)> {
        fn walk(cmd: &clap::Command, path: &[String], out: &mut Vec<(Vec<String>, String)>) {
            for arg in cmd.get_arguments() {
                if let (Some(long), true) = (arg.get_long(), arg.get_action().takes_values()) {
                    out.push((path.to_vec(), long.to_string()));
                }
            }
            for sub in cmd.get_subcommands() {
                let mut deeper = path.to_vec();
                deeper.push(sub.get_name().to_string());
                walk(sub, &deeper, out);
            }
        }
        let mut out = Vec::new();
        walk(&hookprof::cli::command(), &[], &mut out);
        out
    }

    /// Walked once for all the cases.
    static OPTIONS: std::sync::LazyLock<Vec<(Vec<String>, String)>> =
        std::sync::LazyLock::new(options_with_values);

    /// Values of the kinds the safety classes name: control, bidi and zero-width characters,
    /// numbers past every bound and below zero, units, paths that climb, empty, huge.
    fn hostile_value() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<String>(),
            "-?[0-9]{1,30}(\\.[0-9]{0,5})?(ns|us|ms|s|k|M|G|%)?",
            "[a-z_-]{0,12}[=:,]{0,2}-?[0-9]{0,25}",
            "[a-z]{0,6}[\u{202a}-\u{202e}\u{2066}-\u{2069}\u{200b}\u{1b}\n\r\t\0][a-z]{0,6}",
            "(\\.\\./){1,12}[a-z]{0,8}",
            Just(String::new()),
            Just("9".repeat(5000)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Whatever value any option is given, parsing ends in a command or in one line, its
        /// hidden characters shown escaped: no value parser panics on a bound or a character.
        #[test]
        fn any_value_of_any_option_parses_or_is_refused_in_one_escaped_line(
            which in any::<prop::sample::Index>(),
            value in hostile_value(),
        ) {
            let (path, long) = which.get(&OPTIONS);
            let mut argv = vec!["hookprof".to_string()];
            argv.extend(path.iter().cloned());
            argv.push(format!("--{long}={value}"));
            if let Err(e) = hookprof::cli::command().try_get_matches_from(&argv) {
                let line = super::usage_error_line(&e.render().to_string(), None);
                let shown = hookprof::text::escaped(&line);
                prop_assert!(!shown.contains('\n'), "{argv:?}: {shown}");
                prop_assert!(
                    !shown.chars().any(hookprof::text::hidden),
                    "{argv:?}: {shown}"
                );
            }
        }
    }

    #[test]
    fn the_options_walked_include_every_commands_own() {
        let options = options_with_values();
        for (path, long) in [("run", "sweep"), ("stat", "runs"), ("compare", "fail-on")] {
            assert!(
                options
                    .iter()
                    .any(|(p, l)| p.first().map(String::as_str) == Some(path) && l == long),
                "{path} --{long} not among {} options",
                options.len()
            );
        }
    }
}
