//! How each path's share of the sampled CPU time changed between the sides: a share is a ratio
//! inside one run, so the machine's speed, which moves every figure of a run at once, cancels
//! in it (FBDetect watches per-function shares for this reason). Each side's files are pooled
//! by summing their samples. A share's change has a 95% interval from the spread of the
//! rounds' shares on each side (`shares`: a round's samples move together, so the round is
//! the unit; where the comparison's unit is the run, each file's share, a single run
//! predicted from the other side's runs), or, where a side has too few rounds with stack
//! counts (one round, or files written before rounds were kept), from the pooled counts as
//! independent draws (two proportions, normal approximation, its variance at the pooled
//! share), which the output then says. Each change keeps its test: the path verdicts
//! (`paths`) weigh it in the compare's family. Its ns/op change is share x the op's CPU time on each side, with an interval
//! from the share's (the CPU times taken as known): the sampled passes' CPU time per op moves
//! with the machine too, so a path's sampled change can pass the clean op's whole change, and
//! the output says so where it does.
use std::collections::BTreeMap;

use serde::Serialize;

use crate::{
    results::{GroupKind, PathKind, StackProfile},
    stats::shares::{self, RoundCount, ShareTest},
};

/// The sampled side of a change.
#[derive(Debug, Clone, Serialize)]
pub struct SampledChange {
    /// The workload's own samples (less the probes' and the lost stacks) on each side.
    pub old_samples: u64,
    pub new_samples: u64,
    /// The op's CPU time in the sampled passes on each side, ns: what the shares are of.
    pub old_cpu_ns_per_op: f64,
    pub new_cpu_ns_per_op: f64,
    /// The clean op's whole change, ns (None for a rate): a path's sampled change beyond it
    /// gets a note.
    pub whole_ns: Option<f64>,
    /// How the share changes' intervals were made.
    pub interval: ShareInterval,
    /// The larger side's relative spread of its files' CPU time per op (None with one file a
    /// side): how far the machine moved the op between runs, which the shares do not follow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_spread: Option<f64>,
    /// How many times the binomial variance the rounds' spread made the share changes' (the
    /// median over the listed paths, at least 1; 1 without round-level intervals): what a
    /// frame's change of the differential flame graph, which has no rounds of its own, is
    /// judged with.
    pub overdispersion: f64,
    /// Paths with a share of at least `LISTED_SHARE` on either side, largest change first.
    pub paths: Vec<SampledPathDelta>,
    /// The suite summary's groups (the security hooks, each LSM, the framework, the task
    /// paths); empty where a side's files predate them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupDelta>,
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
    /// The spread of the files' shares (the runs are the comparison's unit): Welch's t over
    /// files, or a single run predicted from the other side's.
    Files { old_files: usize, new_files: usize },
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
    /// Its interval: the share change's, times the new side's CPU time per op.
    pub delta_low_ns: f64,
    pub delta_high_ns: f64,
    /// The exact timing of the same path, where it attributes a change whose interval and this
    /// one are apart: the two methods disagree beyond their spreads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed_disagrees: Option<TimedDelta>,
    /// Its tests, and whether its path verdict called it.
    #[serde(skip)]
    pub judged: Judged,
}

/// What a path verdict (`paths`) weighs a sampled row by, and what it decided.
#[derive(Debug, Clone, Copy)]
pub struct Judged {
    /// The share change's test, before any adjustment over the family of paths.
    pub test: ShareTest,
    /// Its path verdict called it (the family's false discovery rate controlled).
    pub starred: bool,
}

/// A path's change by exact timing, with its interval, ns per op.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TimedDelta {
    pub delta_ns_per_op: f64,
    pub low: f64,
    pub high: f64,
}

/// Paths below this share on both sides are left out.
const LISTED_SHARE: f64 = 0.005;

type PathKey = (PathKind, String, Option<String>);

/// One side's profiles summed: the workload's own samples per counted item (a path, or a
/// group of the suite summary), in all and round by round, and the CPU ns per op.
#[derive(Debug)]
struct Side<K> {
    samples: u64,
    paths: BTreeMap<K, u64>,
    /// Each round's own samples over the side's files, in file order; None when a file kept
    /// no rounds.
    rounds: Option<Vec<u64>>,
    /// Each item's samples in those rounds (an item absent from a file had none there).
    path_rounds: BTreeMap<K, Vec<u64>>,
    /// Each file's own samples, CPU time per op and each item's samples: the clusters where
    /// runs are the unit.
    files: Vec<FileCounts<K>>,
    cpu_ns: f64,
    ops: u64,
}

/// One file's counts.
#[derive(Debug)]
struct FileCounts<K> {
    all: u64,
    cpu_ns_per_op: f64,
    items: BTreeMap<K, u64>,
}

/// One profile's counted items: each with its samples and its samples round by round.
type Counts<'a, K> = Vec<(K, u64, &'a [u64])>;

impl<K: Ord + Clone> Side<K> {
    fn of<'a>(
        profiles: &[&'a StackProfile],
        counts: impl Fn(&'a StackProfile) -> Counts<'a, K>,
    ) -> Side<K> {
        let mut side = Side {
            samples: 0,
            paths: BTreeMap::new(),
            rounds: Some(Vec::new()),
            path_rounds: BTreeMap::new(),
            files: Vec::new(),
            cpu_ns: 0.0,
            ops: 0,
        };
        for p in profiles {
            side.samples += p.own_samples();
            side.cpu_ns += p.on_cpu_ns_per_op * p.ops as f64;
            side.ops += p.ops;
            let items = counts(p);
            let mut file = BTreeMap::new();
            for (key, samples, _) in &items {
                *side.paths.entry(key.clone()).or_default() += samples;
                *file.entry(key.clone()).or_default() += samples;
            }
            side.files.push(FileCounts {
                all: p.own_samples(),
                cpu_ns_per_op: p.on_cpu_ns_per_op,
                items: file,
            });
            side.add_rounds(p, &items);
        }
        side
    }

    /// `p`'s rounds after the ones so far, or none at all when `p` kept none (or kept them
    /// for some items only, which no writer does).
    fn add_rounds(&mut self, p: &StackProfile, items: &Counts<K>) {
        let Some(rounds) = &mut self.rounds else {
            return;
        };
        let n = p.round_samples.len();
        let whole = n > 0 && items.iter().all(|(_, _, by_round)| by_round.len() == n);
        if !whole {
            self.rounds = None;
            self.path_rounds.clear();
            return;
        }
        let before = rounds.len();
        rounds.extend(&p.round_samples);
        for (key, _, by_round) in items {
            let counts = self.path_rounds.entry(key.clone()).or_default();
            counts.resize(before, 0);
            counts.extend(*by_round);
        }
        for counts in self.path_rounds.values_mut() {
            counts.resize(before + n, 0);
        }
    }

    fn share(&self, key: &K) -> f64 {
        self.paths.get(key).copied().unwrap_or(0) as f64 / self.samples.max(1) as f64
    }

    /// `key`'s samples and all samples, over the side's files.
    fn pooled(&self, key: &K) -> RoundCount {
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
    fn round_counts(&self, key: &K) -> Vec<RoundCount> {
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

    /// `key`'s counts file by file.
    fn file_counts(&self, key: &K) -> Vec<RoundCount> {
        self.files
            .iter()
            .map(|f| RoundCount {
                path: f.items.get(key).copied().unwrap_or(0),
                all: f.all,
            })
            .collect()
    }

    /// Files with samples, the ones a file-level test stands on.
    fn files_with_samples(&self) -> usize {
        self.files.iter().filter(|f| f.all > 0).count()
    }

    /// The relative spread of its files' CPU time per op (None with fewer than two files).
    fn cpu_spread(&self) -> Option<f64> {
        let cpu: Vec<f64> = self.files.iter().map(|f| f.cpu_ns_per_op).collect();
        let s = crate::stats::summarize(&cpu).filter(|s| s.n >= 2 && s.mean > 0.0)?;
        Some(s.stdev / s.mean)
    }

    /// How `self` and `new` can test a share change: by files where runs are the unit and
    /// both sides have some (one side two or more), else by rounds where both have enough,
    /// else the pooled counts.
    fn method(&self, new: &Side<K>, by_files: bool) -> ShareInterval {
        let (old_files, new_files) = (self.files_with_samples(), new.files_with_samples());
        let (old_rounds, new_rounds) = (self.rounds_with_samples(), new.rounds_with_samples());
        if by_files && old_files.min(new_files) >= 1 && old_files.max(new_files) >= 2 {
            ShareInterval::Files {
                old_files,
                new_files,
            }
        } else if old_rounds.min(new_rounds) >= shares::MIN_ROUNDS {
            ShareInterval::Rounds {
                old_rounds,
                new_rounds,
            }
        } else {
            ShareInterval::Binomial {
                old_rounds,
                new_rounds,
            }
        }
    }

    /// The test of `key`'s share change from `self` to `new` by `method`, the pooled counts'
    /// where the clusters give none.
    fn change_test(&self, new: &Side<K>, key: &K, method: ShareInterval) -> ShareTest {
        let clustered = match method {
            ShareInterval::Files { .. } => shares::change_test_by_files(
                (&self.file_counts(key), &new.file_counts(key)),
                (&self.round_counts(key), &new.round_counts(key)),
            ),
            ShareInterval::Rounds { .. } => {
                shares::change_test(&self.round_counts(key), &new.round_counts(key))
            }
            ShareInterval::Binomial { .. } => None,
        };
        clustered.unwrap_or_else(|| shares::binomial_change_test(self.pooled(key), new.pooled(key)))
    }
}

/// A profile's paths, as `Side` counts them.
fn path_counts(p: &StackProfile) -> Counts<'_, PathKey> {
    p.paths
        .iter()
        .map(|path| (key(path), path.inclusive_samples, &path.round_samples[..]))
        .collect()
}

/// A profile's groups (the suite summary's), as `Side` counts them.
fn group_counts(p: &StackProfile) -> Counts<'_, GroupKey> {
    p.groups
        .iter()
        // A group's name: its LSM's, or its BPF program's (one group per program).
        .map(|g| {
            let name = g.lsm.clone().or_else(|| g.program.clone());
            ((g.kind, name), g.samples, &g.round_samples[..])
        })
        .collect()
}

type GroupKey = (GroupKind, Option<String>);

fn key(path: &crate::results::SampledPath) -> PathKey {
    (path.kind, path.name.clone(), path.parent.clone())
}

/// Marks each sampled path whose change the exact timing also attributes (`timed`, the
/// attribution's rows) with an interval apart from the sampled one, and the timed row with it.
pub(super) fn cross_check(sampled: &mut SampledChange, timed: &mut [super::PathDelta]) {
    for s in &mut sampled.paths {
        let Some(t) = timed
            .iter_mut()
            .find(|t| t.kind == s.kind && t.name == s.name)
        else {
            continue;
        };
        let Some((low, high)) = t.delta_interval else {
            continue;
        };
        if high < s.delta_low_ns || low > s.delta_high_ns {
            t.sampled_disagrees = true;
            s.timed_disagrees = Some(TimedDelta {
                delta_ns_per_op: t.delta_ns_per_op,
                low,
                high,
            });
        }
    }
}

/// The change of every path's share, None unless both sides have samples; by files where
/// `by_files` (the comparison's unit is the run) and the sides have them.
pub fn sampled_change(
    old: &[&StackProfile],
    new: &[&StackProfile],
    by_files: bool,
) -> Option<SampledChange> {
    let (o, n) = (Side::of(old, path_counts), Side::of(new, path_counts));
    if o.samples == 0 || n.samples == 0 {
        return None;
    }
    let interval = o.method(&n, by_files);
    let mut keys: Vec<_> = o.paths.keys().chain(n.paths.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    let mut inflation = Vec::new();
    let mut paths: Vec<SampledPathDelta> = keys
        .into_iter()
        .filter_map(|key| {
            let (p1, p2) = (o.share(&key), n.share(&key));
            if p1.max(p2) < LISTED_SHARE {
                return None;
            }
            let test = o.change_test(&n, &key, interval);
            let i = test.interval(1.0 - crate::stats::CONFIDENCE);
            let binomial = shares::binomial_change_interval(o.pooled(&key), n.pooled(&key));
            if !matches!(interval, ShareInterval::Binomial { .. }) && binomial.half_width() > 0.0 {
                inflation.push((i.half_width() / binomial.half_width()).powi(2));
            }
            Some(path_delta(key, (p1, p2), (&o, &n), test))
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
        old_cpu_ns_per_op: o.cpu_ns_per_op(),
        new_cpu_ns_per_op: n.cpu_ns_per_op(),
        whole_ns: None,
        interval,
        cpu_spread: o
            .cpu_spread()
            .into_iter()
            .chain(n.cpu_spread())
            .reduce(f64::max),
        overdispersion: median(&mut inflation).map_or(1.0, |m| m.max(1.0)),
        paths,
        groups: group_change(old, new, by_files),
    })
}

/// One path's change: its shares, their ns per op on each side, the change's 95% interval.
fn path_delta(
    (kind, name, parent): PathKey,
    (p1, p2): (f64, f64),
    (o, n): (&Side<PathKey>, &Side<PathKey>),
    test: ShareTest,
) -> SampledPathDelta {
    let i = test.interval(1.0 - crate::stats::CONFIDENCE);
    let change = p2 - p1;
    let (old_ns, new_ns) = (p1 * o.cpu_ns_per_op(), p2 * n.cpu_ns_per_op());
    let delta = new_ns - old_ns;
    SampledPathDelta {
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
        delta_ns_per_op: delta,
        delta_low_ns: delta + (i.low - change) * n.cpu_ns_per_op(),
        delta_high_ns: delta + (i.high - change) * n.cpu_ns_per_op(),
        timed_disagrees: None,
        judged: Judged {
            test,
            starred: false,
        },
    }
}

/// How one group of the suite summary (the security hooks, an LSM, the framework, the task
/// paths) changed its share of a workload's CPU time.
#[derive(Debug, Clone, Serialize)]
pub struct GroupDelta {
    pub kind: GroupKind,
    /// The LSM of an `lsm` group, or the program of a `bpf_program` group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lsm: Option<String>,
    pub old_share: f64,
    pub new_share: f64,
    /// new_share - old_share, with its 95% interval (as a path's: the rounds' where both sides
    /// kept two or more, else the pooled counts').
    pub share_change: f64,
    pub share_change_low: f64,
    pub share_change_high: f64,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
    /// Its tests, as a path's, and whether its verdict called it.
    #[serde(skip)]
    pub judged: Judged,
}

impl GroupDelta {
    pub fn label(&self) -> String {
        self.kind.label(self.lsm.as_deref())
    }
}

/// How each group changed, the security hooks first, then the LSMs and the framework, then
/// the task paths; empty unless both sides kept groups (files written before them did not).
pub fn group_change(
    old: &[&StackProfile],
    new: &[&StackProfile],
    by_files: bool,
) -> Vec<GroupDelta> {
    let kept =
        |side: &[&StackProfile]| !side.is_empty() && side.iter().all(|p| !p.groups.is_empty());
    if !kept(old) || !kept(new) {
        return Vec::new();
    }
    let (o, n) = (Side::of(old, group_counts), Side::of(new, group_counts));
    if o.samples == 0 || n.samples == 0 {
        return Vec::new();
    }
    let method = o.method(&n, by_files);
    let mut keys: Vec<GroupKey> = o.paths.keys().chain(n.paths.keys()).cloned().collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .map(|key| {
            let (p1, p2) = (o.share(&key), n.share(&key));
            let test = o.change_test(&n, &key, method);
            let i = test.interval(1.0 - crate::stats::CONFIDENCE);
            let (kind, lsm) = key;
            GroupDelta {
                kind,
                lsm,
                old_share: p1,
                new_share: p2,
                share_change: p2 - p1,
                share_change_low: i.low,
                share_change_high: i.high,
                old_ns_per_op: p1 * o.cpu_ns_per_op(),
                new_ns_per_op: p2 * n.cpu_ns_per_op(),
                judged: Judged {
                    test,
                    starred: false,
                },
            }
        })
        .collect()
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (n > 0).then(|| (values[(n - 1) / 2] + values[n / 2]) / 2.0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::SampledPath;

    /// Whether a change's 95% interval leaves out zero.
    fn leaves_out_zero(d: &SampledPathDelta) -> bool {
        d.share_change_low > 0.0 || d.share_change_high < 0.0
    }

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
                syscall: None,
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
            groups: Vec::new(),
            places: Vec::new(),
        }
    }

    #[test]
    fn a_hook_whose_share_grew_is_listed_with_an_interval_that_leaves_out_zero() {
        let (old, new) = (profile(2000, 100, 3000.0), profile(2000, 300, 3600.0));
        let c = sampled_change(&[&old], &[&new], false).unwrap();
        let d = &c.paths[0];
        assert!((d.share_change - 0.10).abs() < 1e-12);
        assert!(leaves_out_zero(d), "{d:?}");
        assert!((d.delta_ns_per_op - (0.15 * 3600.0 - 0.05 * 3000.0)).abs() < 1e-9);
        // The same share on both sides is no change.
        let same = sampled_change(&[&old], &[&old], false).unwrap();
        assert!(!leaves_out_zero(&same.paths[0]));
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
        let c = sampled_change(&[&old], &[&new], false).unwrap();
        assert_eq!(
            c.interval,
            ShareInterval::Rounds {
                old_rounds: 4,
                new_rounds: 4
            }
        );
        assert!(!leaves_out_zero(&c.paths[0]), "{:?}", c.paths[0]);
        let (mut old_b, mut new_b) = (old.clone(), new.clone());
        for p in [&mut old_b, &mut new_b] {
            p.round_samples.clear();
        }
        let b = sampled_change(&[&old_b], &[&new_b], false).unwrap();
        assert!(leaves_out_zero(&b.paths[0]), "{:?}", b.paths[0]);
        // Rounds that agree: the same shift is marked.
        let steady = rounds_profile(&[(50, 1000), (52, 1000), (48, 1000), (50, 1000)]);
        let c = sampled_change(&[&steady], &[&new], false).unwrap();
        assert!(leaves_out_zero(&c.paths[0]), "{:?}", c.paths[0]);
    }

    #[test]
    fn a_side_with_a_file_that_kept_no_rounds_falls_back_on_the_binomial_interval() {
        let rounds = rounds_profile(&[(50, 1000), (60, 1000), (40, 1000), (55, 1000)]);
        let old_file = profile(4000, 200, 3000.0);
        let c = sampled_change(&[&rounds, &old_file], &[&rounds], false).unwrap();
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
        let side = Side::of(&[&rounds, &other], path_counts);
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
        let c = sampled_change(&[&rounds], &[&rounds], false).unwrap();
        let header = &crate::compare::sampled_lines(&c)[0];
        assert!(
            header.contains("samples in 4 -> 4 rounds; 95% intervals from the rounds'"),
            "{header}"
        );
        let old_file = profile(4000, 205, 3000.0);
        let c = sampled_change(&[&old_file], &[&rounds], false).unwrap();
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
        assert!(!hint(&sampled_change(&[&many], &[&many], false).unwrap()));
        let c = sampled_change(&[&many], &[&few], false).unwrap();
        assert!(hint(&c), "{:?}", crate::compare::sampled_lines(&c));
        assert!(crate::compare::sampled_lines(&c)
            .last()
            .unwrap()
            .contains("(400 samples on the smaller side"));
    }

    /// The timed row of security_file_open with this change and interval, ns per op.
    fn timed(delta: f64, interval: (f64, f64)) -> crate::compare::PathDelta {
        crate::compare::PathDelta {
            kind: PathKind::Hook,
            name: "security_file_open".into(),
            parent: None,
            old_ns_per_op: 100.0,
            new_ns_per_op: 100.0 + delta,
            delta_ns_per_op: delta,
            delta_interval: Some(interval),
            test: None,
            against_rest: None,
            old_rest_ns: None,
            starred: false,
            sampled_disagrees: false,
            top_level: true,
        }
    }

    #[test]
    fn methods_that_disagree_beyond_both_intervals_are_flagged_on_both_rows() {
        // Sampled: 5% -> 10% of 3000 ns, rounds that agree: about +150 ns, well apart from 0.
        let old = rounds_profile(&[(50, 1000), (52, 1000), (48, 1000), (50, 1000)]);
        let new = rounds_profile(&[(100, 1000), (98, 1000), (102, 1000), (100, 1000)]);
        let mut c = sampled_change(&[&old], &[&new], false).unwrap();
        let d = &c.paths[0];
        assert!(d.delta_low_ns > 100.0 && d.delta_high_ns < 200.0, "{d:?}");
        assert!(d.delta_low_ns <= d.delta_ns_per_op && d.delta_ns_per_op <= d.delta_high_ns);
        // Timed: -90 ns [-120, -60]: the opposite sign, apart from the sampled interval.
        let mut rows = vec![timed(-90.0, (-120.0, -60.0))];
        cross_check(&mut c, &mut rows);
        assert!(rows[0].sampled_disagrees);
        let t = c.paths[0].timed_disagrees.expect("flagged");
        assert_eq!((t.delta_ns_per_op, t.low, t.high), (-90.0, -120.0, -60.0));
        let line = &crate::compare::sampled_lines(&c)[1];
        assert!(
            line.contains("! timed -90 ns [-120, -60]: the methods disagree"),
            "{line}"
        );
        // Intervals that overlap: both may be right, nothing flagged.
        let mut c = sampled_change(&[&old], &[&new], false).unwrap();
        let mut rows = vec![timed(90.0, (40.0, 120.0))];
        cross_check(&mut c, &mut rows);
        assert!(!rows[0].sampled_disagrees && c.paths[0].timed_disagrees.is_none());
    }

    #[test]
    fn a_sampled_change_beyond_the_whole_op_s_says_why_it_can_be() {
        let old = profile(2000, 100, 3000.0);
        let new = profile(2000, 300, 6000.0);
        let mut c = sampled_change(&[&old], &[&new], false).unwrap();
        // 150 -> 900 ns of a clean op that moved +200 ns.
        c.whole_ns = Some(200.0);
        let line = &crate::compare::sampled_lines(&c)[1];
        assert!(
            line.contains(
                "(more than the whole op's +200 ns: shares of the sampled passes' CPU time, \
                 which moved +3000 ns)"
            ),
            "{line}"
        );
        c.whole_ns = Some(2000.0);
        assert!(!crate::compare::sampled_lines(&c)[1].contains("more than the whole"));
    }

    #[test]
    fn files_of_a_side_are_pooled_by_their_samples() {
        let (a, b) = (profile(1000, 50, 2000.0), profile(3000, 450, 2000.0));
        let c = sampled_change(&[&a, &b], &[&a], false).unwrap();
        assert_eq!(c.old_samples, 4000);
        assert!((c.paths[0].old_share - 0.125).abs() < 1e-12);
        assert!(sampled_change(&[], &[&a], false).is_none());
    }
}
