//! `hookprof stat`'s workload: one op is one run of the user's command, from start to exit,
//! with `--prepare` before each run outside the timing and the tracking window.
//!
//! The runner starts the command with std's `Command` (posix_spawn: a vfork and an exec), and
//! what any start of a command does (the fork, the exec, the wait) is part of the op. What
//! posix_spawn's child does before the exec is not: it resets every signal's handler (some 120
//! sigactions, which a shell's fork does not make) and sets up stdio. So the child counts from
//! its execve on (`tracking_window::spawning`); the set-up's time is in the residual. Its stdio is
//! /dev/null; it runs in hookprof's working directory.
use std::{
    fs::File,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};
use crate::workloads::tracking_window::{spawning, untracked};

/// The command `stat` measures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandLine {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// A shell command run before each run of `argv`, neither timed nor attributed.
    pub prepare: Option<String>,
}

impl CommandLine {
    /// How results (and scratch directories) name the command's workload: its words joined
    /// by spaces, its secrets masked (`crate::safety::secrets`).
    pub fn name(&self) -> String {
        crate::safety::secrets::masked_argv(&self.argv).join(" ")
    }

    /// The workload spec for this command (leaked: specs are static, and a process measures
    /// one command).
    pub fn spec(&self) -> &'static WorkloadSpec {
        Box::leak(Box::new(WorkloadSpec {
            name: Box::leak(self.name().into_boxed_str()),
            family: Family::Macro,
            metric: Metric::Seconds,
            description: "a run of the command given to `hookprof stat`",
            suite: Suite::Full,
            create,
        }))
    }
}

/// Creates the command workload of `options.setup.command`.
pub fn create(options: &WorkloadOptions) -> Result<Box<dyn Workload>> {
    let command = options
        .setup
        .command
        .clone()
        .context("no command given to the command workload")?;
    if command.argv.is_empty() {
        bail!("no command to run");
    }
    let null = File::options()
        .read(true)
        .write(true)
        .open("/dev/null")
        .context("open /dev/null")?;
    Ok(Box::new(RunCommand { command, null }))
}

struct RunCommand {
    command: CommandLine,
    null: File,
}

impl RunCommand {
    fn stdio(&self) -> Result<[Stdio; 3]> {
        Ok([
            self.null.try_clone()?.into(),
            self.null.try_clone()?.into(),
            self.null.try_clone()?.into(),
        ])
    }

    fn prepare(&self) -> Result<()> {
        let Some(prepare) = &self.command.prepare else {
            return Ok(());
        };
        let [stdin, stdout, stderr] = self.stdio()?;
        let status = Command::new("/bin/sh")
            .args(["-c", prepare])
            .stdin(stdin)
            .stdout(stdout)
            .stderr(stderr)
            .status()
            .with_context(|| format!("--prepare '{prepare}'"))?;
        if !status.success() {
            bail!("--prepare '{prepare}' failed ({status})");
        }
        Ok(())
    }
}

impl Workload for RunCommand {
    fn children_count_from_exec(&self) -> bool {
        true
    }

    fn run(&mut self, ops: u64) -> Result<Duration> {
        let argv = &self.command.argv;
        let mut elapsed = Duration::ZERO;
        for _ in 0..ops {
            let [stdin, stdout, stderr] = untracked(|| {
                self.prepare()?;
                self.stdio()
            })?;
            let start = Instant::now();
            let status = spawning(|| {
                Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(stdin)
                    .stdout(stdout)
                    .stderr(stderr)
                    .status()
            })
            .with_context(|| format!("run '{}'", self.command.name()))?;
            elapsed += start.elapsed();
            if !status.success() {
                bail!("'{}' failed ({status})", self.command.name());
            }
        }
        Ok(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(argv: &[&str], prepare: Option<&str>) -> Result<Duration> {
        let dir = tempfile::tempdir().unwrap();
        let mut options = crate::workloads::tests::options(dir.path());
        options.setup.command = Some(CommandLine {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            prepare: prepare.map(String::from),
        });
        create(&options)?.run(2)
    }

    #[test]
    fn each_op_runs_the_command_after_its_prepare() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let append = |word: &str| format!("echo {word} >> {}", log.display());
        run(&["/bin/sh", "-c", &append("run")], Some(&append("prepare"))).unwrap();
        let lines = std::fs::read_to_string(&log).unwrap();
        assert_eq!(lines, "prepare\nrun\nprepare\nrun\n");
    }

    #[test]
    fn a_failing_command_or_prepare_is_an_error_naming_it() {
        let e = format!("{:#}", run(&["/bin/false"], None).unwrap_err());
        assert!(e.contains("'/bin/false' failed"), "{e}");
        let e = format!("{:#}", run(&["/bin/true"], Some("exit 3")).unwrap_err());
        assert!(e.contains("--prepare 'exit 3' failed"), "{e}");
        let e = format!("{:#}", run(&["/nonexistent/cmd"], None).unwrap_err());
        assert!(e.contains("run '/nonexistent/cmd'"), "{e}");
    }

    #[test]
    fn the_spec_is_named_after_the_command() {
        let c = CommandLine {
            argv: vec!["/bin/true".into(), "x".into()],
            prepare: None,
        };
        assert_eq!(c.spec().name, "/bin/true x");
        assert_eq!(c.spec().metric, Metric::Seconds);
    }
}
