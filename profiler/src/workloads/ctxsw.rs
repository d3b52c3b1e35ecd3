//! lmbench's "Context switching" table (lat_ctx): a token passed around a ring of N processes
//! over pipes, each summing its own K KB working set per hop. The time per hop minus the time of
//! the same hop in one process (write and read its own pipe, sum its data) is the switch time.
use std::{
    os::fd::{AsRawFd, OwnedFd, RawFd},
    time::{Duration, Instant},
};

use super::{
    channel::{pipe, read_exact, write_all},
    net_time,
    peer::{second_cpu, Peer},
    sum_words, Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec,
};
use crate::workloads::tracking_window::untracked;

macro_rules! ring {
    ($name:literal, $procs:literal, $kb:literal, $suite:expr) => {
        WorkloadSpec {
            name: $name,
            family: Family::ContextSwitch,
            metric: Metric::LatencyUs,
            description: concat!(
                "context switch in a ring of ",
                $procs,
                " processes, each summing ",
                $kb,
                " KB per switch"
            ),
            suite: $suite,
            create: |o| TokenRing::create(o, $procs, $kb),
        }
    };
}

pub static SPECS: &[WorkloadSpec] = &[
    ring!("ctx_2p_0k", 2, 0, Suite::Quick),
    ring!("ctx_2p_16k", 2, 16, Suite::Default),
    ring!("ctx_2p_64k", 2, 64, Suite::Default),
    ring!("ctx_8p_16k", 8, 16, Suite::Default),
    ring!("ctx_8p_64k", 8, 64, Suite::Default),
    ring!("ctx_16p_16k", 16, 16, Suite::Default),
    ring!("ctx_16p_64k", 16, 64, Suite::Default),
];

/// Ring member i (>= 1): token in from pipe i-1, sum its own working set, token out on pipe i.
/// Runs in a forked child: maps and fills its own memory (so no page is shared with the other
/// members), closes the pipe ends it does not use (so one member's death unblocks the ring with
/// EOF instead of hanging it), and uses raw syscalls only.
fn member(rx: RawFd, tx: RawFd, all: &[RawFd], words: usize) -> i32 {
    for &fd in all.iter().filter(|&&fd| fd != rx && fd != tx) {
        // SAFETY: the child's copies of pipe fds it does not use.
        unsafe { libc::close(fd) };
    }
    let mut ws: *mut u64 = std::ptr::null_mut();
    if words > 0 {
        // SAFETY: a fresh private anonymous mapping, filled before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                words * 8,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return 3;
        }
        ws = p.cast();
        for i in 0..words {
            // SAFETY: within the mapping.
            unsafe { ws.add(i).write_volatile(i as u64) };
        }
    }
    let mut token = [0u8; 4];
    loop {
        match read_exact(rx, &mut token) {
            Ok(true) => {}
            Ok(false) => return 0,
            Err(_) => return 1,
        }
        std::hint::black_box(sum_words(ws, words));
        if write_all(tx, &token).is_err() {
            return 1;
        }
    }
}

struct TokenRing {
    procs: usize,
    /// The parent is ring member 0: it writes pipe 0 and reads pipe N-1.
    to_next: OwnedFd,
    from_last: OwnedFd,
    /// The single-process reference: a pipe to itself.
    loop_rx: OwnedFd,
    loop_tx: OwnedFd,
    working_set: Vec<u64>,
    members: Vec<Peer>,
}

impl TokenRing {
    fn create(
        options: &WorkloadOptions,
        procs: usize,
        kb: usize,
    ) -> anyhow::Result<Box<dyn Workload>> {
        let words = kb * 1024 / 8;
        // Pipe i carries the token from member i to member i+1 (mod procs).
        let pipes = (0..procs)
            .map(|_| pipe())
            .collect::<anyhow::Result<Vec<_>>>()?;
        let all: Vec<RawFd> = pipes
            .iter()
            .flat_map(|(r, w)| [r.as_raw_fd(), w.as_raw_fd()])
            .collect();
        let second = second_cpu(&options.setup.pin);
        let mut members = Vec::with_capacity(procs - 1);
        for i in 1..procs {
            let (rx, tx) = (pipes[i - 1].0.as_raw_fd(), pipes[i].1.as_raw_fd());
            members.push(Peer::spawn(second, || member(rx, tx, &all, words))?);
        }
        let mut pipes = pipes.into_iter();
        let to_next = pipes.next().expect("procs >= 2").1;
        let from_last = pipes.next_back().expect("procs >= 2").0;
        let (loop_rx, loop_tx) = pipe()?;
        Ok(Box::new(TokenRing {
            procs,
            to_next,
            from_last,
            loop_rx,
            loop_tx,
            working_set: (0..words as u64).collect(),
            members,
        }))
    }

    fn hop_alone(&self, token: &mut [u8; 4]) -> anyhow::Result<()> {
        std::hint::black_box(sum_words(self.working_set.as_ptr(), self.working_set.len()));
        write_all(self.loop_tx.as_raw_fd(), token)?;
        read_exact(self.loop_rx.as_raw_fd(), token)?;
        Ok(())
    }
}

impl Workload for TokenRing {
    fn settle(&mut self) -> anyhow::Result<()> {
        self.members.iter().try_for_each(Peer::wait_until_idle)
    }

    /// One round passes the token once around: `procs` switches.
    fn ops_per_round(&self) -> u64 {
        self.procs as u64
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        // A partial round still goes all the way round (the engine asks for whole rounds).
        let rounds = ops.div_ceil(self.procs as u64).max(1);
        let hops = rounds * self.procs as u64;
        let start = Instant::now();
        for round in 0..rounds {
            let sent = (round as u32).to_ne_bytes();
            std::hint::black_box(sum_words(self.working_set.as_ptr(), self.working_set.len()));
            write_all(self.to_next.as_raw_fd(), &sent)?;
            let mut token = [0u8; 4];
            anyhow::ensure!(
                read_exact(self.from_last.as_raw_fd(), &mut token)?,
                "a ring member died"
            );
            anyhow::ensure!(token == sent, "sent token {sent:?}, got {token:?} back");
        }
        let ring = start.elapsed();

        // The same hops without switching: what lmbench subtracts as overhead.
        let alone = untracked(|| -> anyhow::Result<Duration> {
            let mut token = [0u8; 4];
            let start = Instant::now();
            for _ in 0..hops {
                self.hop_alone(&mut token)?;
            }
            Ok(start.elapsed())
        })?;
        Ok(net_time(ring, alone, hops, ops))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{my_children, options};

    #[test]
    fn the_token_goes_round_every_ring() {
        let dir = tempfile::tempdir().unwrap();
        for spec in SPECS {
            let mut w = (spec.create)(&options(dir.path())).unwrap();
            let procs: usize = spec.name[4..].split('p').next().unwrap().parse().unwrap();
            assert_eq!(my_children().len(), procs - 1, "{}", spec.name);
            // run() fails unless every token comes back unchanged.
            w.run(20).unwrap();
            drop(w);
            assert!(my_children().is_empty(), "{} left children", spec.name);
        }
    }

    #[test]
    fn a_dead_member_breaks_the_ring_instead_of_hanging_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = TokenRing::create(&options(dir.path()), 3, 0).unwrap();
        let child: i32 = my_children()[0].parse().unwrap();
        // SAFETY: our own child.
        unsafe { libc::kill(child, libc::SIGKILL) };
        assert!(w.run(3).is_err());
    }
}
