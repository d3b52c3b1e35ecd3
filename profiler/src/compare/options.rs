//! What a workload's change may owe to the run options that differ between the sides: an
//! injected delay on a path it calls, or any other option that changes what ran (the
//! injection program itself runs on every syscall of the tracked tasks).
use super::{EnvironmentDifference, WorkloadComparison};
use crate::{results::Results, stats::Verdict};

/// The note for a workload called regressed or improved while options differ; None otherwise.
pub(super) fn note(
    options: &[EnvironmentDifference],
    old: &[Results],
    new: &[Results],
    w: &WorkloadComparison,
) -> Option<String> {
    if options.is_empty() || !matches!(w.verdict, Verdict::Regressed | Verdict::Improved) {
        return None;
    }
    let mut injected: Vec<String> = Vec::new();
    if options.iter().any(|d| d.field == "inject") {
        for path in old
            .iter()
            .chain(new)
            .flat_map(|r| r.options.injected_paths())
        {
            if calls(w, &path) && !injected.contains(&path) {
                injected.push(path);
            }
        }
    }
    let fields: Vec<&str> = options.iter().map(|d| d.field).collect();
    Some(if injected.is_empty() {
        format!(
            "the run options differ ({}): this change may be theirs, not the kernel's",
            fields.join(", ")
        )
    } else {
        format!(
            "it calls {}, whose injected delay differs between the sides: this change is the \
             injection's, not the kernel's",
            injected.join(", ")
        )
    })
}

/// Whether `w` calls `path` (a syscall or a hook), by its timed or sampled rows.
fn calls(w: &WorkloadComparison, path: &str) -> bool {
    let timed = w
        .attribution
        .iter()
        .flat_map(|a| &a.paths)
        .any(|p| p.name == path);
    let sampled = w
        .sampled
        .iter()
        .flat_map(|s| &s.paths)
        .any(|p| p.name == path);
    timed || sampled
}
