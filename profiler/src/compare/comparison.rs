//! What a comparison found, as every format renders it: per workload the summaries, the
//! change, its test and verdict, and where the change went; the environment's differences.
use serde::Serialize;

use super::{facts, FailOn};
use crate::{
    replication::{Components, TestKind, Unit as Replication},
    results::{PathKind, Unit},
    stats::{Change, Criteria, Summary, Verdict},
};

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub criteria: Criteria,
    pub old_labels: Vec<String>,
    pub new_labels: Vec<String>,
    /// Environment facts that differ between the sides.
    pub environment: Vec<EnvironmentDifference>,
    /// Paths and task events that appear, disappear or run more or less often per op: facts
    /// that need no timing statistics, listed before any verdict.
    pub call_counts: facts::CallCounts,
    pub workloads: Vec<WorkloadComparison>,
    pub only_in_old: Vec<String>,
    pub only_in_new: Vec<String>,
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
    /// The verdict is inconclusive because a loop that never enters the kernel moved the same
    /// way (`speed`): the machine's speed changed.
    pub machine_speed_changed: bool,
    /// The verdict is inconclusive because the single run on one side was disturbed: its
    /// rounds disagree far more than those of the other side's runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disturbed_run: Option<DisturbedRun>,
    pub extras: Vec<ExtraComparison>,
    pub attribution: Option<ChangeAttribution>,
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

/// Where an end-to-end change went.
#[derive(Debug, Serialize)]
pub struct ChangeAttribution {
    /// Change of the clean op time, ns.
    pub total_ns: f64,
    /// "hooks" or "syscalls": the rows the residual is measured against.
    pub level: &'static str,
    pub paths: Vec<PathDelta>,
    /// total_ns minus the top-level rows' deltas.
    pub residual_ns: f64,
}

#[derive(Debug, Serialize)]
pub struct PathDelta {
    pub kind: PathKind,
    pub name: String,
    pub parent: Option<String>,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
    pub delta_ns_per_op: f64,
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

    /// 1 on a regression (unless told never to fail); 3 when a workload is inconclusive and
    /// the caller asked to fail on that; else 0. (2 is for errors, which never get here.)
    pub fn exit_code(&self, fail_on: FailOn) -> u8 {
        let regressed = self.count(Verdict::Regressed) > 0;
        let undecided = self.count(Verdict::Inconclusive) > 0;
        match fail_on {
            FailOn::Never => 0,
            FailOn::Regression | FailOn::Inconclusive if regressed => 1,
            FailOn::Inconclusive if undecided => 3,
            FailOn::Regression | FailOn::Inconclusive => 0,
        }
    }

    /// What to say on stderr when inconclusive workloads do not change the exit code.
    pub fn inconclusive_warning(&self, fail_on: FailOn) -> Option<String> {
        let n = self.count(Verdict::Inconclusive);
        (n > 0 && fail_on == FailOn::Regression).then(|| {
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
    pub spread: crate::replication::RoundSpread,
}
