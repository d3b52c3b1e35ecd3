//! Reading the per-CPU counters: a snapshot sums every CPU's copy; the difference of two
//! snapshots is what happened between them.
use aya::{
    maps::{MapData, PerCpuArray},
    Ebpf,
};
use profiler_common::{event, Tally, HIST_BUCKETS, MAX_SYSCALLS};

#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// Indexed by syscall number.
    pub syscalls: Vec<Tally>,
    /// Indexed by hook slot (only the slots in use are read).
    pub hooks: Vec<Tally>,
    /// Indexed by `profiler_common::event`.
    pub events: Vec<u64>,
}

impl Snapshot {
    pub fn read(ebpf: &Ebpf, hook_slots: u32) -> anyhow::Result<Snapshot> {
        Ok(Snapshot {
            syscalls: read_tallies(ebpf, "SYSCALLS", MAX_SYSCALLS)?,
            hooks: read_tallies(ebpf, "HOOKS", hook_slots)?,
            events: read_counters(ebpf, "EVENTS", event::COUNT)?,
        })
    }

    /// What happened since `earlier`.
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        Snapshot {
            syscalls: zip_tallies(&self.syscalls, &earlier.syscalls),
            hooks: zip_tallies(&self.hooks, &earlier.hooks),
            events: self
                .events
                .iter()
                .zip(&earlier.events)
                .map(|(a, b)| a - b)
                .collect(),
        }
    }
}

/// One probed sample's counters as the run keeps them until its attribution: only the paths
/// that moved. Each sample is kept for the whole run (per-sample rows need it), and a whole
/// snapshot is 512 syscalls' and every hook slot's tallies, 296 bytes each: ~150 KB a sample,
/// which grew the profiler by 296 KB every workload-round of two samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    /// (syscall number, tally), ascending, none of them zero.
    syscalls: Vec<(usize, Tally)>,
    /// (hook slot, tally), ascending, none of them zero.
    hooks: Vec<(usize, Tally)>,
    /// Indexed by `profiler_common::event`.
    pub events: Vec<u64>,
}

impl Delta {
    /// Syscall `nr`'s tally (zero when it did not move).
    pub fn syscall(&self, nr: usize) -> &Tally {
        find(&self.syscalls, nr)
    }

    /// Hook slot `slot`'s tally (zero when it did not move).
    pub fn hook(&self, slot: usize) -> &Tally {
        find(&self.hooks, slot)
    }

    /// The numbers of the syscalls that moved, ascending.
    pub fn syscalls_moved(&self) -> impl Iterator<Item = usize> + '_ {
        self.syscalls.iter().map(|&(nr, _)| nr)
    }
}

impl From<Snapshot> for Delta {
    fn from(s: Snapshot) -> Delta {
        Delta {
            syscalls: moved(s.syscalls),
            hooks: moved(s.hooks),
            events: s.events,
        }
    }
}

fn moved(tallies: Vec<Tally>) -> Vec<(usize, Tally)> {
    tallies
        .into_iter()
        .enumerate()
        .filter(|(_, t)| *t != Tally::ZERO)
        .collect()
}

fn find(tallies: &[(usize, Tally)], index: usize) -> &Tally {
    tallies
        .binary_search_by_key(&index, |&(i, _)| i)
        .map_or(&Tally::ZERO, |at| &tallies[at].1)
}

fn zip_tallies(now: &[Tally], earlier: &[Tally]) -> Vec<Tally> {
    now.iter()
        .zip(earlier)
        .map(|(a, b)| tally_since(a, b))
        .collect()
}

pub fn tally_since(now: &Tally, earlier: &Tally) -> Tally {
    let mut hist = [0; HIST_BUCKETS];
    for (i, h) in hist.iter_mut().enumerate() {
        *h = now.hist[i] - earlier.hist[i];
    }
    Tally {
        calls: now.calls - earlier.calls,
        timed: now.timed - earlier.timed,
        total_ns: now.total_ns - earlier.total_ns,
        nested: now.nested - earlier.nested,
        off_cpu_ns: now.off_cpu_ns - earlier.off_cpu_ns,
        hist,
    }
}

pub fn tally_sum(a: &Tally, b: &Tally) -> Tally {
    let mut hist = a.hist;
    for (h, x) in hist.iter_mut().zip(b.hist) {
        *h += x;
    }
    Tally {
        calls: a.calls + b.calls,
        timed: a.timed + b.timed,
        total_ns: a.total_ns + b.total_ns,
        nested: a.nested + b.nested,
        off_cpu_ns: a.off_cpu_ns + b.off_cpu_ns,
        hist,
    }
}

fn map<'a>(ebpf: &'a Ebpf, name: &str) -> anyhow::Result<&'a aya::maps::Map> {
    ebpf.map(name)
        .ok_or_else(|| anyhow::anyhow!("the eBPF object has no map {name}"))
}

fn read_tallies(ebpf: &Ebpf, name: &str, len: u32) -> anyhow::Result<Vec<Tally>> {
    let array: PerCpuArray<&MapData, Tally> = PerCpuArray::try_from(map(ebpf, name)?)?;
    (0..len)
        .map(|i| {
            Ok(array
                .get(&i, 0)?
                .iter()
                .fold(Tally::ZERO, |acc, t| tally_sum(&acc, t)))
        })
        .collect()
}

fn read_counters(ebpf: &Ebpf, name: &str, len: u32) -> anyhow::Result<Vec<u64>> {
    let array: PerCpuArray<&MapData, u64> = PerCpuArray::try_from(map(ebpf, name)?)?;
    (0..len)
        .map(|i| Ok(array.get(&i, 0)?.iter().sum()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(calls: u64, timed: u64, total_ns: u64) -> Tally {
        let mut t = Tally {
            calls,
            timed,
            total_ns,
            ..Tally::ZERO
        };
        t.hist[3] = timed;
        t
    }

    #[test]
    fn since_subtracts_every_field() {
        let d = tally_since(&tally(10, 9, 900), &tally(4, 4, 100));
        assert_eq!((d.calls, d.timed, d.total_ns, d.hist[3]), (6, 5, 800, 5));
    }

    #[test]
    fn a_delta_keeps_only_what_moved_and_reads_zero_elsewhere() {
        let mut syscalls = vec![Tally::ZERO; MAX_SYSCALLS as usize];
        syscalls[110] = tally(3, 3, 300);
        // Exits only (entries before the sample began) still moved.
        syscalls[0] = tally(0, 1, 50);
        let hooks = vec![Tally::ZERO, tally(1, 1, 10)];
        let delta = Delta::from(Snapshot {
            syscalls,
            hooks,
            events: vec![7],
        });
        assert_eq!(delta.syscalls_moved().collect::<Vec<_>>(), vec![0, 110]);
        assert_eq!(delta.syscall(110), &tally(3, 3, 300));
        assert_eq!(delta.syscall(0), &tally(0, 1, 50));
        assert_eq!(delta.syscall(111), &Tally::ZERO);
        assert_eq!(
            (delta.hook(0), delta.hook(1)),
            (&Tally::ZERO, &tally(1, 1, 10))
        );
        assert_eq!(delta.hook(300), &Tally::ZERO);
        assert_eq!(delta.events, vec![7]);
    }

    #[test]
    fn sum_adds_every_field() {
        let s = tally_sum(&tally(1, 1, 10), &tally(2, 1, 5));
        assert_eq!((s.calls, s.timed, s.total_ns, s.hist[3]), (3, 2, 15, 2));
    }
}
