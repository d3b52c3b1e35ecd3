//! The best split of a series in O(n log n): E-Divisive's statistic for every split point at
//! once. A permutation test evaluates the same values in a thousand orders, so what depends
//! only on the values (their sorted order, each one's summed distance to all the others) is
//! computed once, and each order costs one pass with a Fenwick tree over the values' ranks.
//! The former search summed each point's distances one by one, O(n^2) per order: 999 orders
//! of 1,000 points took most of `history`'s time.

/// A level must hold for this many points to count: one point alone is an outlier, not a step.
pub const MIN_SEGMENT: usize = 2;

/// One series' values, ready to be split in any order.
pub struct Splits {
    /// The values in ascending order, less their median (distances do not change, and sums of
    /// values near zero lose less to rounding than sums near the values' level).
    sorted: Vec<f64>,
    /// Per rank: the sum of the distances from that value to every other value.
    to_all: Vec<f64>,
    /// The sum of the distances of all pairs.
    total: f64,
    /// Per rank, a Fenwick tree of the values placed so far: how many, and their sum.
    placed_count: Vec<usize>,
    placed_sum: Vec<f64>,
    /// Short series: the values in the order being split.
    in_order: Vec<f64>,
}

impl Splits {
    /// The values of `x`, and for each point of `x` its value's rank (ties broken by
    /// position): `order` for [`Splits::best`] that stands for `x` itself.
    pub fn new(x: &[f64]) -> (Splits, Vec<usize>) {
        let n = x.len();
        let mut by_value: Vec<usize> = (0..n).collect();
        by_value.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
        let centre = if n == 0 { 0.0 } else { x[by_value[n / 2]] };
        let sorted: Vec<f64> = by_value.iter().map(|&i| x[i] - centre).collect();
        let mut rank = vec![0; n];
        for (r, &i) in by_value.iter().enumerate() {
            rank[i] = r;
        }
        // Below rank r: r values, each v - below; above: n - 1 - r values, each above - v.
        let total_sum: f64 = sorted.iter().sum();
        let mut below = 0.0;
        let to_all: Vec<f64> = sorted
            .iter()
            .enumerate()
            .map(|(r, &v)| {
                let above = total_sum - below - v;
                let d = (r as f64 * v - below) + (above - (n - 1 - r) as f64 * v);
                below += v;
                d
            })
            .collect();
        let splits = Splits {
            sorted,
            total: to_all.iter().sum::<f64>() / 2.0,
            to_all,
            placed_count: vec![0; n + 1],
            placed_sum: vec![0.0; n + 1],
            in_order: Vec::with_capacity(n),
        };
        (splits, rank)
    }

    /// The split of the series whose k-th point has rank `order[k]` into [0, k) and [k, n)
    /// that maximises the scaled energy distance
    ///   Q = m r / (m + r) * (2/(m r) sum|x_i - y_j| - sum_{i<i'}|x_i - x_i'|/C(m, 2)
    ///                                               - sum_{j<j'}|y_j - y_j'|/C(r, 2))
    /// with both parts at least [`MIN_SEGMENT`] long; None when it is too short to split.
    /// `order` must be a permutation of the ranks [`Splits::new`] gave.
    pub fn best(&mut self, order: &[usize]) -> Option<(usize, f64)> {
        let n = order.len();
        debug_assert_eq!(n, self.sorted.len());
        if n < 2 * MIN_SEGMENT {
            return None;
        }
        let total = self.total;
        // Short series (the power simulations' thousands of shuffles of 24 points) sum the
        // distances to the left part directly: cheaper there than the tree.
        let direct = n <= DIRECT_UP_TO;
        if direct {
            self.in_order.clear();
            self.in_order
                .extend(order.iter().map(|&rank| self.sorted[rank]));
        } else {
            self.placed_count.fill(0);
            self.placed_sum.fill(0.0);
        }
        // Move the points one by one from the right part to the left, updating the three sums.
        let (mut cross, mut within_left, mut within_right) = (0.0, 0.0, total);
        let mut placed_total = 0.0;
        let mut best: Option<(usize, f64)> = None;
        for (k, &rank) in order.iter().enumerate().take(n - MIN_SEGMENT) {
            let v = self.sorted[rank];
            let to_left = if direct {
                distance_sum(&self.in_order[..k], v)
            } else {
                let (lower, lower_sum) = self.placed_below(rank);
                let (higher, higher_sum) = (k - lower, placed_total - lower_sum);
                self.place(rank, v);
                placed_total += v;
                (lower as f64 * v - lower_sum) + (higher_sum - higher as f64 * v)
            };
            let to_right = self.to_all[rank] - to_left;
            within_left += to_left;
            within_right -= to_right;
            cross += to_right - to_left;
            let (m, r) = ((k + 1) as f64, (n - k - 1) as f64);
            if k + 1 < MIN_SEGMENT {
                continue;
            }
            let q = scaled_energy(cross, within_left, within_right, m, r);
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((k + 1, q));
            }
        }
        best
    }

    /// How many values of rank below `rank` are placed, and their sum (the tree's layout).
    fn placed_below(&self, rank: usize) -> (usize, f64) {
        let (mut count, mut sum) = (0, 0.0);
        let mut i = rank;
        while i > 0 {
            count += self.placed_count[i];
            sum += self.placed_sum[i];
            i &= i - 1;
        }
        (count, sum)
    }

    fn place(&mut self, rank: usize, v: f64) {
        let mut i = rank + 1;
        while i < self.placed_count.len() {
            self.placed_count[i] += 1;
            self.placed_sum[i] += v;
            i += i & i.wrapping_neg();
        }
    }
}

/// Series up to this long are split by summing distances directly, O(n^2) with a small
/// constant; longer ones through the Fenwick tree, O(n log n).
const DIRECT_UP_TO: usize = 64;

/// The sum of the distances from `v` to each of `values`, in four independent sums (one
/// chain of additions waits on each one before it).
fn distance_sum(values: &[f64], v: f64) -> f64 {
    let mut sums = [0.0; 4];
    let mut quads = values.chunks_exact(4);
    for quad in &mut quads {
        for (sum, x) in sums.iter_mut().zip(quad) {
            *sum += (x - v).abs();
        }
    }
    let rest: f64 = quads.remainder().iter().map(|x| (x - v).abs()).sum();
    (sums[0] + sums[1]) + (sums[2] + sums[3]) + rest
}

/// Q of a split into m and r points from its three distance sums: across the split, and
/// within each part.
fn scaled_energy(cross: f64, within_left: f64, within_right: f64, m: f64, r: f64) -> f64 {
    let pairs = |c: f64| c * (c - 1.0) / 2.0;
    m * r / (m + r) * (2.0 * cross / (m * r) - within_left / pairs(m) - within_right / pairs(r))
}

/// [`Splits::best`] of `x` in its own order.
pub fn best_split(x: &[f64]) -> Option<(usize, f64)> {
    let (mut splits, order) = Splits::new(x);
    splits.best(&order)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};

    /// The O(n^2) search this module replaced, kept as the oracle: each point's distances to
    /// the points before and after it summed one by one.
    fn quadratic_best_split(x: &[f64]) -> Option<(usize, f64)> {
        let n = x.len();
        if n < 2 * MIN_SEGMENT {
            return None;
        }
        let d = |i: usize, j: usize| (x[i] - x[j]).abs();
        let total: f64 = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .map(|(i, j)| d(i, j))
            .sum();
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
            let q = scaled_energy(cross, within_left, within_right, m, r);
            if best.is_none_or(|(_, b)| q > b) {
                best = Some((k + 1, q));
            }
        }
        best
    }

    /// Relative difference, against the larger magnitude (0 when both are 0).
    fn relative(a: f64, b: f64) -> f64 {
        let scale = a.abs().max(b.abs());
        if scale == 0.0 {
            0.0
        } else {
            (a - b).abs() / scale
        }
    }

    fn assert_same(x: &[f64], what: &str) {
        let fast = best_split(x);
        let slow = quadratic_best_split(x);
        match (fast, slow) {
            (None, None) => {}
            (Some((kf, qf)), Some((ks, qs))) => {
                // Equal within 1e-9 relative; where the oracle's own sums round more than that
                // (its total is one long sequential sum), within twice its disagreement with
                // itself on the mirrored series, whose best split is the same split in reverse.
                let mirrored: Vec<f64> = x.iter().rev().copied().collect();
                let (_, qm) = quadratic_best_split(&mirrored).expect("as long as x");
                let slack = 2.0 * (qs - qm).abs() / qs.abs().max(f64::MIN_POSITIVE);
                assert!(
                    relative(qf, qs) < 1e-9_f64.max(slack),
                    "{what}: Q {qf} vs {qs} (mirrored {qm})"
                );
                // Where two splits' Q differ by rounding only, either is the best.
                if kf != ks {
                    let q_at_kf = q_at(x, kf);
                    assert!(
                        relative(q_at_kf, qs) < 1e-9_f64.max(slack),
                        "{what}: split {kf} vs {ks}"
                    );
                }
            }
            _ => panic!("{what}: {fast:?} vs {slow:?}"),
        }
    }

    /// Q at the one split `k`, straight from the formula.
    fn q_at(x: &[f64], k: usize) -> f64 {
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
    fn the_best_split_is_the_formulas_maximum() {
        let x = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0];
        let (k, q) = best_split(&x).unwrap();
        let direct: Vec<f64> = (2..=8).map(|k| q_at(&x, k)).collect();
        let max = direct.iter().copied().fold(f64::MIN, f64::max);
        assert!((q - max).abs() < 1e-9, "{q} vs {direct:?}");
        assert!((q_at(&x, k) - q).abs() < 1e-9);
        assert!(best_split(&[1.0, 2.0, 3.0]).is_none());
    }

    #[test]
    fn the_fast_search_gives_the_quadratic_searchs_statistic_on_random_series() {
        let mut rng = StdRng::seed_from_u64(32);
        for case in 0..400 {
            let n = rng.gen_range(0..300);
            let level: f64 = rng.gen_range(-1e6..1e6);
            let spread: f64 = 10f64.powi(rng.gen_range(-6..4));
            let mut x: Vec<f64> = (0..n)
                .map(|_| level + spread * rng.gen_range(-1.0..1.0))
                .collect();
            // Steps, repeated values and constants: where ranks tie and sums cancel.
            match case % 4 {
                0 => x.iter_mut().skip(n / 3).for_each(|v| *v += 5.0 * spread),
                1 => x
                    .iter_mut()
                    .for_each(|v| *v = (*v / spread).round() * spread),
                2 if n > 0 => {
                    let c = x[0];
                    x.iter_mut().step_by(3).for_each(|v| *v = c);
                }
                _ => {}
            }
            assert_same(&x, &format!("case {case}, {n} points"));
        }
    }

    #[test]
    fn every_order_of_one_set_of_values_matches_the_oracle() {
        let mut rng = StdRng::seed_from_u64(999);
        // Both ways of summing: directly (short series) and through the tree.
        for n in [24, 200] {
            let x: Vec<f64> = (0..n)
                .map(|i| rng.gen_range(0.0..1.0) + if i < n * 2 / 5 { 0.0 } else { 0.3 })
                .collect();
            let (mut splits, mut order) = Splits::new(&x);
            let mut shuffled = x.clone();
            for shuffle in 0..50 {
                // The same shuffle of the ranks and of the values: one permutation.
                let seed = rng.gen();
                order.shuffle(&mut StdRng::seed_from_u64(seed));
                shuffled.shuffle(&mut StdRng::seed_from_u64(seed));
                let (kf, qf) = splits.best(&order).unwrap();
                let (ks, qs) = quadratic_best_split(&shuffled).unwrap();
                assert_eq!(kf, ks, "{n} points, shuffle {shuffle}");
                assert!(
                    relative(qf, qs) < 1e-9,
                    "{n} points, shuffle {shuffle}: {qf} vs {qs}"
                );
            }
        }
    }

    #[test]
    fn a_constant_series_has_a_zero_statistic_and_short_ones_none() {
        let (k, q) = best_split(&[7.5; 12]).unwrap();
        assert_eq!(q, 0.0);
        assert_eq!(k, MIN_SEGMENT, "the first split reaching the maximum");
        assert!(best_split(&[1.0, 2.0, 3.0]).is_none());
        assert!(best_split(&[]).is_none());
    }
}
