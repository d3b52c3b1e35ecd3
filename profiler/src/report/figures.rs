//! What every report format says the same way: a figure in a unit scaled to its size (as
//! hyperfine prints `612.3 µs`, not `0.0006 s`), what a metric is called, the probes' cost
//! with the sign of a cost, the residual, a failed workload's phase and error, and where a
//! run's numbers came from.
use crate::{
    attribution::{Breakdown, Part},
    results::{rows, Results, ShareWhole, Source, Unit, WorkloadResult},
    stats,
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

/// A round figure as it is, without trailing zeros (`0.5`, `200`): an axis' ticks.
pub(crate) fn round_figure(v: f64) -> String {
    let s = format!("{:.6}", if v == 0.0 { 0.0 } else { v });
    s.trim_end_matches('0').trim_end_matches('.').to_string()
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

    /// An axis tick's round figure with its unit, without trailing zeros: `1.5 us`, `200 ns`.
    pub fn tick(self, v: f64) -> String {
        format!("{} {}", round_figure(v * self.factor), self.symbol)
    }

    /// The figure with its unit: `612.3 us`.
    pub fn show(self, v: f64) -> String {
        format!("{} {}", self.number(v), self.symbol)
    }
}

/// What the probes cost, as a fraction of the clean mean with the 95% interval of the
/// difference (Welch): `+28.6% (+20.1% to +37.0%)`, or `within noise (+-5.1%)` where the
/// interval holds 0. Positive is worse (slower, or less bandwidth). None without a clean mean.
pub(crate) fn probe_overhead(
    unit: Unit,
    clean: &stats::Summary,
    probed: &stats::Summary,
) -> Option<String> {
    if clean.mean == 0.0 || !clean.mean.is_finite() {
        return None;
    }
    let sign = if unit.higher_is_better() { -1.0 } else { 1.0 };
    let relative = |v: f64| sign * v / clean.mean;
    let change = relative(probed.mean - clean.mean);
    let Some((low, high)) = stats::difference_interval(clean, probed) else {
        return Some(format!(
            "{} (one sample: no interval)",
            signed_percent(change, 1)
        ));
    };
    let (low, high) = {
        let (a, b) = (relative(low), relative(high));
        (a.min(b), a.max(b))
    };
    Some(if low <= 0.0 && high >= 0.0 {
        format!("within noise (+-{:.1}%)", (high - low) / 2.0 * 100.0)
    } else if high < 0.0 {
        // Probes cannot make an op better: the passes met different conditions.
        format!(
            "not told: the probed passes did {:.1}% better ({:.1}% to {:.1}%) than the clean \
             ones, which met other conditions",
            -change * 100.0,
            -high * 100.0,
            -low * 100.0
        )
    } else {
        format!(
            "{} ({} to {})",
            signed_percent(change, 1),
            signed_percent(low, 1),
            signed_percent(high, 1)
        )
    })
}

/// A p-value as reports print it: two decimals, or one significant digit in exponent form
/// below 0.01.
pub(crate) fn format_p(p: f64) -> String {
    if p >= 0.01 || p == 0.0 {
        format!("{p:.2}")
    } else {
        format!("{p:.1e}")
    }
}

/// A share or ratio as a percentage with one decimal (`12.3%`); "n/a" where it has none.
pub(crate) fn percent(fraction: f64) -> String {
    if !fraction.is_finite() {
        return "n/a".into();
    }
    format!("{:.1}%", fraction * 100.0)
}

/// A change as a signed percentage with `decimals` decimals (`+1.25%`); "n/a" for a change
/// from zero (forged or all-zero samples), and rounding noise never prints as "-0.0%".
pub(crate) fn signed_percent(fraction: f64, decimals: usize) -> String {
    if !fraction.is_finite() {
        return "n/a".into();
    }
    let percent = fraction * 100.0;
    let percent = if percent.abs() < 0.5 * 10f64.powi(-(decimals as i32)) {
        0.0
    } else {
        percent
    };
    format!("{percent:+.decimals$}%")
}

/// `Other BPF program sys_enter (bpftrace (pid 812), raw_tracepoint sys_enter): 1.02 runs/op,
/// 63.1 ns/op`, a line each, from the kernel's BPF statistics over the pricing samples.
pub(crate) fn other_program_lines(w: &WorkloadResult) -> Vec<String> {
    w.other_programs
        .iter()
        .map(|p| {
            let name = if p.name.is_empty() {
                format!("id {}", p.program_id)
            } else {
                p.name.clone()
            };
            format!(
                "Other BPF program {name} ({}, {}): {} runs/op, {}/op by the kernel's BPF \
                 statistics over an untimed sample a round (every run of it meanwhile)",
                p.holder,
                p.attach,
                num(p.runs_per_op()),
                Scale::of(Unit::Nanoseconds, p.ns_per_op()).show(p.ns_per_op())
            )
        })
        .collect()
}

/// `Residual: 4.5 us/op (90.0% of the op's own CPU time, 88.1-91.8%) outside the timed
/// syscalls, hooks and task paths: exit_group (...) 60.2%, user time 20.1%, ...`: the residual
/// in the unit of the table, each piece with its share. A timed residual (no stacks sampled)
/// is not split, and one the timed paths overrun is said in words, never as a figure below 0.
pub(crate) fn residual_sentence(b: &Breakdown) -> String {
    let parts = &b.parts;
    let residual = parts.figure(Part::Residual);
    let scale = Scale::of(Unit::Nanoseconds, parts.whole_ns);
    if !parts.sampled && residual.ns < 0.0 {
        return format!(
            "Residual: none measurable {}: the timed paths take {} more than the op's {} {} \
             (their spans hold the probes' own cost)",
            parts.outside,
            scale.show(-residual.ns),
            match parts.whole {
                ShareWhole::CleanOp => "clean time",
                ShareWhole::ProbedOp => "probed time",
                _ => "CPU time",
            },
            scale.show(parts.whole_ns),
        );
    }
    let interval = residual
        .interval
        .map(|(low, high)| format!(", {}-{}", percent(low), percent(high)))
        .unwrap_or_default();
    let mut s = format!(
        "Residual: {} {}/op ({} {}{interval}) {}",
        scale.number(residual.ns),
        scale.symbol,
        percent(residual.share),
        parts.whole.of(),
        parts.outside
    );
    if parts.sampled {
        let pieces: Vec<String> = parts
            .residual
            .iter()
            .map(|p| format!("{} {} ({})", p.name, percent(p.share), scale.show(p.ns)))
            .collect();
        if !pieces.is_empty() {
            s.push_str(": ");
            s.push_str(&pieces.join(", "));
        }
    } else {
        s.push_str(
            " (not split: no stacks were sampled; user time, kernel work outside the timed \
             paths, and the probes' cost outside their spans)",
        );
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
    fn the_probes_cost_carries_its_interval_and_a_cost_within_noise_reads_so() {
        let summary = |v: &[f64]| stats::summarize(v).unwrap();
        let clean = summary(&[5.0, 5.1, 4.9, 5.0]);
        let slower = summary(&[5.5, 5.6, 5.4, 5.5]);
        let s = probe_overhead(Unit::Microseconds, &clean, &slower).unwrap();
        assert!(s.starts_with("+10.0% (+"), "{s}");
        // Bandwidth: the probed pass moving less is the cost.
        let s = probe_overhead(Unit::MegabytesPerSecond, &slower, &clean).unwrap();
        assert!(s.starts_with("+9.1% (+"), "{s}");
        // A probed pass that read faster by noise: no negative cost, an interval.
        let noisy = summary(&[4.6, 5.3, 4.8, 5.2]);
        let s = probe_overhead(Unit::Microseconds, &clean, &noisy).unwrap();
        assert!(s.starts_with("within noise (+-"), "{s}");
        // A probed pass told apart as better: said in words, never as a negative cost.
        let s = probe_overhead(Unit::Microseconds, &slower, &clean).unwrap();
        assert!(
            s.starts_with("not told: the probed passes did 9.1% better ("),
            "{s}"
        );
        assert!(!s.contains('-') || s.starts_with("within noise (+-"), "{s}");
        assert_eq!(
            probe_overhead(Unit::Seconds, &summary(&[0.0]), &clean),
            None
        );
    }

    #[test]
    fn a_timed_residual_the_paths_overrun_is_said_in_words_not_below_zero() {
        let mut w = sample_results().workloads[0].clone();
        let b = Breakdown::of(&w).unwrap();
        assert!(
            residual_sentence(&b).starts_with(
                "Residual: 2.000 us/op (40.0% of the probed op) outside the probed syscalls (not split"
            ),
            "{}",
            residual_sentence(&b)
        );
        w.probed = vec![2.9];
        let b = Breakdown::of(&w).unwrap();
        let s = residual_sentence(&b);
        assert!(
            s.starts_with(
                "Residual: none measurable outside the probed syscalls: the timed paths take \
                 0.1000 us more than the op's probed time 2.900 us"
            ),
            "{s}"
        );
        assert!(!s.contains('-'), "{s}");
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
