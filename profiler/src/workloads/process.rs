//! lmbench's process-creation columns: fork, exec and sh proc.
use std::time::{Duration, Instant};

use super::{Family, Metric, Suite, Workload, WorkloadSpec};

pub static SPECS: &[WorkloadSpec] = &[WorkloadSpec {
    name: "fork_proc",
    family: Family::Processes,
    metric: Metric::LatencyUs,
    description: "fork() + child _exit() + waitpid()",
    suite: Suite::Quick,
    create: |_| Ok(Box::new(ForkProc)),
}];

/// Forks a child that exits at once and reaps it; the child's exit status proves it ran.
pub(crate) fn fork_and_reap(child: impl FnOnce() -> i32) -> anyhow::Result<i32> {
    // SAFETY: the child only calls async-signal-safe code (the closure must keep to that) and
    // leaves with _exit, never returning into the parent's Rust state.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => anyhow::bail!("fork: {}", std::io::Error::last_os_error()),
        0 => unsafe { libc::_exit(child()) },
        pid => wait_for(pid),
    }
}

/// Waits for `pid` and returns its exit code (an error if it was killed by a signal).
pub(crate) fn wait_for(pid: libc::pid_t) -> anyhow::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            anyhow::bail!("waitpid({pid}): {err}");
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else {
        anyhow::bail!("child {pid} ended by signal {}", libc::WTERMSIG(status))
    }
}

struct ForkProc;

impl Workload for ForkProc {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            let code = fork_and_reap(|| 7)?;
            anyhow::ensure!(code == 7, "fork_proc child exited with {code}, expected 7");
        }
        Ok(start.elapsed())
    }
}
