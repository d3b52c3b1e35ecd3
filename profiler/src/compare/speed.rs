//! Did the machine itself get faster or slower? A workload that never enters the kernel while
//! timed moves only with the machine: its CPU's frequency, a busy SMT sibling (on this kind of
//! 2-vCPU guest a loaded neighbour vCPU made mem_l1 1.4x slower, and every kernel row 1.5-2x),
//! the memory bandwidth the host's other guests leave (bw_mem_read fell 18% for two runs in a
//! row of an A/A series, no kernel row moved). Such a workload is a reference: when it moved
//! significantly, its change is the machine's, so it gets no verdict of its own (a kernel change
//! could reach it only through memory placement: page sizes, NUMA), and a change in the same
//! direction in the rows it stands for cannot be told from the machine's either (unless it is
//! far larger than the machine could make): those verdicts become inconclusive, and the
//! comparison says why, among its environment differences.
use super::{EnvironmentDifference, WorkloadComparison};
use crate::stats::Verdict;

/// What a reference measures of the machine, and so which rows its change can explain.
#[derive(Clone, Copy, PartialEq)]
enum Stands {
    /// The CPU's speed: every row.
    Cpu,
    /// Memory bandwidth: the bandwidth rows (copies through memory).
    MemoryBandwidth,
    /// Only itself (a cache or memory latency no kernel row is bound by).
    Itself,
}

/// Workloads whose timed loop never enters the kernel, and what each stands for.
const REFERENCES: &[(&str, Stands)] = &[
    ("mem_l1", Stands::Cpu),
    ("bw_mem_read", Stands::MemoryBandwidth),
    ("bw_mem_write", Stands::MemoryBandwidth),
    ("bw_bcopy_libc", Stands::MemoryBandwidth),
    ("bw_bcopy_hand", Stands::MemoryBandwidth),
    ("mem_l2", Stands::Itself),
    ("mem_main", Stands::Itself),
    ("mem_rand", Stands::Itself),
];

/// How much more than the reference a kernel path may move with the machine alone, as a ratio
/// of log changes: with a loaded neighbour vCPU here, mem_l1 took 1.4x as long and the syscall,
/// fault, fork and pipe rows 1.5-2.2x (up to 2.3 times the reference's log change). A change
/// beyond this is more than the machine could make, and keeps its verdict.
const KERNEL_SENSITIVITY: f64 = 3.0;

/// Applies the check to the compared workloads; an environment line for each reference that
/// moved.
pub(super) fn check(workloads: &mut [WorkloadComparison]) -> Vec<EnvironmentDifference> {
    let moved: Vec<(String, Stands, Verdict, f64)> = workloads
        .iter()
        .filter(|w| matches!(w.verdict, Verdict::Regressed | Verdict::Improved))
        .filter_map(|w| {
            let (_, stands) = REFERENCES.iter().find(|(name, _)| *name == w.name)?;
            Some((
                w.name.clone(),
                *stands,
                w.verdict,
                w.change.map_or(0.0, |c| c.relative),
            ))
        })
        .collect();
    moved
        .into_iter()
        .map(|(name, stands, verdict, change)| discount(workloads, &name, stands, verdict, change))
        .collect()
}

/// Takes the verdict from the reference `name` and from the rows it stands for that moved its
/// way by no more than the machine could; the environment line that says so.
fn discount(
    workloads: &mut [WorkloadComparison],
    name: &str,
    stands: Stands,
    moved: Verdict,
    change: f64,
) -> EnvironmentDifference {
    let worse = moved == Verdict::Regressed;
    let what = match (stands, worse) {
        (Stands::Cpu, true) => "the machine ran slower",
        (Stands::Cpu, false) => "the machine ran faster",
        (Stands::MemoryBandwidth, true) => "the machine's memory bandwidth fell",
        (Stands::MemoryBandwidth, false) => "the machine's memory bandwidth rose",
        (Stands::Itself, true) => "the machine's memory got slower",
        (Stands::Itself, false) => "the machine's memory got faster",
    };
    let note = format!(
        "{what}: {name}, which never enters the kernel, moved {:+.1}%, so a change in the same \
         direction here cannot be told from the machine's",
        100.0 * change
    );
    let stood_for = |w: &WorkloadComparison| match stands {
        Stands::Cpu => true,
        Stands::MemoryBandwidth => w.unit.higher_is_better(),
        Stands::Itself => false,
    };
    let within_machine = |w: &WorkloadComparison| {
        let c = w.change.map_or(0.0, |c| c.relative);
        (1.0 + c).ln() / (1.0 + change).ln() <= KERNEL_SENSITIVITY
    };
    // The reference's own change is the machine's, not the kernel's: no verdict on it either.
    for w in workloads
        .iter_mut()
        .filter(|w| w.name == name || (w.verdict == moved && stood_for(w) && within_machine(w)))
    {
        w.verdict = Verdict::Inconclusive;
        w.machine_speed_changed = true;
        if w.name == name {
            continue;
        }
        w.machine_state = Some(match w.machine_state.take() {
            Some(before) => format!("{note}; {before}"),
            None => note.clone(),
        });
    }
    let reference = workloads
        .iter()
        .find(|w| w.name == name)
        .expect("the reference is among the workloads");
    let unit = reference.unit.symbol();
    let rows = match stands {
        Stands::Cpu => "verdicts in the same direction",
        Stands::MemoryBandwidth => "bandwidth verdicts in the same direction",
        Stands::Itself => "its own verdict only",
    };
    EnvironmentDifference {
        field: match stands {
            Stands::Cpu => "machine speed (a loop that never enters the kernel)",
            Stands::MemoryBandwidth => "memory bandwidth (a loop that never enters the kernel)",
            Stands::Itself => "memory latency (a loop that never enters the kernel)",
        },
        old: vec![format!("{name} {:.4} {unit}", reference.old.mean)],
        new: vec![format!(
            "{:.4} {unit} ({:+.1}%: {what}; {rows}, up to {}x its change in log terms, are \
             inconclusive)",
            reference.new.mean,
            100.0 * change,
            KERNEL_SENSITIVITY
        )],
    }
}
