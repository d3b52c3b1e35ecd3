//! One breakdown of a workload's op, made here and read by every view (text, markdown, HTML,
//! the JSON rows' `share`, compare): the whole the timed shares are of, each attributed path's
//! time and share of that whole in display order, and the op's exclusive parts by kind that
//! add up to their whole without counting a nanosecond twice, with the residual outside the
//! outermost probed paths split into named pieces.
//!
//! The parts come from one measurement. Where kernel stacks were sampled they are the samples'
//! places (`StackProfile::places`), each sample in one place, so every part is a count with
//! an interval, never below zero, and they add up to the op's own CPU time exactly. Only a run
//! without samples falls back on the timed rows, whose differences (a syscall less the hooks
//! timed inside it) hold the probes' cost and are said to.
use std::collections::HashMap;

use serde::Serialize;

use crate::{
    results::{
        rows, AttributionRow, PathKind, Place, SampledPlace, ShareWhole, StackProfile,
        WorkloadResult,
    },
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

/// The exclusive parts of `whole_ns` the rows make, in `Part::ALL` order: they add up to it.
/// `ns[i]` is `rows[i]`'s ns per op. Where only LSM functions were probed nothing is
/// outermost, and the residual is the whole.
fn parts_of(rows: &[AttributionRow], ns: &[f64], whole_ns: f64) -> [(Part, f64); 5] {
    let total = |keep: &dyn Fn(&AttributionRow) -> bool| -> f64 {
        rows.iter()
            .zip(ns)
            .filter(|(r, _)| keep(r))
            .map(|(_, ns)| ns)
            .sum()
    };
    let level = outermost(rows).map_or(Level::Hooks, |(level, _)| level);
    let outer_ns = match level {
        Level::Syscalls => total(&|r| r.kind == PathKind::Syscall),
        Level::Hooks => total(&is_top_kernel_path),
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
    /// What the timed rows' shares are of.
    pub whole: ShareWhole,
    pub whole_ns: f64,
    pub level: Level,
    /// Every timed row, in display order.
    pub paths: Vec<PathShare<'a>>,
    /// The op's exclusive parts, by one method.
    pub parts: Parts,
}

/// The op's exclusive parts, in `Part::ALL` order, adding up to `whole_ns`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parts {
    pub whole: ShareWhole,
    pub whole_ns: f64,
    /// From the sampled stacks' places (each with an interval), else from the timed rows.
    pub sampled: bool,
    pub figures: [PartFigure; 5],
    /// What the residual is outside of, in words.
    pub outside: &'static str,
    /// The residual's pieces, largest first, adding up to it (sampled parts only).
    pub residual: Vec<Piece>,
}

/// One part of the op: its time per op and share of the parts' whole, with the share's 95%
/// interval where it was counted (sampled).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PartFigure {
    pub part: Part,
    pub ns: f64,
    pub share: f64,
    pub interval: Option<(f64, f64)>,
}

/// One named piece of the residual, with its share's 95% interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Piece {
    pub name: String,
    pub ns: f64,
    pub share: f64,
    pub low: f64,
    pub high: f64,
}

impl Parts {
    /// The parts from the profile's places: the syscalls that were timed (all syscalls where
    /// none was) make the syscall part with the hooks, LSM functions and task paths beside
    /// them; everything else (user time, a syscall not timed, kernel work outside syscalls) is
    /// the residual, piece by piece. None without places (a file from before them).
    fn sampled(p: &StackProfile, rows: &[AttributionRow]) -> Option<Parts> {
        if p.places.is_empty() {
            return None;
        }
        let timed: Vec<&str> = rows
            .iter()
            .filter(|r| r.kind == PathKind::Syscall && r.ns_per_call > 0.0)
            .map(|r| r.name.as_str())
            .collect();
        let in_syscall_part = |x: &SampledPlace| {
            timed.is_empty() || x.syscall.as_deref().is_some_and(|n| timed.contains(&n))
        };
        let part_of = |x: &SampledPlace| match x.place {
            Place::Lsm => Part::Lsm,
            Place::Hook => Part::Hook,
            Place::TaskPath => Part::TaskPath,
            Place::Syscall if in_syscall_part(x) => Part::Syscall,
            _ => Part::Residual,
        };
        let own = p.own_samples();
        let whole_ns = p.own_ns_per_op();
        let figures = Part::ALL.map(|part| {
            let samples: u64 = p
                .places
                .iter()
                .filter(|x| part_of(x) == part)
                .map(|x| x.samples)
                .sum();
            let share = samples as f64 / own.max(1) as f64;
            PartFigure {
                part,
                ns: share * whole_ns,
                share,
                interval: Some(stats::wilson_interval(samples, own)),
            }
        });
        let mut residual: Vec<Piece> = p
            .places
            .iter()
            .filter(|x| part_of(x) == Part::Residual && x.samples > 0)
            .map(|x| Piece {
                name: piece_name(x, rows),
                ns: x.ns_per_op,
                share: x.share,
                low: x.share_low,
                high: x.share_high,
            })
            .collect();
        residual.sort_by(|a, b| b.share.total_cmp(&a.share));
        Some(Parts {
            whole: if p.of_unprobed_op() {
                ShareWhole::UnprobedOpOwnCpuTime
            } else {
                ShareWhole::OpOwnCpuTime
            },
            whole_ns,
            sampled: true,
            figures,
            outside: if timed.is_empty() {
                "outside any syscall, hook or task path"
            } else {
                "outside the timed syscalls, hooks and task paths"
            },
            residual,
        })
    }

    /// The parts from the timed rows, of `whole_ns`: differences of probed spans, which hold
    /// the probes' cost, so one can fall below zero; the residual is not split.
    fn timed(rows: &[AttributionRow], whole: ShareWhole, whole_ns: f64) -> Parts {
        let level = outermost(rows).map_or(Level::Hooks, |(level, _)| level);
        Parts {
            whole,
            whole_ns,
            sampled: false,
            figures: parts_of(rows, &own_figures(rows), whole_ns).map(|(part, ns)| PartFigure {
                part,
                ns,
                share: ns / whole_ns,
                interval: None,
            }),
            outside: level.describe(),
            residual: Vec::new(),
        }
    }

    /// Whether every part is a possible share of the whole (none below 0, none above it): a
    /// timed breakdown whose spans hold more of the probes' cost than the op does not fit,
    /// and is not drawn as if it did.
    pub fn fit(&self) -> bool {
        self.figures
            .iter()
            .all(|f| f.ns >= 0.0 && f.ns <= self.whole_ns * (1.0 + 1e-9))
    }

    pub fn figure(&self, part: Part) -> PartFigure {
        self.figures[Part::ALL.iter().position(|p| *p == part).unwrap_or(0)]
    }
}

/// A residual piece's name: a syscall's, with why it was not timed where the rows say.
fn piece_name(x: &SampledPlace, rows: &[AttributionRow]) -> String {
    let Some(name) = x.syscall.as_deref() else {
        return x.place.describe(None);
    };
    let row = rows
        .iter()
        .find(|r| r.kind == PathKind::Syscall && r.name == name);
    match row {
        Some(r) if r.ns_per_call == 0.0 && r.untimed_calls > 0 => {
            format!("{name} (counted, never timed: it does not return)")
        }
        _ => format!("{name} (not timed)"),
    }
}

impl<'a> Breakdown<'a> {
    /// The breakdown of `w`; None when nothing was attributed or sampled, or there is no whole
    /// to take shares of (no clean samples, or a bandwidth op whose rows do not say it).
    pub fn of(w: &'a WorkloadResult) -> Option<Breakdown<'a>> {
        let (whole, whole_ns) = rows::whole_of(w)?;
        let sampled = w
            .profile
            .as_ref()
            .and_then(|p| Parts::sampled(p, &w.attribution));
        if w.attribution.is_empty() && sampled.is_none() {
            return None;
        }
        let level = outermost(&w.attribution).map_or(Level::Hooks, |(level, _)| level);
        let parts = sampled.unwrap_or_else(|| Parts::timed(&w.attribution, whole, whole_ns));
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

    /// A part's ns per op.
    pub fn part(&self, part: Part) -> f64 {
        self.parts.figure(part).ns
    }

    pub fn residual_ns(&self) -> f64 {
        self.part(Part::Residual)
    }
}

/// Rows in display order, each with its depth: each row that is no LSM function followed by
/// the LSM functions under it; those whose hook has no row come last, with the hook named.
fn ordered(rows: &[AttributionRow]) -> Vec<(&AttributionRow, usize, Option<&str>)> {
    let is_lsm = |r: &AttributionRow| r.kind == PathKind::Lsm;
    // The LSM functions under each hook, in file order: one pass, so a forged file of many
    // rows costs linear time, not a scan of every row per hook.
    let mut under: HashMap<&str, Vec<usize>> = HashMap::new();
    for (at, child) in rows.iter().enumerate().filter(|(_, r)| is_lsm(r)) {
        let parent = child.parent.as_deref().unwrap_or_default();
        under.entry(parent).or_default().push(at);
    }
    let mut ordered = Vec::with_capacity(rows.len());
    let mut placed = vec![false; rows.len()];
    for r in rows.iter().filter(|r| !is_lsm(r)) {
        ordered.push((r, 0, None));
        // Under the first row of the hook's name only: a name given twice lists them once.
        for at in under.remove(r.name.as_str()).unwrap_or_default() {
            ordered.push((&rows[at], 1, None));
            placed[at] = true;
        }
    }
    // Those whose hook has no row, with the hook named.
    for (at, orphan) in rows.iter().enumerate() {
        if is_lsm(orphan) && !placed[at] {
            ordered.push((orphan, 0, Some(orphan.parent.as_deref().unwrap_or("?"))));
        }
    }
    ordered
}

/// Each row's own ns per op (`rows::ns_per_op`).
fn own_figures(rows: &[AttributionRow]) -> Vec<f64> {
    rows.iter().map(rows::ns_per_op).collect()
}

/// How an end-to-end change of `total_ns` per op divides into the breakdown's parts: each
/// part's change, the residual's being the change the outermost rows leave unexplained. Each
/// side is its rows with each row's ns per op, taken as the op's own figure was (a comparison
/// takes both from the same observations). None with no row on a side, or when the sides'
/// outermost rows are not the same paths (syscalls probed on one side only).
pub fn change(
    total_ns: f64,
    (old, old_ns): (&[AttributionRow], &[f64]),
    (new, new_ns): (&[AttributionRow], &[f64]),
) -> Option<(Level, [(Part, f64); 5])> {
    let (old_level, _) = outermost(old)?;
    let (new_level, _) = outermost(new)?;
    if old_level != new_level {
        return None;
    }
    // The old op as zero and the new one as the change: each part's difference, and the
    // residual's is the total less the outermost rows' change.
    let (before, after) = (parts_of(old, old_ns, 0.0), parts_of(new, new_ns, total_ns));
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
    fn the_cpu_time_is_the_whole_where_it_was_measured_and_json_says_so() {
        let mut r = sample_results();
        r.workloads[0].accounting = Some(accounting(4000.0, 0.0));
        r.derive_shares();
        let w = &r.workloads[0];
        assert_eq!(w.share_of, Some(ShareWhole::ProbedOpCpuTime));
        let b = Breakdown::of(w).unwrap();
        for p in &b.paths {
            assert_eq!(p.row.share, Some(p.share), "{}", p.row.name);
        }
        assert_eq!(w.attribution[0].share, Some(0.75));
        // What the run took the share of the clean op as stays, under its own name.
        assert_eq!(w.attribution[0].share_of_clean_op, Some(0.6));
    }

    #[test]
    fn the_parts_add_up_to_the_whole_and_the_residual_is_outside_the_syscalls() {
        let r = sample_results();
        let b = Breakdown::of(&r.workloads[0]).unwrap();
        assert_eq!((b.whole, b.whole_ns), (ShareWhole::ProbedOp, 5000.0));
        assert_eq!(b.level, Level::Syscalls);
        let sum: f64 = b.parts.figures.iter().map(|f| f.ns).sum();
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
        let sum: f64 = b.parts.figures.iter().map(|f| f.ns).sum();
        assert!((sum - 5000.0).abs() < 1e-9);
    }

    #[test]
    fn a_change_divides_into_the_parts_at_the_level_both_sides_share() {
        let old = sample_results().workloads[0].attribution.clone();
        let mut new = old.clone();
        new[0].ns_per_op += 300.0;
        new[1].ns_per_op += 100.0;
        let (old_ns, new_ns) = (own_figures(&old), own_figures(&new));
        let (level, parts) = change(500.0, (&old, &old_ns), (&new, &new_ns)).unwrap();
        assert_eq!(level, Level::Syscalls);
        let part = |p: Part| parts.iter().find(|(q, _)| *q == p).unwrap().1;
        assert_eq!(
            [part(Part::Syscall), part(Part::Hook), part(Part::Residual)],
            [200.0, 100.0, 200.0]
        );
        let sum: f64 = parts.iter().map(|(_, ns)| ns).sum();
        assert!((sum - 500.0).abs() < 1e-9);
        assert_eq!(
            change(500.0, (&old, &old_ns), (&new[1..], &new_ns[1..])),
            None
        );
    }
}
