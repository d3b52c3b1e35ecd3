//! The measured work runs in a process of its own, the runner (`serve`): `hookprof` executed
//! afresh (exec leaves the profiler's address space behind, and every BPF fd is
//! close-on-exec), so a workload that forks copies a few MB, not the profiler's parsed BTF,
//! loaded programs and BPF fds. Each workload gets fresh runners (one per `--parallel` copy),
//! which end with it, so nothing a workload left (memory, allocator state) reaches the next.
//! The profiler supervises them (`supervisor`): requests and replies over pipes, signals,
//! timeouts, progress.
pub mod protocol;
pub mod serve;
mod supervisor;
mod workload;

pub use self::{
    supervisor::{children_of, Supervisor},
    workload::{CopyRun, RemoteWorkload},
};
pub use crate::safety::credentials::Credentials;

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
