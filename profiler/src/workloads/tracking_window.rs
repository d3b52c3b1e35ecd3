//! Which tasks the probes count: the runner's threads inside their tracking window, and
//! everything they fork while it is open. The runner says where its window is twice: with a
//! gate ioctl that the sys_enter program intercepts (it gives the thread its timing state), and
//! in its window word (`WINDOW_WORD_ADDR`), which the sampler and the fork program read where
//! no syscall program is attached (the passes for the stacks alone). Only the gate owners'
//! calls and words count (the supervisor names the runners, one per parallel copy, with
//! `Probes::set_gate_owners`).
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{ensure, Result};
use profiler_common::{GATE_CLOSE, GATE_FD, GATE_OPEN, GATE_SPAWN, WINDOW_WORD_ADDR};

thread_local! {
    /// Whether this thread's tracking window is open (so `untracked` knows what to restore).
    static WINDOW_OPEN: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The window word, once `map_window_word` has mapped its page, and the id of the thread that
/// did: the runner's one thread, whose windows it marks.
static WINDOW_WORD: std::sync::OnceLock<(&'static AtomicU32, u32)> = std::sync::OnceLock::new();

/// Maps the window word's page at its fixed address: the runner does so once as it starts,
/// before it serves (and before any seccomp policy, which may refuse mmap and gettid). A
/// process without it opens and closes its window by the ioctl alone.
pub fn map_window_word() -> Result<()> {
    let page = WINDOW_WORD_ADDR as *mut libc::c_void;
    // SAFETY: a fresh anonymous page at an address nothing else holds (NOREPLACE refuses one
    // that is taken); populated, so the probes' non-faulting reads find it present.
    let mapped = unsafe {
        libc::mmap(
            page,
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE
                | libc::MAP_ANONYMOUS
                | libc::MAP_FIXED_NOREPLACE
                | libc::MAP_POPULATE,
            -1,
            0,
        )
    };
    if mapped == libc::MAP_FAILED {
        let e = std::io::Error::last_os_error();
        anyhow::bail!("map the tracking window's word at {WINDOW_WORD_ADDR:#x}: {e}");
    }
    ensure!(
        mapped == page,
        "the tracking window's word was mapped at {mapped:p}, not at {WINDOW_WORD_ADDR:#x}"
    );
    // SAFETY: the page is this process's for its lifetime, zeroed and suitably aligned.
    let word = unsafe { &*(page as *const AtomicU32) };
    // SAFETY: gettid has no arguments and cannot fail.
    let tid = unsafe { libc::gettid() } as u32;
    ensure!(
        WINDOW_WORD.set((word, tid)).is_ok(),
        "the window word is mapped once"
    );
    Ok(())
}

/// Opens (or closes) the calling thread's tracking window. The ioctl fails with EBADF by
/// design; the sys_enter program sees it first and never counts it. The word opens after the
/// ioctl and closes before it, so a pass that reads the word alone does not sample the ioctl.
pub fn gate(open: bool) {
    WINDOW_OPEN.with(|w| w.set(open));
    if !open {
        set_word(false);
    }
    let cmd = if open { GATE_OPEN } else { GATE_CLOSE };
    // SAFETY: ioctl on an invalid fd has no effect beyond returning EBADF.
    unsafe { libc::ioctl(GATE_FD as libc::c_int, cmd as libc::c_ulong) };
    if open {
        set_word(true);
    }
}

/// Marks the mapping thread's window open (its id) or closed (0), with no syscall (a seccomp
/// policy may refuse gettid). The probes read the word only on that thread (they run in its
/// context), so program order is all they need.
fn set_word(open: bool) {
    if let Some((word, tid)) = WINDOW_WORD.get() {
        word.store(if open { *tid } else { 0 }, Ordering::Relaxed);
    }
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
