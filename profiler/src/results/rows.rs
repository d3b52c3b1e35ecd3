//! The arithmetic the reports and `compare` do on attribution rows: an operation's time in
//! nanoseconds, a row's ns per op, which rows add up without counting a nanosecond twice (the
//! level), what is left of an operation outside them (the residual), and the order reports
//! list them in.
use super::{AttributionRow, PathKind, Unit};

/// One operation's time in nanoseconds, for metrics that are a time per operation.
pub fn op_ns(unit: Unit, value: f64) -> Option<f64> {
    match unit {
        Unit::Nanoseconds => Some(value),
        Unit::Microseconds => Some(value * 1e3),
        Unit::Seconds => Some(value * 1e9),
        Unit::MegabytesPerSecond | Unit::Percent => None,
    }
}

/// A row's ns per op: the mean of its per-sample values when there are any (pooled files keep
/// them all), else the run's own figure.
pub fn ns_per_op(row: &AttributionRow) -> f64 {
    if row.samples_ns_per_op.is_empty() {
        row.ns_per_op
    } else {
        row.samples_ns_per_op.iter().sum::<f64>() / row.samples_ns_per_op.len() as f64
    }
}

/// A row's share of the op, of the whole the residual is taken from (`report::figures::
/// Residual`): the probed op's CPU time over all its tasks where sched_switch measured it (the
/// rows are CPU time then, so shares of one level never pass 100% but for noise), else the
/// clean op (the row's own `share`).
pub fn share(row: &AttributionRow, accounting: Option<&super::Accounting>) -> f64 {
    match accounting.filter(|a| a.on_cpu_ns_per_op > 0.0) {
        Some(a) => ns_per_op(row) / a.on_cpu_ns_per_op,
        None => row.share,
    }
}

/// The share column's heading for `share`.
pub fn share_heading(accounting: Option<&super::Accounting>) -> &'static str {
    if accounting.is_some() {
        "CPU share"
    } else {
        "share"
    }
}

/// What the residual is measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `security_*` hooks: their LSM rows run inside them, syscalls and task paths around them.
    Hooks,
    /// Syscalls, when no hook was probed (the residual is then user-space time).
    Syscalls,
}

impl Level {
    /// The level used for rows of these kinds: hooks when any hook was probed.
    pub fn of(kinds: impl IntoIterator<Item = PathKind>) -> Option<Level> {
        let mut level = None;
        for kind in kinds {
            match kind {
                PathKind::Hook => return Some(Level::Hooks),
                PathKind::Syscall => level = Some(Level::Syscalls),
                PathKind::Lsm | PathKind::TaskPath => {}
            }
        }
        level
    }

    /// The kind of the rows that make up this level.
    pub fn kind(self) -> PathKind {
        match self {
            Level::Hooks => PathKind::Hook,
            Level::Syscalls => PathKind::Syscall,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Level::Hooks => "outside the probed hooks",
            Level::Syscalls => "outside the probed syscalls",
        }
    }
}

/// The level whose rows are disjoint in time, and those rows; None when nothing was attributed.
pub fn top_level(rows: &[AttributionRow]) -> Option<(Level, Vec<&AttributionRow>)> {
    let level = Level::of(rows.iter().map(|r| r.kind))?;
    Some((
        level,
        rows.iter().filter(|r| r.kind == level.kind()).collect(),
    ))
}

/// The op time (ns) not inside the top-level rows, with the level it refers to.
pub fn residual_ns(op_ns: f64, rows: &[AttributionRow]) -> Option<(Level, f64)> {
    let (level, top) = top_level(rows)?;
    Some((level, op_ns - top.iter().map(|r| ns_per_op(r)).sum::<f64>()))
}

/// Rows in display order: each top-level row followed by the LSM rows under it; LSM rows whose
/// hook is not in the table come last, marked with their parent.
pub fn ordered_rows(rows: &[AttributionRow]) -> Vec<(String, &AttributionRow)> {
    let mut ordered = Vec::new();
    for r in rows.iter().filter(|r| r.kind != PathKind::Lsm) {
        ordered.push((r.name.clone(), r));
        for child in rows
            .iter()
            .filter(|c| c.kind == PathKind::Lsm && c.parent.as_deref() == Some(&r.name))
        {
            ordered.push((format!("  {}", child.name), child));
        }
    }
    for orphan in rows.iter().filter(|c| {
        c.kind == PathKind::Lsm
            && !rows
                .iter()
                .any(|p| p.kind != PathKind::Lsm && c.parent.as_deref() == Some(&p.name))
    }) {
        let under = orphan.parent.as_deref().unwrap_or("?");
        ordered.push((format!("{} (under {under})", orphan.name), orphan));
    }
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain_row(kind: PathKind, name: &str, ns: f64) -> AttributionRow {
        AttributionRow {
            kind,
            name: name.into(),
            parent: None,
            lsm: None,
            corrected_ns_per_call: 0.0,
            corrected_ns_per_op: 0.0,
            correction: None,
            dispatch_ns_per_op: None,
            calls_per_op: 1.0,
            ns_per_call: ns,
            ns_per_op: ns,
            share: 0.0,
            untimed_calls: 0,
            histogram: vec![],
            samples_ns_per_op: vec![],
            off_cpu_ns_per_op: None,
        }
    }

    #[test]
    fn hooks_are_the_top_level_when_probed_and_lsm_rows_are_not_added_again() {
        let rows = vec![
            plain_row(PathKind::Syscall, "openat", 3000.0),
            plain_row(PathKind::Hook, "security_file_open", 400.0),
            plain_row(PathKind::Lsm, "apparmor_file_open", 380.0),
            plain_row(PathKind::Hook, "security_file_free", 100.0),
        ];
        assert_eq!(residual_ns(5000.0, &rows), Some((Level::Hooks, 4500.0)));
        assert_eq!(
            residual_ns(5000.0, &rows[..1]),
            Some((Level::Syscalls, 2000.0))
        );
        assert_eq!(residual_ns(5000.0, &[]), None);
    }

    #[test]
    fn per_sample_values_win_over_the_single_figure() {
        let mut r = plain_row(PathKind::Hook, "h", 10.0);
        r.samples_ns_per_op = vec![1.0, 3.0];
        assert_eq!(ns_per_op(&r), 2.0);
        assert_eq!(op_ns(Unit::Microseconds, 2.5), Some(2500.0));
        assert_eq!(op_ns(Unit::MegabytesPerSecond, 2.5), None);
    }
}
