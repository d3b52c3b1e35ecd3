//! The arithmetic on one attribution row or figure: an operation's time in nanoseconds and a
//! row's ns per op. How rows add up to an op is `attribution::Breakdown`'s.
use super::{AttributionRow, Unit};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PathKind;

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
}
