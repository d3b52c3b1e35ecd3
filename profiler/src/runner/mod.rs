//! The measured work runs in a process of its own, the runner (`serve`): `hookprof` executed
//! afresh (exec leaves the profiler's address space behind, and every BPF fd is
//! close-on-exec), so a workload that forks copies a few MB, not the profiler's parsed BTF,
//! loaded programs and BPF fds. Each workload gets fresh runners (one per `--parallel` copy),
//! which end with it, so nothing a workload left (memory, allocator state) reaches the next.
//! The profiler supervises them (`supervisor`): requests and replies over pipes, signals,
//! timeouts, progress.
mod credentials;
pub mod protocol;
pub mod serve;
mod supervisor;
mod workload;

pub use self::{
    credentials::Credentials,
    supervisor::{children_of, Supervisor},
    workload::{CopyRun, RemoteWorkload},
};

/// CLOCK_MONOTONIC in ns: the clock every process reads alike, so the runs of parallel copies
/// can be started together and laid side by side.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; the clocks used here exist on every Linux hookprof runs on.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a request came to.
pub enum Wait<T> {
    Done(T),
    /// Ctrl-C or SIGTERM came before the runner answered.
    Interrupted,
}

impl<T> Wait<T> {
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Wait<U> {
        match self {
            Wait::Done(t) => Wait::Done(f(t)),
            Wait::Interrupted => Wait::Interrupted,
        }
    }
}
