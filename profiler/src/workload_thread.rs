//! The workload thread: a workload is created, run and dropped on a thread of its own, so the
//! main thread stays free to watch for an interrupt (a sample may last seconds) and can keep
//! root's credentials while the workload runs as `--user` (credentials are per thread in the
//! kernel; only this thread drops them).
use std::{
    sync::{
        atomic::{AtomicBool, AtomicI32, Ordering},
        mpsc::{self, RecvTimeoutError},
        Arc,
    },
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{anyhow, bail, Context, Result};

use crate::{
    probes,
    workloads::{Extra, Workload, WorkloadOptions, WorkloadSpec},
};

/// Whom the workload runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
}

impl Credentials {
    /// A user by name or uid, from the passwd database (a bare uid not listed there runs with
    /// gid = uid).
    pub fn lookup(user: &str) -> Result<Credentials> {
        let found = match user.parse::<u32>() {
            Ok(uid) => passwd_entry(|pw, buf, out| {
                // SAFETY: valid out-pointers and buffer of the given length.
                unsafe { libc::getpwuid_r(uid, pw, buf.as_mut_ptr(), buf.len(), out) }
            })
            .or(Some(Credentials { uid, gid: uid })),
            Err(_) => {
                let name = std::ffi::CString::new(user)
                    .map_err(|_| anyhow!("--user '{user}': not a user name"))?;
                passwd_entry(|pw, buf, out| {
                    // SAFETY: a NUL-terminated name, valid out-pointers and buffer.
                    unsafe { libc::getpwnam_r(name.as_ptr(), pw, buf.as_mut_ptr(), buf.len(), out) }
                })
            }
        };
        found.ok_or_else(|| anyhow!("--user '{user}': no such user in the passwd database"))
    }
}

/// Calls a getpw*_r function and returns the uid and gid it found.
fn passwd_entry(
    get: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<Credentials> {
    // SAFETY: passwd is plain data, filled in by `get`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out = std::ptr::null_mut();
    let r = get(&mut pw, &mut buf, &mut out);
    (r == 0 && !out.is_null()).then_some(Credentials {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

enum Request {
    /// Run `ops` operations; `tracked` opens the thread's tracking window around them.
    Run { ops: u64, tracked: bool },
}

enum Reply {
    /// The workload is set up; its ops come in rounds of this many.
    Created(Result<u64>),
    Ran(Result<Duration>, Vec<Extra>),
}

/// How often the main thread looks at the stop flag while the workload thread works: well
/// within the 1 s an interrupt may take, and rare enough not to disturb the workload.
const POLL: Duration = Duration::from_millis(50);

pub struct WorkloadThread {
    requests: Option<mpsc::Sender<Request>>,
    replies: mpsc::Receiver<Reply>,
    thread: Option<JoinHandle<()>>,
    /// The thread's kernel tid (0 until it has started), to find the processes it forked.
    tid: Arc<AtomicI32>,
    /// A request is under way (the thread cannot be joined without waiting for it).
    busy: bool,
    /// The workload's `ops_per_round`.
    ops_per_round: u64,
}

/// What a request came to.
pub enum Wait<T> {
    Done(T),
    /// The stop flag was raised before the workload thread answered.
    Interrupted,
}

impl WorkloadThread {
    /// Starts the thread: it pins itself to `pin`, takes on `user`'s credentials, and creates
    /// the workload (inside its tracking window if `tracked`).
    pub fn start(
        spec: &'static WorkloadSpec,
        options: WorkloadOptions,
        user: Option<Credentials>,
        tracked: bool,
        stop: &AtomicBool,
    ) -> Result<Wait<WorkloadThread>> {
        let (requests, inbox) = mpsc::channel();
        let (outbox, replies) = mpsc::channel();
        let tid = Arc::new(AtomicI32::new(0));
        let thread = {
            let tid = Arc::clone(&tid);
            std::thread::Builder::new()
                .name(format!("workload {}", spec.name))
                .spawn(move || {
                    // SAFETY: gettid has no preconditions.
                    tid.store(unsafe { libc::gettid() }, Ordering::Relaxed);
                    serve(spec, &options, user, tracked, &inbox, &outbox);
                })
                .context("start the workload thread")?
        };
        let mut me = WorkloadThread {
            requests: Some(requests),
            replies,
            thread: Some(thread),
            tid,
            busy: true,
            ops_per_round: 1,
        };
        Ok(match me.wait(stop)? {
            Wait::Done(Reply::Created(created)) => {
                me.ops_per_round = created?.max(1);
                Wait::Done(me)
            }
            Wait::Done(Reply::Ran(..)) => unreachable!("the first reply is Created"),
            Wait::Interrupted => Wait::Interrupted,
        })
    }

    /// `ops` rounded up to whole rounds of the workload (see `Workload::ops_per_round`).
    pub fn whole_rounds(&self, ops: u64) -> u64 {
        ops.max(1).div_ceil(self.ops_per_round) * self.ops_per_round
    }

    /// Runs `ops` operations and returns their time and extra metrics.
    pub fn run(
        &mut self,
        ops: u64,
        tracked: bool,
        stop: &AtomicBool,
    ) -> Result<Wait<(Duration, Vec<Extra>)>> {
        let sender = self.requests.as_ref().expect("requests open until drop");
        sender
            .send(Request::Run { ops, tracked })
            .map_err(|_| anyhow!("the workload thread is gone"))?;
        self.busy = true;
        Ok(match self.wait(stop)? {
            Wait::Done(Reply::Ran(ran, extras)) => Wait::Done((ran?, extras)),
            Wait::Done(Reply::Created(_)) => unreachable!("Created comes only first"),
            Wait::Interrupted => Wait::Interrupted,
        })
    }

    fn wait(&mut self, stop: &AtomicBool) -> Result<Wait<Reply>> {
        loop {
            if stop.load(Ordering::Relaxed) {
                self.kill_children();
                return Ok(Wait::Interrupted);
            }
            match self.replies.recv_timeout(POLL) {
                Ok(reply) => {
                    self.busy = false;
                    return Ok(Wait::Done(reply));
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.busy = false;
                    let thread = self.thread.take().expect("joined once");
                    return Err(match thread.join() {
                        Err(panic) => anyhow!("the workload thread panicked: {}", message(&panic)),
                        Ok(()) => anyhow!("the workload thread ended unexpectedly"),
                    });
                }
            }
        }
    }

    /// On interrupt: kills the processes the workload thread forked, so a workload waiting on
    /// them fails at once instead of finishing a long sample, and none outlives hookprof.
    fn kill_children(&self) {
        let tid = self.tid.load(Ordering::Relaxed);
        let children = std::fs::read_to_string(format!("/proc/self/task/{tid}/children"));
        for pid in children.iter().flat_map(|c| c.split_whitespace()) {
            if let Ok(pid) = pid.parse::<libc::pid_t>() {
                // SAFETY: an unreaped child of this process; SIGKILL ends it, nothing else.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

impl Drop for WorkloadThread {
    /// Ends the thread, which drops the workload (its files, sockets and helper processes).
    /// A thread still busy with an interrupted request is left to the process's exit.
    fn drop(&mut self) {
        self.requests.take();
        if !self.busy {
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        }
    }
}

/// The workload thread's body.
fn serve(
    spec: &'static WorkloadSpec,
    options: &WorkloadOptions,
    user: Option<Credentials>,
    tracked: bool,
    inbox: &mpsc::Receiver<Request>,
    outbox: &mpsc::Sender<Reply>,
) {
    let created = (|| -> Result<Box<dyn Workload>> {
        if let Some(&cpu) = options.pin.first() {
            crate::workloads::pin_to(cpu).with_context(|| format!("--pin {cpu}"))?;
        }
        if let Some(user) = user {
            become_user(user)?;
        }
        with_window(tracked, || (spec.create)(options))
            .with_context(|| format!("set up {}", spec.name))
    })();
    let mut workload = match created {
        Ok(w) => {
            let _ = outbox.send(Reply::Created(Ok(w.ops_per_round())));
            w
        }
        Err(e) => {
            let _ = outbox.send(Reply::Created(Err(e)));
            return;
        }
    };
    // Testing only: proves that a panic mid-run leaves nothing behind (tests/safety.rs).
    let panic_for_test = std::env::var_os("HOOKPROF_TEST_PANIC").is_some();
    while let Ok(Request::Run { ops, tracked }) = inbox.recv() {
        assert!(!panic_for_test, "HOOKPROF_TEST_PANIC is set");
        let ran = with_window(tracked, || workload.run(ops))
            .and_then(|elapsed| workload.settle().map(|()| elapsed));
        let extras = workload.extras();
        if outbox.send(Reply::Ran(ran, extras)).is_err() {
            break;
        }
    }
}

/// Runs `f` with this thread's tracking window open if `tracked`.
fn with_window<T>(tracked: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if !tracked {
        return f();
    }
    probes::gate(true);
    let out = f();
    probes::gate(false);
    out
}

/// Drops this thread's credentials to `user`'s. Raw syscalls: glibc's setuid and friends
/// would change every thread of the process, the profiler's included.
fn become_user(user: Credentials) -> Result<()> {
    // SAFETY: plain syscalls on this thread's credentials; a null list with size 0 is valid.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0 {
            bail!("setgroups: {}", std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_setresgid, user.gid, user.gid, user.gid) != 0 {
            bail!(
                "setresgid({}): {}",
                user.gid,
                std::io::Error::last_os_error()
            );
        }
        if libc::syscall(libc::SYS_setresuid, user.uid, user.uid, user.uid) != 0 {
            bail!(
                "setresuid({}): {}",
                user.uid,
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

fn message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
