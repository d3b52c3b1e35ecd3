//! One breakdown of a workload's op, made here and read by every view (text, markdown, HTML,
//! the JSON rows' `share`, compare): the whole the shares are of, each attributed path's time
//! and share of that whole in display order, the parts by kind that add up to the whole
//! without counting a nanosecond twice, and the residual outside the outermost probed paths.
use serde::Serialize;

use crate::{
    results::{rows, AttributionRow, PathKind, Results, ShareWhole, WorkloadResult},
    stats,
};

/// The outermost probed paths, disjoint in time: the residual is the whole less them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Syscalls: hooks and task paths run inside them.
    Syscalls,
    /// No syscall was probed: the hooks and task paths that run under no other probed path.
    Hooks,
}

impl Level {
    pub fn describe(self) -> &'static str {
        match self {
            Level::Syscalls => "outside the probed syscalls",
            Level::Hooks => "outside the probed hooks and task paths",
        }
    }
}

/// The outermost rows and their level; None when no row is a syscall, hook or task path.
pub fn outermost(rows: &[AttributionRow]) -> Option<(Level, Vec<&AttributionRow>)> {
    let syscalls: Vec<&AttributionRow> = rows
        .iter()
        .filter(|r| r.kind == PathKind::Syscall)
        .collect();
    if !syscalls.is_empty() {
        return Some((Level::Syscalls, syscalls));
    }
    let top: Vec<&AttributionRow> = rows.iter().filter(|r| is_top_kernel_path(r)).collect();
    (!top.is_empty()).then_some((Level::Hooks, top))
}

/// A hook or task path under no other probed path (LSM functions run under their hooks).
fn is_top_kernel_path(r: &AttributionRow) -> bool {
    matches!(r.kind, PathKind::Hook | PathKind::TaskPath) && r.parent.is_none()
}

/// The ns per op the outermost rows take together.
fn outermost_ns(rows: &[AttributionRow]) -> Option<(Level, f64)> {
    let (level, top) = outermost(rows)?;
    Some((level, top.iter().map(|r| rows::ns_per_op(r)).sum()))
}

/// The exclusive parts of `whole_ns` the rows make, in `Part::ALL` order: they add up to it.
/// Where only LSM functions were probed nothing is outermost, and the residual is the whole.
fn parts_of(rows: &[AttributionRow], whole_ns: f64) -> [(Part, f64); 5] {
    let (level, outer_ns) = outermost_ns(rows).unwrap_or((Level::Hooks, 0.0));
    let total = |keep: &dyn Fn(&AttributionRow) -> bool| -> f64 {
        rows.iter().filter(|r| keep(r)).map(rows::ns_per_op).sum()
    };
    let lsm = total(&|r| r.kind == PathKind::Lsm);
    let hooks = total(&|r| r.kind == PathKind::Hook && r.parent.is_none());
    let tasks = total(&|r| r.kind == PathKind::TaskPath && r.parent.is_none());
    let syscall_own = match level {
        Level::Syscalls => outer_ns - hooks - tasks,
        Level::Hooks => 0.0,
    };
    [
        (Part::Syscall, syscall_own),
        (Part::Hook, hooks - lsm),
        (Part::Lsm, lsm),
        (Part::TaskPath, tasks),
        (Part::Residual, whole_ns - outer_ns),
    ]
}

/// One row as the views list it: nested under its hook at depth 1 (an LSM function), with
/// the hook named where that hook is not in the table.
#[derive(Debug, Clone, Copy)]
pub struct PathShare<'a> {
    pub row: &'a AttributionRow,
    pub depth: usize,
    /// An LSM function whose hook has no row: the hook it ran under.
    pub under: Option<&'a str>,
    pub ns_per_op: f64,
    /// ns_per_op over the breakdown's whole.
    pub share: f64,
}

/// Exclusive parts of the whole: each kind's time less what runs inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    /// The syscalls' time outside the hooks and task paths probed inside them.
    Syscall,
    /// The hooks' own dispatch: their time less the LSM functions under them.
    Hook,
    Lsm,
    TaskPath,
    Residual,
}

impl Part {
    pub const ALL: [Part; 5] = [
        Part::Syscall,
        Part::Hook,
        Part::Lsm,
        Part::TaskPath,
        Part::Residual,
    ];
}

#[derive(Debug, Clone)]
pub struct Breakdown<'a> {
    pub whole: ShareWhole,
    pub whole_ns: f64,
    pub level: Level,
    /// Every row, in display order.
    pub paths: Vec<PathShare<'a>>,
    /// ns per op of each exclusive part, in `Part::ALL` order: they add up to `whole_ns`
    /// (a part below zero says the probes' own cost or noise put more inside than around it).
    pub parts: [(Part, f64); 5],
}

impl<'a> Breakdown<'a> {
    /// The breakdown of `w`'s attribution; None when nothing was attributed or there is no
    /// whole to take shares of (no clean samples, or a bandwidth op whose rows do not say it).
    pub fn of(w: &'a WorkloadResult) -> Option<Breakdown<'a>> {
        let (whole, whole_ns) = whole_of(w)?;
        if w.attribution.is_empty() {
            return None;
        }
        let level = outermost(&w.attribution).map_or(Level::Hooks, |(level, _)| level);
        let parts = parts_of(&w.attribution, whole_ns);
        let paths = ordered(&w.attribution)
            .into_iter()
            .map(|(row, depth, under)| {
                let ns_per_op = rows::ns_per_op(row);
                PathShare {
                    row,
                    depth,
                    under,
                    ns_per_op,
                    share: ns_per_op / whole_ns,
                }
            })
            .collect();
        Some(Breakdown {
            whole,
            whole_ns,
            level,
            paths,
            parts,
        })
    }

    pub fn part(&self, part: Part) -> f64 {
        self.parts
            .iter()
            .find(|(p, _)| *p == part)
            .map_or(0.0, |(_, ns)| *ns)
    }

    pub fn residual_ns(&self) -> f64 {
        self.part(Part::Residual)
    }
}

/// What `w`'s shares are of, in ns per op: the probed op's CPU time over all its tasks where
/// sched_switch measured it (the rows are CPU time then, so shares of one level add up to at
/// most 100% but for noise), else the clean op.
pub fn whole_of(w: &WorkloadResult) -> Option<(ShareWhole, f64)> {
    if let Some(a) = w.accounting.as_ref().filter(|a| a.on_cpu_ns_per_op > 0.0) {
        return Some((ShareWhole::ProbedOpCpuTime, a.on_cpu_ns_per_op));
    }
    let clean = stats::summarize(&w.clean)?;
    clean_op_ns(w, clean.mean)
        .filter(|ns| *ns > 0.0)
        .map(|ns| (ShareWhole::CleanOp, ns))
}

/// The clean op in ns: a time metric's mean, or, for bandwidth, what the run took the rows'
/// clean-op shares of (each row's ns per op over that share).
pub fn clean_op_ns(w: &WorkloadResult, clean_mean: f64) -> Option<f64> {
    rows::op_ns(w.unit, clean_mean).or_else(|| {
        w.attribution.iter().find_map(|r| {
            let share = r.share_of_clean_op.filter(|s| *s > 0.0)?;
            (r.ns_per_op > 0.0).then(|| r.ns_per_op / share)
        })
    })
}

/// Rows in display order, each with its depth: each row that is no LSM function followed by
/// the LSM functions under it; those whose hook has no row come last, with the hook named.
fn ordered(rows: &[AttributionRow]) -> Vec<(&AttributionRow, usize, Option<&str>)> {
    let mut ordered = Vec::new();
    let is_lsm = |r: &AttributionRow| r.kind == PathKind::Lsm;
    for r in rows.iter().filter(|r| !is_lsm(r)) {
        ordered.push((r, 0, None));
        for child in rows
            .iter()
            .filter(|c| is_lsm(c) && c.parent.as_deref() == Some(&r.name))
        {
            ordered.push((child, 1, None));
        }
    }
    for orphan in rows.iter().filter(|c| {
        is_lsm(c)
            && !rows
                .iter()
                .any(|p| !is_lsm(p) && c.parent.as_deref() == Some(&p.name))
    }) {
        ordered.push((orphan, 0, Some(orphan.parent.as_deref().unwrap_or("?"))));
    }
    ordered
}

impl Results {
    /// Sets every row's `share` (and its workload's `share_of`) from the breakdown, so the
    /// JSON holds the figure the reports print.
    pub fn derive_shares(&mut self) {
        for w in &mut self.workloads {
            let Some((whole, whole_ns)) = whole_of(w) else {
                w.share_of = None;
                continue;
            };
            w.share_of = (!w.attribution.is_empty()).then_some(whole);
            for r in &mut w.attribution {
                r.share = rows::ns_per_op(r) / whole_ns;
            }
        }
    }

    /// A file written before rows said what their share was of: its `share` was of the clean
    /// op, which `share_of_clean_op` now holds; `share` is then made again as runs make it.
    pub(crate) fn read_old_shares(&mut self) {
        let mut old = false;
        for w in self.workloads.iter_mut().filter(|w| w.share_of.is_none()) {
            for r in w
                .attribution
                .iter_mut()
                .filter(|r| r.share_of_clean_op.is_none())
            {
                r.share_of_clean_op = Some(r.share);
                old = true;
            }
        }
        if old {
            self.derive_shares();
        }
    }
}

/// How an end-to-end change of `total_ns` per op divides into the breakdown's parts: each
/// part's change, the residual's being the change the outermost rows leave unexplained. None
/// with no row on a side, or when the sides' outermost rows are not the same paths (syscalls
/// probed on one side only).
pub fn change(
    total_ns: f64,
    old: &[AttributionRow],
    new: &[AttributionRow],
) -> Option<(Level, [(Part, f64); 5])> {
    let (old_level, _) = outermost(old)?;
    let (new_level, _) = outermost(new)?;
    if old_level != new_level {
        return None;
    }
    // The old op as zero and the new one as the change: each part's difference, and the
    // residual's is the total less the outermost rows' change.
    let (before, after) = (parts_of(old, 0.0), parts_of(new, total_ns));
    let mut parts = after;
    for (part, (_, was)) in parts.iter_mut().zip(before) {
        part.1 -= was;
    }
    Some((new_level, parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::{accounting, row, sample_results};

    #[test]
    fn the_parts_add_up_to_the_whole_and_the_residual_is_outside_the_syscalls() {
        let r = sample_results();
        let b = Breakdown::of(&r.workloads[0]).unwrap();
        assert_eq!((b.whole, b.whole_ns), (ShareWhole::CleanOp, 5000.0));
        assert_eq!(b.level, Level::Syscalls);
        let sum: f64 = b.parts.iter().map(|(_, ns)| ns).sum();
        assert!((sum - b.whole_ns).abs() < 1e-9, "{:?}", b.parts);
        assert_eq!(b.residual_ns(), 2000.0);
        assert_eq!(b.part(Part::Lsm), 380.0);
        assert_eq!(b.part(Part::Hook), 120.0);
        assert_eq!(b.part(Part::Syscall), 2500.0);
        // Display order: the LSM function right under its hook, one level in.
        let names: Vec<(&str, usize)> = b
            .paths
            .iter()
            .map(|p| (p.row.name.as_str(), p.depth))
            .collect();
        assert_eq!(
            names,
            [
                ("openat", 0),
                ("security_file_open", 0),
                ("apparmor_file_open", 1),
                ("security_file_free", 0)
            ]
        );
    }

    #[test]
    fn without_syscalls_the_hooks_and_task_paths_are_outermost() {
        let mut w = sample_results().workloads[0].clone();
        w.attribution.remove(0);
        w.attribution
            .push(row(PathKind::TaskPath, "copy_process", None, 0.5, 1000.0));
        let b = Breakdown::of(&w).unwrap();
        assert_eq!(b.level, Level::Hooks);
        assert_eq!(b.residual_ns(), 5000.0 - 400.0 - 100.0 - 500.0);
        assert_eq!(b.part(Part::Syscall), 0.0);
        let sum: f64 = b.parts.iter().map(|(_, ns)| ns).sum();
        assert!((sum - 5000.0).abs() < 1e-9);
    }

    #[test]
    fn the_cpu_time_is_the_whole_where_it_was_measured_and_json_says_so() {
        let mut r = sample_results();
        r.workloads[0].accounting = Some(accounting(4000.0, 0.0));
        r.derive_shares();
        let w = &r.workloads[0];
        assert_eq!(w.share_of, Some(ShareWhole::ProbedOpCpuTime));
        let b = Breakdown::of(w).unwrap();
        for p in &b.paths {
            assert_eq!(p.row.share, p.share, "{}", p.row.name);
        }
        assert_eq!(w.attribution[0].share, 0.75);
        // What the run took the share of the clean op as stays, under its own name.
        assert_eq!(w.attribution[0].share_of_clean_op, Some(0.6));
    }

    #[test]
    fn an_old_file_s_share_was_of_the_clean_op() {
        let mut r = sample_results();
        for w in &mut r.workloads {
            w.share_of = None;
            for row in &mut w.attribution {
                row.share_of_clean_op = None;
                row.share = 0.123;
            }
        }
        r.read_old_shares();
        let w = &r.workloads[0];
        assert_eq!(w.attribution[0].share_of_clean_op, Some(0.123));
        assert_eq!(w.share_of, Some(ShareWhole::CleanOp));
        assert_eq!(w.attribution[0].share, 0.6);
    }

    #[test]
    fn a_change_divides_into_the_parts_at_the_level_both_sides_share() {
        let old = sample_results().workloads[0].attribution.clone();
        let mut new = old.clone();
        new[0].ns_per_op += 300.0;
        new[1].ns_per_op += 100.0;
        let (level, parts) = change(500.0, &old, &new).unwrap();
        assert_eq!(level, Level::Syscalls);
        let part = |p: Part| parts.iter().find(|(q, _)| *q == p).unwrap().1;
        assert_eq!(
            [part(Part::Syscall), part(Part::Hook), part(Part::Residual)],
            [200.0, 100.0, 200.0]
        );
        let sum: f64 = parts.iter().map(|(_, ns)| ns).sum();
        assert!((sum - 500.0).abs() < 1e-9);
        assert_eq!(change(500.0, &old, &new[1..]), None);
    }
}
