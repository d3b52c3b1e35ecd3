//! A sampled share's 95% interval with the round, not the sample, as the unit: pure
//! statistics, no I/O.
//!
//! Samples of one round are not independent draws: a round's fresh runner, order and CPU
//! placement move every path's share at once, more than binomial noise says (an A/A compare
//! with the binomial interval marked 6 of 57 unchanged paths). So each round is one cluster:
//! a side's share is the ratio estimate (its samples in the path over all its samples) and its
//! variance comes from how far the rounds' counts stray from that share (the linearised
//! variance of a ratio over clusters), with Student's t at rounds - 1 degrees of freedom and
//! Welch-Satterthwaite between the sides.
//!
//! Why t on the rounds and not a design-effect adjusted binomial interval with z: with 4
//! rounds a run's variance estimate has 3 degrees of freedom, and so has a design effect
//! estimated from it; taking it as known (z = 1.96 instead of t = 3.18) would leave the
//! interval short about as often as the binomial one. The between-round variance is floored
//! at the binomial one: rounds cannot agree better than their sampling allows, and with few
//! rounds a small spread is often luck; a side floored so has its variance known (its
//! degrees of freedom taken as infinite). For a change, that floor is taken at the share of
//! both sides pooled (the share if nothing changed, as a two-proportion test takes it): a
//! side that never sampled a path has no spread and a binomial variance of 0 at its own
//! share, which would make 0 of 12 samples against 8 of 62 look certain.
use statrs::distribution::{ChiSquared, ContinuousCDF, Normal, StudentsT};

use crate::stats::CONFIDENCE;

/// The own samples behind a 5% share known within +-1 percentage point (95%, samples taken as
/// independent): 1.96^2 * 0.05 * 0.95 / 0.01^2.
pub const PRECISE_STACK_SAMPLES: u64 = 1_825;

/// Rounds a side needs before its spread can be estimated at all.
pub const MIN_ROUNDS: usize = 2;

/// One round's counts: samples with the path on the stack, and all the round's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoundCount {
    pub path: u64,
    pub all: u64,
}

/// A share with its variance and the degrees of freedom behind that variance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareEstimate {
    pub share: f64,
    pub variance: f64,
    /// Infinite when the binomial floor decided the variance.
    pub df: f64,
}

/// A share, or a change of one, with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub value: f64,
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn half_width(&self) -> f64 {
        (self.high - self.low) / 2.0
    }
}

/// The share of all the rounds' samples together.
fn pooled_share(rounds: &[RoundCount]) -> f64 {
    let (path, all) = rounds
        .iter()
        .fold((0u64, 0u64), |(p, a), c| (p + c.path, a + c.all));
    path as f64 / all.max(1) as f64
}

/// One side's share from its rounds, its variance floored at the binomial one at
/// `floor_share`; None with fewer than `MIN_ROUNDS` rounds that have samples (rounds without
/// samples, a workload that failed early, carry no share).
pub fn estimate(rounds: &[RoundCount], floor_share: f64) -> Option<ShareEstimate> {
    let rounds: Vec<RoundCount> = rounds.iter().copied().filter(|r| r.all > 0).collect();
    if rounds.len() < MIN_ROUNDS {
        return None;
    }
    let r = rounds.len() as f64;
    let (path, all) = rounds
        .iter()
        .fold((0u64, 0u64), |(p, a), c| (p + c.path, a + c.all));
    let (path, all) = (path as f64, all as f64);
    let share = path / all;
    let mean_all = all / r;
    // Each round's residual from the common share, in units of a mean round's samples.
    let spread: f64 = rounds
        .iter()
        .map(|c| ((c.path as f64 - share * c.all as f64) / mean_all).powi(2))
        .sum::<f64>()
        / (r * (r - 1.0));
    let binomial = floor_share * (1.0 - floor_share) / all;
    Some(if spread > binomial {
        ShareEstimate {
            share,
            variance: spread,
            df: r - 1.0,
        }
    } else {
        ShareEstimate {
            share,
            variance: binomial,
            df: f64::INFINITY,
        }
    })
}

/// One side's share with its 95% interval (clamped to 0..1), None as `estimate`.
pub fn share_interval(rounds: &[RoundCount]) -> Option<Interval> {
    let e = estimate(rounds, pooled_share(rounds))?;
    let half = critical(e.df, 1.0 - CONFIDENCE) * e.variance.sqrt();
    Some(Interval {
        value: e.share,
        low: (e.share - half).max(0.0),
        high: (e.share + half).min(1.0),
    })
}

/// A share's change tested: its estimate, the standard error and the degrees of freedom
/// behind it (infinite where a binomial variance decided it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShareTest {
    pub change: f64,
    pub std_error: f64,
    pub df: f64,
}

/// The ns per op a share's change from `old_share` by `change` means where the path alone
/// changed: the path's cost over the rest of the op (s / (1 - s)) priced at the old side's
/// rest ((1 - s_old) x `old_cpu_ns`), which comes to `old_cpu_ns` x change / (1 - s_new). A
/// path that grows by N ns while the rest stays reads N; a machine that runs the whole op
/// slower moves no share, so it reads 0. A new share within a thousandth of the whole leaves
/// no rest to price the path against: its growth is unbounded (+infinity), which is what the
/// top of an interval reaching the whole says.
pub fn against_rest_ns(old_share: f64, change: f64, old_cpu_ns: f64) -> f64 {
    let rest_after = 1.0 - old_share - change;
    if rest_after < 1e-3 {
        return f64::INFINITY;
    }
    old_cpu_ns * change / rest_after
}

impl ShareTest {
    /// Two-sided p-value of no change (1 at no change with no spread, 0 at a change).
    pub fn p_value(&self) -> f64 {
        if self.std_error <= 0.0 {
            return if self.change == 0.0 { 1.0 } else { 0.0 };
        }
        let z = (self.change / self.std_error).abs();
        let sf = match StudentsT::new(0.0, 1.0, self.df) {
            Ok(t) if self.df.is_finite() && self.df < 1e5 => t.sf(z),
            _ => Normal::standard().sf(z),
        };
        (2.0 * sf).clamp(0.0, 1.0)
    }

    /// The change with its interval at confidence 1 - `alpha`, the ends kept where a change of
    /// a share can be.
    pub fn interval(&self, alpha: f64) -> Interval {
        within_shares(self.change, critical(self.df, alpha) * self.std_error)
    }
}

/// The test of a share's change from `old` to `new`, each side's clusters (rounds, or files
/// where runs are the unit) as `estimate` takes them: Welch-Satterthwaite where both sides
/// have `MIN_ROUNDS` clusters with samples; where one side has a single cluster, it is
/// predicted from the other side's spread (one cluster's variance, at least the binomial at
/// its own samples, plus the other side's mean's), as `replication::test` predicts a single
/// run. None otherwise.
pub fn change_test(old: &[RoundCount], new: &[RoundCount]) -> Option<ShareTest> {
    let both = pooled_share(&[old, new].concat());
    let (o, n, predicted_df) = match (estimate(old, both), estimate(new, both)) {
        (Some(o), Some(n)) => (o, n, None),
        (Some(many), None) => (many, predicted(&many, old, new, both)?, Some(many.df)),
        (None, Some(many)) => (predicted(&many, new, old, both)?, many, Some(many.df)),
        (None, None) => return None,
    };
    let variance = o.variance + n.variance;
    // A side with infinite df adds nothing to the denominator; both so: the normal. A
    // prediction's two variances are one estimate: its degrees of freedom.
    let denominator = o.variance.powi(2) / o.df + n.variance.powi(2) / n.df;
    let df = match predicted_df {
        Some(df) => df,
        None if denominator > 0.0 => variance.powi(2) / denominator,
        None => f64::INFINITY,
    };
    Some(ShareTest {
        change: n.share - o.share,
        std_error: variance.sqrt(),
        df,
    })
}

/// The test of a share's change with files as the unit (`change_test` over each side's files),
/// never surer than the rounds inside those files say: a few files whose shares agree by chance
/// leave a spread far below what one file's share moves by from round to round (two A/A series
/// of 17 compares called 8 paths on it). The rounds' standard error floors the files'; the
/// files' degrees of freedom stay (a run's 4 rounds would leave 3).
pub fn change_test_by_files(
    (old_files, new_files): (&[RoundCount], &[RoundCount]),
    (old_rounds, new_rounds): (&[RoundCount], &[RoundCount]),
) -> Option<ShareTest> {
    let files = change_test(old_files, new_files)?;
    Some(match change_test(old_rounds, new_rounds) {
        Some(rounds) if rounds.std_error > files.std_error => ShareTest {
            std_error: rounds.std_error,
            ..files
        },
        _ => files,
    })
}

/// The single cluster of `single` as one more of `many`'s (whose clusters `repeated` are):
/// its share, and the variance one cluster of `many` has (the variance of its mean times
/// its clusters), at least the binomial at the single cluster's samples.
fn predicted(
    many: &ShareEstimate,
    repeated: &[RoundCount],
    single: &[RoundCount],
    floor_share: f64,
) -> Option<ShareEstimate> {
    let [one] = single
        .iter()
        .filter(|c| c.all > 0)
        .copied()
        .collect::<Vec<_>>()[..]
    else {
        return None;
    };
    let clusters = repeated.iter().filter(|c| c.all > 0).count() as f64;
    let binomial = floor_share * (1.0 - floor_share) / one.all as f64;
    let variance = (many.variance * clusters).max(binomial);
    Some(ShareEstimate {
        share: one.path as f64 / one.all as f64,
        variance,
        df: if variance > binomial {
            many.df
        } else {
            f64::INFINITY
        },
    })
}

/// The change of a share from `old` to `new` with its 95% interval (`change_test`'s).
pub fn change_interval(old: &[RoundCount], new: &[RoundCount]) -> Option<Interval> {
    change_test(old, new).map(|t| t.interval(1.0 - CONFIDENCE))
}

/// A change of a share with its interval, the ends kept where a change of a share can be.
fn within_shares(change: f64, half: f64) -> Interval {
    Interval {
        value: change,
        low: (change - half).max(-1.0),
        high: (change + half).min(1.0),
    }
}

/// The test of a share's change from the pooled counts, samples taken as independent draws
/// (for sides with too few rounds): the two-proportion normal test, its variance at the share
/// of both sides pooled, as in `change_test`.
pub fn binomial_change_test(old: RoundCount, new: RoundCount) -> ShareTest {
    let both = pooled_share(&[old, new]);
    let variance =
        both * (1.0 - both) * (1.0 / old.all.max(1) as f64 + 1.0 / new.all.max(1) as f64);
    ShareTest {
        change: pooled_share(&[new]) - pooled_share(&[old]),
        std_error: variance.sqrt(),
        df: f64::INFINITY,
    }
}

/// The change of a share with its 95% interval from the pooled counts (`binomial_change_test`).
pub fn binomial_change_interval(old: RoundCount, new: RoundCount) -> Interval {
    binomial_change_test(old, new).interval(1.0 - CONFIDENCE)
}

/// Which of several paths' (or frames') sample counts changed their share between two sides
/// beyond chance: each a two-proportion z test at its pooled share, its variance times
/// `overdispersion` (how much more than independent samples the rounds' shares spread, 1 where
/// that is unknown), with Holm's adjustment across all of them at `alpha`, so among hundreds of
/// frames of an unchanged workload none is called but by a 5% family-wise chance. `counts` are
/// (old, new) per path, `totals` each side's samples.
pub fn changed_shares(
    counts: &[(u64, u64)],
    totals: (u64, u64),
    overdispersion: f64,
    alpha: f64,
) -> Vec<bool> {
    let (old_all, new_all) = (totals.0.max(1) as f64, totals.1.max(1) as f64);
    let normal = Normal::standard();
    let p_values: Vec<f64> = counts
        .iter()
        .map(|&(old, new)| {
            let both = (old + new) as f64 / (old_all + new_all);
            let variance =
                both * (1.0 - both) * (1.0 / old_all + 1.0 / new_all) * overdispersion.max(1.0);
            let change = new as f64 / new_all - old as f64 / old_all;
            if variance > 0.0 {
                2.0 * normal.sf((change / variance.sqrt()).abs())
            } else {
                1.0
            }
        })
        .collect();
    crate::stats::holm(&p_values)
        .into_iter()
        .map(|p| p < alpha)
        .collect()
}

/// The two-sided critical value at level `alpha`: Student's t at `df`, the normal's past the
/// point where the two agree to four digits.
fn critical(df: f64, alpha: f64) -> f64 {
    let p = 1.0 - alpha / 2.0;
    match StudentsT::new(0.0, 1.0, df) {
        Ok(t) if df.is_finite() && df < 1e5 => t.inverse_cdf(p),
        _ => Normal::standard().inverse_cdf(p),
    }
}

/// Below this p-value a path's shares are said to differ between rounds (a strict level: a
/// profile tests dozens of paths, and one in a hundred would say so by chance at this level).
pub const VARIES_BELOW_P: f64 = 0.01;

/// The lowest and highest round's share, where the rounds differ more than their samples'
/// noise explains: Pearson's chi-square test that every round has the same share (rounds
/// with no samples left out). None with fewer than two such rounds, or where they agree.
pub fn varies_between_rounds(rounds: &[RoundCount]) -> Option<(f64, f64)> {
    let kept: Vec<RoundCount> = rounds.iter().copied().filter(|r| r.all > 0).collect();
    let share = pooled_share(&kept);
    if kept.len() < MIN_ROUNDS || share <= 0.0 || share >= 1.0 {
        return None;
    }
    let statistic: f64 = kept
        .iter()
        .map(|r| {
            let expected = r.all as f64 * share;
            (r.path as f64 - expected).powi(2) / (expected * (1.0 - share))
        })
        .sum();
    let df = (kept.len() - 1) as f64;
    let p = 1.0 - ChiSquared::new(df).ok()?.cdf(statistic);
    if p >= VARIES_BELOW_P {
        return None;
    }
    let each = kept.iter().map(|r| r.path as f64 / r.all as f64);
    let low = each.clone().fold(f64::INFINITY, f64::min);
    Some((low, each.fold(0.0, f64::max)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_that_differ_beyond_their_samples_noise_are_said_to_and_agreeing_ones_are_not() {
        // 1.2% and 1.9% of 20,000 samples each: far beyond binomial noise.
        let apart = rounds(&[(240, 20_000), (380, 20_000), (300, 20_000)]);
        let (low, high) = varies_between_rounds(&apart).unwrap();
        assert!((low - 0.012).abs() < 1e-12 && (high - 0.019).abs() < 1e-12);
        // The same shares from 500 samples a round: within what sampling moves them.
        let few = rounds(&[(6, 500), (9, 500), (7, 500)]);
        assert_eq!(varies_between_rounds(&few), None);
        assert_eq!(
            varies_between_rounds(&rounds(&[(240, 20_000)])),
            None,
            "one round"
        );
        assert_eq!(varies_between_rounds(&rounds(&[(0, 100), (0, 100)])), None);
    }

    #[test]
    fn files_that_agree_by_chance_are_no_surer_than_their_rounds() {
        // Three old files at 1.00%, 1.01% and 0.99% of 40,000 samples, each from four rounds
        // that spread from 0.5% to 1.5%; one new file at 1.6% whose rounds spread as much.
        let round = |shares: [u64; 4]| {
            shares.map(|p| RoundCount {
                path: p,
                all: 10_000,
            })
        };
        let old_rounds: Vec<RoundCount> =
            [[50, 150, 60, 140], [55, 145, 150, 54], [150, 50, 45, 151]]
                .into_iter()
                .flat_map(round)
                .collect();
        let new_rounds = round([100, 220, 120, 200]).to_vec();
        let file = |r: &[RoundCount]| RoundCount {
            path: r.iter().map(|c| c.path).sum(),
            all: r.iter().map(|c| c.all).sum(),
        };
        let old_files: Vec<RoundCount> = old_rounds.chunks(4).map(file).collect();
        let new_files = [file(&new_rounds)];
        let by_files = change_test(&old_files, &new_files).unwrap();
        let floored =
            change_test_by_files((&old_files, &new_files), (&old_rounds, &new_rounds)).unwrap();
        let by_rounds = change_test(&old_rounds, &new_rounds).unwrap();
        assert!(by_files.p_value() < 0.01, "{by_files:?}");
        assert_eq!(floored.std_error, by_rounds.std_error);
        assert_eq!((floored.change, floored.df), (by_files.change, by_files.df));
        assert!(floored.p_value() > 0.05, "{floored:?}");
        // Files that spread more than their rounds keep their own standard error.
        let steady: Vec<RoundCount> = old_rounds
            .iter()
            .map(|c| RoundCount { path: 100, ..*c })
            .collect();
        let apart = [40, 100, 160].map(|p| RoundCount {
            path: p * 4,
            all: 40_000,
        });
        let kept = change_test_by_files((&apart, &new_files), (&steady, &new_rounds)).unwrap();
        assert_eq!(kept, change_test(&apart, &new_files).unwrap());
    }

    fn rounds(counts: &[(u64, u64)]) -> Vec<RoundCount> {
        counts
            .iter()
            .map(|&(path, all)| RoundCount { path, all })
            .collect()
    }

    #[test]
    fn of_many_unchanged_frames_none_is_called_and_a_real_change_is() {
        // 200 frames of 10 samples each in 2000 a side, drawn again: small differences only.
        let mut counts: Vec<(u64, u64)> = (0..200).map(|i| (10, 10 + (i % 5) - 2)).collect();
        let changed = changed_shares(&counts, (2000, 2000), 1.0, 0.05);
        assert!(changed.iter().all(|c| !c), "{changed:?}");
        // One frame 10 -> 110 samples: called; overdispersed rounds need more.
        counts.push((10, 110));
        let changed = changed_shares(&counts, (2000, 2100), 1.0, 0.05);
        assert_eq!(changed.iter().filter(|c| **c).count(), 1);
        assert!(changed[200]);
        let barely = [(10, 30)];
        assert!(changed_shares(&barely, (2000, 2000), 1.0, 0.05)[0]);
        assert!(!changed_shares(&barely, (2000, 2000), 9.0, 0.05)[0]);
    }

    #[test]
    fn equal_shares_on_both_sides_give_an_interval_around_zero() {
        let side = rounds(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let c = change_interval(&side, &side).unwrap();
        assert_eq!(c.value, 0.0);
        assert!(c.low < 0.0 && c.high > 0.0, "{c:?}");
    }

    #[test]
    fn a_side_shifted_by_much_more_than_the_rounds_spread_is_marked() {
        let old = rounds(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let new = rounds(&[(120, 1000), (130, 1000), (110, 1000), (125, 1000)]);
        let c = change_interval(&old, &new).unwrap();
        assert!((c.value - 0.07).abs() < 1e-12);
        assert!(c.low > 0.0, "{c:?}");
    }

    #[test]
    fn rounds_that_disagree_widen_the_interval_past_the_binomial_one() {
        // Same pooled counts (200 of 4000); the second side's rounds stray far apart.
        let steady = rounds(&[(50, 1000), (50, 1000), (50, 1000), (50, 1000)]);
        let wild = rounds(&[(10, 1000), (90, 1000), (20, 1000), (80, 1000)]);
        let (s, w) = (
            estimate(&steady, 0.05).unwrap(),
            estimate(&wild, 0.05).unwrap(),
        );
        assert_eq!(s.share, w.share);
        // Rounds that agree exactly fall back on the binomial variance, known.
        assert!((s.variance - 0.05 * 0.95 / 4000.0).abs() < 1e-15);
        assert!(s.df.is_infinite());
        assert!(w.variance > 10.0 * s.variance && w.df == 3.0, "{w:?}");
        let (si, wi) = (
            share_interval(&steady).unwrap(),
            share_interval(&wild).unwrap(),
        );
        assert!(wi.half_width() > 3.0 * si.half_width(), "{si:?} {wi:?}");
        // A shift the binomial interval would call real is inside the wild rounds' spread.
        let shifted = rounds(&[(70, 1000), (70, 1000), (70, 1000), (70, 1000)]);
        assert!(change_interval(&steady, &shifted).unwrap().low > 0.0);
        assert!(change_interval(&wild, &shifted).unwrap().low < 0.0);
    }

    #[test]
    fn a_side_that_never_sampled_a_path_is_not_taken_as_knowing_its_share_exactly() {
        // 0 of 12 samples against 8 of 62: a 6% share misses 12 samples half the time.
        let never = rounds(&[(0, 3), (0, 3), (0, 3), (0, 3)]);
        let some = rounds(&[(2, 15), (2, 16), (2, 15), (2, 16)]);
        let c = change_interval(&never, &some).unwrap();
        assert!(c.low < 0.0 && c.high > 0.0, "{c:?}");
        // Many samples that never hit it are evidence: the same shift is then marked.
        let never = rounds(&[(0, 300), (0, 300), (0, 300), (0, 300)]);
        assert!(change_interval(&never, &some).unwrap().low > 0.0);
    }

    #[test]
    fn too_few_rounds_with_samples_give_no_round_level_interval() {
        let one = rounds(&[(50, 1000)]);
        let two = rounds(&[(50, 1000), (55, 1000)]);
        assert!(estimate(&one, 0.05).is_none());
        assert!(estimate(&rounds(&[(50, 1000), (0, 0)]), 0.05).is_none());
        assert!(change_interval(&one, &one).is_none());
        assert!(change_interval(&two, &two).is_some());
    }

    #[test]
    fn a_single_run_is_predicted_from_the_other_side_s_runs() {
        // Ten runs whose shares stray between 3% and 7%, far beyond their binomial noise, and
        // one more run.
        let runs = rounds(&[
            (30, 1000),
            (70, 1000),
            (35, 1000),
            (65, 1000),
            (50, 1000),
            (32, 1000),
            (68, 1000),
            (45, 1000),
            (55, 1000),
            (50, 1000),
        ]);
        let like = change_test(&runs, &rounds(&[(53, 1000)])).unwrap();
        assert!(like.p_value() > 0.5, "{like:?}");
        // Its spread is one run's, not the ten runs' mean's: sqrt(10) times wider.
        let both = change_test(&runs, &runs).unwrap();
        assert!(like.std_error > 2.0 * both.std_error, "{like:?} {both:?}");
        assert_eq!(like.df, 9.0);
        let shifted = change_test(&runs, &rounds(&[(200, 1000)])).unwrap();
        assert!(shifted.p_value() < 1e-4, "{shifted:?}");
        // Either side may be the single run; the sign follows the sides.
        let back = change_test(&rounds(&[(200, 1000)]), &runs).unwrap();
        assert!((back.change + shifted.change).abs() < 1e-12);
        // Runs that agree exactly are floored at the single run's binomial variance, known.
        let flat = rounds(&[(50, 1000); 5]);
        let t = change_test(&flat, &rounds(&[(50, 1000)])).unwrap();
        assert!(t.df.is_infinite() && t.std_error > 0.0, "{t:?}");
    }

    #[test]
    fn with_many_rounds_of_pure_binomial_noise_the_interval_is_the_binomial_one() {
        // Rounds that stray by about binomial noise: the variance is within reach of p(1-p)/N.
        let side: Vec<RoundCount> = (0..40)
            .map(|i| RoundCount {
                path: (50 + [-7i64, 7, -3, 3, 0][i % 5]) as u64,
                all: 1000,
            })
            .collect();
        let e = estimate(&side, pooled_share(&side)).unwrap();
        let binomial = 0.05 * 0.95 / 40_000.0;
        assert!(
            e.variance >= binomial && e.variance < 1.2 * binomial,
            "{e:?}"
        );
    }

    #[test]
    fn a_share_change_priced_against_the_rest_reads_the_path_s_own_growth() {
        // A 600 ns path in a 2000 ns op grows by 100 ns: 30% -> 700 / 2100.
        let ns = against_rest_ns(0.3, 700.0 / 2100.0 - 0.3, 2000.0);
        assert!((ns - 100.0).abs() < 1e-9, "{ns}");
        assert_eq!(against_rest_ns(0.3, 0.0, 2000.0), 0.0);
        // A new share of the whole op leaves no rest: the growth is unbounded, not a price
        // a thousand times the op.
        assert_eq!(against_rest_ns(0.97, 0.03, 727_000.0), f64::INFINITY);
        assert!(against_rest_ns(0.97, 0.02, 727_000.0) < 2.0 * 727_000.0);
    }
}
