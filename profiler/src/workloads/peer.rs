//! Shared plumbing of multi-process workloads: CPU pinning, and forked peers that cannot outlive
//! the workload.
//!
//! A forked child of a multi-threaded process may only use async-signal-safe code: peers get
//! everything they need (fds, buffers) before the fork and then use only raw syscalls.
use std::io;

use super::process::wait_for;

/// Where the two ends of a two-process workload run, from `WorkloadOptions::pin`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Pinning {
    pub first: Option<usize>,
    pub second: Option<usize>,
}

impl Pinning {
    pub fn new(pin: &[usize]) -> Self {
        Pinning {
            first: pin.first().copied(),
            second: pin.get(1).or(pin.first()).copied(),
        }
    }
}

/// Pins the calling thread to `cpu` (raw syscall: safe in a forked child).
pub fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: an all-zero cpu_set_t is an empty set; CPU_SET bounds-checks against its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Pins the calling thread for the guard's lifetime and restores its previous CPU set on drop,
/// so the engine's thread is not left pinned after the workload.
pub struct PinGuard {
    saved: Option<libc::cpu_set_t>,
}

impl PinGuard {
    pub fn new(cpu: Option<usize>) -> anyhow::Result<Self> {
        let Some(cpu) = cpu else {
            return Ok(PinGuard { saved: None });
        };
        // SAFETY: all-zero is a valid cpu_set_t; the out-pointer is valid for its size.
        let mut saved: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut saved) } != 0 {
            anyhow::bail!("sched_getaffinity: {}", io::Error::last_os_error());
        }
        pin_to(cpu).map_err(|e| anyhow::anyhow!("pin to CPU {cpu}: {e}"))?;
        Ok(PinGuard { saved: Some(saved) })
    }
}

impl Drop for PinGuard {
    fn drop(&mut self) {
        if let Some(saved) = &self.saved {
            // SAFETY: `saved` is the set sched_getaffinity returned.
            unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), saved) };
        }
    }
}

/// A forked helper process. Dropping it kills and reaps it; the child also dies with SIGKILL
/// if the thread that forked it goes away (PR_SET_PDEATHSIG), so it never outlives hookprof.
#[derive(Debug)]
pub struct Peer {
    pid: libc::pid_t,
}

impl Peer {
    /// Forks a child that pins itself to `cpu`, runs `body` and exits with its return value.
    /// `body` runs in a forked child: raw syscalls only, no allocation, no locks, no panics.
    pub fn spawn(cpu: Option<usize>, mut body: impl FnMut() -> i32) -> anyhow::Result<Peer> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the child runs only raw syscalls and `body` (same contract), then _exit; it
        // never returns into the parent's Rust state, and `body` is never dropped there.
        match unsafe { libc::fork() } {
            -1 => anyhow::bail!("fork: {}", io::Error::last_os_error()),
            0 => unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // A helper that kept the profiler's BPF link fds would keep its probes
                // attached through the clean samples.
                crate::probes::close_inherited_bpf_fds();
                if libc::getppid() != parent {
                    libc::_exit(111);
                }
                if let Some(cpu) = cpu {
                    if pin_to(cpu).is_err() {
                        libc::_exit(112);
                    }
                }
                libc::_exit(body())
            },
            pid => Ok(Peer { pid }),
        }
    }

    #[cfg(test)]
    pub fn pid(&self) -> libc::pid_t {
        self.pid
    }

    #[cfg(test)]
    /// Waits for the peer to exit on its own and returns its exit code.
    pub fn wait(mut self) -> anyhow::Result<i32> {
        let pid = std::mem::replace(&mut self.pid, 0);
        wait_for(pid)
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        if self.pid > 0 {
            // SAFETY: pid is our unreaped child, so it cannot have been reused.
            unsafe { libc::kill(self.pid, libc::SIGKILL) };
            let _ = wait_for(self.pid);
        }
    }
}

/// Whether a process with this pid still exists (zombies included).
#[cfg(test)]
pub fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks for existence.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::channel::{pipe, read_exact, write_all};
    use std::os::fd::AsRawFd;

    #[test]
    fn a_peer_is_gone_after_drop() {
        let peer = Peer::spawn(None, || {
            // SAFETY: pause just sleeps until a signal.
            unsafe { libc::pause() };
            0
        })
        .unwrap();
        let pid = peer.pid();
        assert!(alive(pid));
        drop(peer);
        assert!(!alive(pid), "peer {pid} outlived its drop");
    }

    #[test]
    fn a_peer_exit_code_comes_back() {
        let (r, w) = pipe().unwrap();
        let w = w.as_raw_fd();
        let peer = Peer::spawn(None, || match write_all(w, b"x") {
            Ok(()) => 9,
            Err(_) => 1,
        })
        .unwrap();
        let mut b = [0u8];
        assert!(read_exact(r.as_raw_fd(), &mut b).unwrap());
        assert_eq!(&b, b"x");
        assert_eq!(peer.wait().unwrap(), 9);
    }
}
