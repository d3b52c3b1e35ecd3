//! lmbench's "sig inst" and "sig hndl" columns, and the signal plumbing `prot_fault` shares.
use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex, MutexGuard,
    },
    time::{Duration, Instant},
};

use super::{Family, Metric, Suite, Workload, WorkloadSpec};

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "sig_install",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "sigaction() installing a handler",
        suite: Suite::Quick,
        create: |_| Ok(Box::new(SigInstall)),
    },
    WorkloadSpec {
        name: "sig_catch",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "signal to self caught by an empty handler, minus the cost of kill(self, 0)",
        suite: Suite::Quick,
        create: |_| Ok(Box::new(SigCatch)),
    },
];

pub type Handler = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);

/// Serialises handler changes: handlers are process-wide, and a guard restoring the previous
/// disposition while another thread still sends that signal would kill the process.
static HANDLERS: Mutex<()> = Mutex::new(());

/// Installs a handler and restores the previous disposition on drop.
pub struct HandlerGuard {
    signal: libc::c_int,
    old: libc::sigaction,
    _lock: MutexGuard<'static, ()>,
}

impl HandlerGuard {
    pub fn install(signal: libc::c_int, handler: Handler) -> anyhow::Result<Self> {
        let lock = HANDLERS.lock().unwrap_or_else(|e| e.into_inner());
        let act = sigaction_for(handler);
        // SAFETY: all-zero is a valid sigaction to receive the old disposition.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: `act` and `old` are valid; the handler only touches atomics (and mprotect).
        if unsafe { libc::sigaction(signal, &act, &mut old) } != 0 {
            anyhow::bail!("sigaction({signal}): {}", std::io::Error::last_os_error());
        }
        Ok(HandlerGuard {
            signal,
            old,
            _lock: lock,
        })
    }
}

impl Drop for HandlerGuard {
    fn drop(&mut self) {
        // SAFETY: restores the disposition sigaction returned.
        unsafe { libc::sigaction(self.signal, &self.old, std::ptr::null_mut()) };
    }
}

fn sigaction_for(handler: Handler) -> libc::sigaction {
    // SAFETY: all-zero is a valid sigaction (empty mask, no flags).
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = handler as usize;
    act.sa_flags = libc::SA_SIGINFO;
    act
}

static CAUGHT: AtomicU64 = AtomicU64::new(0);

extern "C" fn count_signal(_: libc::c_int, _: *mut libc::siginfo_t, _: *mut libc::c_void) {
    CAUGHT.fetch_add(1, Ordering::Relaxed);
}

/// Sends `signal` to the calling thread, not the process: with a process-directed kill() the
/// kernel may deliver the signal to another thread, asynchronously to the timed loop.
fn signal_self(signal: libc::c_int) -> std::io::Result<()> {
    // SAFETY: tgkill to our own thread; the signal is 0 or has a handler installed.
    let r = unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), libc::gettid(), signal) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn time_signals(signal: libc::c_int, ops: u64) -> anyhow::Result<Duration> {
    let start = Instant::now();
    for _ in 0..ops {
        signal_self(signal)?;
    }
    Ok(start.elapsed())
}

/// Time of `ops` signal deliveries to an empty handler, minus as many tgkill(self, 0) calls:
/// lmbench's "sig hndl". `prot_fault` subtracts it as the handler cost.
pub fn signal_delivery_time(ops: u64) -> anyhow::Result<Duration> {
    let _guard = HandlerGuard::install(libc::SIGUSR1, count_signal)?;
    let before = CAUGHT.load(Ordering::Relaxed);
    let caught = time_signals(libc::SIGUSR1, ops)?;
    let delivered = CAUGHT.load(Ordering::Relaxed) - before;
    anyhow::ensure!(delivered == ops, "{delivered} of {ops} signals were caught");
    let sent_only = crate::workloads::tracking_window::untracked(|| time_signals(0, ops))?;
    Ok(caught.saturating_sub(sent_only))
}

struct SigInstall;

impl Workload for SigInstall {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        // Installs onto SIGUSR2, so sig_catch's SIGUSR1 handler is never disturbed.
        let _guard = HandlerGuard::install(libc::SIGUSR2, count_signal)?;
        let act = sigaction_for(count_signal);
        // SAFETY: all-zero is a valid sigaction out-buffer.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: valid sigaction structs; the handler is async-signal-safe.
            if unsafe { libc::sigaction(libc::SIGUSR2, &act, &mut old) } != 0 {
                anyhow::bail!("sigaction: {}", std::io::Error::last_os_error());
            }
        }
        Ok(start.elapsed())
    }
}

struct SigCatch;

impl Workload for SigCatch {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        signal_delivery_time(ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::run_and_drop;

    #[test]
    fn signals_are_installed_and_caught() {
        run_and_drop("sig_install", 100);
        // signal_delivery_time() fails unless every signal reached the handler.
        let t = run_and_drop("sig_catch", 100);
        assert!(
            t > Duration::ZERO,
            "catching cost nothing over kill(self, 0)"
        );
        // The previous disposition (default: terminate) is back.
        // SAFETY: queries only.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        let _lock = HANDLERS.lock();
        unsafe { libc::sigaction(libc::SIGUSR1, std::ptr::null(), &mut old) };
        assert_eq!(old.sa_sigaction, libc::SIG_DFL);
    }
}
