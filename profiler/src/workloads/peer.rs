//! Shared plumbing of multi-process workloads: CPU pinning, and forked peers that cannot outlive
//! the workload.
//!
//! A forked child of a multi-threaded process may only use async-signal-safe code: peers get
//! everything they need (fds, buffers) before the fork and then use only raw syscalls.
use std::io;
use std::time::{Duration, Instant};

use super::process::wait_for;

/// How long a peer may stay busy after an op before the run fails.
const IDLE_WAIT: Duration = Duration::from_secs(10);

/// Where the second end of a two-process workload runs, from `WorkloadSetup::pin`: its second
/// CPU, or the first when only one is given. The first end is the runner, which pins itself
/// before it creates the workload.
pub fn second_cpu(pin: &[usize]) -> Option<usize> {
    pin.get(1).or(pin.first()).copied()
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

    /// Waits until the peer sleeps again, which in every peer's loop means it is blocked
    /// waiting for the next op's request: the syscalls that close this op (a server's read of
    /// the next request) have then been entered while the probes are still attached, and none
    /// of the next op's is. A peer that has died is left for the next run to notice.
    pub fn wait_until_idle(&self) -> anyhow::Result<()> {
        let path = format!("/proc/{}/stat", self.pid);
        let deadline = Instant::now() + IDLE_WAIT;
        loop {
            let stat = match std::fs::read_to_string(&path) {
                Ok(stat) => stat,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(anyhow::Error::new(e).context(format!("read {path}"))),
            };
            // "pid (comm) S ...": the state follows the last ')', as comm may hold one.
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next());
            if matches!(state, Some('S' | 'Z' | 'X')) {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "helper process {} still busy (state {state:?}) {} s after the op",
                self.pid,
                IDLE_WAIT.as_secs()
            );
            // Sleeping, not spinning: the peer may share this CPU (--pin with one CPU).
            std::thread::sleep(Duration::from_micros(20));
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

    /// The peer answers a request, then works ~20 ms more before it blocks for the next one:
    /// waiting for it to be idle must wait out that work (its "done" byte is there after).
    #[test]
    fn waiting_for_idle_waits_out_the_work_after_an_answer() {
        let (req_r, req_w) = pipe().unwrap();
        let (ans_r, ans_w) = pipe().unwrap();
        let (done_r, done_w) = pipe().unwrap();
        let (rx, ans, done) = (req_r.as_raw_fd(), ans_w.as_raw_fd(), done_w.as_raw_fd());
        let peer = Peer::spawn(None, || {
            let mut b = [0u8];
            while let Ok(true) = read_exact(rx, &mut b) {
                let _ = write_all(ans, &b);
                // A busy loop on clock reads: no allocation, safe in a forked child.
                let end = Instant::now() + Duration::from_millis(20);
                while Instant::now() < end {}
                let _ = write_all(done, &b);
            }
            0
        })
        .unwrap();
        for round in 0..3u8 {
            write_all(req_w.as_raw_fd(), &[round]).unwrap();
            let mut b = [0u8];
            assert!(read_exact(ans_r.as_raw_fd(), &mut b).unwrap());
            peer.wait_until_idle().unwrap();
            // SAFETY: a non-blocking poll of our own pipe.
            let mut pfd = libc::pollfd {
                fd: done_r.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 1, "round {round}");
            assert!(read_exact(done_r.as_raw_fd(), &mut b).unwrap());
        }
        drop(peer);
    }
}
