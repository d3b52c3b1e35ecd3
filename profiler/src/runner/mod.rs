//! The measured work runs in a process of its own, the runner (`serve`): `hookprof` executed
//! again before the profiler parses BTF or loads probes, so a workload that forks copies a
//! few MB, not the profiler's address space and BPF fds. The profiler supervises it
//! (`supervisor`): requests and replies over a pipe, signals, timeouts, progress.
mod credentials;
pub mod protocol;
pub mod serve;
mod supervisor;
mod workload;

pub use self::{
    credentials::Credentials,
    supervisor::{children_of, Supervisor},
    workload::{RemoteWorkload, WorkloadSetup},
};

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
