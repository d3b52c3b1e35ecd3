//! How each path's share of the sampled CPU time changed between the sides: a share is a ratio
//! inside one run, so the machine's speed, which moves every figure of a run at once, cancels
//! in it (FBDetect watches per-function shares for this reason). Each side's files are pooled
//! by summing their samples; a share's change has a 95% interval from the counts (two
//! proportions, normal approximation), and its ns/op change is share x the op's CPU time on
//! each side.
use std::collections::BTreeMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

use crate::results::{PathKind, StackProfile};

/// The sampled side of a change.
#[derive(Debug, Clone, Serialize)]
pub struct SampledChange {
    pub old_samples: u64,
    pub new_samples: u64,
    /// Paths with a share of at least `LISTED_SHARE` on either side, largest change first.
    pub paths: Vec<SampledPathDelta>,
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

/// One side's profiles summed: samples per path, all samples, and the CPU ns per op.
#[derive(Debug, Default)]
struct Side {
    samples: u64,
    paths: BTreeMap<(PathKind, String, Option<String>), u64>,
    cpu_ns: f64,
    ops: u64,
}

impl Side {
    fn of(profiles: &[&StackProfile]) -> Side {
        let mut side = Side::default();
        for p in profiles {
            side.samples += p.samples;
            side.cpu_ns += p.on_cpu_ns_per_op * p.ops as f64;
            side.ops += p.ops;
            for path in &p.paths {
                let key = (path.kind, path.name.clone(), path.parent.clone());
                *side.paths.entry(key).or_default() += path.inclusive_samples;
            }
        }
        side
    }

    fn share(&self, key: &(PathKind, String, Option<String>)) -> f64 {
        self.paths.get(key).copied().unwrap_or(0) as f64 / self.samples.max(1) as f64
    }

    fn cpu_ns_per_op(&self) -> f64 {
        self.cpu_ns / self.ops.max(1) as f64
    }
}

/// The change of every path's share, None unless both sides have samples.
pub fn sampled_change(old: &[&StackProfile], new: &[&StackProfile]) -> Option<SampledChange> {
    let (o, n) = (Side::of(old), Side::of(new));
    if o.samples == 0 || n.samples == 0 {
        return None;
    }
    let z = Normal::standard().inverse_cdf(0.975);
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
            let se =
                (p1 * (1.0 - p1) / o.samples as f64 + p2 * (1.0 - p2) / n.samples as f64).sqrt();
            let change = p2 - p1;
            let (old_ns, new_ns) = (p1 * o.cpu_ns_per_op(), p2 * n.cpu_ns_per_op());
            let (kind, name, parent) = key;
            Some(SampledPathDelta {
                kind,
                name,
                parent,
                old_share: p1,
                new_share: p2,
                share_change: change,
                share_change_low: change - z * se,
                share_change_high: change + z * se,
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
            samples,
            user_samples: 0,
            probe_samples: 0,
            lost_stacks: 0,
            ops: 1000,
            on_cpu_ns_per_op: cpu_ns,
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

    #[test]
    fn files_of_a_side_are_pooled_by_their_samples() {
        let (a, b) = (profile(1000, 50, 2000.0), profile(3000, 450, 2000.0));
        let c = sampled_change(&[&a, &b], &[&a]).unwrap();
        assert_eq!(c.old_samples, 4000);
        assert!((c.paths[0].old_share - 0.125).abs() < 1e-12);
        assert!(sampled_change(&[], &[&a]).is_none());
    }
}
