//! How each path's share of the sampled CPU time changed between the sides: a share is a ratio
//! inside one run, so the machine's speed, which moves every figure of a run at once, cancels
//! in it (FBDetect watches per-function shares for this reason). Each side's files are pooled
//! by summing their samples. A share's change has a 95% interval from the spread of the
//! rounds' shares on each side (`shares`: a round's samples move together, so the round is
//! the unit), or, where a side has too few rounds with stack counts (one round, or files
//! written before rounds were kept), from the pooled counts as independent draws (two
//! proportions, normal approximation, its variance at the pooled share), which the output
//! then says. Its ns/op change is share x the op's CPU time on each side.
use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    results::{PathKind, StackProfile},
    shares::{self, RoundCount},
};

/// The sampled side of a change.
#[derive(Debug, Clone, Serialize)]
pub struct SampledChange {
    /// The workload's own samples (less the probes' and the lost stacks) on each side.
    pub old_samples: u64,
    pub new_samples: u64,
    /// How the share changes' intervals were made.
    pub interval: ShareInterval,
    /// Paths with a share of at least `LISTED_SHARE` on either side, largest change first.
    pub paths: Vec<SampledPathDelta>,
}

/// Where a share change's interval comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum ShareInterval {
    /// The spread of the rounds' shares on each side (Welch's t over rounds).
    Rounds {
        old_rounds: usize,
        new_rounds: usize,
    },
    /// The pooled counts as independent draws: a side had fewer than `shares::MIN_ROUNDS`
    /// rounds with stack counts (counted here; 0 for files that kept none).
    Binomial {
        old_rounds: usize,
        new_rounds: usize,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct SampledPathDelta {
    pub kind: PathKind,
    pub name: String,
    pub parent: Option<String>,
    pub old_share: f64,
    pub new_share: f64,
    /// new_share - old_share, with its 95% interval.
    pub share_change: f64,
    pub share_change_low: f64,
    pub share_change_high: f64,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
    pub delta_ns_per_op: f64,
}

impl SampledPathDelta {
    /// Whether the share's interval leaves out zero.
    pub fn significant(&self) -> bool {
        self.share_change_low > 0.0 || self.share_change_high < 0.0
    }
}

/// Paths below this share on both sides are left out.
const LISTED_SHARE: f64 = 0.005;

type PathKey = (PathKind, String, Option<String>);

/// One side's profiles summed: the workload's own samples per path, in all and round by
/// round, and the CPU ns per op.
#[derive(Debug, Default)]
struct Side {
    samples: u64,
    paths: BTreeMap<PathKey, u64>,
    /// Each round's own samples over the side's files, in file order; None when a file kept
    /// no rounds.
    rounds: Option<Vec<u64>>,
    /// Each path's samples in those rounds (a path absent from a file had none there).
    path_rounds: BTreeMap<PathKey, Vec<u64>>,
    cpu_ns: f64,
    ops: u64,
}

impl Side {
    fn of(profiles: &[&StackProfile]) -> Side {
        let mut side = Side {
            rounds: Some(Vec::new()),
            ..Side::default()
        };
        for p in profiles {
            side.samples += p.own_samples();
            side.cpu_ns += p.on_cpu_ns_per_op * p.ops as f64;
            side.ops += p.ops;
            for path in &p.paths {
                *side.paths.entry(key(path)).or_default() += path.inclusive_samples;
            }
            side.add_rounds(p);
        }
        side
    }

    /// `p`'s rounds after the ones so far, or none at all when `p` kept none (or kept them
    /// for some paths only, which no writer does).
    fn add_rounds(&mut self, p: &StackProfile) {
        let Some(rounds) = &mut self.rounds else {
            return;
        };
        let n = p.round_samples.len();
        let whole = n > 0 && p.paths.iter().all(|path| path.round_samples.len() == n);
        if !whole {
            self.rounds = None;
            self.path_rounds.clear();
            return;
        }
        let before = rounds.len();
        rounds.extend(&p.round_samples);
        for path in &p.paths {
            let counts = self.path_rounds.entry(key(path)).or_default();
            counts.resize(before, 0);
            counts.extend(&path.round_samples);
        }
        for counts in self.path_rounds.values_mut() {
            counts.resize(before + n, 0);
        }
    }

    fn share(&self, key: &PathKey) -> f64 {
        self.paths.get(key).copied().unwrap_or(0) as f64 / self.samples.max(1) as f64
    }

    /// `key`'s samples and all samples, over the side's files.
    fn pooled(&self, key: &PathKey) -> RoundCount {
        RoundCount {
            path: self.paths.get(key).copied().unwrap_or(0),
            all: self.samples,
        }
    }

    /// Rounds with samples, the ones a round-level interval stands on.
    fn rounds_with_samples(&self) -> usize {
        self.rounds
            .as_ref()
            .map_or(0, |r| r.iter().filter(|&&n| n > 0).count())
    }

    /// `key`'s counts round by round (zeros where it was never sampled).
    fn round_counts(&self, key: &PathKey) -> Vec<RoundCount> {
        let rounds = self.rounds.as_deref().unwrap_or_default();
        let path = self.path_rounds.get(key);
        rounds
            .iter()
            .enumerate()
            .map(|(i, &all)| RoundCount {
                path: path.and_then(|p| p.get(i)).copied().unwrap_or(0),
                all,
            })
            .collect()
    }

    fn cpu_ns_per_op(&self) -> f64 {
        self.cpu_ns / self.ops.max(1) as f64
    }
}

fn key(path: &crate::results::SampledPath) -> PathKey {
    (path.kind, path.name.clone(), path.parent.clone())
}

/// The change of every path's share, None unless both sides have samples.
pub fn sampled_change(old: &[&StackProfile], new: &[&StackProfile]) -> Option<SampledChange> {
    let (o, n) = (Side::of(old), Side::of(new));
    if o.samples == 0 || n.samples == 0 {
        return None;
    }
    let (old_rounds, new_rounds) = (o.rounds_with_samples(), n.rounds_with_samples());
    let interval = if old_rounds.min(new_rounds) >= shares::MIN_ROUNDS {
        ShareInterval::Rounds {
            old_rounds,
            new_rounds,
        }
    } else {
        ShareInterval::Binomial {
            old_rounds,
            new_rounds,
        }
    };
    let mut keys: Vec<_> = o.paths.keys().chain(n.paths.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut paths: Vec<SampledPathDelta> = keys
        .into_iter()
        .filter_map(|key| {
            let (p1, p2) = (o.share(&key), n.share(&key));
            if p1.max(p2) < LISTED_SHARE {
                return None;
            }
            let change = p2 - p1;
            let by_rounds = match interval {
                ShareInterval::Rounds { .. } => {
                    shares::change_interval(&o.round_counts(&key), &n.round_counts(&key))
                }
                ShareInterval::Binomial { .. } => None,
            };
            let i = by_rounds.unwrap_or_else(|| {
                shares::binomial_change_interval(o.pooled(&key), n.pooled(&key))
            });
            let (old_ns, new_ns) = (p1 * o.cpu_ns_per_op(), p2 * n.cpu_ns_per_op());
            let (kind, name, parent) = key;
            Some(SampledPathDelta {
                kind,
                name,
                parent,
                old_share: p1,
                new_share: p2,
                share_change: change,
                share_change_low: i.low,
                share_change_high: i.high,
                old_ns_per_op: old_ns,
                new_ns_per_op: new_ns,
                delta_ns_per_op: new_ns - old_ns,
            })
        })
        .collect();
    paths.sort_by(|a, b| {
        b.delta_ns_per_op
            .abs()
            .total_cmp(&a.delta_ns_per_op.abs())
            .then(a.name.cmp(&b.name))
    });
    Some(SampledChange {
        old_samples: o.samples,
        new_samples: n.samples,
        interval,
        paths,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::SampledPath;

    /// `samples` samples, `hook_samples` of them in security_file_open.
    pub(crate) fn profile(samples: u64, hook_samples: u64, cpu_ns: f64) -> StackProfile {
        let share = hook_samples as f64 / samples as f64;
        StackProfile {
            period_ns: 200_000,
            stack_passes: None,
            samples,
            user_samples: 0,
            probe_samples: 0,
            lost_stacks: 0,
            ops: 1000,
            on_cpu_ns_per_op: cpu_ns,
            round_samples: Vec::new(),
            paths: vec![SampledPath {
                kind: PathKind::Hook,
                name: "security_file_open".into(),
                parent: None,
                lsm: None,
                inclusive_samples: hook_samples,
                self_samples: 0,
                inclusive_share: share,
                share_low: 0.0,
                share_high: 1.0,
                self_share: 0.0,
                ns_per_op: share * cpu_ns,
                ns_per_op_low: 0.0,
                ns_per_op_high: 0.0,
                spanned_samples: 0,
                spanned_ns_per_op: 0.0,
                round_samples: Vec::new(),
            }],
            folded: Vec::new(),
        }
    }

    #[test]
    fn a_hook_whose_share_grew_is_listed_with_an_interval_that_leaves_out_zero() {
        let (old, new) = (profile(2000, 100, 3000.0), profile(2000, 300, 3600.0));
        let c = sampled_change(&[&old], &[&new]).unwrap();
        let d = &c.paths[0];
        assert!((d.share_change - 0.10).abs() < 1e-12);
        assert!(d.significant(), "{d:?}");
        assert!((d.delta_ns_per_op - (0.15 * 3600.0 - 0.05 * 3000.0)).abs() < 1e-9);
        // The same share on both sides is no change.
        let same = sampled_change(&[&old], &[&old]).unwrap();
        assert!(!same.paths[0].significant());
    }

    /// A profile of these rounds: (security_file_open's samples, all samples) each.
    pub(crate) fn rounds_profile(rounds: &[(u64, u64)]) -> StackProfile {
        let (hook, all) = rounds
            .iter()
            .fold((0, 0), |(h, a), (rh, ra)| (h + rh, a + ra));
        let mut p = profile(all, hook, 3000.0);
        p.round_samples = rounds.iter().map(|r| r.1).collect();
        p.paths[0].round_samples = rounds.iter().map(|r| r.0).collect();
        p
    }

    #[test]
    fn a_change_inside_the_rounds_spread_is_not_marked_though_the_binomial_would_mark_it() {
        // 5% -> 6.5% of 4000 samples a side: the binomial interval leaves out 0, but the old
        // side's rounds stray from 2% to 8%.
        let old = rounds_profile(&[(20, 1000), (80, 1000), (30, 1000), (70, 1000)]);
        let new = rounds_profile(&[(60, 1000), (70, 1000), (65, 1000), (65, 1000)]);
        let c = sampled_change(&[&old], &[&new]).unwrap();
        assert_eq!(
            c.interval,
            ShareInterval::Rounds {
                old_rounds: 4,
                new_rounds: 4
            }
        );
        assert!(!c.paths[0].significant(), "{:?}", c.paths[0]);
        let (mut old_b, mut new_b) = (old.clone(), new.clone());
        for p in [&mut old_b, &mut new_b] {
            p.round_samples.clear();
        }
        let b = sampled_change(&[&old_b], &[&new_b]).unwrap();
        assert!(b.paths[0].significant(), "{:?}", b.paths[0]);
        // Rounds that agree: the same shift is marked.
        let steady = rounds_profile(&[(50, 1000), (52, 1000), (48, 1000), (50, 1000)]);
        let c = sampled_change(&[&steady], &[&new]).unwrap();
        assert!(c.paths[0].significant(), "{:?}", c.paths[0]);
    }

    #[test]
    fn a_side_with_a_file_that_kept_no_rounds_falls_back_on_the_binomial_interval() {
        let rounds = rounds_profile(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let old_file = profile(4000, 200, 3000.0);
        let c = sampled_change(&[&rounds, &old_file], &[&rounds]).unwrap();
        assert_eq!(
            c.interval,
            ShareInterval::Binomial {
                old_rounds: 0,
                new_rounds: 4
            }
        );
        // Two files of rounds on a side: their rounds add up, a path absent from one of them
        // counting 0 there.
        let mut other = rounds_profile(&[(10, 1000), (20, 1000)]);
        other.paths[0].name = "security_file_free".into();
        let side = Side::of(&[&rounds, &other]);
        assert_eq!(side.rounds, Some(vec![1000; 6]));
        let open = (PathKind::Hook, "security_file_open".to_string(), None);
        let counts: Vec<u64> = side.round_counts(&open).iter().map(|r| r.path).collect();
        assert_eq!(counts, [50, 60, 40, 55, 0, 0]);
        let free = (PathKind::Hook, "security_file_free".to_string(), None);
        let counts: Vec<u64> = side.round_counts(&free).iter().map(|r| r.path).collect();
        assert_eq!(counts, [0, 0, 0, 0, 10, 20]);
    }

    #[test]
    fn the_text_names_the_interval_it_used() {
        let rounds = rounds_profile(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let c = sampled_change(&[&rounds], &[&rounds]).unwrap();
        let header = &crate::compare::sampled_lines(&c)[0];
        assert!(
            header.contains("samples in 4 -> 4 rounds; * the 95% interval from the rounds'"),
            "{header}"
        );
        let old_file = profile(4000, 205, 3000.0);
        let c = sampled_change(&[&old_file], &[&rounds]).unwrap();
        let header = &crate::compare::sampled_lines(&c)[0];
        assert!(
            header.contains("samples taken as independent") && header.contains("(0 -> 4)"),
            "{header}"
        );
    }

    #[test]
    fn the_text_says_how_to_narrow_intervals_of_few_samples() {
        let many = rounds_profile(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let few = profile(400, 20, 3000.0);
        let hint = |c: &SampledChange| {
            crate::compare::sampled_lines(c)
                .iter()
                .any(|l| l.contains("2,000 on both sides (run --stack-samples"))
        };
        assert!(!hint(&sampled_change(&[&many], &[&many]).unwrap()));
        let c = sampled_change(&[&many], &[&few]).unwrap();
        assert!(hint(&c), "{:?}", crate::compare::sampled_lines(&c));
        assert!(crate::compare::sampled_lines(&c)
            .last()
            .unwrap()
            .contains("(400 samples on the smaller side"));
    }

    #[test]
    fn files_of_a_side_are_pooled_by_their_samples() {
        let (a, b) = (profile(1000, 50, 2000.0), profile(3000, 450, 2000.0));
        let c = sampled_change(&[&a, &b], &[&a]).unwrap();
        assert_eq!(c.old_samples, 4000);
        assert!((c.paths[0].old_share - 0.125).abs() < 1e-12);
        assert!(sampled_change(&[], &[&a]).is_none());
    }
}
