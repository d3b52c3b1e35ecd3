//! E-Divisive means (Matteson & James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", JASA 109(505), 2014): divisive change-point detection on the
//! energy distance between the points before and after a split, each new change point tested
//! with a permutation test. It finds a shift of the whole distribution, not only of the mean,
//! and assumes nothing about its shape; MongoDB's performance CI uses it for the same job.
//! Pure functions, no I/O; the permutations come from a fixed seed, so a series always gives
//! the same answer.
use rand::{rngs::StdRng, seq::SliceRandom, SeedableRng};
use serde::Serialize;

/// A level must hold for this many points to count: one point alone is an outlier, not a step.
pub const MIN_SEGMENT: usize = 2;

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

/// Change points of `series`, in index order. Each round takes the strongest split of any
/// segment and keeps it when its permutation p-value is below `alpha`; the first split that is
/// not significant ends the search.
pub fn change_points(series: &[f64], alpha: f64, permutations: usize) -> Vec<ChangePoint> {
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
        let p_value = permutation_p(&series[a..b], statistic, permutations, &mut rng);
        if p_value >= alpha {
            break;
        }
        found.push(ChangePoint {
            index,
            statistic,
            p_value,
        });
        segments.splice(s..=s, [(a, index), (index, b)]);
    }
    found.sort_by_key(|c| c.index);
    found
}

/// The split of `x` into [0, k) and [k, n) that maximises the scaled energy distance
///   Q = m r / (m + r) * (2/(m r) sum|x_i - y_j| - sum_{i<i'}|x_i - x_i'|/C(m, 2)
///                                               - sum_{j<j'}|y_j - y_j'|/C(r, 2))
/// with both parts at least [`MIN_SEGMENT`] long; None when `x` is too short to split.
pub fn best_split(x: &[f64]) -> Option<(usize, f64)> {
    let n = x.len();
    if n < 2 * MIN_SEGMENT {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    let total: f64 = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| d(i, j))
        .sum();
    // Move the points one by one from the right part to the left, updating the three sums.
    let (mut cross, mut within_left, mut within_right) = (0.0, 0.0, total);
    let mut best: Option<(usize, f64)> = None;
    for k in 0..n - MIN_SEGMENT {
        let to_left: f64 = (0..k).map(|i| d(i, k)).sum();
        let to_right: f64 = (k + 1..n).map(|j| d(k, j)).sum();
        within_left += to_left;
        within_right -= to_right;
        cross += to_right - to_left;
        let (m, r) = ((k + 1) as f64, (n - k - 1) as f64);
        if k + 1 < MIN_SEGMENT {
            continue;
        }
        let pairs = |c: f64| c * (c - 1.0) / 2.0;
        let energy = 2.0 * cross / (m * r) - within_left / pairs(m) - within_right / pairs(r);
        let q = m * r / (m + r) * energy;
        if best.is_none_or(|(_, b)| q > b) {
            best = Some((k + 1, q));
        }
    }
    best
}

/// (shuffles whose best split reaches `observed`, plus one) / (shuffles plus one).
fn permutation_p(x: &[f64], observed: f64, permutations: usize, rng: &mut StdRng) -> f64 {
    let mut shuffled = x.to_vec();
    // Relative slack so a shuffle equal to the observed order counts despite rounding.
    let reach = observed - observed.abs() * 1e-12;
    let mut at_least = 0;
    for _ in 0..permutations {
        shuffled.shuffle(rng);
        if best_split(&shuffled).is_some_and(|(_, q)| q >= reach) {
            at_least += 1;
        }
    }
    (at_least + 1) as f64 / (permutations + 1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A brute-force Q straight from the formula, for checking the incremental sums.
    fn q_direct(x: &[f64], k: usize) -> f64 {
        let (l, r) = x.split_at(k);
        let (m, n) = (l.len() as f64, r.len() as f64);
        let cross: f64 = l
            .iter()
            .flat_map(|a| r.iter().map(move |b| (a - b).abs()))
            .sum();
        let within = |s: &[f64]| -> f64 {
            let c = s.len() as f64;
            let sum: f64 = (0..s.len())
                .flat_map(|i| (i + 1..s.len()).map(move |j| (i, j)))
                .map(|(i, j)| (s[i] - s[j]).abs())
                .sum();
            sum / (c * (c - 1.0) / 2.0)
        };
        m * n / (m + n) * (2.0 * cross / (m * n) - within(l) - within(r))
    }

    #[test]
    fn the_incremental_statistic_is_the_formula() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0];
        let (k, q) = best_split(&x).unwrap();
        let direct: Vec<f64> = (2..=8).map(|k| q_direct(&x, k)).collect();
        let max = direct.iter().copied().fold(f64::MIN, f64::max);
        assert!((q - max).abs() < 1e-9, "{q} vs {direct:?}");
        assert!((q_direct(&x, k) - q).abs() < 1e-9);
        assert!(best_split(&[1.0, 2.0, 3.0]).is_none());
    }

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
}
