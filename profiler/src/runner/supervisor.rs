//! The profiler's side of the runner: it starts the runner processes (one per parallel copy of
//! a workload), sends them one request each at a time and waits for the replies in one event
//! loop with the signals (Ctrl-C, SIGTERM, SIGHUP), the workload's deadline (`--timeout-per-workload`)
//! and the progress display. A runner that dies or overruns the deadline is killed with every
//! other runner and everything they forked, and the request fails; the next request gets fresh
//! runners.
use std::{
    pin::pin,
    process::{ExitStatus, Stdio},
    time::Duration,
};

use anyhow::{anyhow, bail, Context, Result};
use indicatif::ProgressBar;
use tokio::{
    io::{unix::AsyncFd, AsyncBufReadExt, AsyncWriteExt, BufReader, Lines},
    process::{Child, ChildStdin, ChildStdout, Command},
    runtime::Runtime,
    signal::unix::{signal, Signal, SignalKind},
    time::Instant,
};

use super::{
    protocol::{Reply, Request},
    serve::RunnerArgs,
    Wait,
};
use crate::{policy::Policy, probes::GateOwners, safety::credentials::Credentials};

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

/// Ctrl-C, SIGTERM and SIGHUP: each ends the run alike, with the samples taken so far kept.
/// SIGHUP is the commonest of the three (an SSH session that drops).
struct Signals {
    interrupt: Signal,
    terminate: Signal,
    hangup: Signal,
}

/// The probes' messages from their rare paths (full stacks, unmatched exits, tracking storage
/// the kernel could not give, gate misuse), printed above the progress display.
type KernelLog = AsyncFd<aya_log::EbpfLogger<PrintAbove>>;

pub struct Supervisor {
    rt: Runtime,
    signals: Signals,
    kernel_log: Option<KernelLog>,
    /// One per parallel copy; the first also serves calibration and discovery.
    runners: Vec<RunnerProcess>,
    user: Option<Credentials>,
    /// `--policy`: every runner takes these on before it serves.
    policies: Vec<Policy>,
    timeout: Duration,
    /// When the current workload (or discovery burst) must be done.
    deadline: Option<Instant>,
    bar: ProgressBar,
    interrupted: bool,
    /// With a syscall injection: its gate owners, kept naming the runners, whose work then
    /// always runs inside their tracking windows (see `keep_windows_open`).
    injection_owners: Option<GateOwners>,
}

/// How waiting for a reply ended.
enum Ending {
    /// Every runner's reply line, or the index of the first runner that hung up.
    Replies(std::io::Result<Result<Vec<String>, usize>>),
    Interrupted,
    TimedOut,
}

impl Supervisor {
    /// Takes over Ctrl-C, SIGTERM and SIGHUP (an interrupt then ends the current request at once) and
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
                hangup: signal(SignalKind::hangup()).context("install signal handler")?,
            }
        };
        // SAFETY: prctl with plain integer arguments.
        unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
        Ok(Supervisor {
            rt,
            signals,
            kernel_log: None,
            runners: Vec::new(),
            user,
            policies: Vec::new(),
            timeout,
            deadline: None,
            bar,
            interrupted: false,
            injection_owners: None,
        })
    }

    /// Every runner started from now on puts itself under `policies` before it serves.
    pub fn confine(&mut self, policies: Vec<Policy>) {
        self.policies = policies;
    }

    /// `--user`'s credentials, which the runners take on (None: root's).
    pub fn user(&self) -> Option<Credentials> {
        self.user
    }

    /// True once Ctrl-C, SIGTERM or SIGHUP came: every request from then on ends as interrupted.
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

    /// From now on, prints the messages of the probes' programs (`hookprof run -v`): those of
    /// the eBPF object that the loaded program `program_id` belongs to.
    pub fn follow_kernel_log(&mut self, program_id: u32) -> Result<()> {
        let logger =
            aya_log::EbpfLogger::init_from_id_with_logger(program_id, PrintAbove(self.bar.clone()))
                .context("open the probes' log")?;
        let _entered = self.rt.enter();
        // SAFETY: the logger owns its ring buffer's fd and keeps it open while it is watched.
        let watched = unsafe { AsyncFd::register(logger) };
        self.kernel_log = Some(watched.context("watch the probes' log")?);
        Ok(())
    }

    /// From now on, every runner's set-up and runs happen inside its tracking window, clean
    /// runs too, and `owners` (a syscall injection's) always names the runners: the injection
    /// is a kernel change in force for the whole run, not only while probes are attached.
    pub fn keep_windows_open(&mut self, owners: GateOwners) -> Result<()> {
        self.injection_owners = Some(owners);
        self.owners_follow_runners()
    }

    /// True once `keep_windows_open` was called: every request runs tracked.
    pub fn windows_kept_open(&self) -> bool {
        self.injection_owners.is_some()
    }

    fn owners_follow_runners(&mut self) -> Result<()> {
        let pids: Vec<u32> = self.runners.iter().map(|r| r.pid).collect();
        match &mut self.injection_owners {
            Some(owners) => owners
                .set(&pids)
                .context("name the runners to the injection"),
            None => Ok(()),
        }
    }

    /// The pid of the first runner (started if there is none): the probes' gate owner.
    pub fn runner_pid(&mut self) -> Result<u32> {
        Ok(self.runner_pids(1)?[0])
    }

    /// The pids of the first `n` runners, started as needed: the probes' gate owners.
    pub fn runner_pids(&mut self, n: usize) -> Result<Vec<u32>> {
        while self.runners.len() < n {
            let runner = self.spawn()?;
            self.runners.push(runner);
            self.owners_follow_runners()?;
        }
        Ok(self.runners[..n].iter().map(|r| r.pid).collect())
    }

    /// True if child `pid` was continued after a stop (SIGSTOP, SIGTSTP: a debugger, a shell's
    /// job control, a freezer) since the last time this was asked: the report the kernel
    /// keeps for the parent is taken (only exits are what tokio reaps).
    pub fn continued(pid: u32) -> bool {
        // SAFETY: siginfo_t is plain data, filled in by waitid.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid on our own child, never blocking, never reaping it.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                pid,
                &mut info,
                libc::WCONTINUED | libc::WNOHANG,
            )
        };
        // SAFETY: si_pid is valid for a SIGCHLD siginfo, zero when nothing was reported.
        r == 0
            && unsafe { info.si_pid() } == pid as libc::pid_t
            && info.si_code == libc::CLD_CONTINUED
    }

    /// True while runner `pid` is still serving.
    pub fn serves(&self, pid: u32) -> bool {
        self.runners.iter().any(|r| r.pid == pid)
    }

    fn spawn(&mut self) -> Result<RunnerProcess> {
        let _entered = self.rt.enter();
        // The same binary, executed afresh: none of this process's memory or fds comes along.
        let mut command = Command::new("/proc/self/exe");
        command.args(RunnerArgs::command_line(
            std::process::id(),
            self.user,
            &self.policies,
        ));
        if let Some(user) = self.user {
            // Another user's processes can read the runner's environment (/proc/PID/environ):
            // none of the profiler's goes along (a store's password, tokens, root's paths).
            command
                .env_clear()
                .envs(crate::safety::credentials::minimal_environment(user));
        }
        let mut child = command
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

    /// Runs `work` on a thread of its own while the event loop watches for Ctrl-C, SIGTERM and SIGHUP,
    /// so a start-up step that takes seconds on a slow or busy machine (parsing the kernel's
    /// BTF, loading hundreds of programs) does not hold up an interrupt. Interrupted, the work
    /// is left to its thread: what it loads is freed when the thread drops it or the process
    /// exits, and nothing it does outlives the process.
    pub fn blocking<T: Send + 'static>(
        &mut self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<Wait<T>> {
        if self.interrupted {
            return Ok(Wait::Interrupted);
        }
        let (done, result) = tokio::sync::oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("start-up".into())
            .spawn(move || {
                let _ = done.send(work());
            })
            .context("start a thread")?;
        let Supervisor {
            rt, signals, bar, ..
        } = self;
        let ending = rt.block_on(async {
            let mut result = pin!(result);
            let mut tick = tokio::time::interval(TICK);
            loop {
                tokio::select! {
                    biased;
                    _ = signals.interrupt.recv() => break None,
                    _ = signals.terminate.recv() => break None,
                    _ = signals.hangup.recv() => break None,
                    value = &mut result => break Some(value),
                    _ = tick.tick() => bar.tick(),
                }
            }
        });
        match ending {
            Some(Ok(value)) => Ok(Wait::Done(value)),
            // The thread panicked: so does this one, as if the work had run here.
            Some(Err(_)) => match thread.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => bail!("a start-up step ended without a result"),
            },
            None => {
                self.interrupted = true;
                Ok(Wait::Interrupted)
            }
        }
    }

    /// Sends `request` to the first runner and waits for its reply (see `request_each`).
    pub fn request(&mut self, request: &Request) -> Result<Wait<Reply>> {
        Ok(self
            .request_each(std::slice::from_ref(request))?
            .map(|mut replies| replies.remove(0)))
    }

    /// Sends `requests[i]` to runner `i`, all before waiting for any reply, then waits for
    /// every reply: the copies of a parallel workload start together and the next request
    /// waits for the slowest (a barrier). A reply that says a request failed is an error (the
    /// runners stay); a runner that died or overran the deadline is an error too, and every
    /// runner is gone with everything they forked.
    pub fn request_each(&mut self, requests: &[Request]) -> Result<Wait<Vec<Reply>>> {
        if self.interrupted {
            return Ok(Wait::Interrupted);
        }
        self.runner_pids(requests.len())?;
        let lines: Vec<String> = requests
            .iter()
            .map(|r| serde_json::to_string(r).expect("requests serialize") + "\n")
            .collect();
        let ending = self.exchange(&lines);
        self.replies_of(ending)
    }

    /// Writes `lines[i]` to runner `i`, then reads every reply line, until they are all in, a
    /// signal interrupts, or the deadline passes; the kernel log is printed meanwhile.
    fn exchange(&mut self, lines: &[String]) -> Ending {
        let Supervisor {
            rt,
            signals,
            kernel_log,
            runners,
            deadline,
            bar,
            ..
        } = self;
        let runners = &mut runners[..lines.len()];
        let deadline = *deadline;
        rt.block_on(async {
            let exchange = async {
                for (runner, line) in runners.iter_mut().zip(lines) {
                    runner.requests.write_all(line.as_bytes()).await?;
                    runner.requests.flush().await?;
                }
                let mut replies = Vec::with_capacity(runners.len());
                for (i, runner) in runners.iter_mut().enumerate() {
                    match runner.replies.next_line().await? {
                        Some(line) => replies.push(line),
                        None => return Ok(Err(i)),
                    }
                }
                Ok(Ok(replies))
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
            let ending = loop {
                tokio::select! {
                    biased;
                    _ = signals.interrupt.recv() => break Ending::Interrupted,
                    _ = signals.terminate.recv() => break Ending::Interrupted,
                    _ = signals.hangup.recv() => break Ending::Interrupted,
                    replies = &mut exchange => break Ending::Replies(replies),
                    () = &mut overrun => break Ending::TimedOut,
                    () = print_kernel_log(kernel_log.as_mut()) => {}
                    _ = tick.tick() => bar.tick(),
                }
            };
            // What the probes said while the reply was on its way.
            if let Some(log) = kernel_log {
                log.get_mut().flush();
            }
            ending
        })
    }

    /// The replies an exchange ended with, or why there are none (the runners then killed).
    fn replies_of(&mut self, ending: Ending) -> Result<Wait<Vec<Reply>>> {
        match ending {
            Ending::Replies(Ok(Ok(lines))) => {
                let mut replies = Vec::with_capacity(lines.len());
                for line in lines {
                    match serde_json::from_str(&line)
                        .with_context(|| format!("the runner's reply {line:?}"))?
                    {
                        Reply::Failed { error } => return Err(anyhow!(error)),
                        reply => replies.push(reply),
                    }
                }
                Ok(Wait::Done(replies))
            }
            Ending::Replies(gone) => {
                let statuses = self.kill_runners();
                let status = match gone {
                    Ok(Err(i)) => statuses.get(i).copied().flatten(),
                    _ => None,
                };
                if statuses.iter().flatten().any(died_of_interrupt) {
                    self.interrupted = true;
                    return Ok(Wait::Interrupted);
                }
                bail!("the runner process died ({})", describe(status))
            }
            Ending::Interrupted => {
                self.interrupted = true;
                self.kill_runners();
                Ok(Wait::Interrupted)
            }
            Ending::TimedOut => {
                self.kill_runners();
                bail!(
                    "still running after {} s (--timeout-per-workload); the runner was killed",
                    self.timeout.as_secs()
                )
            }
        }
    }

    /// `calls` getppid calls in the runner: ns per call.
    pub fn getppid_loop(&mut self, calls: u32, tracked: bool) -> Result<f64> {
        self.calibration_loop(&Request::GetppidLoop { calls, tracked })
    }

    /// `calls` calls of a syscall number that has no syscall in the runner: ns per call.
    pub fn unassigned_syscall_loop(&mut self, calls: u32, tracked: bool) -> Result<f64> {
        self.calibration_loop(&Request::UnassignedSyscallLoop { calls, tracked })
    }

    fn calibration_loop(&mut self, request: &Request) -> Result<f64> {
        match self.request(request)? {
            Wait::Done(Reply::CalibrationLoop { ns_per_call }) => Ok(ns_per_call),
            Wait::Done(other) => bail!("unexpected reply from the runner: {other:?}"),
            Wait::Interrupted => bail!("interrupted"),
        }
    }

    /// Kills the runners and everything they forked (orphans come to this process, their
    /// subreaper), and reaps them all; each runner's exit status if it had one.
    pub fn kill_runners(&mut self) -> Vec<Option<ExitStatus>> {
        let mut runners = std::mem::take(&mut self.runners);
        for r in &mut runners {
            let _ = r.child.start_kill();
        }
        let statuses = runners
            .iter_mut()
            .map(|r| self.rt.block_on(r.child.wait()).ok())
            .collect();
        kill_orphans();
        let _ = self.owners_follow_runners(); // none left: nobody's gate counts
        statuses
    }

    /// Lets the runners drop their workloads and exit; kills those that do not within a grace
    /// period.
    pub fn stop_runners(&mut self) {
        let runners = std::mem::take(&mut self.runners);
        if runners.is_empty() {
            return;
        }
        // EOF on every runner's requests at once: their cue to end.
        let mut children: Vec<Child> = runners.into_iter().map(|r| r.child).collect();
        let exited = self.rt.block_on(async {
            tokio::time::timeout(EXIT_GRACE, async {
                for child in &mut children {
                    let _ = child.wait().await;
                }
            })
            .await
        });
        if exited.is_err() {
            for child in &mut children {
                let _ = child.start_kill();
                let _ = self.rt.block_on(child.wait());
            }
        }
        kill_orphans();
        let _ = self.owners_follow_runners(); // none left: nobody's gate counts
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        if std::thread::panicking() || self.interrupted {
            self.kill_runners();
        } else {
            self.stop_runners();
        }
    }
}

/// Waits until the probes' log has messages and prints them (forever pending without a log).
async fn print_kernel_log(log: Option<&mut KernelLog>) {
    let Some(log) = log else {
        return std::future::pending().await;
    };
    match log.readable_mut().await {
        Ok(mut ready) => {
            ready.get_inner_mut().flush();
            ready.clear_ready();
        }
        // The log cannot be watched: stop watching it rather than spin.
        Err(_) => std::future::pending().await,
    }
}

/// A `log::Log` that prints each record on its own line above the progress display.
struct PrintAbove(ProgressBar);

impl log::Log for PrintAbove {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        self.0
            .suspend(|| eprintln!("hookprof: probes: {}", record.args()));
    }

    fn flush(&self) {}
}

fn died_of_interrupt(status: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    matches!(
        status.signal(),
        Some(libc::SIGINT | libc::SIGTERM | libc::SIGHUP)
    )
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
