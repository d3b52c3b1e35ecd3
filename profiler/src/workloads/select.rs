//! lmbench's "selct TCP" and "100fd selct" columns (lat_select -n 100 tcp|file): one fd, a
//! connected TCP socket on loopback or a regular file, dup'd 100 times into a write set, and
//! select(100, NULL, &set, NULL, {0, 0}) on it. lmbench passes nfds = 100, not the highest fd
//! plus one, so only the dups below fd 100 are polled; both kinds are always writable, so
//! select() finds every one of them ready.
use std::{
    fs::File,
    net::{TcpListener, TcpStream},
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};

/// lmbench's `lat_select -n 100`: the dup count and select()'s nfds.
const FDS: usize = 100;

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "select_tcp",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "select(100) for writing on 100 dups of a connected TCP socket on loopback \
                      (the dups below fd 100 are polled)",
        suite: Suite::Quick,
        create: Select::create_tcp,
    },
    WorkloadSpec {
        name: "select_file",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "select(100) for writing on 100 dups of a regular-file fd (the dups below \
                      fd 100 are polled)",
        suite: Suite::Default,
        create: Select::create_file,
    },
];

struct Select {
    /// The dups select() watches (the ones below FDS).
    _dups: Vec<OwnedFd>,
    /// Kept open so a watched socket stays connected.
    _peer: Option<OwnedFd>,
    set: libc::fd_set,
    /// How many fds select() must report ready: the dups below FDS.
    polled: i32,
}

impl Select {
    /// Dups `fd` FDS times (lowest free fd each time, as dup(2)) and closes it.
    fn new(fd: OwnedFd, peer: Option<OwnedFd>) -> anyhow::Result<Self> {
        let mut dups = Vec::with_capacity(FDS);
        for _ in 0..FDS {
            // SAFETY: dup of an fd we own; the new fd is owned by the OwnedFd.
            let dup = unsafe { libc::dup(fd.as_raw_fd()) };
            anyhow::ensure!(dup >= 0, "dup: {}", std::io::Error::last_os_error());
            dups.push(unsafe { OwnedFd::from_raw_fd(dup) });
        }
        drop(fd);
        // SAFETY: all-zero is an empty fd_set; FD_SET is only called with fds < FDS.
        let mut set: libc::fd_set = unsafe { std::mem::zeroed() };
        let mut polled = 0;
        for fd in dups
            .iter()
            .map(AsRawFd::as_raw_fd)
            .filter(|&fd| fd < FDS as i32)
        {
            unsafe { libc::FD_SET(fd, &mut set) };
            polled += 1;
        }
        anyhow::ensure!(
            polled > 0,
            "no fd below {FDS} is free for select(): too many files open"
        );
        Ok(Select {
            _dups: dups,
            _peer: peer,
            set,
            polled,
        })
    }

    fn create_tcp(_: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind 127.0.0.1")?;
        let socket = TcpStream::connect(listener.local_addr()?).context("connect")?;
        let peer = listener.accept().context("accept")?.0;
        Ok(Box::new(Select::new(socket.into(), Some(peer.into()))?))
    }

    fn create_file(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let path = options.scratch_dir.join("select_file");
        std::fs::write(&path, b"hookprof\n").with_context(|| format!("{}", path.display()))?;
        let opened = File::open(&path);
        // The open fd keeps the file alive; nothing is left behind, even if the open failed.
        std::fs::remove_file(&path)?;
        Ok(Box::new(Select::new(opened?.into(), None)?))
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
            // SAFETY: `set` and `timeout` are valid for the call; the set holds only our fds.
            let ready = unsafe {
                libc::select(
                    FDS as i32,
                    std::ptr::null_mut(),
                    &mut set,
                    std::ptr::null_mut(),
                    &mut timeout,
                )
            };
            if ready != self.polled {
                anyhow::bail!(
                    "select() on {} fds returned {ready}, expected all writable: {}",
                    self.polled,
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
    fn select_finds_every_polled_socket_and_file_writable() {
        // run() fails unless select() reports every dup below fd 100 ready for writing.
        run_and_drop("select_tcp", 10);
        run_and_drop("select_file", 10);
    }
}
