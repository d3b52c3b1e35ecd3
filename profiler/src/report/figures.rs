//! What every report format says the same way: a figure in a unit scaled to its size (as
//! hyperfine prints `612.3 µs`, not `0.0006 s`), what a metric is called, the probes' cost
//! with the sign of a cost, the residual, a failed workload's phase and error, and where a
//! run's numbers came from.
use crate::{
    attribution::Breakdown,
    results::{rows, Results, ShareWhole, Source, Unit},
};

/// A number with about four significant digits, without exponent notation.
pub(crate) fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 10.0 {
        format!("{v:.2}")
    } else if a >= 1.0 {
        format!("{v:.3}")
    } else {
        format!("{v:.4}")
    }
}

/// `v` with the digits the half-width `half` of its 95% interval allows: rounded at the
/// half-width's first significant digit (its second where that is a 1), never finer than
/// `num`'s four significant digits; `num`'s digits without an interval.
pub(crate) fn num_within(v: f64, half: Option<f64>) -> String {
    let Some(half) = half.filter(|h| h.is_finite() && *h > 0.0) else {
        return num(v);
    };
    let mut place = half.log10().floor() as i32;
    // (A hair under 2: a half-width of exactly 2 units, scaled, comes out 1.9999999.)
    if half / 10f64.powi(place) < 2.0 - 1e-9 {
        place -= 1;
    }
    // num's own last digit, for the figure's size: never show more than it would.
    let finest = match v.abs() {
        a if a >= 1000.0 || a == 0.0 => 0,
        a if a >= 100.0 => -1,
        a if a >= 10.0 => -2,
        a if a >= 1.0 => -3,
        _ => -4,
    };
    let place = place.max(finest);
    if place >= 0 {
        let step = 10f64.powi(place);
        format!("{:.0}", (v / step).round() * step)
    } else {
        format!("{v:.*}", (-place) as usize)
    }
}

/// How a unit's figures are shown: times in the unit (ns, us, ms, s) that puts the figure the
/// scale was chosen for between 1 and 1000; other units as they are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Scale {
    factor: f64,
    pub symbol: &'static str,
}

impl Scale {
    /// The scale for figures of `unit` around `typical` (a mean: the whole line or table row
    /// then reads in one unit).
    pub fn of(unit: Unit, typical: f64) -> Scale {
        let as_is = Scale {
            factor: 1.0,
            symbol: unit.symbol(),
        };
        let Some(ns) = rows::op_ns(unit, typical).filter(|ns| ns.is_finite() && *ns != 0.0) else {
            return as_is;
        };
        let per_ns = ns / typical;
        let (unit_ns, symbol) = match ns.abs() {
            a if a < 1e3 => (1.0, "ns"),
            a if a < 1e6 => (1e3, "us"),
            a if a < 1e9 => (1e6, "ms"),
            _ => (1e9, "s"),
        };
        Scale {
            factor: per_ns / unit_ns,
            symbol,
        }
    }

    /// The figure in this scale's unit, without the symbol.
    pub fn number(self, v: f64) -> String {
        num(v * self.factor)
    }

    /// The figure in this scale's unit with the digits its interval allows (`num_within`).
    pub fn number_within(self, v: f64, half: Option<f64>) -> String {
        num_within(v * self.factor, half.map(|h| h * self.factor))
    }

    /// The figure with its unit: `612.3 us`.
    pub fn show(self, v: f64) -> String {
        format!("{} {}", self.number(v), self.symbol)
    }
}

/// What the probes cost, as a fraction of the clean figure: positive when the probed pass was
/// worse (slower, or less bandwidth), negative when it did better. None without a clean mean.
pub(crate) fn probe_cost(unit: Unit, clean_mean: f64, probed_mean: f64) -> Option<f64> {
    if clean_mean == 0.0 {
        return None;
    }
    let change = probed_mean / clean_mean - 1.0;
    Some(if unit.higher_is_better() {
        -change
    } else {
        change
    })
}

pub(crate) fn percent(fraction: f64) -> String {
    // A change from zero (forged or all-zero samples) has no percentage.
    if !fraction.is_finite() {
        return "n/a".into();
    }
    format!("{:+.1}%", fraction * 100.0)
}

/// `Residual: 4500 ns/op (90.0% of the clean op) outside the probed syscalls`, and why a
/// negative one is negative.
pub(crate) fn residual_sentence(b: &Breakdown) -> String {
    let ns = b.residual_ns();
    let mut s = format!(
        "Residual: {} ns/op ({:.1}% {}) {}",
        num(ns),
        ns / b.whole_ns * 100.0,
        b.whole.of(),
        b.level.describe()
    );
    match b.whole {
        ShareWhole::ProbedOpCpuTime => {
            s.push_str(" (user time, and the probes' cost outside the spans they time)");
            if ns < -0.05 * b.whole_ns {
                s.push_str(
                    ": below zero, the timed paths' CPU time (their enter-to-exit time less \
                     what sched_switch saw them switched out) exceeds the CPU time sched_switch \
                     counted for the op's tasks",
                );
            }
        }
        ShareWhole::CleanOp if ns < 0.0 => s.push_str(
            ": the probed paths take more than the clean op (their times include the probes' \
             own cost)",
        ),
        ShareWhole::CleanOp => {}
    }
    s
}

/// Why a run is incomplete: the workloads that failed, else an interruption.
pub(crate) fn incomplete_reason(r: &Results) -> Option<String> {
    if r.complete {
        return None;
    }
    let failed = r.failed_workloads();
    Some(match failed.len() {
        0 => "the run was interrupted".into(),
        1 => format!("workload {} failed", failed[0]),
        n => format!("{n} workloads failed ({})", failed.join(", ")),
    })
}

/// `label base, measured by hookprof` or `label 00-base, imported from lmbench`.
pub(crate) fn origin(r: &Results) -> String {
    match &r.source {
        Source::Import(from) => format!("label {}, imported from {from}", r.label),
        Source::Hookprof => format!("label {}, measured by hookprof", r.label),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_figure_carries_the_digits_its_interval_allows() {
        assert_eq!(num_within(75184.0, Some(9000.0)), "75000");
        assert_eq!(num_within(75.184, Some(9.0)), "75");
        assert_eq!(num_within(46.1, Some(5.6)), "46");
        assert_eq!(num_within(0.3, Some(0.85)), "0.3");
        // A leading 1 keeps a second digit.
        assert_eq!(num_within(12.3456, Some(0.15)), "12.35");
        // Never finer than four significant digits, and those without an interval.
        assert_eq!(num_within(1234.4, Some(0.01)), "1234");
        assert_eq!(num_within(1234.4, None), num(1234.4));
    }
    use crate::results::fixtures::sample_results;

    #[test]
    fn times_are_shown_in_the_unit_their_size_calls_for() {
        let s = Scale::of(Unit::Seconds, 0.0006);
        assert_eq!(
            (s.show(0.0006), s.show(0.0001), s.symbol),
            ("600.0 us".into(), "100.0 us".into(), "us")
        );
        assert_eq!(Scale::of(Unit::Seconds, 0.0123).show(0.0123), "12.30 ms");
        assert_eq!(Scale::of(Unit::Seconds, 124.36).show(124.36), "124.4 s");
        assert_eq!(
            Scale::of(Unit::Microseconds, 0.1923).show(0.1923),
            "192.3 ns"
        );
        assert_eq!(Scale::of(Unit::Microseconds, 5.0).show(5.0), "5.000 us");
        assert_eq!(
            Scale::of(Unit::Microseconds, 1742.0).show(1742.0),
            "1.742 ms"
        );
        assert_eq!(Scale::of(Unit::Nanoseconds, 1.272).show(1.272), "1.272 ns");
        // Not a time, or nothing to size it by: as it is.
        assert_eq!(
            Scale::of(Unit::MegabytesPerSecond, 977.6).show(977.6),
            "977.6 MB/s"
        );
        assert_eq!(Scale::of(Unit::Seconds, 0.0).show(0.0), "0 s");
    }

    #[test]
    fn the_probes_cost_is_positive_when_they_made_things_worse() {
        assert_eq!(
            probe_cost(Unit::Microseconds, 5.0, 5.5).map(percent),
            Some("+10.0%".into())
        );
        // 1121 MB/s probed against 977.6 clean: the probed pass moved more, a negative cost.
        let bw = probe_cost(Unit::MegabytesPerSecond, 977.6, 1121.0).unwrap();
        assert_eq!(percent(bw), "-14.7%");
        assert_eq!(
            probe_cost(Unit::MegabytesPerSecond, 1000.0, 900.0).map(percent),
            Some("+10.0%".into())
        );
        assert_eq!(probe_cost(Unit::Seconds, 0.0, 1.0), None);
    }

    #[test]
    fn a_negative_residual_is_the_same_figure_and_says_why() {
        let mut w = sample_results().workloads[0].clone();
        let b = Breakdown::of(&w).unwrap();
        assert!(
            residual_sentence(&b).starts_with(
                "Residual: 2000 ns/op (40.0% of the clean op) outside the probed syscalls"
            ),
            "{}",
            residual_sentence(&b)
        );
        w.clean = vec![2.9];
        let b = Breakdown::of(&w).unwrap();
        assert!(
            residual_sentence(&b)
                .starts_with("Residual: -100.0 ns/op (-3.4% of the clean op) outside the probed syscalls: the probed paths take more"),
            "{}",
            residual_sentence(&b)
        );
    }

    #[test]
    fn a_bandwidth_op_is_what_its_rows_clean_shares_were_taken_of() {
        let mut w = sample_results().workloads[0].clone();
        w.unit = Unit::MegabytesPerSecond;
        // The fixture's shares are of a 5000 ns op.
        let b = Breakdown::of(&w).unwrap();
        assert_eq!(b.whole_ns, 5000.0);
        w.attribution.clear();
        assert!(Breakdown::of(&w).is_none());
    }

    #[test]
    fn a_failure_names_its_phase_once_and_an_incomplete_run_its_cause() {
        let f = crate::results::WorkloadFailure {
            phase: "warm-up".into(),
            error: "warm-up: '/bin/false' failed (exit status: 1)".into(),
        };
        assert_eq!(
            f.sentence(),
            "failed in warm-up: '/bin/false' failed (exit status: 1)"
        );
        let mut r = sample_results();
        assert_eq!(incomplete_reason(&r), None);
        r.complete = false;
        assert_eq!(incomplete_reason(&r).unwrap(), "the run was interrupted");
        r.workloads[1].failure = Some(f);
        assert_eq!(incomplete_reason(&r).unwrap(), "workload build failed");
    }

    #[test]
    fn the_origin_says_label_and_source() {
        let mut r = sample_results();
        assert_eq!(origin(&r), "label base, measured by hookprof");
        r.source = Source::Import("lmbench".into());
        assert_eq!(origin(&r), "label base, imported from lmbench");
    }
}
