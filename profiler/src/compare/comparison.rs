//! What a comparison found, as every format renders it: per workload the summaries, the
//! change, its test and verdict, and where the change went; the environment's differences.
use serde::Serialize;

use super::{facts, FailOn};
use crate::{
    attribution::{Level, Part},
    results::{PathKind, Unit},
    stats::replication::{Components, TestKind, Unit as Replication},
    stats::{Change, Criteria, Summary, Verdict},
};

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub criteria: Criteria,
    pub old_labels: Vec<String>,
    pub new_labels: Vec<String>,
    /// Run options that change what ran (`--inject`, `--policy`, `--stack-noop`, `--user`,
    /// `--parallel`, the probes, the sampling rates, where the workloads' files live) and
    /// differ between the sides: listed first, since a change may be theirs.
    pub options: Vec<EnvironmentDifference>,
    /// Either side ran under load, or their loads differ: said before anything else.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<super::load::Load>,
    /// Environment facts that differ between the sides.
    pub environment: Vec<EnvironmentDifference>,
    /// Paths and task events that appear, disappear or run more or less often per op: facts
    /// that need no timing statistics, listed before any verdict.
    pub call_counts: facts::CallCounts,
    pub workloads: Vec<WorkloadComparison>,
    pub only_in_old: Vec<String>,
    pub only_in_new: Vec<String>,
    /// The largest slowdown the comparison could have missed: over the workloads not called
    /// regressed, the worse end of their intervals, the largest in log terms.
    pub largest_missed_slowdown: Option<MissedSlowdown>,
    /// The path verdicts over every workload: how many were tested and called, at which
    /// confidence, the largest called change and what a pass rules out.
    pub path_family: super::paths::PathFamily,
    /// The sampled stacks of workloads profiled on both sides (the HTML page's differential
    /// flame graphs; too bulky for the JSON comparison).
    #[serde(skip)]
    pub stacks: Vec<super::stacks::StacksChange>,
}

#[derive(Debug, Serialize)]
pub struct EnvironmentDifference {
    pub field: &'static str,
    pub old: Vec<String>,
    pub new: Vec<String>,
}

impl EnvironmentDifference {
    /// Each side's values, as one line each.
    pub fn sides(&self) -> (String, String) {
        (self.old.join(" | "), self.new.join(" | "))
    }
}

#[derive(Debug, Serialize)]
pub struct WorkloadComparison {
    pub name: String,
    pub unit: Unit,
    /// What `old.n` and `new.n` count: samples, rounds or files.
    pub replication: Replication,
    /// Welch's test, or a prediction test when only one side repeated the unit (a run
    /// against a baseline of several); None when neither did.
    pub test: Option<TestKind>,
    pub old: Summary,
    pub new: Summary,
    /// None when the old mean is 0 (no relative change).
    pub change: Option<Change>,
    /// Holm-adjusted over every workload of the comparison with a p-value.
    pub adjusted_p: Option<f64>,
    pub verdict: Verdict,
    /// The spread at each level (samples in a round, rounds in a file, files in a side).
    pub components: Components,
    /// The smallest relative change this comparison detects with 80% power at Holm's
    /// strictest step (alpha over the workloads tested), never below the threshold; None
    /// when there is no test.
    pub minimum_detectable_effect: Option<f64>,
    /// The least the minimum detectable effect could become with unlimited rounds a run: the
    /// spread between runs alone, which rounds never average away (None unless the unit is
    /// the file). Close to the effect itself: more rounds would not help, pairing would.
    pub floor_over_rounds: Option<f64>,
    /// Why this workload's spread is the machine's, not the kernel's, when it is.
    pub machine_state: Option<String>,
    /// A loop that never enters the kernel moved the same way (`speed`): the machine's speed
    /// changed, and the interval was widened by what it could make of this workload.
    pub machine_speed_changed: bool,
    /// The single run on one side was disturbed: its rounds disagree far more than those of
    /// the other side's runs (their spread widens the interval; the note says to run again).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disturbed_run: Option<DisturbedRun>,
    /// Why a change may be the run options' rather than the kernel's (an injection on a path
    /// the workload calls, or other options that differ).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option_note: Option<String>,
    /// Left inconclusive while a side ran under load.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load_note: Option<String>,
    pub extras: Vec<ExtraComparison>,
    pub attribution: Option<ChangeAttribution>,
    /// Each tested path's verdict (`paths`), in the order timed, sampled, groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<super::paths::PathVerdict>,
    /// Other tools' BPF programs, each one's ns per op on both sides (the kernel's BPF
    /// statistics).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_programs: Vec<super::other_programs::ProgramChange>,
    /// Each path's share of the sampled CPU time on both sides (where both sampled stacks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<super::SampledChange>,
}

#[derive(Debug, Serialize)]
pub struct ExtraComparison {
    pub name: String,
    pub unit: Unit,
    pub old: Summary,
    pub new: Summary,
    pub change: Option<Change>,
}

/// The largest slowdown a comparison could have missed, and whose it is.
#[derive(Debug, Serialize)]
pub struct MissedSlowdown {
    pub workload: String,
    /// The worse end of its interval: a time's slowdown (+0.25: 25% slower) or a rate's drop
    /// (-0.2: 20% less).
    pub bound: f64,
    pub unit: Unit,
    /// Workloads not called whose spread the machine's state explains (`machine_state`):
    /// their intervals bound the machine, not the kernel, so they are not weighed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<String>,
}

impl MissedSlowdown {
    /// Over the kernel's workloads (not the machine's references, whose timed loop never
    /// enters it) with an interval not called regressed or improved, less those whose spread
    /// is the machine's: the worse end furthest from no change in log terms (a rate's drop
    /// weighed as the time its work then takes); None when every such end is on the better
    /// side.
    pub fn of(workloads: &[WorkloadComparison]) -> Option<MissedSlowdown> {
        let not_called = || {
            workloads.iter().filter(|w| {
                !matches!(w.verdict, Verdict::Regressed | Verdict::Improved)
                    && !super::speed::is_reference(&w.name)
            })
        };
        let left_out = not_called()
            .filter(|w| w.machine_state.is_some())
            .map(|w| w.name.clone())
            .collect();
        not_called()
            .filter(|w| w.machine_state.is_none())
            .filter_map(|w| {
                let better = w.unit.higher_is_better();
                let bound = w.change?.worse_bound(better)?;
                let slower = if better {
                    -bound.ln_1p()
                } else {
                    bound.ln_1p()
                };
                (slower > 0.0).then_some((slower, w, bound))
            })
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, w, bound)| MissedSlowdown {
                workload: w.name.clone(),
                bound,
                unit: w.unit,
                left_out,
            })
    }
}

/// Where an end-to-end change went.
#[derive(Debug, Serialize)]
pub struct ChangeAttribution {
    /// Change of the clean op time, ns.
    pub total_ns: f64,
    /// The outermost rows, whose change the residual is the total less (`attribution::
    /// breakdown`): "syscalls", or "hooks" (hooks and task paths) where none was probed.
    pub level: Level,
    pub paths: Vec<PathDelta>,
    /// The change of each of the breakdown's parts (they add up to total_ns).
    pub parts: Vec<(Part, f64)>,
    /// The residual part's change: total_ns less the outermost rows' change.
    pub residual_ns: f64,
    /// The change is told by the hooks (`top_level` paths) where any was probed.
    #[serde(skip)]
    pub by_hooks: bool,
}

impl ChangeAttribution {
    /// The parts a change's sentence names after its paths, so that what it names adds up to
    /// the total: where hooks tell it, the syscalls' own time and the task paths beside them;
    /// always the residual.
    pub fn parts_after_paths(&self) -> Vec<(&'static str, Part, f64)> {
        self.parts
            .iter()
            .filter_map(|&(part, ns)| {
                let name = match part {
                    Part::Syscall if self.by_hooks && self.level == Level::Syscalls => {
                        "syscalls' own"
                    }
                    Part::TaskPath
                        if self.by_hooks
                            && self.paths.iter().any(|p| p.kind == PathKind::TaskPath) =>
                    {
                        "task paths"
                    }
                    Part::Residual => "residual",
                    _ => return None,
                };
                Some((name, part, ns))
            })
            .collect()
    }
}

#[derive(Debug, Serialize)]
pub struct PathDelta {
    pub kind: PathKind,
    pub name: String,
    pub parent: Option<String>,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
    pub delta_ns_per_op: f64,
    /// Its 95% interval, from the row's values at the comparison's unit (None where a side
    /// has one value).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delta_interval: Option<(f64, f64)>,
    /// The test behind the interval, before any adjustment over the family of paths.
    #[serde(skip)]
    pub test: Option<crate::stats::DifferenceTest>,
    /// The test of its change against the rest of the op, priced in ns per op at the old
    /// side's rest (`explain::against_rest_test`).
    #[serde(skip)]
    pub against_rest: Option<crate::stats::DifferenceTest>,
    /// The old side's rest of the op that prices it, ns per op.
    #[serde(skip)]
    pub old_rest_ns: Option<f64>,
    /// Its path verdict called it (`paths`: the family's false discovery rate controlled).
    #[serde(skip)]
    pub starred: bool,
    /// The sampled stacks attribute this path's change, and their interval and this one are
    /// apart: the two methods disagree beyond what either's spread explains.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub sampled_disagrees: bool,
    /// Counted in the residual's sum.
    pub top_level: bool,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.workloads
            .iter()
            .filter(|w| w.verdict == verdict)
            .count()
    }

    /// 1 on a regression (with `path-regressed`, also a path's); 3 when a workload is
    /// inconclusive and the caller asked to fail on that; else 0. (2 is for errors, which
    /// never get here.)
    pub fn exit_code(&self, fail_on: FailOn) -> u8 {
        let regressed = self.count(Verdict::Regressed) > 0;
        let undecided = self.count(Verdict::Inconclusive) > 0;
        match fail_on {
            FailOn::Never => 0,
            FailOn::PathRegressed if regressed || self.path_family.regressed > 0 => {
                crate::exit::REGRESSED
            }
            FailOn::PathRegressed => 0,
            FailOn::Regression | FailOn::Inconclusive if regressed => crate::exit::REGRESSED,
            FailOn::Inconclusive if undecided => crate::exit::UNDECIDED,
            FailOn::Regression | FailOn::Inconclusive => 0,
        }
    }

    /// What to say on stderr when inconclusive workloads do not change the exit code.
    pub fn inconclusive_warning(&self, fail_on: FailOn) -> Option<String> {
        let n = self.count(Verdict::Inconclusive);
        let silent = matches!(fail_on, FailOn::Regression | FailOn::PathRegressed);
        (n > 0 && silent).then(|| {
            format!(
                "{n} of {} workloads inconclusive; they do not fail the comparison (with \
                 --fail-on inconclusive they exit 3)",
                self.workloads.len()
            )
        })
    }
}

/// Which side's single run was disturbed, and its rounds' spread against the other side's.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct DisturbedRun {
    /// "old" or "new".
    pub side: &'static str,
    #[serde(flatten)]
    pub spread: crate::stats::replication::RoundSpread,
}
