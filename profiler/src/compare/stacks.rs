//! The sampled kernel stacks of each workload profiled on both sides of a comparison, a side's
//! files summed stack by stack, for the comparison page's differential flame graphs.
use crate::results::Results;

/// One workload's folded stacks on each side.
#[derive(Debug, Clone, PartialEq)]
pub struct StacksChange {
    pub workload: String,
    pub old: Vec<(String, u64)>,
    pub new: Vec<(String, u64)>,
}

/// Every workload with sampled stacks on both sides, in OLD's order.
pub fn changes(old: &[Results], new: &[Results]) -> Vec<StacksChange> {
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
                workload: name.to_string(),
                old,
                new,
            })
        })
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
    use crate::report::{folded::tests::profile, text::tests::sample_results};

    #[test]
    fn a_workload_profiled_on_both_sides_has_its_stacks_summed_per_side() {
        let mut a = sample_results();
        a.workloads[0].profile = Some(profile(1));
        let mut b = a.clone();
        b.workloads[0].profile = Some(profile(2));
        // build is profiled in the old side only: no change to draw.
        a.workloads[1].profile = Some(profile(1));
        let changes = changes(&[a.clone(), b.clone()], &[b]);
        assert_eq!(changes.len(), 1);
        let c = &changes[0];
        assert_eq!(c.workload, "open_close");
        // AppArmor's stack: 30 + 60 over the two old files, 60 in the new.
        assert!(c.old[0].0.ends_with(";apparmor_file_open") && c.old[0].1 == 90);
        assert_eq!(c.new[0].1, 60);
        assert_eq!(c.old.len(), profile(1).folded.len());
        assert!(super::changes(&[sample_results()], &[sample_results()]).is_empty());
    }
}
