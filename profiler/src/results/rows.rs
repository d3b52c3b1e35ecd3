//! The arithmetic on one attribution row or figure: an operation's time in nanoseconds, a
//! row's ns per op, and the whole a workload's row shares are of (kept in the file, so a
//! loaded file is read the way a run writes it). How rows add up to an op is
//! `attribution::Breakdown`'s.
use super::{AttributionRow, Results, ShareWhole, Unit, WorkloadResult};
use crate::stats;

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

/// What `w`'s timed shares are of, in ns per op: the probed op's CPU time over all its tasks
/// where sched_switch measured it (the rows are CPU time then, so shares of one level add up
/// to at most 100% but for noise), else the probed op's time (the pass the rows timed, the
/// probes' cost in both), else the clean op (a bandwidth op, whose time the rows' clean
/// shares give). A CPU time some row outgrows is passed over for the probed op's time: a
/// part above that whole is two measurements of one pass disagreeing (under TCG a syscall
/// timed at 232 us of CPU in an op whose tasks' switches summed 204), never a share above
/// 100%. (Paths overrunning the probed op's time are said in words by the breakdown.)
pub fn whole_of(w: &WorkloadResult) -> Option<(ShareWhole, f64)> {
    let largest_row = w.attribution.iter().map(ns_per_op).fold(0.0, f64::max);
    let cpu = w
        .accounting
        .as_ref()
        .map(|a| a.on_cpu_ns_per_op)
        .filter(|ns| *ns > 0.0 && *ns >= largest_row);
    if let Some(ns) = cpu {
        return Some((ShareWhole::ProbedOpCpuTime, ns));
    }
    let probed = stats::summarize(&w.probed)
        .and_then(|p| op_ns(w.unit, p.mean))
        .filter(|ns| *ns > 0.0);
    if let Some(ns) = probed {
        return Some((ShareWhole::ProbedOp, ns));
    }
    let clean = stats::summarize(&w.clean)?;
    clean_op_ns(w, clean.mean)
        .filter(|ns| *ns > 0.0)
        .map(|ns| (ShareWhole::CleanOp, ns))
}

/// The clean op in ns: a time metric's mean, or, for bandwidth, what the run took the rows'
/// clean-op shares of (each row's ns per op over that share).
pub fn clean_op_ns(w: &WorkloadResult, clean_mean: f64) -> Option<f64> {
    op_ns(w.unit, clean_mean).or_else(|| {
        w.attribution.iter().find_map(|r| {
            let share = r.share_of_clean_op.filter(|s| *s > 0.0)?;
            (r.ns_per_op > 0.0).then(|| r.ns_per_op / share)
        })
    })
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
                r.share = Some(ns_per_op(r) / whole_ns).filter(|share| *share <= 1.0);
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
                r.share_of_clean_op = r.share;
                old = true;
            }
        }
        if old {
            self.derive_shares();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{
        fixtures::{self, sample_results},
        PathKind,
    };

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
            share: Some(0.0),
            share_of_clean_op: None,
            untimed_calls: 0,
            histogram: vec![],
            samples_ns_per_op: vec![],
            off_cpu_ns_per_op: None,
        }
    }

    #[test]
    fn per_sample_values_win_over_the_single_figure() {
        let mut r = plain_row(PathKind::Hook, "h", 10.0);
        r.samples_ns_per_op = vec![1.0, 3.0];
        assert_eq!(ns_per_op(&r), 2.0);
        assert_eq!(op_ns(Unit::Microseconds, 2.5), Some(2500.0));
        assert_eq!(op_ns(Unit::MegabytesPerSecond, 2.5), None);
    }

    #[test]
    fn a_whole_some_row_outgrows_is_passed_over() {
        let mut r = sample_results();
        let w = &mut r.workloads[0];
        let largest = w.attribution.iter().map(ns_per_op).fold(0.0, f64::max);
        // The probed op: 5.0 us; its CPU time first where every row fits it.
        w.accounting = Some(fixtures::accounting(largest + 1.0, 0.0));
        assert_eq!(
            whole_of(w),
            Some((ShareWhole::ProbedOpCpuTime, largest + 1.0))
        );
        // A row above the CPU time: the probed op's time holds it.
        w.accounting = Some(fixtures::accounting(largest - 1.0, 0.0));
        assert_eq!(whole_of(w), Some((ShareWhole::ProbedOp, 5000.0)));
        r.derive_shares();
        let w = &r.workloads[0];
        assert!(
            w.attribution
                .iter()
                .all(|r| r.share.is_some_and(|s| s <= 1.0)),
            "{w:?}"
        );
    }

    #[test]
    fn a_row_above_every_whole_has_no_share_and_its_json_none() {
        let mut r = sample_results();
        let w = &mut r.workloads[0];
        // A row timed longer than the probed op's 5.0 us and its CPU time alike.
        w.attribution[0].samples_ns_per_op = vec![6000.0, 7000.0];
        w.accounting = Some(fixtures::accounting(5500.0, 0.0));
        r.derive_shares();
        let w = &r.workloads[0];
        assert_eq!(w.share_of, Some(ShareWhole::ProbedOp));
        assert_eq!(w.attribution[0].share, None);
        assert!(w.attribution[1..].iter().all(|r| r.share.is_some()));
        let json = serde_json::to_value(&w.attribution[0]).unwrap();
        assert!(json.get("share").is_none(), "{json}");
        let back: AttributionRow = serde_json::from_value(json).unwrap();
        assert_eq!(back.share, None);
    }

    #[test]
    fn an_old_file_s_share_was_of_the_clean_op() {
        let mut r = sample_results();
        for w in &mut r.workloads {
            w.share_of = None;
            for row in &mut w.attribution {
                row.share_of_clean_op = None;
                row.share = Some(0.123);
            }
        }
        r.read_old_shares();
        let w = &r.workloads[0];
        assert_eq!(w.attribution[0].share_of_clean_op, Some(0.123));
        // Shares are made again as runs make them: of the probed op the rows timed.
        assert_eq!(w.share_of, Some(ShareWhole::ProbedOp));
        assert_eq!(w.attribution[0].share, Some(0.6));
    }
}
