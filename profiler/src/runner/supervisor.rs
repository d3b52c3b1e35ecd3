//! The profiler's side of the runner: it starts the runner process, sends it one request at a
//! time and waits for the reply in one event loop with the signals (Ctrl-C, SIGTERM), the
//! workload's deadline (`--timeout-per-workload`) and the progress display. A runner that dies
//! or overruns the deadline is killed with everything it forked, and the request fails; the
//! next request gets a fresh runner.
use std::{
    pin::pin,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
    runtime::Runtime,
    signal::unix::{signal, Signal, SignalKind},
    time::Instant,
};

use super::{
    credentials::Credentials,
    protocol::{Reply, Request},
    serve::RunnerArgs,
    Wait,
};
use crate::policy::Policy;

/// How often the progress display is redrawn while a request is under way.
const TICK: Duration = Duration::from_millis(100);
/// How long a runner that was told to stop has to drop its workload and exit.
const EXIT_GRACE: Duration = Duration::from_secs(10);

struct RunnerProcess {
    child: Child,
    pid: u32,
    requests: ChildStdin,
    replies: Lines<BufReader<ChildStdout>>,
}

struct Signals {
    interrupt: Signal,
    terminate: Signal,
}

pub struct Supervisor {
    rt: Runtime,
    signals: Signals,
    runner: Option<RunnerProcess>,
    user: Option<Credentials>,
    /// `--policy`: every runner takes these on before it serves.
    policies: Vec<Policy>,
    timeout: Duration,
    /// When the current workload (or discovery burst) must be done.
    deadline: Option<Instant>,
    bar: ProgressBar,
    interrupted: bool,
}

/// How waiting for a reply ended.
enum Ending {
    Reply(std::io::Result<Option<String>>),
    Interrupted,
    TimedOut,
}

impl Supervisor {
    /// Takes over Ctrl-C and SIGTERM (an interrupt then ends the current request at once) and
    /// becomes the reaper of whatever the runner forks, so nothing outlives a killed runner.
    pub fn new(user: Option<Credentials>, timeout: Duration, bar: ProgressBar) -> Result<Self> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("start the supervisor's event loop")?;
        let signals = {
            let _entered = rt.enter();
            Signals {
                interrupt: signal(SignalKind::interrupt()).context("install signal handler")?,
                terminate: signal(SignalKind::terminate()).context("install signal handler")?,
            }
        };
        // SAFETY: prctl with plain integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
        Ok(Supervisor {
            rt,
            signals,
            runner: None,
            user,
            policies: Vec::new(),
            timeout,
            deadline: None,
            bar,
            interrupted: false,
        })
    }

    /// Every runner started from now on puts itself under `policies` before it serves.
    pub fn confine(&mut self, policies: Vec<Policy>) {
        self.policies = policies;
    }

    /// True once Ctrl-C or SIGTERM came: every request from then on ends as interrupted.
    pub fn interrupted(&self) -> bool {
        self.interrupted
    }

    /// The next workload (or discovery burst) starts now: its deadline is `timeout` away.
    pub fn start_clock(&mut self) {
        self.deadline = Some(Instant::now() + self.timeout);
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Prints a line above the progress display.
    pub fn warn(&self, line: &str) {
        self.bar.suspend(|| eprintln!("hookprof: {line}"));
    }

    /// The pid of the runner (started if there is none): the probes' gate owner.
    pub fn runner_pid(&mut self) -> Result<u32> {
        if self.runner.is_none() {
            self.runner = Some(self.spawn()?);
        }
        Ok(self.runner.as_ref().expect("just started").pid)
    }

    /// True while runner `pid` is still the one serving.
    pub fn serves(&self, pid: u32) -> bool {
        self.runner.as_ref().is_some_and(|r| r.pid == pid)
    }

    fn spawn(&mut self) -> Result<RunnerProcess> {
        let _entered = self.rt.enter();
        // The same binary, executed afresh: none of this process's memory or fds comes along.
        let mut child = Command::new("/proc/self/exe")
            .args(RunnerArgs::command_line(
                std::process::id(),
                self.user,
                &self.policies,
            ))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("start the runner process")?;
        let pid = child.id().context("the runner process is gone")?;
        Ok(RunnerProcess {
            pid,
            requests: child.stdin.take().expect("piped"),
            replies: BufReader::new(child.stdout.take().expect("piped")).lines(),
            child,
        })
    }

    /// Sends `request` and waits for its reply. A reply that says the request failed is an
    /// error (the runner stays); a runner that died or overran the deadline is an error too,
    /// and is gone with everything it forked.
    pub fn request(&mut self, request: &Request) -> Result<Wait<Reply>> {
        if self.interrupted {
            return Ok(Wait::Interrupted);
        }
        self.runner_pid()?;
        let line = serde_json::to_string(request).expect("requests serialize") + "\n";
        let Supervisor {
            rt,
            signals,
            runner,
            deadline,
            bar,
            ..
        } = self;
        let runner = runner.as_mut().expect("started above");
        let deadline = *deadline;
        let ending = rt.block_on(async {
            let exchange = async {
                runner.requests.write_all(line.as_bytes()).await?;
                runner.requests.flush().await?;
                runner.replies.next_line().await
            };
            let overrun = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            let mut exchange = pin!(exchange);
            let mut overrun = pin!(overrun);
            let mut tick = tokio::time::interval(TICK);
            loop {
                tokio::select! {
                    biased;
                    _ = signals.interrupt.recv() => return Ending::Interrupted,
                    _ = signals.terminate.recv() => return Ending::Interrupted,
                    reply = &mut exchange => return Ending::Reply(reply),
                    () = &mut overrun => return Ending::TimedOut,
                    _ = tick.tick() => bar.tick(),
                }
            }
        });
        match ending {
            Ending::Reply(Ok(Some(line))) => {
                match serde_json::from_str(&line)
                    .with_context(|| format!("the runner's reply {line:?}"))?
                {
                    Reply::Failed { error } => Err(anyhow!(error)),
                    reply => Ok(Wait::Done(reply)),
                }
            }
            Ending::Reply(_) => {
                let status = self.kill_runner();
                if status.is_some_and(|s| died_of_interrupt(&s)) {
                    self.interrupted = true;
                    return Ok(Wait::Interrupted);
                }
                bail!("the runner process died ({})", describe(status))
            }
            Ending::Interrupted => {
                self.interrupted = true;
                self.kill_runner();
                Ok(Wait::Interrupted)
            }
            Ending::TimedOut => {
                self.kill_runner();
                bail!(
                    "still running after {} s (--timeout-per-workload); the runner was killed",
                    self.timeout.as_secs()
                )
            }
        }
    }

    /// `calls` getppid calls in the runner: ns per call.
    pub fn getppid_loop(&mut self, calls: u32, tracked: bool) -> Result<f64> {
        match self.request(&Request::GetppidLoop { calls, tracked })? {
            Wait::Done(Reply::GetppidLoop { ns_per_call }) => Ok(ns_per_call),
            Wait::Done(other) => bail!("unexpected reply from the runner: {other:?}"),
            Wait::Interrupted => bail!("interrupted"),
        }
    }

    /// Kills the runner and everything it forked (orphans come to this process, their
    /// subreaper), and reaps them all; the runner's exit status if it had one.
    pub fn kill_runner(&mut self) -> Option<ExitStatus> {
        let status = self.runner.take().and_then(|mut r| {
            let _ = r.child.start_kill();
            self.rt.block_on(r.child.wait()).ok()
        });
        kill_orphans();
        status
    }

    /// Lets the runner drop its workload and exit; kills it if it does not within a grace
    /// period.
    pub fn stop_runner(&mut self) {
        let Some(runner) = self.runner.take() else {
            return;
        };
        let RunnerProcess {
            mut child,
            requests,
            ..
        } = runner;
        drop(requests); // EOF: the runner's cue to end
        let exited = self
            .rt
            .block_on(async { tokio::time::timeout(EXIT_GRACE, child.wait()).await });
        if exited.is_err() {
            let _ = child.start_kill();
            let _ = self.rt.block_on(child.wait());
        }
        kill_orphans();
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if std::thread::panicking() || self.interrupted {
            self.kill_runner();
        } else {
            self.stop_runner();
        }
    }
}

fn died_of_interrupt(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(status.signal(), Some(libc::SIGINT | libc::SIGTERM))
}

fn describe(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        None => "no exit status".into(),
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit code {code}"),
            (_, Some(sig)) => format!("killed by signal {sig}{}", signal_name(sig)),
            _ => s.to_string(),
        },
    }
}

fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string.
    let name = unsafe { std::ffi::CStr::from_ptr(libc::strsignal(sig)) };
    format!(" ({})", name.to_string_lossy())
}

/// Kills and reaps this process's children: with the runner gone, the only ones left are what
/// it forked, reparented here.
fn kill_orphans() {
    for _ in 0..100 {
        let orphans = children_of(std::process::id() as libc::pid_t);
        if orphans.is_empty() {
            return;
        }
        for pid in orphans {
            // SAFETY: our own child; SIGKILL ends it and waitpid reaps it.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// The children of process `pid`, from every thread's /proc children list (a child belongs
/// to the thread that forked it).
pub fn children_of(pid: libc::pid_t) -> Vec<libc::pid_t> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}
