//! How busy the rest of the machine was while a run measured: the CPU time everything but the
//! run used, and the time a hypervisor gave this machine's CPUs to someone else (steal), as
//! shares of all its CPUs' time. A task sharing the run's CPU stretches every op it overlaps
//! (a spinner beside the inject tests' runs: up to 1.8x), so a comparison lists a different
//! load among the environment differences, before any verdict. With the run's CPU to itself
//! (`bench/quiet-cpu1.sh`), a spinner or a memory-touching loop on the other CPU moved
//! null_call, exec_proc and mem_l1 by no more than run-to-run noise here.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What the rest of the machine did over a run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MachineLoad {
    /// CPU time (user and system) spent by everything but the run's own processes, % of all
    /// CPUs' time.
    pub others_busy_percent: f64,
    /// Time the hypervisor ran something else on this machine's CPUs, % of all CPUs' time.
    pub steal_percent: f64,
}

impl MachineLoad {
    /// The rest of the machine was idle and the hypervisor took next to nothing.
    pub fn quiet(&self) -> bool {
        self.others_busy_percent < 25.0 && self.steal_percent < 5.0
    }

    /// A coarse class, so that two runs differ only when the load did by a lot: what
    /// `compare` lists as an environment difference.
    pub fn class(&self) -> String {
        let others = match self.others_busy_percent {
            p if p < 25.0 => "the rest of the machine idle (under 25% of its CPU time)",
            p if p < 75.0 => "the rest of the machine busy (25-75% of its CPU time)",
            _ => "the rest of the machine saturated (over 75% of its CPU time)",
        };
        if self.steal_percent >= 5.0 {
            format!("{others}, the hypervisor taking 5% or more")
        } else {
            others.to_string()
        }
    }
}

/// The fewest ticks of all CPUs' time a load is told from: half a second of a 2-CPU machine.
const MIN_TICKS: u64 = 100;

/// The machine's CPU time counters and the run's own CPU time at one moment, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// user + nice + system over all CPUs.
    busy: u64,
    steal: u64,
    /// Every state of every CPU: the time that passed, times the CPUs.
    total: u64,
    /// This process's and its reaped children's user + system time.
    own: u64,
}

impl Snapshot {
    /// Now, or None where /proc/stat cannot be read.
    pub fn now() -> Option<Snapshot> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let mut snapshot = from_proc_stat(&stat)?;
        snapshot.own = own_ticks();
        Some(snapshot)
    }

    /// The load between `self` and a later snapshot; None when too little time passed to
    /// tell (the counters tick 100 times a second a CPU).
    pub fn until(&self, end: &Snapshot) -> Option<MachineLoad> {
        let total = end
            .total
            .checked_sub(self.total)
            .filter(|&t| t >= MIN_TICKS)? as f64;
        let busy = end.busy.saturating_sub(self.busy);
        let own = end.own.saturating_sub(self.own);
        Some(MachineLoad {
            others_busy_percent: 100.0 * busy.saturating_sub(own) as f64 / total,
            steal_percent: 100.0 * end.steal.saturating_sub(self.steal) as f64 / total,
        })
    }
}

/// The counters of /proc/stat's first line (`cpu  user nice system idle iowait irq softirq
/// steal ...`, proc(5)); the run's own time is left at 0.
fn from_proc_stat(stat: &str) -> Option<Snapshot> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // guest and guest_nice (after steal) are already inside user and nice.
    let [user, nice, system, _idle, _iowait, _irq, _softirq, steal, ..] = ticks[..] else {
        return None;
    };
    Some(Snapshot {
        busy: user + nice + system,
        steal,
        total: ticks.iter().take(8).sum(),
        own: 0,
    })
}

/// This process's and its reaped children's user + system time, in clock ticks.
fn own_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let seconds = |who| {
        // SAFETY: an all-zero rusage is valid, and getrusage fills it.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(who, &mut usage) };
        let time = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        time(usage.ru_utime) + time(usage.ru_stime)
    };
    ((seconds(libc::RUSAGE_SELF) + seconds(libc::RUSAGE_CHILDREN)) * per_second) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_of_the_machine_is_what_was_busy_beyond_the_run() {
        let start = from_proc_stat("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\n").unwrap();
        let mut end = from_proc_stat("cpu  400 0 150 900 10 0 0 40 0 0\n").unwrap();
        assert_eq!((start.busy, start.steal, start.total), (150, 40, 1000));
        // 500 ticks passed, 400 of them busy, 100 of those the run's own.
        end.own = 100;
        let load = start.until(&end).unwrap();
        assert_eq!(load.others_busy_percent, 60.0);
        assert_eq!(load.steal_percent, 0.0);
        assert!(load.class().contains("busy (25-75%"), "{}", load.class());
        assert!(start.until(&start).is_none(), "no time passed");
        let brief = from_proc_stat("cpu  100 0 50 850 10 0 0 40 0 0\n").unwrap();
        assert!(start.until(&brief).is_none(), "50 ticks tell nothing");
    }

    #[test]
    fn steal_is_said_and_a_malformed_line_is_none() {
        let start = from_proc_stat("cpu  0 0 0 0 0 0 0 0\n").unwrap();
        let end = from_proc_stat("cpu  100 0 0 800 0 0 0 100\n").unwrap();
        let load = start.until(&end).unwrap();
        assert_eq!((load.others_busy_percent, load.steal_percent), (10.0, 10.0));
        assert!(load.class().contains("idle") && load.class().contains("hypervisor"));
        assert!(from_proc_stat("cpu  1 2 x 4 5 6 7 8\n").is_none());
        assert!(from_proc_stat("cpu  1 2 3\n").is_none());
        assert!(from_proc_stat("intr 1 2 3\n").is_none());
    }
}
