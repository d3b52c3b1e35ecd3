//! Did the machine itself get faster or slower? A workload that never enters the kernel moves
//! only with the CPU's speed: its frequency, a busy SMT sibling (on this kind of 2-vCPU guest a
//! loaded neighbour vCPU made it 1.4x slower, and every kernel row 1.5-2x), the host's other
//! guests. When such a reference moved significantly, its change is the machine's, and so may
//! be a change in the same direction elsewhere (unless it is far larger than the machine could
//! make): those verdicts become inconclusive, and the comparison says why, among its
//! environment differences.
use super::{EnvironmentDifference, WorkloadComparison};
use crate::stats::Verdict;

/// Workloads that never enter the kernel while timed: dependent loads within the L1 cache.
const REFERENCES: &[&str] = &["mem_l1"];

/// How much more than the reference a kernel path may move with the machine alone, as a ratio
/// of log changes: with a loaded neighbour vCPU here, mem_l1 took 1.4x as long and the syscall,
/// fault, fork and pipe rows 1.5-2.2x (up to 2.3 times the reference's log change). A change
/// beyond this is more than the machine could make, and keeps its verdict.
const KERNEL_SENSITIVITY: f64 = 3.0;

/// Applies the check to the compared workloads; the environment line when the machine's speed
/// changed.
pub(super) fn check(workloads: &mut [WorkloadComparison]) -> Option<EnvironmentDifference> {
    let reference = workloads.iter().find(|w| {
        REFERENCES.contains(&w.name.as_str())
            && matches!(w.verdict, Verdict::Regressed | Verdict::Improved)
    })?;
    let (name, moved) = (reference.name.clone(), reference.verdict);
    let change = reference.change.map_or(0.0, |c| c.relative);
    let speed = if moved == Verdict::Regressed {
        "slower"
    } else {
        "faster"
    };
    let note = format!(
        "the machine ran {speed}: {name}, which never enters the kernel, moved {:+.1}%, so a \
         change in the same direction here cannot be told from the machine's",
        100.0 * change
    );
    let within_machine = |w: &WorkloadComparison| {
        let c = w.change.map_or(0.0, |c| c.relative);
        (1.0 + c).ln() / (1.0 + change).ln() <= KERNEL_SENSITIVITY
    };
    // The reference's own change is the machine's, not the kernel's: no verdict on it either.
    for w in workloads
        .iter_mut()
        .filter(|w| w.name == name || (w.verdict == moved && within_machine(w)))
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
    let reference = workloads.iter().find(|w| w.name == name)?;
    let unit = reference.unit.symbol();
    Some(EnvironmentDifference {
        field: "machine speed (a loop that never enters the kernel)",
        old: vec![format!("{name} {:.4} {unit}", reference.old.mean)],
        new: vec![format!(
            "{:.4} {unit} ({:+.1}%: {speed}; {} verdicts in the same direction, up to {}x its \
             change in log terms, are inconclusive)",
            reference.new.mean,
            100.0 * change,
            if moved == Verdict::Regressed {
                "regressed"
            } else {
                "improved"
            },
            KERNEL_SENSITIVITY
        )],
    })
}
