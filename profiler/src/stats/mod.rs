//! Summary statistics and two-sample comparison: pure functions, no I/O.
//!
//! Every number returned is finite: cases where a textbook formula divides by zero (one sample,
//! zero variance) are decided explicitly and documented on the function.
pub mod replication;
pub mod shares;

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

/// The arithmetic mean; None for no values.
pub fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
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

/// The two-sided critical value of Student's t for [`CONFIDENCE`] at `df` degrees of freedom.
fn t_quantile(df: f64) -> f64 {
    t_critical(df, 1.0 - CONFIDENCE)
}

/// The two-sided critical value of Student's t at level `alpha` (t(1 - alpha/2)) and `df`
/// degrees of freedom.
fn t_critical(df: f64, alpha: f64) -> f64 {
    // Each is an iterative inverse of the incomplete beta, and the same few degrees of freedom
    // recur in every summary: a thousand files' rounds spent a fifth of `history` here.
    thread_local! {
        static KNOWN: std::cell::RefCell<std::collections::HashMap<(u64, u64), f64>> =
            Default::default();
    }
    KNOWN.with(|known| {
        *known
            .borrow_mut()
            .entry((df.to_bits(), alpha.to_bits()))
            .or_insert_with(|| {
                StudentsT::new(0.0, 1.0, df)
                    .expect("df > 0")
                    .inverse_cdf(1.0 - alpha / 2.0)
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

/// A side of a ratio test: how many observations, their mean and the variance of one of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moments {
    pub n: usize,
    pub mean: f64,
    pub variance: f64,
}

impl From<&Summary> for Moments {
    fn from(s: &Summary) -> Moments {
        Moments {
            n: s.n,
            mean: s.mean,
            variance: s.stdev.powi(2),
        }
    }
}

impl Moments {
    /// The variance of one observation relative to the mean's square (the variance of its
    /// log, to first order); None unless the mean is positive.
    pub fn relative_variance(&self) -> Option<f64> {
        (self.mean > 0.0 && self.mean.is_finite())
            .then(|| (self.variance.sqrt() / self.mean).powi(2))
    }
}

/// A two-sided test of a ratio of two positive means, made on the log scale: t = ln(ratio) /
/// se. Its interval, exp(ln ratio +- t se), is a ratio too, so a change of a time or a rate
/// never reads below -100%, and the interval excludes 1 exactly when p is below its level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RatioTest {
    /// mean(new) / mean(old).
    pub ratio: f64,
    /// Standard error of ln(ratio); 0 when the ratio is known exactly (no spread on either
    /// side).
    pub log_std_error: f64,
    /// Degrees of freedom of t.
    pub df: f64,
    /// Two-sided p-value of ratio = 1 (before any adjustment over workloads).
    pub p_value: f64,
}

impl RatioTest {
    /// The test of `ratio` with this standard error of its log; None unless the ratio is
    /// positive and finite, and (with a spread) `df` admits a t distribution. A zero standard
    /// error means the ratio is known exactly: p = 1 when it is 1, else 0.
    pub fn new(ratio: f64, log_std_error: f64, df: f64) -> Option<RatioTest> {
        if !(ratio > 0.0 && ratio.is_finite() && log_std_error.is_finite()) {
            return None;
        }
        let log_std_error = log_std_error.max(0.0);
        let p_value = if log_std_error == 0.0 {
            if ratio == 1.0 {
                1.0
            } else {
                0.0
            }
        } else {
            let dist = StudentsT::new(0.0, 1.0, df).ok()?;
            (2.0 * dist.sf((ratio.ln() / log_std_error).abs())).clamp(0.0, 1.0)
        };
        Some(RatioTest {
            ratio,
            log_std_error,
            df,
            p_value,
        })
    }

    /// The interval of the relative change (ratio - 1) at confidence 1 - `alpha`: never below
    /// -1, always a number.
    pub fn interval(&self, alpha: f64) -> (f64, f64) {
        let ln = self.ratio.ln();
        if self.log_std_error == 0.0 {
            return (self.ratio - 1.0, self.ratio - 1.0);
        }
        let half = t_critical(self.df, alpha) * self.log_std_error;
        ((ln - half).exp() - 1.0, finite((ln + half).exp() - 1.0))
    }
}

/// Welch's test of the ratio of two means on the log scale: each side's mean has the variance
/// of its log of (relative variance of one observation) / n, and the degrees of freedom are
/// Welch-Satterthwaite's over those. None unless each side has two observations and a positive
/// mean.
pub fn welch_ratio(old: Moments, new: Moments) -> Option<RatioTest> {
    if old.n < 2 || new.n < 2 {
        return None;
    }
    let (vo, vn) = (
        old.relative_variance()? / old.n as f64,
        new.relative_variance()? / new.n as f64,
    );
    let var = vo + vn;
    let df = if var > 0.0 {
        let df = var.powi(2) / (vo.powi(2) / (old.n - 1) as f64 + vn.powi(2) / (new.n - 1) as f64);
        // Squares of tiny variances underflow to 0/0; Welch's df lies between the smaller
        // side's n - 1 and the pooled df, and rounding must not move it out.
        let pooled = (old.n + new.n - 2) as f64;
        let df = if df.is_finite() { df } else { pooled };
        df.clamp((old.n.min(new.n) - 1) as f64, pooled)
    } else {
        0.0
    };
    RatioTest::new(new.mean / old.mean, var.sqrt(), df)
}

/// A two-sided test of mean(new) - mean(old) for an additive figure (a path's ns per op).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DifferenceTest {
    pub difference: f64,
    /// Its standard error; 0 when neither side varies (then p is 1 at no difference, else 0).
    pub std_error: f64,
    pub df: f64,
    /// Two-sided p-value of no difference (before any adjustment over a family).
    pub p_value: f64,
}

impl DifferenceTest {
    /// The same test of `by` times the difference (its p-value unchanged); `by` > 0.
    pub fn scaled(self, by: f64) -> DifferenceTest {
        DifferenceTest {
            difference: self.difference * by,
            std_error: self.std_error * by,
            ..self
        }
    }

    /// The same difference with `variance` more in its standard error (at the same degrees of
    /// freedom), its p-value anew: a side whose value is less sure than the test took it.
    pub fn widened(self, variance: f64) -> DifferenceTest {
        if !(variance > 0.0 && variance.is_finite()) {
            return self;
        }
        let std_error = (self.std_error.powi(2) + variance).sqrt();
        let p_value = match StudentsT::new(0.0, 1.0, self.df) {
            Ok(t) => (2.0 * t.sf((self.difference / std_error).abs())).clamp(0.0, 1.0),
            Err(_) => self.p_value,
        };
        DifferenceTest {
            std_error,
            p_value,
            ..self
        }
    }

    /// The interval of the difference at confidence 1 - `alpha`.
    pub fn interval(&self, alpha: f64) -> (f64, f64) {
        if self.std_error == 0.0 {
            return (self.difference, self.difference);
        }
        let half = t_critical(self.df, alpha) * self.std_error;
        (self.difference - half, self.difference + half)
    }
}

/// The test of mean(new) - mean(old): Welch's with two or more values a side; with one on a
/// side, one more value predicted from the other side's spread (s * sqrt(1 + 1/k), k - 1
/// degrees of freedom). None with fewer.
pub fn difference_test(old: &Summary, new: &Summary) -> Option<DifferenceTest> {
    let difference = new.mean - old.mean;
    let (variance, df) = match (old.n, new.n) {
        (o, n) if o >= 2 && n >= 2 => {
            let (vo, vn) = (old.stdev.powi(2) / o as f64, new.stdev.powi(2) / n as f64);
            let var = vo + vn;
            let df = var.powi(2) / (vo.powi(2) / (o - 1) as f64 + vn.powi(2) / (n - 1) as f64);
            let pooled = (o + n - 2) as f64;
            let df = if df.is_finite() { df } else { pooled };
            (var, df.clamp((o.min(n) - 1) as f64, pooled))
        }
        (k, 1) | (1, k) if k >= 2 => {
            let repeated = if old.n >= 2 { old } else { new };
            (
                repeated.stdev.powi(2) * (1.0 + 1.0 / k as f64),
                (k - 1) as f64,
            )
        }
        _ => return None,
    };
    if !difference.is_finite() {
        return None;
    }
    if !(variance > 0.0 && variance.is_finite()) {
        let p_value = if difference == 0.0 { 1.0 } else { 0.0 };
        return Some(DifferenceTest {
            difference,
            std_error: 0.0,
            df,
            p_value,
        });
    }
    let std_error = variance.sqrt();
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some(DifferenceTest {
        difference,
        std_error,
        df,
        p_value: (2.0 * t.sf((difference / std_error).abs())).clamp(0.0, 1.0),
    })
}

/// The 95% interval of mean(new) - mean(old) (`difference_test`'s).
pub fn difference_interval(old: &Summary, new: &Summary) -> Option<(f64, f64)> {
    difference_test(old, new).map(|t| t.interval(1.0 - CONFIDENCE))
}

/// Benjamini and Hochberg's step-up adjustment of a family of p-values (their q-values), in
/// the input order: a hypothesis is rejected at false discovery rate alpha exactly when its
/// q-value is below alpha.
pub fn benjamini_hochberg(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[b].total_cmp(&p_values[a]));
    let mut adjusted = vec![0.0; m];
    let mut running_min: f64 = 1.0;
    for (from_top, &i) in order.iter().enumerate() {
        let rank = m - from_top;
        running_min = running_min.min(p_values[i] * m as f64 / rank as f64);
        adjusted[i] = running_min;
    }
    adjusted
}

/// The level of the intervals that go with Benjamini-Hochberg at `alpha` (Benjamini and
/// Yekutieli's false coverage rate, 2005): alpha x R / m with R rejected of m, alpha / m when
/// none is, so an interval leaves out 0 exactly when its q-value is below alpha.
pub fn false_coverage_level(q_values: &[f64], alpha: f64) -> f64 {
    let m = q_values.len().max(1) as f64;
    let rejected = q_values.iter().filter(|&&q| q < alpha).count().max(1) as f64;
    alpha * rejected / m
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

/// The level Holm's step-down tested each hypothesis at, in the input order: alpha / (m - k)
/// for the k-th smallest p-value (from 0) while the steps reject, and the level of the step
/// where they stopped, alpha / (m - r) with r rejected, for the rest. An interval at its
/// hypothesis' level excludes the null exactly when the Holm-adjusted p (`holm`) is below
/// alpha: the rejected passed every step up to theirs; the first one kept failed its step, and
/// every later one has a p-value at least as large.
pub fn holm_levels(p_values: &[f64], alpha: f64) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let mut levels = vec![0.0; m];
    let mut rejecting = true;
    let mut stop = alpha / m.max(1) as f64;
    for (rank, &i) in order.iter().enumerate() {
        if rejecting {
            let step = alpha / (m - rank) as f64;
            rejecting = p_values[i] < step;
            stop = step;
        }
        levels[i] = stop;
    }
    levels
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
    /// The false discovery rate of the path verdicts.
    pub path_alpha: f64,
    /// Smallest relative change that matters (0.01 = 1%).
    pub threshold: f64,
    /// Smallest change of a path's cost that matters, ns per op (timed, or a share priced at
    /// the op's CPU time).
    pub path_threshold_ns: f64,
    /// ... and of a share judged alone, as a fraction (0.005 = 0.5 percentage points).
    pub path_threshold_share: f64,
}

impl Default for Criteria {
    fn default() -> Self {
        Criteria {
            alpha: 0.05,
            path_alpha: 0.01,
            threshold: 0.01,
            path_threshold_ns: 10.0,
            path_threshold_share: 0.005,
        }
    }
}

/// A change whose interval holds 0 is "no change" with what it rules out, unless the interval
/// reaches past this many times the threshold (10% at the default 1%) on both sides: then the
/// data tell neither a slowdown nor a speedup of that size from nothing, and it is
/// inconclusive.
const INCONCLUSIVE_WIDTH_FACTOR: f64 = 10.0;

/// Relative change of new vs old with its confidence interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// mean(new) / mean(old) - 1.
    pub relative: f64,
    /// Its interval, made on the ratio (log scale: never below -1), at `confidence`; None
    /// without a test.
    pub ci: Option<(f64, f64)>,
    /// The interval's confidence: 0.95 alone, more where it is one of a family of workloads
    /// (the level Holm's step-down tested it at, so the interval holds 0 exactly when the
    /// adjusted p-value is not significant).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    /// Unadjusted two-sided p-value; None without a test.
    pub p_value: Option<f64>,
}

impl Change {
    /// The change from a ratio test, its interval at level `alpha`.
    pub fn tested(test: &RatioTest, alpha: f64) -> Change {
        Change {
            relative: test.ratio - 1.0,
            ci: Some(test.interval(alpha)),
            confidence: Some(1.0 - alpha),
            p_value: Some(test.p_value),
        }
    }

    /// The end of the interval on the worse side: the largest slowdown of a time (its upper
    /// end), or the largest drop of a rate (its lower end), that the data leave possible.
    pub fn worse_bound(&self, higher_is_better: bool) -> Option<f64> {
        self.ci
            .map(|(lo, hi)| if higher_is_better { lo } else { hi })
    }
}

/// The verdict for one change, from its interval (Holm-adjusted where it is one of a family),
/// so the two never disagree: an interval that leaves out 0 is a change (regressed or
/// improved beyond the threshold, else within the noise threshold), never inconclusive; one
/// that holds 0 is never a change.
pub fn verdict(change: &Change, higher_is_better: bool, criteria: &Criteria) -> Verdict {
    let Some((lo, hi)) = change.ci else {
        return Verdict::Inconclusive;
    };
    if lo > 0.0 || hi < 0.0 {
        if change.relative.abs() <= criteria.threshold {
            return Verdict::NoChange;
        }
        let worse = (change.relative > 0.0) != higher_is_better;
        return if worse {
            Verdict::Regressed
        } else {
            Verdict::Improved
        };
    }
    let band = INCONCLUSIVE_WIDTH_FACTOR * criteria.threshold;
    if lo < -band && hi > band {
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
        assert!(welch_ratio((&s).into(), (&summarize(&[3.0, 3.1]).unwrap()).into()).is_none());
        let untested = Change {
            relative: 0.22,
            ci: None,
            confidence: None,
            p_value: None,
        };
        assert_eq!(
            verdict(&untested, false, &Criteria::default()),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn welch_on_the_ratio_matches_a_log_scale_calculation() {
        // stat, 00-base vs 01-lsm of the fixture. mpmath: ratio 4.174 / 3.942, var of its log
        // (0.04087 / 3.942)^2 / 5 + (0.04827 / 4.174)^2 / 5, Welch-Satterthwaite df over those,
        // p = 2 * t.sf(ln(ratio) / se, df) (the regularised incomplete beta), and the interval
        // exp(ln(ratio) +- t.ppf(0.975, df) * se) - 1.
        let old = summarize(&[3.88, 3.97, 3.92, 3.97, 3.97]).unwrap();
        let new = summarize(&[4.13, 4.16, 4.13, 4.23, 4.22]).unwrap();
        let t = welch_ratio((&old).into(), (&new).into()).unwrap();
        assert_close(t.ratio, 1.058853373921867);
        assert_close(t.log_std_error, 0.006945586194092764);
        assert_close(t.df, 7.906234658145415);
        assert!(
            (t.p_value - 3.7999299738130e-05).abs() < 1e-10,
            "{}",
            t.p_value
        );
        let (lo, hi) = t.interval(0.05);
        assert_close(lo, 0.041994771533056014);
        assert_close(hi, 0.0759847343726845);
    }

    #[test]
    fn the_difference_interval_matches_scipy() {
        // stat, 00-base vs 01-lsm of the fixture: scipy's Welch t interval of the difference,
        // 0.232 +- t.ppf(0.975, 7.788) * 0.028284.
        let old = summarize(&[3.88, 3.97, 3.92, 3.97, 3.97]).unwrap();
        let new = summarize(&[4.13, 4.16, 4.13, 4.23, 4.22]).unwrap();
        let (lo, hi) = difference_interval(&old, &new).unwrap();
        assert_close(hi - 0.232, 0.06553402992058195);
        assert_close(0.232 - lo, 0.06553402992058195);
        // One value on a side: a prediction from the other's spread; none with one a side.
        let one = summarize(&[4.5]).unwrap();
        let (lo, hi) = difference_interval(&old, &one).unwrap();
        assert!(lo < 0.558 && hi > 0.558 && hi - lo > 0.2, "{lo} {hi}");
        assert!(difference_interval(&one, &one).is_none());
    }

    #[test]
    fn a_difference_s_p_value_is_where_its_interval_touches_zero() {
        let old = summarize(&[3.88, 3.97, 3.92, 3.97, 3.97]).unwrap();
        let new = summarize(&[4.13, 4.16, 4.13, 4.23, 4.22]).unwrap();
        let t = difference_test(&old, &new).unwrap();
        assert!(t.p_value > 0.0 && t.p_value < 1e-3, "{t:?}");
        let (lo, _) = t.interval(t.p_value);
        assert!(lo.abs() < 1e-9, "{lo}");
        // The same values on both sides: nothing to reject.
        let same = difference_test(&old, &old).unwrap();
        assert!(same.p_value > 0.99, "{same:?}");
        // Neither side varies: known exactly.
        let flat = summarize(&[4.0, 4.0]).unwrap();
        assert_eq!(difference_test(&flat, &flat).unwrap().p_value, 1.0);
    }

    #[test]
    fn benjamini_hochberg_steps_up_from_the_largest_p_value() {
        // By hand: sorted 0.005, 0.01, 0.03, 0.04 of m = 4 scale by 4/1, 4/2, 4/3, 4/4, then
        // each takes the least of itself and those above it.
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005]);
        for (got, expected) in q.iter().zip([0.02, 0.04, 0.04, 0.02]) {
            assert_close(*got, expected);
        }
        // All four are rejected at 0.05, so the intervals are at 0.05 x 4 / 4.
        assert_close(false_coverage_level(&q, 0.05), 0.05);
        // None rejected at 0.01: the level of a single test among four.
        assert_close(false_coverage_level(&q, 0.01), 0.0025);
        assert!(benjamini_hochberg(&[]).is_empty());
    }

    #[test]
    fn a_ratio_s_interval_never_falls_below_minus_100_percent() {
        // Two rounds a side that disagree wildly: a difference-scale interval read -166%.
        let old = summarize(&[1.0, 5.0]).unwrap();
        let new = summarize(&[0.9, 4.9]).unwrap();
        let t = welch_ratio((&old).into(), (&new).into()).unwrap();
        let (lo, hi) = t.interval(0.05);
        assert!(lo > -1.0 && lo < -0.5 && hi > 1.0, "{lo} {hi}");
        // As wide as it is, it is one interval on the log scale, symmetric about the ratio.
        assert_close((1.0 + lo) * (1.0 + hi), t.ratio * t.ratio);
        // A known ratio: the interval is the point, p is 0 (or 1 when nothing changed).
        let exact = RatioTest::new(1.25, 0.0, 0.0).unwrap();
        assert_eq!((exact.p_value, exact.interval(0.05)), (0.0, (0.25, 0.25)));
        assert_eq!(RatioTest::new(1.0, 0.0, 0.0).unwrap().p_value, 1.0);
        assert!(RatioTest::new(-1.0, 0.1, 3.0).is_none());
    }

    #[test]
    fn identical_constants_are_no_change_and_different_ones_a_change() {
        let a = summarize(&[5.0, 5.0, 5.0]).unwrap();
        let b = summarize(&[6.0, 6.0, 6.0]).unwrap();
        let c = Criteria::default();
        let same = Change::tested(&welch_ratio((&a).into(), (&a).into()).unwrap(), 0.05);
        assert_eq!(
            (same.relative, same.p_value, same.ci),
            (0.0, Some(1.0), Some((0.0, 0.0)))
        );
        assert_eq!(verdict(&same, false, &c), Verdict::NoChange);
        let up = Change::tested(&welch_ratio((&a).into(), (&b).into()).unwrap(), 0.05);
        assert_close(up.relative, 0.2);
        assert_eq!(up.p_value, Some(0.0));
        assert_eq!(verdict(&up, false, &c), Verdict::Regressed);
        // For a bandwidth, higher is better.
        assert_eq!(verdict(&up, true, &c), Verdict::Improved);
    }

    #[test]
    fn tiny_variances_do_not_make_nan() {
        let old = summarize(&[1e-160, 2e-160]).unwrap();
        let new = summarize(&[3e-160, 4e-160]).unwrap();
        let t = welch_ratio((&old).into(), (&new).into()).unwrap();
        assert!((1.0..=2.0).contains(&t.df), "{t:?}");
        let (lo, hi) = t.interval(0.05);
        for x in [t.p_value, t.log_std_error, lo, hi] {
            assert!(x.is_finite(), "{t:?}");
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

    /// A change with this interval (the point in the middle).
    fn change(lo: f64, hi: f64) -> Change {
        Change {
            relative: (lo + hi) / 2.0,
            ci: Some((lo, hi)),
            confidence: Some(0.95),
            p_value: None,
        }
    }

    #[test]
    fn the_verdict_is_the_interval_s() {
        let c = Criteria::default();
        // Significant but smaller than the threshold: within the noise threshold.
        assert_eq!(verdict(&change(0.004, 0.006), false, &c), Verdict::NoChange);
        assert_eq!(verdict(&change(-0.06, -0.04), false, &c), Verdict::Improved);
        assert_eq!(verdict(&change(0.04, 0.06), false, &c), Verdict::Regressed);
        // Holding 0: never a change. Past 10% on both sides: inconclusive; on one side only,
        // no change, with what it rules out.
        assert_eq!(
            verdict(&change(-0.2, 0.3), false, &c),
            Verdict::Inconclusive
        );
        let one_sided = change(-0.05, 0.3);
        assert_eq!(verdict(&one_sided, false, &c), Verdict::NoChange);
        assert_eq!(one_sided.worse_bound(false), Some(0.3));
        assert_eq!(one_sided.worse_bound(true), Some(-0.05));
        assert_eq!(verdict(&change(-0.08, 0.09), false, &c), Verdict::NoChange);
    }

    /// Families of workloads with p-values anywhere from certain to nothing, adjusted by Holm:
    /// each workload's interval, made at the level Holm tested it at, leaves out 0 exactly when
    /// its adjusted p is below alpha, and the verdict follows both.
    #[test]
    fn verdict_and_interval_agree_across_holm_adjustment() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(45);
        let criteria = Criteria::default();
        let mut seen = [0usize; 2];
        for _ in 0..2_000 {
            let m = rng.gen_range(1..=20);
            let tests: Vec<RatioTest> = (0..m)
                .map(|_| {
                    let se = rng.gen_range(0.005..0.3);
                    let t: f64 = rng.gen_range(-8.0..8.0);
                    let df = rng.gen_range(1.0..40.0);
                    RatioTest::new((t * se).exp(), se, df).unwrap()
                })
                .collect();
            let p: Vec<f64> = tests.iter().map(|t| t.p_value).collect();
            for ((t, adjusted), level) in tests
                .iter()
                .zip(holm(&p))
                .zip(holm_levels(&p, criteria.alpha))
            {
                let c = Change::tested(t, level);
                let (lo, hi) = c.ci.unwrap();
                let excludes_zero = lo > 0.0 || hi < 0.0;
                assert_eq!(
                    excludes_zero,
                    adjusted < criteria.alpha,
                    "{t:?}: adjusted p {adjusted}, level {level}, interval {lo} {hi}"
                );
                // Significant alone, not after adjustment: the interval holds 0 too.
                let v = verdict(&c, false, &criteria);
                if excludes_zero {
                    assert_ne!(v, Verdict::Inconclusive);
                } else {
                    assert!(
                        matches!(v, Verdict::NoChange | Verdict::Inconclusive),
                        "{v}"
                    );
                }
                seen[usize::from(t.p_value < criteria.alpha && adjusted >= criteria.alpha)] += 1;
            }
        }
        // Both kinds happened: workloads Holm's adjustment made non-significant are covered.
        assert!(seen[1] > 100, "{seen:?}");
    }

    #[test]
    fn holm_levels_are_the_steps_and_stop_where_the_steps_do() {
        // Sorted 0.005 < 0.05/4, 0.01 < 0.05/3, 0.03 >= 0.05/2: two rejected, the rest at 0.05/2.
        let levels = holm_levels(&[0.01, 0.04, 0.03, 0.005], 0.05);
        let expected = [0.05 / 3.0, 0.025, 0.025, 0.0125];
        for (l, e) in levels.iter().zip(expected) {
            assert_close(*l, e);
        }
        assert_eq!(holm_levels(&[0.5], 0.05), vec![0.05]);
        assert!(holm_levels(&[], 0.05).is_empty());
    }

    /// Every figure of a summary and a ratio test is a number, whatever the
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
                // No test where a mean is not positive or the ratio overflows; a number where
                // there is one.
                if let Some(t) = welch_ratio((&o).into(), (&n).into()) {
                    let (lo, hi) = t.interval(0.05);
                    for v in [t.ratio, t.log_std_error, t.df, t.p_value, lo, hi] {
                        assert!(v.is_finite(), "{old:?} vs {new:?}: {t:?}");
                    }
                }
            }
        }
        let same = summarize(&[1e308; 5]).unwrap();
        assert_eq!((same.mean, same.stdev), (1e308, 0.0));
        let t = welch_ratio((&same).into(), (&same).into()).unwrap();
        assert_eq!(t.p_value, 1.0);
    }
}
