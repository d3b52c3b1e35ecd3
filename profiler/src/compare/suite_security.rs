//! The suite summary's change: per workload, how the security hooks' share of its CPU time
//! changed, split by LSM and the framework, and the task paths', each with its 95% interval
//! (sampled shares: a ratio inside one run, so the machine's speed cancels in it).
use super::{sampled::GroupDelta, Comparison};
use crate::{report::markup::Markup, results::GroupKind};

/// Groups below this share on both sides, and not changed beyond their interval, are left out
/// (the security hooks' row is always shown).
const LISTED_SHARE: f64 = 0.005;

/// The table, its heading and a line naming the largest change; None when no workload has
/// groups on both sides.
pub(super) fn table(c: &Comparison, markup: Markup) -> Option<String> {
    let mut rows: Vec<(&str, &[GroupDelta])> = c
        .workloads
        .iter()
        .filter_map(|w| {
            let s = w.sampled.as_ref()?;
            (!s.groups.is_empty()).then_some((w.name.as_str(), &s.groups[..]))
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let hooks = |groups: &[GroupDelta]| {
        groups
            .iter()
            .find(|g| g.kind == GroupKind::Hooks)
            .map_or(0.0, |g| g.share_change)
    };
    rows.sort_by(|a, b| {
        hooks(b.1)
            .abs()
            .total_cmp(&hooks(a.1).abs())
            .then(a.0.cmp(b.0))
    });
    let mut table = markup.table(&[
        "workload",
        "group",
        "old share",
        "new share",
        "change (pp)",
        "95% interval",
        "ns/op old -> new",
    ]);
    for (workload, groups) in &rows {
        let shown = groups.iter().filter(|g| {
            g.kind == GroupKind::Hooks
                || g.judged.starred
                || g.old_share.max(g.new_share) >= LISTED_SHARE
        });
        for (i, g) in shown.enumerate() {
            let label = match (g.kind, markup) {
                (GroupKind::Lsm | GroupKind::Framework, Markup::Terminal) => {
                    format!("  {}", g.label())
                }
                (GroupKind::Lsm | GroupKind::Framework, Markup::Markdown) => {
                    format!("└ {}", g.label())
                }
                _ => g.label(),
            };
            let pp = |v: f64| format!("{:+.2}", v * 100.0);
            table.add_row(vec![
                if i == 0 {
                    workload.to_string()
                } else {
                    String::new()
                },
                label,
                format!("{:.1}%", g.old_share * 100.0),
                format!("{:.1}%", g.new_share * 100.0),
                format!(
                    "{}{}",
                    if g.judged.starred { "*" } else { "" },
                    pp(g.share_change)
                ),
                format!("[{}, {}]", pp(g.share_change_low), pp(g.share_change_high)),
                format!("{:.1} -> {:.1}", g.old_ns_per_op, g.new_ns_per_op),
            ]);
        }
    }
    markup.align_numbers(&mut table, 2);
    let mut out = String::from(
        "Security stack change (sampled: each share is of the op's own CPU time; an LSM's and \
         the framework's are inside the hooks'; * its path verdict called it: the family's false discovery rate held, the change past the threshold)\n",
    );
    if markup == Markup::Markdown {
        out.push('\n');
    }
    out.push_str(&table.to_string());
    out.push('\n');
    if let Some(line) = largest(&rows) {
        if markup == Markup::Markdown {
            out.push('\n');
        }
        out.push_str(&line);
        out.push('\n');
    }
    Some(out)
}

/// The largest called change of an LSM's (or the framework's) share, and where.
fn largest(rows: &[(&str, &[GroupDelta])]) -> Option<String> {
    let (workload, g) = rows
        .iter()
        .flat_map(|(w, groups)| groups.iter().map(move |g| (*w, g)))
        .filter(|(_, g)| matches!(g.kind, GroupKind::Lsm | GroupKind::Framework))
        .filter(|(_, g)| g.judged.starred)
        .max_by(|a, b| a.1.share_change.abs().total_cmp(&b.1.share_change.abs()))?;
    Some(format!(
        "The largest change inside the hooks: {} in {}, {:.1}% -> {:.1}% of its CPU time ({:+.1} ns/op).",
        g.label(),
        workload,
        g.old_share * 100.0,
        g.new_share * 100.0,
        g.new_ns_per_op - g.old_ns_per_op
    ))
}
