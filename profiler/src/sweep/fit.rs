//! The straight line through a sweep's points, with its interval and a test of whether the
//! points lie on a line at all. Pure statistics: no I/O, no kernel.
//!
//! Every value of a sweep is measured in each round, so a round is a block: the line is fitted
//! to each round's values around that round's mean (round effects out, as a paired test takes
//! them out), and the slope's interval has the degrees of freedom left after the rounds and the
//! slope. Where a path has one value per sweep value (no per-round figures), the line is fitted
//! to those points alone. Linearity is the lack-of-fit F test: a mean per value against the
//! line; a small p says the curve bends.
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

/// Below this p-value the points are said not to lie on a line.
pub const BENDS_BELOW_P: f64 = 0.05;

/// A fitted line: y = intercept + slope * x, with the slope's 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Line {
    pub slope: f64,
    pub intercept: f64,
    /// The slope's 95% interval (None: too few values left to estimate the scatter).
    pub slope_low: Option<f64>,
    pub slope_high: Option<f64>,
    /// The lack-of-fit test's p-value (None: too few values or rounds to test).
    pub linearity_p: Option<f64>,
    /// Residual degrees of freedom of the slope's interval.
    pub df: f64,
}

impl Line {
    /// Whether the lack-of-fit test says the points bend away from the line.
    pub fn bends(&self) -> bool {
        self.linearity_p.is_some_and(|p| p < BENDS_BELOW_P)
    }
}

/// Fits a line to `ys[v][r]`, the value at `xs[v]` in round `r` (rounds are blocks: each
/// round holds every value). None with fewer than two distinct x or ragged rounds.
pub fn blocked(xs: &[f64], ys: &[Vec<f64>]) -> Option<Line> {
    let v = xs.len();
    let r = ys.first()?.len();
    if ys.len() != v || r == 0 || ys.iter().any(|y| y.len() != r) {
        return None;
    }
    let x_mean = mean(xs);
    let sxx: f64 = xs.iter().map(|x| (x - x_mean).powi(2)).sum::<f64>() * r as f64;
    if sxx <= 0.0 {
        return None;
    }
    let round_mean: Vec<f64> = (0..r).map(|j| mean(&column(ys, j))).collect();
    let value_mean: Vec<f64> = ys.iter().map(|y| mean(y)).collect();
    let grand = mean(&value_mean);
    let mut sxy = 0.0;
    for (x, y) in xs.iter().zip(ys) {
        for (value, round) in y.iter().zip(&round_mean) {
            sxy += (x - x_mean) * (value - round);
        }
    }
    let slope = sxy / sxx;
    let (mut sse_line, mut sse_means) = (0.0, 0.0);
    for ((x, y), vm) in xs.iter().zip(ys).zip(&value_mean) {
        for (value, round) in y.iter().zip(&round_mean) {
            sse_line += (value - round - slope * (x - x_mean)).powi(2);
            sse_means += (value - round - vm + grand).powi(2);
        }
    }
    // Values, less one mean per round and the slope.
    let df = (v * r) as f64 - r as f64 - 1.0;
    let df_means = ((r - 1) * (v - 1)) as f64;
    let linearity_p = (v >= 3 && df_means > 0.0)
        .then(|| lack_of_fit_p(sse_line, sse_means, (v - 2) as f64, df_means))
        .flatten();
    Some(with_interval(
        slope,
        grand - slope * x_mean,
        sse_line,
        sxx,
        df,
        linearity_p,
    ))
}

/// The line through each x's values round by round (`(x, rounds)`): blocked on the rounds
/// where every x has the same rounds, else through the means per x.
pub fn through(values: &[(u64, Vec<f64>)]) -> Option<Line> {
    let xs: Vec<f64> = values.iter().map(|(x, _)| *x as f64).collect();
    let rounds = values.first()?.1.len();
    if rounds > 1 && values.iter().all(|(_, r)| r.len() == rounds) {
        let ys: Vec<Vec<f64>> = values.iter().map(|(_, r)| r.clone()).collect();
        blocked(&xs, &ys)
    } else {
        let ys: Vec<f64> = values.iter().map(|(_, r)| mean(r)).collect();
        points(&xs, &ys)
    }
}

/// Fits a line to one value per x (no rounds to block on). None with fewer than two distinct x.
pub fn points(xs: &[f64], ys: &[f64]) -> Option<Line> {
    if xs.len() != ys.len() {
        return None;
    }
    let (x_mean, y_mean) = (mean(xs), mean(ys));
    let sxx: f64 = xs.iter().map(|x| (x - x_mean).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (x - x_mean) * (y - y_mean))
        .sum();
    let slope = sxy / sxx;
    let intercept = y_mean - slope * x_mean;
    let sse: f64 = xs
        .iter()
        .zip(ys)
        .map(|(x, y)| (y - intercept - slope * x).powi(2))
        .sum();
    let df = xs.len() as f64 - 2.0;
    Some(with_interval(slope, intercept, sse, sxx, df, None))
}

fn with_interval(
    slope: f64,
    intercept: f64,
    sse: f64,
    sxx: f64,
    df: f64,
    linearity_p: Option<f64>,
) -> Line {
    let half = (df >= 1.0)
        .then(|| {
            let t = StudentsT::new(0.0, 1.0, df).ok()?.inverse_cdf(0.975);
            Some(t * (sse / df / sxx).sqrt())
        })
        .flatten();
    Line {
        slope,
        intercept,
        slope_low: half.map(|h| slope - h),
        slope_high: half.map(|h| slope + h),
        linearity_p,
        df,
    }
}

/// The p-value that the means per value depart from the line no more than chance would have.
fn lack_of_fit_p(sse_line: f64, sse_means: f64, df_lack: f64, df_means: f64) -> Option<f64> {
    if sse_means <= 0.0 {
        // Every round agrees exactly: any departure from the line is real.
        return Some(if sse_line > 1e-12 { 0.0 } else { 1.0 });
    }
    let f = ((sse_line - sse_means).max(0.0) / df_lack) / (sse_means / df_means);
    Some(1.0 - FisherSnedecor::new(df_lack, df_means).ok()?.cdf(f))
}

fn column(ys: &[Vec<f64>], j: usize) -> Vec<f64> {
    ys.iter().map(|y| y[j]).collect()
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_that_shift_together_leave_the_slope_exact_and_its_interval_narrow() {
        // 100 ns a step, each round offset by its own drift, a little noise.
        let xs = [0.0, 1.0, 2.0, 3.0];
        let drift = [0.0, 500.0, -300.0];
        let noise = [
            [1.0, -1.0, 0.5],
            [-0.5, 1.0, -1.0],
            [0.0, -0.5, 1.0],
            [0.5, 0.5, -0.5],
        ];
        let ys: Vec<Vec<f64>> = xs
            .iter()
            .zip(noise)
            .map(|(x, n)| {
                (0..3)
                    .map(|r| 1000.0 + 100.0 * x + drift[r] + n[r])
                    .collect()
            })
            .collect();
        let line = blocked(&xs, &ys).unwrap();
        assert!((line.slope - 100.0).abs() < 1.0, "{line:?}");
        let (lo, hi) = (line.slope_low.unwrap(), line.slope_high.unwrap());
        assert!(lo < 100.0 && hi > 100.0 && hi - lo < 5.0, "{line:?}");
        assert!(
            (line.intercept - 1000.0 - mean(&drift)).abs() < 2.0,
            "{line:?}"
        );
        assert!(!line.bends(), "{line:?}");
        assert_eq!(line.df, 12.0 - 3.0 - 1.0);
        // Unblocked, the same points' drift would swamp the interval.
        let flat: Vec<f64> = ys.iter().flatten().copied().collect();
        let xs_flat: Vec<f64> = xs.iter().flat_map(|&x| [x; 3]).collect();
        let unblocked = points(&xs_flat, &flat).unwrap();
        assert!(unblocked.slope_high.unwrap() - unblocked.slope_low.unwrap() > 10.0 * (hi - lo));
    }

    #[test]
    fn a_curve_that_bends_is_said_to_and_a_line_is_not() {
        let xs = [0.0, 1.0, 10.0, 100.0];
        let noise = [0.3, -0.2, 0.1];
        let make = |f: &dyn Fn(f64) -> f64| -> Vec<Vec<f64>> {
            xs.iter()
                .map(|&x| noise.iter().map(|n| f(x) + n).collect())
                .collect()
        };
        let log = blocked(&xs, &make(&|x| 50.0 * (1.0 + x).ln())).unwrap();
        assert!(log.bends(), "{log:?}");
        let straight = blocked(&xs, &make(&|x| 7.0 + 2.0 * x)).unwrap();
        assert!(!straight.bends(), "{straight:?}");
        assert!((straight.slope - 2.0).abs() < 0.01, "{straight:?}");
    }

    #[test]
    fn too_few_values_fit_without_an_interval_or_do_not_fit() {
        assert!(points(&[1.0, 1.0], &[2.0, 3.0]).is_none(), "one distinct x");
        let two = points(&[0.0, 1.0], &[2.0, 3.0]).unwrap();
        assert_eq!((two.slope, two.slope_low), (1.0, None));
        assert!(
            blocked(&[0.0, 1.0], &[vec![1.0, 2.0], vec![3.0]]).is_none(),
            "ragged"
        );
        let two_values = blocked(&[0.0, 1.0], &[vec![1.0, 2.0], vec![3.0, 4.1]]).unwrap();
        assert_eq!(
            two_values.linearity_p, None,
            "a line through two values always fits"
        );
    }
}
