//! The runner process: `hookprof` executed again with a hidden subcommand, so it holds none of
//! the profiler's memory (no parsed BTF, no eBPF object) and no BPF fds (the kernel makes them
//! close-on-exec). Single-threaded, it hosts one workload at a time and does the measured work
//! synchronously, one request at a time. A workload's forks copy only this small process.
use std::{
    fs::File,
    io::{self, BufRead, BufReader, Write},
    os::fd::{AsRawFd, FromRawFd, RawFd},
    process::ExitCode,
    time::Duration,
};

use anyhow::{anyhow, Context, Result};

use super::protocol::{Reply, Request, UNASSIGNED_SYSCALL};
use crate::{
    machine::clock::{clock_ns, monotonic_ns},
    policy::Policy,
    safety::credentials::{self, Credentials},
    workloads::tracking_window::with_window,
    workloads::{self, Workload, WorkloadOptions, WorkloadSetup},
};

/// Test hooks: a runner told so dies (abort) or hangs in the first run of the named workload,
/// so the tests can check that a run survives a failed workload.
pub const CRASH_FOR_TEST: &str = "HOOKPROF_TEST_CRASH_WORKLOAD";
pub const HANG_FOR_TEST: &str = "HOOKPROF_TEST_HANG_WORKLOAD";

#[derive(clap::Args, Debug)]
pub struct RunnerArgs {
    /// The supervisor's pid: the runner dies with it.
    #[arg(long)]
    parent: u32,
    /// Run as this uid (with `--gid`), dropping every privilege.
    #[arg(long, requires = "gid")]
    uid: Option<u32>,
    #[arg(long, requires = "uid")]
    gid: Option<u32>,
    /// The `--policy` list as JSON: applied after the credentials, before any request is
    /// served, so every workload runs under it.
    #[arg(long, value_parser = parse_policies, default_value = "[]")]
    policies: PolicyList,
}

#[derive(Debug, Clone)]
struct PolicyList(Vec<Policy>);

fn parse_policies(json: &str) -> Result<PolicyList, String> {
    serde_json::from_str(json)
        .map(PolicyList)
        .map_err(|e| e.to_string())
}

impl RunnerArgs {
    pub fn command_line(
        parent: u32,
        user: Option<Credentials>,
        policies: &[Policy],
    ) -> Vec<String> {
        let mut args = vec!["__runner".into(), "--parent".into(), parent.to_string()];
        if let Some(user) = user {
            args.extend([
                "--uid".into(),
                user.uid.to_string(),
                "--gid".into(),
                user.gid.to_string(),
            ]);
        }
        if !policies.is_empty() {
            let json = serde_json::to_string(policies).expect("policies serialize");
            args.extend(["--policies".into(), json]);
        }
        args
    }
}

/// The hosted workload.
struct Hosted {
    name: String,
    workload: Box<dyn Workload>,
}

pub fn main(args: &RunnerArgs) -> ExitCode {
    let (requests, mut replies) = match take_stdio() {
        Ok(pipes) => pipes,
        Err(e) => {
            eprintln!("hookprof runner: {e}");
            return ExitCode::from(crate::exit::ERROR);
        }
    };
    // Every request of a runner that could not start (or take on its policy) fails with the
    // reason: it never serves unconfined.
    // Opened before any policy, which may deny opening files.
    let peak_rss = PeakRss::open();
    let mut harness_fds = vec![requests.as_raw_fd(), replies.as_raw_fd()];
    harness_fds.extend(peak_rss.fds());
    let started = start(args, &harness_fds);
    let mut hosted: Option<Hosted> = None;
    for line in BufReader::new(requests).lines() {
        let Ok(line) = line else { break };
        let reply = match (&started, serde_json::from_str::<Request>(&line)) {
            (Err(e), _) => Err(anyhow!("the runner could not start: {e:#}")),
            (Ok(()), Err(e)) => Err(anyhow!("bad request {line:?}: {e}")),
            (Ok(()), Ok(request)) => serve(request, &mut hosted, &peak_rss),
        };
        let reply = reply.unwrap_or_else(|e| Reply::Failed {
            error: format!("{e:#}"),
        });
        let line = serde_json::to_string(&reply).expect("replies serialize");
        if writeln!(replies, "{line}").is_err() {
            break;
        }
    }
    // EOF: the supervisor is done with us; the workload (and its helpers) go first.
    drop(hosted);
    ExitCode::SUCCESS
}

/// Takes the pipes to the supervisor off stdin and stdout (close-on-exec, so a workload's
/// exec'd children cannot write into the protocol) and points those at /dev/null.
fn take_stdio() -> io::Result<(File, File)> {
    let null = File::options().read(true).write(true).open("/dev/null")?;
    let mut pipes = [0; 2];
    for (fd, pipe) in pipes.iter_mut().enumerate() {
        // SAFETY: fcntl and dup2 on this process's own standard fds.
        unsafe {
            *pipe = libc::fcntl(fd as i32, libc::F_DUPFD_CLOEXEC, 3);
            if *pipe < 0 || libc::dup2(null.as_raw_fd(), fd as i32) < 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    // SAFETY: fresh fds that nothing else owns.
    Ok(unsafe { (File::from_raw_fd(pipes[0]), File::from_raw_fd(pipes[1])) })
}

/// Dies with the supervisor, takes on `--user`'s credentials, then the policies (`harness_fds`,
/// the pipes to the supervisor and the peak RSS files, stay usable under a seccomp allow-list).
fn start(args: &RunnerArgs, harness_fds: &[RawFd]) -> Result<()> {
    die_with_parent(args.parent)?;
    crate::workloads::tracking_window::map_window_word()?;
    if let (Some(uid), Some(gid)) = (args.uid, args.gid) {
        credentials::become_user(Credentials { uid, gid })?;
        // Changing credentials clears the parent-death signal and makes /proc/self root's
        // (clear_refs for the peak RSS): set both again.
        die_with_parent(args.parent)?;
        // SAFETY: prctl with plain integer arguments.
        unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 1) };
    }
    if !args.policies.0.is_empty() {
        // A policy may kill the runner (a seccomp filter's kill action): that is the
        // workload's error, not a crash to leave a core file for.
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: setrlimit with a valid rlimit.
        unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    }
    for policy in &args.policies.0 {
        policy.apply(harness_fds)?;
    }
    Ok(())
}

fn die_with_parent(parent: u32) -> Result<()> {
    // SAFETY: prctl and getppid with plain integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        anyhow::ensure!(
            libc::getppid() as u32 == parent,
            "the supervisor (pid {parent}) is gone"
        );
    }
    Ok(())
}

fn serve(request: Request, hosted: &mut Option<Hosted>, peak_rss: &PeakRss) -> Result<Reply> {
    Ok(match request {
        Request::Create {
            workload,
            setup,
            scratch_dir,
            tracked,
        } => {
            *hosted = None;
            peak_rss.reset();
            let options = WorkloadOptions { scratch_dir, setup };
            let created = create(&workload, &options, tracked)?;
            let reply = Reply::Created {
                ops_per_round: created.ops_per_round(),
                children_count_from_exec: created.children_count_from_exec(),
            };
            *hosted = Some(Hosted {
                name: workload,
                workload: created,
            });
            reply
        }
        Request::Run {
            ops,
            tracked,
            start_at_ns,
        } => {
            let hosted = hosted.as_mut().context("no workload to run")?;
            fail_for_test(&hosted.name);
            let w = &mut hosted.workload;
            if let Some(at) = start_at_ns {
                sleep_until(at);
            }
            let start_ns = monotonic_ns();
            let elapsed = with_window(tracked, || w.run(ops))?;
            let end_ns = monotonic_ns();
            w.settle()?;
            Reply::Ran {
                elapsed_ns: elapsed.as_nanos() as u64,
                extras: w.extras(),
                start_ns,
                end_ns,
            }
        }
        Request::Drop => {
            *hosted = None;
            Reply::Dropped {
                peak_rss_kib: peak_rss.kib(),
            }
        }
        Request::GetppidLoop { calls, tracked } => Reply::CalibrationLoop {
            ns_per_call: with_window(tracked, || getppid_loop(calls)),
        },
        Request::UnassignedSyscallLoop { calls, tracked } => Reply::CalibrationLoop {
            ns_per_call: with_window(tracked, || unassigned_syscall_loop(calls))?,
        },
    })
}

/// Pins this thread (the runner's only one) to the setup's first CPU, for good: the runner
/// ends with its workload. Then creates the registry's workload named `workload`, or `stat`'s
/// command, inside the tracking window if `tracked`.
fn create(workload: &str, options: &WorkloadOptions, tracked: bool) -> Result<Box<dyn Workload>> {
    let WorkloadSetup { pin, command, .. } = &options.setup;
    let create = match command {
        Some(_) => workloads::command::create,
        None => {
            workloads::find(workload)
                .with_context(|| format!("no workload named {workload}"))?
                .create
        }
    };
    if let Some(&cpu) = pin.first() {
        workloads::pin_to(cpu).with_context(|| format!("--pin {cpu}"))?;
    }
    with_window(tracked, || create(options)).with_context(|| format!("set up {workload}"))
}

fn fail_for_test(workload: &str) {
    if std::env::var(CRASH_FOR_TEST).is_ok_and(|w| w == workload) {
        std::process::abort();
    }
    if std::env::var(HANG_FOR_TEST).is_ok_and(|w| w == workload) {
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
}

/// ns of this thread's CPU time per getppid call over `calls` calls. CPU time, not wall
/// time: on a busy machine the loop is descheduled for whole time slices, which says nothing
/// about what a probe costs, while the syscall and its probes are charged to the thread.
fn getppid_loop(calls: u32) -> f64 {
    let start = thread_cpu_ns();
    for _ in 0..calls {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    (thread_cpu_ns() - start) as f64 / f64::from(calls)
}

/// As `getppid_loop`, with `UNASSIGNED_SYSCALL`; an error if the kernel has a syscall there.
fn unassigned_syscall_loop(calls: u32) -> Result<f64> {
    // SAFETY: a syscall number with no syscall behind it takes no arguments and does nothing.
    let call = || unsafe { libc::syscall(UNASSIGNED_SYSCALL) };
    if call() != -1 || io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
        anyhow::bail!(
            "syscall {UNASSIGNED_SYSCALL} is assigned on this kernel: it cannot stand for a \
             syscall that does nothing"
        );
    }
    let start = thread_cpu_ns();
    for _ in 0..calls {
        std::hint::black_box(call());
    }
    Ok((thread_cpu_ns() - start) as f64 / f64::from(calls))
}

fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sleeps until CLOCK_MONOTONIC reads `at_ns` (at once if it is past).
fn sleep_until(at_ns: u64) {
    let at = libc::timespec {
        tv_sec: (at_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (at_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec; a null remainder is allowed with TIMER_ABSTIME. Restarted when
    // a signal (the workload's own) interrupts it.
    while unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &at,
            std::ptr::null_mut(),
        )
    } == libc::EINTR
    {}
}

/// The runner's peak resident set (VmHWM), through files opened once: a policy may deny
/// opening them later, and a seccomp allow-list lets only these fds through.
struct PeakRss {
    clear_refs: Option<File>,
    status: Option<File>,
}

impl PeakRss {
    fn open() -> PeakRss {
        PeakRss {
            clear_refs: File::options()
                .write(true)
                .open("/proc/self/clear_refs")
                .ok(),
            status: File::open("/proc/self/status").ok(),
        }
    }

    fn fds(&self) -> impl Iterator<Item = RawFd> + '_ {
        [&self.clear_refs, &self.status]
            .into_iter()
            .flatten()
            .map(|f| f.as_raw_fd())
    }

    /// Starts the peak afresh for the next workload.
    fn reset(&self) {
        if let Some(mut f) = self.clear_refs.as_ref() {
            let _ = f.write_all(b"5");
        }
    }

    fn kib(&self) -> Option<u64> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0; 8192];
        let n = self.status.as_ref()?.read_at(&mut buf, 0).ok()?;
        crate::environment::status_field_kib(&String::from_utf8_lossy(&buf[..n]), "VmHWM")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The CPUs the calling thread may run on.
    fn allowed() -> i32 {
        // SAFETY: all-zero is a valid cpu_set_t out-buffer; CPU_COUNT reads the set filled.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set);
            libc::CPU_COUNT(&set)
        }
    }

    /// The runner pins itself, once, before the workload is set up; the workload's second end
    /// goes to the second CPU on its own (see ipc's tests).
    #[test]
    fn the_runner_pins_itself_before_it_creates_the_workload() {
        let dir = tempfile::tempdir().unwrap();
        let options = WorkloadOptions {
            scratch_dir: dir.path().to_path_buf(),
            setup: WorkloadSetup {
                pin: vec![0],
                ..WorkloadSetup::default()
            },
        };
        // A thread of its own, as the runner's: the pin lasts as long as the thread.
        std::thread::spawn(move || {
            let mut w = create("lat_pipe", &options, false).unwrap();
            assert_eq!(allowed(), 1);
            w.run(5).unwrap();
        })
        .join()
        .unwrap();
        let Err(err) = create("nope", &workloads::tests::options(dir.path()), false) else {
            panic!("created a workload named nope");
        };
        assert!(err.to_string().contains("no workload named nope"), "{err}");
    }
}
