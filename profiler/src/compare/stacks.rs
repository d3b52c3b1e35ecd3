//! The sampled kernel stacks of each workload profiled on both sides of a comparison, a side's
//! files summed stack by stack, for the comparison page's differential flame graphs, and which
//! functions' own samples (the stacks they end) changed their share beyond chance: only those
//! are coloured, so an unchanged workload's graph is neutral.
use std::collections::{BTreeMap, BTreeSet};

use crate::{results::Results, stats::shares, stats::CONFIDENCE};

/// One workload's folded stacks on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct StacksChange {
    pub workload: String,
    pub old: Vec<(String, u64)>,
    pub new: Vec<(String, u64)>,
    /// The functions whose own samples' share changed beyond chance (`shares::changed_shares`,
    /// at the rounds' overdispersion of the workload's sampled paths, Holm across them).
    pub changed: BTreeSet<String>,
}

/// Every workload with sampled stacks on both sides, in OLD's order; `overdispersion` says, per
/// workload, how much more than independent samples its rounds spread.
pub fn changes(
    old: &[Results],
    new: &[Results],
    overdispersion: &dyn Fn(&str) -> f64,
) -> Vec<StacksChange> {
    let mut names: Vec<&str> = Vec::new();
    for w in old.iter().flat_map(|r| &r.workloads) {
        if !names.contains(&w.name.as_str()) {
            names.push(&w.name);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let (old, new) = (side(old, name), side(new, name));
            (!old.is_empty() && !new.is_empty()).then(|| StacksChange {
                changed: changed(&old, &new, overdispersion(name)),
                workload: name.to_string(),
                old,
                new,
            })
        })
        .collect()
}

/// The functions whose own samples (the stacks they are the last frame of) changed their share
/// of each side's samples beyond chance.
fn changed(old: &[(String, u64)], new: &[(String, u64)], overdispersion: f64) -> BTreeSet<String> {
    let mut own: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (side, stacks) in [(0, old), (1, new)] {
        for (stack, n) in stacks {
            let leaf = stack.rsplit(';').next().unwrap_or(stack);
            let counts = own.entry(leaf).or_default();
            if side == 0 {
                counts.0 += n;
            } else {
                counts.1 += n;
            }
        }
    }
    let total = |stacks: &[(String, u64)]| stacks.iter().map(|(_, n)| n).sum::<u64>();
    let counts: Vec<(u64, u64)> = own.values().copied().collect();
    let called = shares::changed_shares(
        &counts,
        (total(old), total(new)),
        overdispersion,
        1.0 - CONFIDENCE,
    );
    own.keys()
        .zip(called)
        .filter(|(_, c)| *c)
        .map(|(f, _)| f.to_string())
        .collect()
}

/// `name`'s stacks over a side's files, summed per stack, most sampled first.
fn side(files: &[Results], name: &str) -> Vec<(String, u64)> {
    let mut stacks: Vec<(String, u64)> = Vec::new();
    let folded = files
        .iter()
        .filter_map(|r| r.workload(name)?.profile.as_ref())
        .flat_map(|p| &p.folded);
    for (stack, count) in folded {
        match stacks.iter_mut().find(|(s, _)| s == stack) {
            Some((_, n)) => *n += count,
            None => stacks.push((stack.clone(), *count)),
        }
    }
    stacks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    stacks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{report::folded::tests::profile, results::fixtures::sample_results};

    #[test]
    fn a_workload_profiled_on_both_sides_has_its_stacks_summed_per_side() {
        let mut a = sample_results();
        a.workloads[0].profile = Some(profile(1));
        let mut b = a.clone();
        b.workloads[0].profile = Some(profile(2));
        // build is profiled in the old side only: no change to draw.
        a.workloads[1].profile = Some(profile(1));
        let changes = changes(&[a.clone(), b.clone()], &[b], &|_| 1.0);
        assert_eq!(changes.len(), 1);
        let c = &changes[0];
        assert_eq!(c.workload, "open_close");
        // AppArmor's stack: 30 + 60 over the two old files, 60 in the new.
        assert!(c.old[0].0.ends_with(";apparmor_file_open") && c.old[0].1 == 90);
        assert_eq!(c.new[0].1, 60);
        assert_eq!(c.old.len(), profile(1).folded.len());
    }

    #[test]
    fn only_functions_whose_own_share_moved_beyond_chance_are_changed() {
        let stacks = |n: &[u64]| -> Vec<(String, u64)> {
            ["a;open", "a;read", "a;b;close", "a;b;stat"]
                .iter()
                .zip(n)
                .map(|(s, n)| (s.to_string(), *n))
                .collect()
        };
        // Draws of the same profile: nothing changed.
        let same = changed(
            &stacks(&[500, 300, 150, 50]),
            &stacks(&[480, 320, 140, 60]),
            1.0,
        );
        assert!(same.is_empty(), "{same:?}");
        // stat's own samples 5% -> 20%: it, and the others it took its share from.
        let moved = changed(
            &stacks(&[500, 300, 150, 50]),
            &stacks(&[400, 240, 120, 240]),
            1.0,
        );
        assert!(moved.contains("stat"), "{moved:?}");
        assert!(!moved.contains("b") && !moved.contains("a"), "{moved:?}");
        assert!(super::changes(&[sample_results()], &[sample_results()], &|_| 1.0).is_empty());
    }
}
