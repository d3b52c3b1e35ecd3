//! Work done in a short-lived process of this same binary (a hidden subcommand), its result
//! sent back as JSON on the child's stdout. What the work allocates on its way is the child's:
//! it never counts in the profiler's peak resident set, and it is all gone when the child exits.
use std::{
    io::{BufReader, BufWriter, Read, Write},
    process::{Command, ExitCode, Stdio},
};

use anyhow::{bail, Context, Result};
use serde::{de::DeserializeOwned, Serialize};

/// Runs this binary with `args`, a hidden subcommand that answers through `serve`, and returns
/// its answer; the child's error, if it fails, is this one's.
pub fn run<T: DeserializeOwned>(args: &[&str]) -> Result<T> {
    let command = format!("hookprof {}", args.join(" "));
    // The same binary, executed afresh (as the runner is): none of this process comes along.
    let mut child = Command::new("/proc/self/exe")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start `{command}`"))?;
    // Read as it comes, so the answer's text is never held whole. The pipe closes before
    // stderr is read: a child still writing gets EPIPE and ends instead of blocking.
    let answer = serde_json::from_reader(BufReader::new(child.stdout.take().expect("piped")));
    let mut error = String::new();
    child
        .stderr
        .take()
        .expect("piped")
        .read_to_string(&mut error)
        .with_context(|| format!("read the errors of `{command}`"))?;
    let status = child
        .wait()
        .with_context(|| format!("wait for `{command}`"))?;
    if !status.success() {
        let error = error.trim();
        if error.is_empty() {
            bail!("`{command}` ended with {status}"); // killed by a signal
        }
        bail!("{error}");
    }
    answer.with_context(|| format!("read the answer of `{command}`"))
}

/// The child's side: does `work` and writes its result to stdout as JSON, or its error on one
/// line to stderr (exit code 2).
pub fn serve<T: Serialize>(work: impl FnOnce() -> Result<T>) -> ExitCode {
    // SAFETY: prctl with an option that takes one integer. The child ends with the thread that
    // started it, so an interrupted profiler leaves no child behind.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let answered = work().and_then(|value| {
        let mut out = BufWriter::new(std::io::stdout().lock());
        serde_json::to_writer(&mut out, &value)?;
        out.flush()?;
        Ok(())
    });
    match answered {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            ExitCode::from(crate::exit::ERROR)
        }
    }
}
