//! The machine's load, said first: whether either side ran while the rest of the machine was
//! busy (`machine_load`: its CPU time beyond the run's, and steal), whether the sides' loads
//! differ, and which workloads that left undecided. A task beside the run stretches every op
//! it overlaps, so the op's time is what load disturbs; a path's share is a ratio inside the
//! op, which it moves far less, so the path verdicts are pointed to.
use serde::Serialize;

use super::WorkloadComparison;
use crate::{machine::load::MachineLoad, results::Results, stats::Verdict};

/// Each side's busiest run, and how many of its runs were loaded.
#[derive(Debug, Clone, Serialize)]
pub struct Load {
    pub old: SideLoad,
    pub new: SideLoad,
    /// The sides' load classes differ (`MachineLoad::class`).
    pub differ: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SideLoad {
    /// Runs that recorded the load, and those of them that were not quiet.
    pub runs: usize,
    pub loaded: usize,
    /// The busiest of its runs (the most CPU time the rest of the machine used).
    pub busiest: Option<MachineLoad>,
}

impl SideLoad {
    fn of(side: &[Results]) -> SideLoad {
        let loads: Vec<MachineLoad> = side
            .iter()
            .filter_map(|r| r.environment.machine_load)
            .collect();
        SideLoad {
            runs: loads.len(),
            loaded: loads.iter().filter(|l| !l.quiet()).count(),
            busiest: loads
                .iter()
                .copied()
                .max_by(|a, b| a.others_busy_percent.total_cmp(&b.others_busy_percent)),
        }
    }

    /// `2 of 10 runs under load (the busiest: the rest of the machine used 62% of its CPU
    /// time, steal 0%)`, or `quiet`.
    fn describe(&self) -> String {
        match (self.loaded, self.busiest) {
            (0, _) | (_, None) => format!("quiet ({} of {} runs loaded)", 0, self.runs),
            (n, Some(b)) => format!(
                "{n} of {} run{} under load (the busiest: the rest of the machine used {:.0}% of \
                 its CPU time, steal {:.0}%)",
                self.runs,
                if self.runs == 1 { "" } else { "s" },
                b.others_busy_percent,
                b.steal_percent
            ),
        }
    }

    fn classes(side: &[Results]) -> Vec<String> {
        let mut classes: Vec<String> = side
            .iter()
            .filter_map(|r| r.environment.machine_load.map(|l| l.class()))
            .collect();
        classes.sort();
        classes.dedup();
        classes
    }
}

/// The sides' load, None when neither was loaded and they do not differ (or no run recorded
/// it).
pub(super) fn load(old: &[Results], new: &[Results]) -> Option<Load> {
    let (o, n) = (SideLoad::of(old), SideLoad::of(new));
    let differ = o.runs > 0 && n.runs > 0 && SideLoad::classes(old) != SideLoad::classes(new);
    (o.loaded + n.loaded > 0 || differ).then_some(Load {
        old: o,
        new: n,
        differ,
    })
}

/// The sentence said before anything else.
pub fn sentence(l: &Load) -> String {
    let differ = if l.differ {
        "; the sides' loads differ"
    } else {
        ""
    };
    format!(
        "Load: old {}; new {}{differ}. A task beside the run stretches the ops it overlaps, so \
         op verdicts under load are less sure; path verdicts weigh shares inside the op, which \
         load moves far less.",
        l.old.describe(),
        l.new.describe()
    )
}

/// The note of a workload left inconclusive while a side ran under load.
pub(super) fn note(l: Option<&Load>, w: &WorkloadComparison) -> Option<String> {
    let l = l?;
    if w.verdict != Verdict::Inconclusive || l.old.loaded + l.new.loaded == 0 {
        return None;
    }
    let sides = match (l.old.loaded > 0, l.new.loaded > 0) {
        (true, true) => "both sides",
        (true, false) => "the old side",
        _ => "the new side",
    };
    Some(format!(
        "undecided under load ({sides}, the Load line above): its path verdicts still stand; \
         measure again on a quiet machine to decide the op"
    ))
}
