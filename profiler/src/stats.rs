//! Summary statistics and two-sample comparison: pure functions, no I/O.
//!
//! Every number returned is finite: cases where a textbook formula divides by zero (one sample,
//! zero variance) are decided explicitly and documented on the function.
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// Confidence level of every interval in hookprof.
pub const CONFIDENCE: f64 = 0.95;

/// Tukey's outlier counts: mild beyond 1.5 IQR from the quartiles, severe beyond 3 IQR.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Outliers {
    pub low_mild: usize,
    pub high_mild: usize,
    pub low_severe: usize,
    pub high_severe: usize,
}

impl Outliers {
    pub fn mild(&self) -> usize {
        self.low_mild + self.high_mild
    }
    pub fn severe(&self) -> usize {
        self.low_severe + self.high_severe
    }
}

/// One metric's samples, summarised.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    /// Sample standard deviation (n - 1); 0 for a single sample.
    pub stdev: f64,
    /// Population standard deviation (n), what lmbench's STDEV rows show.
    pub pop_stdev: f64,
    pub min: f64,
    pub max: f64,
    /// stdev / |mean|; 0 when the mean is 0.
    pub cv: f64,
    /// 95% confidence interval of the mean (Student t); None for fewer than two samples.
    pub ci: Option<(f64, f64)>,
    pub outliers: Outliers,
}

impl Summary {
    /// Half the width of the confidence interval (0 when there is none).
    pub fn ci_half_width(&self) -> f64 {
        self.ci.map_or(0.0, |(lo, hi)| hi / 2.0 - lo / 2.0)
    }
}

/// Summarises `samples`; None when there are none. Non-finite samples are ignored.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    // In units of the largest magnitude, so sums and squares of values near f64::MAX stay
    // finite; the figures are scaled back at the end.
    let scale = sorted[0].abs().max(sorted[n - 1].abs());
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let mean_z = sorted.iter().map(|v| v / scale).sum::<f64>() / n as f64;
    let sum_sq: f64 = sorted.iter().map(|v| (v / scale - mean_z).powi(2)).sum();
    let stdev_z = if n > 1 {
        (sum_sq / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    let (mean, stdev) = (mean_z * scale, finite(stdev_z * scale));
    let pop_stdev = finite((sum_sq / n as f64).sqrt() * scale);
    let ci = (n > 1).then(|| {
        let half = t_quantile(n as f64 - 1.0) * stdev_z / (n as f64).sqrt();
        (
            finite((mean_z - half) * scale),
            finite((mean_z + half) * scale),
        )
    });
    Some(Summary {
        n,
        mean,
        median: quantile(&sorted, 0.5),
        stdev,
        pop_stdev,
        min: sorted[0],
        max: sorted[n - 1],
        cv: if mean == 0.0 {
            0.0
        } else {
            finite(stdev_z / mean_z.abs())
        },
        ci,
        outliers: tukey_outliers(&sorted),
    })
}

/// The two-sided critical value of Student's t for [`CONFIDENCE`] at `df` degrees of freedom.
/// The 95% Wilson score interval of a proportion seen `k` times in `n` trials (sample counts:
/// it stays inside 0..1 and is honest for small counts, where the normal interval is not).
pub fn wilson_interval(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let z = Normal::standard().inverse_cdf(0.975);
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    // At k = 0 (or n) the bound is 0 (or 1) exactly; rounding must not move it.
    let low = if k == 0.0 {
        0.0
    } else {
        (centre - half).max(0.0)
    };
    let high = if k == n {
        1.0
    } else {
        (centre + half).min(1.0)
    };
    (low, high)
}

fn t_quantile(df: f64) -> f64 {
    // Each is an iterative inverse of the incomplete beta, and the same few degrees of freedom
    // recur in every summary: a thousand files' rounds spent a fifth of `history` here.
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<u64, f64>> =
            Default::default();
    }
    KNOWN.with(|known| {
        *known.borrow_mut().entry(df.to_bits()).or_insert_with(|| {
            StudentsT::new(0.0, 1.0, df)
                .expect("df > 0")
                .inverse_cdf(0.5 + CONFIDENCE / 2.0)
        })
    })
}

/// Quantile of sorted data by linear interpolation between order statistics (R type 7, the
/// default of R and numpy, so reference values are easy to reproduce).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    let f = pos - lo as f64;
    // A weighted sum, not lo + (hi - lo) * f: the difference of extremes can overflow.
    if f == 0.0 {
        sorted[lo]
    } else {
        sorted[lo] * (1.0 - f) + sorted[hi] * f
    }
}

/// `x`, or the largest finite value of its sign where the arithmetic overflowed (a spread or
/// interval of values near f64::MAX): every figure hookprof reports is a number.
fn finite(x: f64) -> f64 {
    x.clamp(f64::MIN, f64::MAX)
}

fn tukey_outliers(sorted: &[f64]) -> Outliers {
    let (q1, q3) = (quantile(sorted, 0.25), quantile(sorted, 0.75));
    let iqr = q3 - q1;
    let mut out = Outliers::default();
    for &v in sorted {
        if v < q1 - 3.0 * iqr {
            out.low_severe += 1;
        } else if v < q1 - 1.5 * iqr {
            out.low_mild += 1;
        } else if v > q3 + 3.0 * iqr {
            out.high_severe += 1;
        } else if v > q3 + 1.5 * iqr {
            out.high_mild += 1;
        }
    }
    out
}

/// Welch's unequal-variance t-test of new vs old.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Welch {
    /// mean(new) - mean(old).
    pub difference: f64,
    /// Standard error of the difference.
    pub std_error: f64,
    /// Welch-Satterthwaite degrees of freedom (0 when both sides have zero variance).
    pub df: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// 95% confidence interval of the difference.
    pub ci: (f64, f64),
}

/// Welch's t-test; None when a side has fewer than two samples (no variance estimate).
///
/// With zero variance on both sides the difference is known exactly: p = 1 when the means are
/// equal, p = 0 when they differ, and the interval is the point.
pub fn welch(old: &Summary, new: &Summary) -> Option<Welch> {
    if old.n < 2 || new.n < 2 {
        return None;
    }
    // In units of the largest figure, so that differences and squares of values near f64::MAX
    // stay finite (t, df and p do not depend on the unit).
    let scale = [old.mean, new.mean, old.stdev, new.stdev]
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()));
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let difference = new.mean / scale - old.mean / scale;
    let (vo, vn) = (
        (old.stdev / scale).powi(2) / old.n as f64,
        (new.stdev / scale).powi(2) / new.n as f64,
    );
    let var = vo + vn;
    let (df, std_error) = if var == 0.0 {
        (0.0, 0.0)
    } else {
        let df = var.powi(2) / (vo.powi(2) / (old.n - 1) as f64 + vn.powi(2) / (new.n - 1) as f64);
        // Squares of tiny variances underflow to 0/0: fall back to the pooled degrees of
        // freedom. Welch's df lies between the smaller side's n - 1 and the pooled df; rounding
        // may not.
        let pooled = (old.n + new.n - 2) as f64;
        let df = if df.is_finite() { df } else { pooled };
        (df.clamp((old.n.min(new.n) - 1) as f64, pooled), var.sqrt())
    };
    let TTest { p_value, ci } = t_test(difference, std_error, df)?;
    Some(Welch {
        difference: finite(difference * scale),
        std_error: finite(std_error * scale),
        df,
        p_value,
        ci: (finite(ci.0 * scale), finite(ci.1 * scale)),
    })
}

/// A two-sided test of a difference against 0.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TTest {
    pub p_value: f64,
    /// 95% interval of the difference.
    pub ci: (f64, f64),
}

/// Student's t-test of `difference` against 0 with this standard error and degrees of
/// freedom. A zero (or non-finite) standard error means the difference is known exactly:
/// p = 1 when it is 0, else p = 0, and the interval is the point. None when `df` admits no t
/// distribution.
pub fn t_test(difference: f64, std_error: f64, df: f64) -> Option<TTest> {
    if std_error == 0.0 || !std_error.is_finite() {
        let p_value = if difference == 0.0 { 1.0 } else { 0.0 };
        return Some(TTest {
            p_value,
            ci: (difference, difference),
        });
    }
    let dist = StudentsT::new(0.0, 1.0, df).ok()?;
    let p_value = (2.0 * dist.sf((difference / std_error).abs())).clamp(0.0, 1.0);
    let half = dist.inverse_cdf(0.5 + CONFIDENCE / 2.0) * std_error;
    Some(TTest {
        p_value,
        ci: (difference - half, difference + half),
    })
}

/// Holm's step-down adjustment of a family of p-values, returned in the input order.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut adjusted = vec![0.0; m];
    let mut running_max: f64 = 0.0;
    for (rank, &i) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * p_values[i]).min(1.0);
        running_max = running_max.max(scaled);
        adjusted[i] = running_max;
    }
    adjusted
}

/// What a comparison concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regressed,
    Improved,
    NoChange,
    Inconclusive,
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no change",
            Verdict::Inconclusive => "inconclusive",
        })
    }
}

/// When a change counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Criteria {
    /// Significance level for the Holm-adjusted p-value.
    pub alpha: f64,
    /// Smallest relative change that matters (0.01 = 1%).
    pub threshold: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            alpha: 0.05,
            threshold: 0.01,
        }
    }
}

/// A non-significant result is only "no change" if the interval rules out changes this many
/// times the threshold (10% at the default 1%); otherwise the data cannot tell.
const INCONCLUSIVE_WIDTH_FACTOR: f64 = 10.0;

/// Relative change of new vs old with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// mean(new) / mean(old) - 1.
    pub relative: f64,
    /// The Welch interval of the difference divided by mean(old) (the old mean taken as
    /// exact, as criterion and hyperfine do); None when Welch's test is not possible.
    pub ci: Option<(f64, f64)>,
    /// Unadjusted two-sided p-value; None when Welch's test is not possible.
    pub p_value: Option<f64>,
}

/// The relative change of `new` against `old`; None when the old mean is 0 (no ratio).
pub fn relative_change(old: &Summary, new: &Summary) -> Option<Change> {
    if old.mean == 0.0 {
        return None;
    }
    let scale = old.mean.abs();
    let test = welch(old, new);
    Some(Change {
        relative: finite(new.mean / scale - old.mean / scale),
        ci: test.map(|w| (finite(w.ci.0 / scale), finite(w.ci.1 / scale))),
        p_value: test.map(|w| w.p_value),
    })
}

/// The verdict for one change, given its Holm-adjusted p-value and which way is better.
pub fn verdict(
    change: &Change,
    adjusted_p: Option<f64>,
    higher_is_better: bool,
    criteria: &Criteria,
) -> Verdict {
    let (Some(p), Some((lo, hi))) = (adjusted_p, change.ci) else {
        return Verdict::Inconclusive;
    };
    if p < criteria.alpha && change.relative.abs() > criteria.threshold {
        let worse = (change.relative > 0.0) != higher_is_better;
        return if worse {
            Verdict::Regressed
        } else {
            Verdict::Improved
        };
    }
    if p >= criteria.alpha
        && lo.abs().max(hi.abs()) > INCONCLUSIVE_WIDTH_FACTOR * criteria.threshold
    {
        return Verdict::Inconclusive;
    }
    Verdict::NoChange
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_interval_holds_the_share_and_stays_inside_zero_and_one() {
        // 50 of 1000: the textbook interval is about 3.8% to 6.5%.
        let (low, high) = wilson_interval(50, 1000);
        assert!(
            (low - 0.0381).abs() < 0.001 && (high - 0.0653).abs() < 0.001,
            "{low} {high}"
        );
        let (low, high) = wilson_interval(0, 20);
        assert_eq!(low, 0.0);
        assert!(high > 0.1 && high < 0.2, "{high}");
        assert_eq!(wilson_interval(7, 7).1, 1.0);
        assert_eq!(wilson_interval(0, 0), (0.0, 1.0));
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-12)
    }

    #[track_caller]
    fn assert_close(a: f64, b: f64) {
        assert!(close(a, b, 1e-6), "{a} != {b}");
    }

    // Reference values from numpy / scipy 1.17 (python3): np.mean, np.median, np.std(ddof=1),
    // np.std(ddof=0), scipy.stats.t.interval(0.95, n-1, loc=mean, scale=sem),
    // scipy.stats.ttest_ind(new, old, equal_var=False) and t.ppf(0.975, df) * se.

    #[test]
    fn summary_matches_numpy_and_scipy() {
        // The 00-base `stat` column of the lmbench fixture.
        let s = summarize(&[3.88, 3.97, 3.92, 3.97, 3.97]).unwrap();
        assert_eq!(s.n, 5);
        assert_close(s.mean, 3.942);
        assert_close(s.median, 3.97);
        assert_close(s.stdev, 0.04086563348340525);
        assert_close(s.pop_stdev, 0.03655133376499427);
        assert_close(s.cv, 0.04086563348340525 / 3.942);
        let (lo, hi) = s.ci.unwrap();
        assert_close(lo, 3.8912586141398657);
        assert_close(hi, 3.9927413858601346);
        assert_eq!((s.min, s.max), (3.88, 3.97));
    }

    #[test]
    fn tukey_counts_mild_and_severe_outliers() {
        // Fences from np.percentile([...], [25, 75]) (type 7).
        // 11 values: Q1 2.5, Q3 7.5, IQR 5; mild fences -5 / 15, severe -12.5 / 22.5.
        let mut v: Vec<f64> = (1..=8).map(f64::from).collect();
        v.extend([12.0, 40.0, -30.0]);
        let o = summarize(&v).unwrap().outliers;
        assert_eq!(o.high_severe, 1);
        assert_eq!(o.low_severe, 1);
        assert_eq!(o.mild(), 0);
        // 12 values: Q1 2.75, Q3 9, IQR 6.25; mild fence 18.375, severe -16 / 27.75.
        v.push(20.0);
        let o = summarize(&v).unwrap().outliers;
        assert_eq!((o.high_mild, o.high_severe, o.low_severe), (1, 1, 1));
    }

    #[test]
    fn a_single_sample_has_no_interval_and_no_nan() {
        let s = summarize(&[2.5]).unwrap();
        assert_eq!(
            (s.n, s.mean, s.median, s.stdev, s.pop_stdev),
            (1, 2.5, 2.5, 0.0, 0.0)
        );
        assert_eq!(s.ci, None);
        assert_eq!(s.cv, 0.0);
        assert!(summarize(&[]).is_none());
        let change = relative_change(&s, &summarize(&[3.0, 3.1]).unwrap()).unwrap();
        assert_eq!(change.p_value, None);
        assert_eq!(
            verdict(&change, None, false, &Criteria::default()),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn welch_matches_scipy() {
        // stat, 00-base vs 01-lsm of the fixture.
        let old = summarize(&[3.88, 3.97, 3.92, 3.97, 3.97]).unwrap();
        let new = summarize(&[4.13, 4.16, 4.13, 4.23, 4.22]).unwrap();
        let w = welch(&old, &new).unwrap();
        assert_close(w.difference, 0.232);
        assert_close(w.df, 7.787972450047462);
        assert_close(w.std_error, 0.02828427124746198);
        assert_close(w.p_value, 4.258812835207211e-05);
        assert_close(w.ci.1 - w.difference, 0.06553402992058195);
    }

    #[test]
    fn identical_constants_are_no_change_and_different_ones_a_change() {
        let a = summarize(&[5.0, 5.0, 5.0]).unwrap();
        let b = summarize(&[6.0, 6.0, 6.0]).unwrap();
        let same = relative_change(&a, &a).unwrap();
        assert_eq!(
            (same.relative, same.p_value, same.ci),
            (0.0, Some(1.0), Some((0.0, 0.0)))
        );
        let c = Criteria::default();
        assert_eq!(verdict(&same, same.p_value, false, &c), Verdict::NoChange);
        let up = relative_change(&a, &b).unwrap();
        assert_close(up.relative, 0.2);
        assert_eq!(up.p_value, Some(0.0));
        assert_eq!(verdict(&up, up.p_value, false, &c), Verdict::Regressed);
        // For a bandwidth, higher is better.
        assert_eq!(verdict(&up, up.p_value, true, &c), Verdict::Improved);
        for x in [up.relative, up.ci.unwrap().0, up.ci.unwrap().1] {
            assert!(x.is_finite());
        }
    }

    #[test]
    fn tiny_variances_do_not_make_nan() {
        let old = summarize(&[1e-160, 2e-160]).unwrap();
        let new = summarize(&[3e-160, 4e-160]).unwrap();
        let w = welch(&old, &new).unwrap();
        assert_eq!(w.df, 2.0);
        for x in [w.p_value, w.ci.0, w.ci.1, w.std_error] {
            assert!(x.is_finite(), "{w:?}");
        }
    }

    #[test]
    fn holm_matches_a_hand_calculation() {
        // By hand: sorted 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, max(0.04*1, 0.06) = 0.06.
        let adjusted = holm(&[0.01, 0.04, 0.03, 0.005]);
        let expected = [0.03, 0.06, 0.06, 0.02];
        for (a, e) in adjusted.iter().zip(expected) {
            assert_close(*a, e);
        }
        assert!(holm(&[]).is_empty());
        assert_eq!(holm(&[0.9, 0.8]), vec![1.0, 1.0]);
    }

    #[test]
    fn small_significant_changes_are_no_change_and_wide_intervals_inconclusive() {
        let c = Criteria::default();
        let tiny = Change {
            relative: 0.005,
            ci: Some((0.004, 0.006)),
            p_value: Some(1e-6),
        };
        assert_eq!(verdict(&tiny, Some(1e-6), false, &c), Verdict::NoChange);
        let wide = Change {
            relative: 0.05,
            ci: Some((-0.2, 0.3)),
            p_value: Some(0.4),
        };
        assert_eq!(verdict(&wide, Some(0.4), false, &c), Verdict::Inconclusive);
        let faster = Change {
            relative: -0.05,
            ci: Some((-0.06, -0.04)),
            p_value: Some(1e-4),
        };
        assert_eq!(verdict(&faster, Some(1e-4), false, &c), Verdict::Improved);
        // Significant before adjustment, not after: no regression.
        assert_eq!(verdict(&faster, Some(0.2), false, &c), Verdict::NoChange);
    }

    /// Every figure of a summary, a Welch test and a change is a number, whatever the
    /// magnitudes (samples of 1e308 made mean, variance and t overflow, and statrs panicked).
    #[test]
    fn extreme_magnitudes_give_numbers_not_overflow_or_a_panic() {
        let big = f64::MAX;
        let sides: [&[f64]; 6] = [
            &[1e308; 5],
            &[1e308, 1e308, 1.5e308, big],
            &[0.0, big, 0.0, big],
            &[-big, big, -big],
            &[5e-324, 1e-320, 0.0],
            &[1.0, 2.0, 3.0],
        ];
        for old in sides {
            for new in sides {
                let (o, n) = (summarize(old).unwrap(), summarize(new).unwrap());
                let (lo, hi) = o.ci.unwrap();
                let half = o.ci_half_width();
                for v in [o.mean, o.median, o.stdev, o.pop_stdev, o.cv, lo, hi, half] {
                    assert!(v.is_finite(), "{old:?}: {o:?}");
                }
                let w = welch(&o, &n).unwrap();
                for v in [w.difference, w.std_error, w.df, w.p_value, w.ci.0, w.ci.1] {
                    assert!(v.is_finite(), "{old:?} vs {new:?}: {w:?}");
                }
                if let Some(c) = relative_change(&o, &n) {
                    let (lo, hi) = c.ci.unwrap();
                    assert!([c.relative, lo, hi].iter().all(|v| v.is_finite()), "{c:?}");
                }
            }
        }
        let same = summarize(&[1e308; 5]).unwrap();
        assert_eq!((same.mean, same.stdev), (1e308, 0.0));
        assert_eq!(welch(&same, &same).unwrap().p_value, 1.0);
    }
}
