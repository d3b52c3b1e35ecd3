//! lmbench's "selct TCP" column: select() on 100 fds that are never ready (connected TCP sockets
//! on loopback), and the same on 100 regular-file fds (always ready).
use std::{
    fs::File,
    net::{TcpListener, TcpStream},
    os::fd::{AsRawFd, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};

/// lmbench's default `lat_select -n 100`.
const FDS: usize = 100;

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "select_tcp",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "select() on 100 connected, idle TCP sockets on loopback",
        suite: Suite::Quick,
        create: Select::create_tcp,
    },
    WorkloadSpec {
        name: "select_file",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "select() on 100 regular-file fds",
        suite: Suite::Default,
        create: Select::create_file,
    },
];

struct Select {
    /// The fds select() watches.
    watched: Vec<OwnedFd>,
    /// Kept open so the watched sockets stay connected (and idle).
    _peers: Vec<OwnedFd>,
    set: libc::fd_set,
    nfds: i32,
    /// How many fds select() must report ready: 0 for idle sockets, all for files.
    expect_ready: i32,
}

impl Select {
    fn new(watched: Vec<OwnedFd>, peers: Vec<OwnedFd>, expect_ready: i32) -> anyhow::Result<Self> {
        // SAFETY: all-zero is an empty fd_set; FD_SET is only called with fds < FD_SETSIZE.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        let mut max = 0;
        for fd in &watched {
            let fd = fd.as_raw_fd();
            anyhow::ensure!(
                (fd as usize) < libc::FD_SETSIZE,
                "fd {fd} too large for select()"
            );
            unsafe { libc::FD_SET(fd, &mut set) };
            max = max.max(fd);
        }
        Ok(Select {
            watched,
            _peers: peers,
            set,
            nfds: max + 1,
            expect_ready,
        })
    }

    fn create_tcp(_: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        let addr = listener.local_addr()?;
        let (mut watched, mut peers) = (Vec::new(), Vec::new());
        for _ in 0..FDS {
            watched.push(OwnedFd::from(TcpStream::connect(addr).context("connect")?));
            peers.push(OwnedFd::from(listener.accept().context("accept")?.0));
        }
        Ok(Box::new(Select::new(watched, peers, 0)?))
    }

    fn create_file(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let path = options.scratch_dir.join("select_file");
        std::fs::write(&path, b"hookprof\n").with_context(|| format!("{}", path.display()))?;
        let opened = (0..FDS)
            .map(|_| File::open(&path).map(OwnedFd::from))
            .collect::<Result<Vec<_>, _>>();
        // The open fds keep the file alive; nothing is left behind, even if an open failed.
        std::fs::remove_file(&path)?;
        let watched = opened?;
        Ok(Box::new(Select::new(watched, Vec::new(), FDS as i32)?))
    }
}

impl Workload for Select {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            let mut set = self.set;
            let mut timeout = libc::timeval {
                tv_sec: 0,
                tv_usec: 0,
            };
            // SAFETY: `set` and `timeout` are valid for the call; nfds covers only our fds.
            let ready = unsafe {
                libc::select(
                    self.nfds,
                    &mut set,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    &mut timeout,
                )
            };
            if ready != self.expect_ready {
                anyhow::bail!(
                    "select() on {} fds returned {ready}, expected {}: {}",
                    self.watched.len(),
                    self.expect_ready,
                    std::io::Error::last_os_error()
                );
            }
        }
        Ok(start.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use crate::workloads::tests::run_and_drop;

    #[test]
    fn select_sees_idle_sockets_and_ready_files() {
        // run() fails unless select() reports 0 ready sockets and 100 ready files.
        run_and_drop("select_tcp", 10);
        run_and_drop("select_file", 10);
    }
}
