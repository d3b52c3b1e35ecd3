//! Did the machine itself get faster or slower? A workload that never enters the kernel while
//! timed moves only with the machine: its CPU's frequency, a busy SMT sibling (on this kind of
//! 2-vCPU guest a loaded neighbour vCPU made mem_l1 1.4x slower, and every kernel row 1.5-2x),
//! the memory bandwidth the host's other guests leave (bw_mem_read fell 18% for two runs in a
//! row of an A/A series, no kernel row moved). Such a workload is a reference: its change,
//! significant or not, is the best estimate of the machine's, so a change in the same
//! direction in the rows it stands for cannot be told from the machine's unless it is larger
//! than the machine could make of it: their intervals are widened towards no change by that,
//! so only a change beyond keeps its verdict (and the interval says so). When the reference
//! moved significantly, its change is the machine's, so it gets no verdict of its own (a kernel
//! change could reach it only through memory placement: page sizes, NUMA), and the comparison
//! says why, among its environment differences.
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

/// Whether `workload` is a reference: its timed loop never enters the kernel.
pub(super) fn is_reference(workload: &str) -> bool {
    REFERENCES.iter().any(|(name, _)| *name == workload)
}

/// How much more than the reference a kernel path may move with the machine alone, as a ratio
/// of log changes: with a loaded neighbour vCPU here, mem_l1 took 1.4x as long and the syscall,
/// fault, fork and pipe rows 1.5-2.2x (up to 2.3 times the reference's log change). A change
/// beyond this is more than the machine could make, and keeps its verdict.
const KERNEL_SENSITIVITY: f64 = 3.0;

/// Applies the check to the compared workloads; an environment line for each reference that
/// moved significantly. Every reference's move counts, significant or not: it is the best
/// estimate of the machine's, and a kernel row's change its way may be up to
/// `KERNEL_SENSITIVITY` times it. (Taken only when significant, a reference whose rounds
/// disagreed, or that moved 2-3% as the syscall rows moved 16-20%, let those through as
/// regressions in an A/A series here: 3 of 17 compares.)
pub(super) fn check(workloads: &mut [WorkloadComparison]) -> Vec<EnvironmentDifference> {
    let references: Vec<Reference> = workloads
        .iter()
        .filter_map(|w| {
            let (_, stands) = REFERENCES.iter().find(|(name, _)| *name == w.name)?;
            let change = w.change?.relative;
            Some(Reference {
                name: w.name.clone(),
                stands: *stands,
                // Slower, or less bandwidth.
                worse: (change > 0.0) != w.unit.higher_is_better(),
                change,
                significant: matches!(w.verdict, Verdict::Regressed | Verdict::Improved),
            })
        })
        .collect();
    for r in &references {
        widen_rows(workloads, r);
    }
    references
        .iter()
        .filter(|r| r.significant)
        .map(|r| discount(workloads, r))
        .collect()
}

/// A reference's move.
struct Reference {
    name: String,
    stands: Stands,
    worse: bool,
    change: f64,
    /// Called regressed or improved on its own interval.
    significant: bool,
}

impl Reference {
    /// What its move says of the machine.
    fn what(&self) -> &'static str {
        match (self.stands, self.worse, self.significant) {
            (Stands::Cpu, true, true) => "the machine ran slower",
            (Stands::Cpu, false, true) => "the machine ran faster",
            (Stands::Cpu, true, false) => "the machine may have run slower",
            (Stands::Cpu, false, false) => "the machine may have run faster",
            (Stands::MemoryBandwidth, true, _) => "the machine's memory bandwidth fell",
            (Stands::MemoryBandwidth, false, _) => "the machine's memory bandwidth rose",
            (Stands::Itself, true, _) => "the machine's memory got slower",
            (Stands::Itself, false, _) => "the machine's memory got faster",
        }
    }

    fn stands_for(&self, w: &WorkloadComparison) -> bool {
        w.name != self.name
            && match self.stands {
                Stands::Cpu => true,
                Stands::MemoryBandwidth => w.unit.higher_is_better(),
                Stands::Itself => false,
            }
    }

    /// How far the machine could move a row it stands for, in log terms.
    fn reach(&self) -> f64 {
        KERNEL_SENSITIVITY * self.change.ln_1p().abs()
    }
}

/// Widens the interval of every row `r` stands for that was called a change its way, by the
/// machine's reach; a row whose interval then holds no change is inconclusive, and says why.
fn widen_rows(workloads: &mut [WorkloadComparison], r: &Reference) {
    let its_way = if r.worse {
        Verdict::Regressed
    } else {
        Verdict::Improved
    };
    let moved_by = format!(
        "{}: {}, which never enters the kernel, moved {:+.1}%",
        r.what(),
        r.name,
        100.0 * r.change
    );
    for w in workloads
        .iter_mut()
        .filter(|w| w.verdict == its_way && r.stands_for(w))
    {
        let Some(c) = &mut w.change else { continue };
        let Some(ci) = c.ci.map(|ci| towards_no_change(ci, r.reach())) else {
            continue;
        };
        c.ci = Some(ci);
        let beyond = ci.0 > 0.0 || ci.1 < 0.0;
        w.machine_speed_changed |= !beyond;
        let note = match (beyond, r.significant) {
            (false, _) => format!(
                "{moved_by}, and up to {KERNEL_SENSITIVITY}x that in log terms here: a change \
                 in the same direction cannot be told from the machine's"
            ),
            (true, true) => format!(
                "{moved_by}; this change is beyond the {KERNEL_SENSITIVITY}x of it the machine \
                 could make"
            ),
            (true, false) => continue,
        };
        w.machine_state = Some(match w.machine_state.take() {
            Some(before) => format!("{note}; {before}"),
            None => note,
        });
    }
}

/// A reference that moved significantly: its own change is the machine's, not the kernel's,
/// so its interval takes the machine's reach too (and holds no change); the environment line
/// that says so.
fn discount(workloads: &mut [WorkloadComparison], r: &Reference) -> EnvironmentDifference {
    let reference = workloads
        .iter_mut()
        .find(|w| w.name == r.name)
        .expect("the reference is among the workloads");
    if let Some(c) = &mut reference.change {
        c.ci = c.ci.map(|ci| towards_no_change(ci, r.reach()));
    }
    reference.machine_speed_changed = true;
    let unit = reference.unit.symbol();
    let rows = match r.stands {
        Stands::Cpu => "changes in the same direction",
        Stands::MemoryBandwidth => "bandwidth changes in the same direction",
        Stands::Itself => "its own change only",
    };
    EnvironmentDifference {
        field: match r.stands {
            Stands::Cpu => "machine speed (a loop that never enters the kernel)",
            Stands::MemoryBandwidth => "memory bandwidth (a loop that never enters the kernel)",
            Stands::Itself => "memory latency (a loop that never enters the kernel)",
        },
        old: vec![format!("{} {:.4} {unit}", r.name, reference.old.mean)],
        new: vec![format!(
            "{:.4} {unit} ({:+.1}%: {}; {rows} have their intervals widened towards no \
             change by {}x its change in log terms)",
            reference.new.mean,
            100.0 * r.change,
            r.what(),
            KERNEL_SENSITIVITY
        )],
    }
}

/// A change's interval with its end nearer no change moved `reach` further towards it, in log
/// terms: what remains beyond is more than the machine could have made.
fn towards_no_change((lo, hi): (f64, f64), reach: f64) -> (f64, f64) {
    if lo > 0.0 {
        ((lo.ln_1p() - reach).exp_m1(), hi)
    } else if hi < 0.0 {
        (lo, (hi.ln_1p() + reach).exp_m1())
    } else {
        (lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_machine_s_reach_widens_the_end_nearer_no_change() {
        // +10% to +20% slower, the machine's reach ln(1.05) * 3: the low end crosses no change.
        let reach = 3.0 * 0.05f64.ln_1p();
        let (lo, hi) = towards_no_change((0.10, 0.20), reach);
        assert!(lo < 0.0 && (hi - 0.20).abs() < 1e-12, "{lo} {hi}");
        // A change far beyond it keeps an interval that leaves out no change.
        let (lo, _) = towards_no_change((0.60, 0.90), reach);
        assert!(lo > 0.3, "{lo}");
        let (_, hi) = towards_no_change((-0.2, -0.1), reach);
        assert!(hi > 0.0, "{hi}");
        assert_eq!(towards_no_change((-0.1, 0.1), reach), (-0.1, 0.1));
    }
}
