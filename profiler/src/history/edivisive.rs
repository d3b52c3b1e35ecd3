//! E-Divisive means (Matteson & James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", JASA 109(505), 2014): divisive change-point detection on the
//! energy distance between the points before and after a split, each new change point tested
//! with a permutation test. It finds a shift of the whole distribution, not only of the mean,
//! and assumes nothing about its shape; MongoDB's performance CI uses it for the same job.
//! Pure functions, no I/O; the permutations come from a fixed seed, so a series always gives
//! the same answer.
use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use serde::Serialize;

use super::split::Splits;
pub use super::split::{best_split, MIN_SEGMENT};

/// Seed of the permutations ("hookprof" in ASCII, truncated): any fixed value would do.
const SEED: u64 = 0x686f_6f6b_7072_6f66;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ChangePoint {
    /// Index of the first point of the new level.
    pub index: usize,
    /// The divergence statistic at the split (scaled energy distance, in the data's unit).
    pub statistic: f64,
    /// Permutation p-value: the share of shuffled segments whose best split diverges as much.
    pub p_value: f64,
}

/// Whether a step in the middle of a series can be found, and how large it must be.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Detectable {
    /// The smallest step, in units of the points' standard deviation, that the method finds
    /// [`POWER`] of the time.
    Step(f64),
    /// No step, however large, reaches p < alpha in a series this short.
    TooShort,
}

/// The share of series with a step that the step must be found in to count as detectable.
pub const POWER: f64 = 0.8;
/// Simulated series per power estimate: the power is known to about ±0.04.
const SIMULATIONS: usize = 100;
/// Longer series are not simulated (the cost grows with the square of the length): their step
/// is the one at this length, scaled by the noise of a difference of two level means. The
/// step times sqrt(points) still shrinks beyond (9.0 sd at 10 points, 8.1 at 20, 7.3 at 40),
/// so the scaled step overstates what a longer series needs, never understates it.
const SIMULATED_POINTS: usize = 24;

/// The smallest step in the middle of `n` points with standard normal noise that
/// [`change_points`] finds in [`POWER`] of simulated series, in units of the noise's standard
/// deviation. Measured with the method itself (its search over every split costs power that a
/// test at a known split would not pay, about a third more step at 10 to 20 points), by
/// bisection with the same simulated noise at every step size; deterministic. Series longer than
/// [`SIMULATED_POINTS`] get that length's step, scaled.
pub fn detectable_step(n: usize, alpha: f64, permutations: usize) -> Detectable {
    if n > SIMULATED_POINTS {
        // A step in the middle of n points is measured against sqrt(1/n1 + 1/n2) of noise.
        let spread = |n: usize| (1.0 / (n / 2) as f64 + 1.0 / (n - n / 2) as f64).sqrt();
        return match detectable_step(SIMULATED_POINTS, alpha, permutations) {
            Detectable::Step(step) => Detectable::Step(step * spread(n) / spread(SIMULATED_POINTS)),
            Detectable::TooShort => Detectable::TooShort,
        };
    }
    if !step_reaches(n, alpha, permutations) {
        return Detectable::TooShort;
    }
    let mut rng = StdRng::seed_from_u64(SEED);
    let noise: Vec<Vec<f64>> = (0..SIMULATIONS)
        .map(|_| (0..n).map(|_| standard_normal(&mut rng)).collect())
        .collect();
    // Whether `step` is found in at least POWER of the series: it stops as soon as it knows.
    let powerful = |step: f64| {
        let needed = (POWER * SIMULATIONS as f64).ceil() as usize;
        let (mut found, mut missed) = (0, 0);
        for (s, z) in noise.iter().enumerate() {
            let x: Vec<f64> = z
                .iter()
                .enumerate()
                .map(|(i, z)| if i < n / 2 { *z } else { z + step })
                .collect();
            let mut rng = StdRng::seed_from_u64(SEED ^ s as u64);
            let significant = best_split(&x).is_some_and(|(_, q)| {
                permutation_p_below(&x, q, alpha, permutations, &mut rng).is_some()
            });
            if significant {
                found += 1;
            } else {
                missed += 1;
            }
            if found >= needed || missed > SIMULATIONS - needed {
                break;
            }
        }
        found >= needed
    };
    let (mut low, mut high) = (0.0, 1.0);
    while !powerful(high) {
        (low, high) = (high, 2.0 * high);
    }
    // To within 1/64 of the bracket, about 1%.
    for _ in 0..6 {
        let mid = (low + high) / 2.0;
        if powerful(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Detectable::Step(high)
}

/// The fewest points (at most `limit`) in which some step is found at p < alpha; None when
/// even `limit` points are too few (the permutation test cannot give p below
/// 1 / (permutations + 1)).
pub fn points_needed(alpha: f64, permutations: usize, limit: usize) -> Option<usize> {
    (2 * MIN_SEGMENT..=limit).find(|&n| step_reaches(n, alpha, permutations))
}

/// True if a noiseless step in the middle of `n` points is found at p < alpha: the most the
/// permutation test can say with so few points (2 of the C(n, n/2) orders are as extreme).
fn step_reaches(n: usize, alpha: f64, permutations: usize) -> bool {
    let x: Vec<f64> = (0..n).map(|i| if i < n / 2 { 0.0 } else { 1.0 }).collect();
    let mut rng = StdRng::seed_from_u64(SEED);
    best_split(&x)
        .is_some_and(|(_, q)| permutation_p_below(&x, q, alpha, permutations, &mut rng).is_some())
}

/// Box-Muller: a standard normal draw from two uniform ones.
fn standard_normal(rng: &mut StdRng) -> f64 {
    let u: f64 = 1.0 - rng.gen::<f64>();
    let v: f64 = rng.gen();
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Change points of `series`, in index order. Each round takes the strongest split of any
/// segment and keeps it when its permutation p-value is below `alpha`; the first split that is
/// not significant ends the search.
pub fn change_points(series: &[f64], alpha: f64, permutations: usize) -> Vec<ChangePoint> {
    // In units of the largest magnitude, so sums of distances between values near f64::MAX
    // stay finite; the statistic is scaled back (it is linear in the data's unit).
    let scale = series.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let series: Vec<f64> = series.iter().map(|v| v / scale).collect();
    let series = series.as_slice();
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut segments = vec![(0, series.len())];
    let mut found = Vec::new();
    loop {
        let best = segments
            .iter()
            .enumerate()
            .filter_map(|(s, &(a, b))| best_split(&series[a..b]).map(|(k, q)| (s, a + k, q)))
            .max_by(|x, y| x.2.total_cmp(&y.2));
        let Some((s, index, statistic)) = best else {
            break;
        };
        let (a, b) = segments[s];
        let Some(p_value) =
            permutation_p_below(&series[a..b], statistic, alpha, permutations, &mut rng)
        else {
            break;
        };
        found.push(ChangePoint {
            index,
            statistic: (statistic * scale).clamp(f64::MIN, f64::MAX),
            p_value,
        });
        segments.splice(s..=s, [(a, index), (index, b)]);
    }
    found.sort_by_key(|c| c.index);
    found
}

/// The permutation p-value of `observed` ((shuffles whose best split reaches it, plus one) /
/// (shuffles plus one)) when it is below `alpha`; None as soon as the shuffles show it cannot
/// be. Where there is no step, a few shuffles decide (the search stops there and needs no
/// exact figure); a history of 1,000 points spent ~30 s on all 999 for each flat metric.
fn permutation_p_below(
    x: &[f64],
    observed: f64,
    alpha: f64,
    permutations: usize,
    rng: &mut StdRng,
) -> Option<f64> {
    // The ranks of the values are shuffled, the same permutation as shuffling the values.
    let (mut splits, mut shuffled) = Splits::new(x);
    // Relative slack so a shuffle equal to the observed order counts despite rounding.
    let reach = observed - observed.abs() * 1e-12;
    let allowed = alpha * (permutations + 1) as f64;
    let mut at_least = 0;
    for _ in 0..permutations {
        shuffled.shuffle(rng);
        if splits.best(&shuffled).is_some_and(|(_, q)| q >= reach) {
            at_least += 1;
            if (at_least + 1) as f64 >= allowed {
                return None;
            }
        }
    }
    let p = (at_least + 1) as f64 / (permutations + 1) as f64;
    (p < alpha).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Noise from a fixed pattern: no randomness in the test itself.
    fn noisy(level: f64, n: usize, offset: usize) -> Vec<f64> {
        const NOISE: [f64; 7] = [0.3, -0.5, 0.1, 0.6, -0.2, -0.4, 0.2];
        (0..n)
            .map(|i| level + NOISE[(i + offset) % NOISE.len()])
            .collect()
    }

    #[test]
    fn a_known_step_is_found_where_it_is() {
        let mut x = noisy(10.0, 12, 0);
        x.extend(noisy(13.0, 8, 3));
        let found = change_points(&x, 0.05, 999);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 12);
        assert!(found[0].p_value <= 0.002, "{found:?}");
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut x = noisy(10.0, 8, 0);
        x.extend(noisy(14.0, 8, 2));
        x.extend(noisy(11.0, 8, 5));
        let idx: Vec<usize> = change_points(&x, 0.05, 999)
            .iter()
            .map(|c| c.index)
            .collect();
        assert_eq!(idx, [8, 16]);
    }

    #[test]
    fn noise_alone_and_constants_have_no_step() {
        assert!(change_points(&noisy(10.0, 21, 0), 0.05, 999).is_empty());
        assert!(change_points(&[5.0; 10], 0.05, 999).is_empty());
        assert!(change_points(&[5.0, 6.0, 7.0], 0.05, 999).is_empty());
    }

    /// The share of `runs` series of `n` standard normal points, `step` added to the second
    /// half, in which a change point is found (noise from a seed of its own, not the method's).
    fn found_share(n: usize, step: f64, alpha: f64, runs: usize) -> f64 {
        let mut rng = StdRng::seed_from_u64(1);
        let found = (0..runs)
            .filter(|_| {
                let x: Vec<f64> = (0..n)
                    .map(|i| standard_normal(&mut rng) + if i < n / 2 { 0.0 } else { step })
                    .collect();
                !change_points(&x, alpha, 999).is_empty()
            })
            .count();
        found as f64 / runs as f64
    }

    #[test]
    fn the_detectable_step_is_found_four_times_in_five() {
        // An independent numpy simulation of the same test (400 series each) found such steps
        // in 0.855 of 8-point series at 4.1875 sd (0.70 at 0.8 of it), in 0.825 of 10-point
        // series at 2.84375 sd (0.61 at 0.8 of it) and in 0.87 of 20-point series at 1.8125 sd.
        for n in [8, 10] {
            let Detectable::Step(k) = detectable_step(n, 0.05, 999) else {
                panic!("{n} points can show a step at p < 0.05");
            };
            let at = found_share(n, k, 0.05, 300);
            let below = found_share(n, 0.7 * k, 0.05, 300);
            assert!(
                at >= 0.74 && below < 0.74,
                "{n} points, {k} sd: {at}, {below}"
            );
        }
    }

    #[test]
    fn too_short_series_cannot_show_any_step() {
        // 2 of the C(n, n/2) orders are as extreme as a noiseless step: 2/35 = 0.057 for 7
        // points, 2/70 = 0.029 for 8.
        assert_eq!(detectable_step(7, 0.05, 999), Detectable::TooShort);
        assert_eq!(detectable_step(3, 0.05, 999), Detectable::TooShort);
        assert_eq!(points_needed(0.05, 999, 64), Some(8));
        // 999 shuffles never give p below 0.001.
        assert_eq!(points_needed(0.0005, 999, 64), None);
    }

    #[test]
    fn long_series_scale_the_longest_simulated_one() {
        let (Detectable::Step(at_24), Detectable::Step(at_48)) = (
            detectable_step(24, 0.05, 999),
            detectable_step(48, 0.05, 999),
        ) else {
            panic!("24 points can show a step");
        };
        // sqrt(1/24 + 1/24) / sqrt(1/12 + 1/12) = 1/sqrt(2)
        assert!(
            (at_48 - at_24 / 2f64.sqrt()).abs() < 1e-12,
            "{at_24} {at_48}"
        );
    }
}
