//! Which tasks the probes count: the runner's threads inside their tracking window, and
//! everything they fork while it is open. The runner opens and closes its window with a gate
//! ioctl that the sys_enter program intercepts; only the gate owners' calls count (the
//! supervisor names the runners, one per parallel copy, with `Probes::set_gate_owners`).
use profiler_common::{GATE_CLOSE, GATE_FD, GATE_OPEN, GATE_SPAWN};

thread_local! {
    /// Whether this thread's tracking window is open (so `untracked` knows what to restore).
    static WINDOW_OPEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Opens (or closes) the calling thread's tracking window. The call fails with EBADF by
/// design; the sys_enter program sees it first and never counts it.
pub fn gate(open: bool) {
    WINDOW_OPEN.with(|w| w.set(open));
    let cmd = if open { GATE_OPEN } else { GATE_CLOSE };
    // SAFETY: ioctl on an invalid fd has no effect beyond returning EBADF.
    unsafe { libc::ioctl(GATE_FD as libc::c_int, cmd as libc::c_ulong) };
}

/// Runs `f` with the calling thread's tracking window open if `tracked`.
pub fn with_window<T>(tracked: bool, f: impl FnOnce() -> T) -> T {
    if !tracked {
        return f();
    }
    gate(true);
    let out = f();
    gate(false);
    out
}

/// Runs `f`, which starts a program, so that a child it forks counts from its execve on: what
/// the child does before (posix_spawn's set-up: a sigaction per signal, the dup2s) is the
/// launcher's, not the program's. The fork, the exec and the wait count, as for any program a
/// shell starts. Outside a window it just runs `f`.
pub fn spawning<T>(f: impl FnOnce() -> T) -> T {
    if !WINDOW_OPEN.with(|w| w.get()) {
        return f();
    }
    // SAFETY: ioctl on an invalid fd has no effect beyond returning EBADF.
    unsafe { libc::ioctl(GATE_FD as libc::c_int, GATE_SPAWN as libc::c_ulong) };
    let out = f();
    gate(true);
    out
}

/// Runs `f` outside the calling thread's tracking window: a workload's untimed preparation and
/// the reference loops lmbench subtracts must not be attributed to its operation. Outside a
/// window (clean samples, no probes) it just runs `f`.
pub fn untracked<T>(f: impl FnOnce() -> T) -> T {
    if !WINDOW_OPEN.with(|w| w.get()) {
        return f();
    }
    gate(false);
    let out = f();
    gate(true);
    out
}
