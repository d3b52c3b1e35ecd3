//! The sampled side of a workload in text and markdown: the op's time on and off a CPU (the
//! accounting) and the sampled stacks' table, each hook with its LSM functions under it.
use std::fmt::Write;

use super::{
    figures::{num, Scale},
    markup::Markup,
};
use crate::results::{Accounting, PathKind, SampledPath, StackProfile, Unit};

/// `wall 4.907 us = on CPU 4.905 us (user ..., kernel ..., probes ...) + off CPU ... (runnable
/// ..., blocked ...)`, and for several tasks their number.
pub fn accounting_line(a: &Accounting) -> String {
    let scale = Scale::of(Unit::Nanoseconds, a.wall_ns_per_op);
    let show = |v: f64| scale.show(v);
    let mut split = Vec::new();
    for (name, part) in [
        ("user", a.user_ns_per_op),
        ("kernel", a.kernel_ns_per_op),
        ("probes", a.probe_ns_per_op),
    ] {
        if let Some(v) = part {
            split.push(format!("{name} {}", show(v)));
        }
    }
    let split = if split.is_empty() {
        String::new()
    } else {
        format!(" ({})", split.join(", "))
    };
    let mut line = format!(
        "Per op (probed): on CPU {}{split} + off CPU {} (runnable {}, blocked {})",
        show(a.on_cpu_ns_per_op),
        show(a.off_cpu_ns_per_op()),
        show(a.off_cpu_runnable_ns_per_op),
        show(a.off_cpu_blocked_ns_per_op),
    );
    if (a.tasks - 1.0).abs() < 0.05 {
        let _ = write!(
            line,
            " = {} of the wall time {}",
            pct(a.tasks),
            show(a.wall_ns_per_op)
        );
    } else {
        let _ = write!(
            line,
            "; wall time {}: {} tasks' time per op (CPU {} per wall second)",
            show(a.wall_ns_per_op),
            num(a.tasks),
            num(a.on_cpu_ns_per_op / a.wall_ns_per_op.max(f64::MIN_POSITIVE)),
        );
    }
    line
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v * 100.0)
}

/// How well these samples know a 5% share, and how to know it better, when they know it worse
/// than +-1 percentage point.
fn precision_line(p: &StackProfile) -> String {
    let own = p.own_samples();
    if own == 0 || own >= crate::shares::PRECISE_STACK_SAMPLES {
        return String::new();
    }
    let half = 1.96 * (0.05 * 0.95 / own as f64).sqrt();
    format!(
        "  {own} own samples know a 5% share within +-{:.1} percentage points (95%); about +-1 \
         takes 2,000 (run --stack-samples, whose passes stop at 2 s a round: more --rounds \
         for a workload mostly off its CPU; or more stat --runs)\n",
        half * 100.0
    )
}

/// The profile's heading and table: each path's inclusive share of the CPU samples with its
/// 95% interval, self share, ns per op and the samples behind it.
pub fn sampled_table(markup: Markup, p: &StackProfile) -> String {
    let mut out = format!(
        "Sampled kernel stacks: {} samples of CPU time ({}; {} user, {} in the probes), \
         shares of the op's CPU time {}\n",
        p.samples,
        p.rates(),
        p.user_samples,
        p.probe_samples,
        Scale::of(Unit::Nanoseconds, p.on_cpu_ns_per_op).show(p.on_cpu_ns_per_op)
    );
    out.push_str(&precision_line(p));
    if markup == Markup::Markdown {
        out.push('\n'); // a table does not interrupt a paragraph
    }
    if p.paths.is_empty() {
        out.push_str("(no sample fell in a syscall, hook or task path)\n");
        return out;
    }
    let header = [
        "kind",
        "path",
        "share",
        "95% interval",
        "self",
        "ns/op",
        "samples",
    ];
    let mut table = markup.table(&header);
    for (depth, r) in ordered(&p.paths) {
        let name = match (markup, depth) {
            (Markup::Terminal, 1) => format!("  {}", r.name),
            (Markup::Markdown, 1) => format!("`└ {}`", r.name),
            (Markup::Markdown, _) => format!("`{}`", r.name),
            _ => r.name.clone(),
        };
        table.add_row(vec![
            r.kind.name().to_string(),
            name,
            pct(r.inclusive_share),
            format!("{}-{}", pct(r.share_low), pct(r.share_high)),
            pct(r.self_share),
            num(r.ns_per_op),
            r.inclusive_samples.to_string(),
        ]);
    }
    markup.align_numbers(&mut table, 2);
    out.push_str(&table.to_string());
    out
}

/// Most sampled first.
fn by_share(mut rows: Vec<&SampledPath>) -> Vec<&SampledPath> {
    rows.sort_by(|a, b| {
        b.inclusive_samples
            .cmp(&a.inclusive_samples)
            .then(a.name.cmp(&b.name))
    });
    rows
}

/// Syscalls, then hooks each with its LSM functions under it, then task paths each with its
/// steps, every group by share; with each row its depth (1 under a parent shown above it).
pub fn ordered(paths: &[SampledPath]) -> Vec<(usize, &SampledPath)> {
    let tops = by_share(
        paths
            .iter()
            .filter(|r| {
                r.parent.is_none() || !paths.iter().any(|p| Some(&p.name) == r.parent.as_ref())
            })
            .collect(),
    );
    let mut out = Vec::new();
    for kind in [
        PathKind::Syscall,
        PathKind::Hook,
        PathKind::TaskPath,
        PathKind::Lsm,
    ] {
        for top in tops.iter().filter(|r| r.kind == kind) {
            out.push((0, *top));
            let children = by_share(
                paths
                    .iter()
                    .filter(|c| c.parent.as_deref() == Some(top.name.as_str()))
                    .collect(),
            );
            out.extend(children.into_iter().map(|c| (1, c)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(kind: PathKind, name: &str, parent: Option<&str>, n: u64) -> SampledPath {
        SampledPath {
            kind,
            name: name.into(),
            parent: parent.map(String::from),
            lsm: None,
            inclusive_samples: n,
            self_samples: 0,
            inclusive_share: n as f64 / 100.0,
            share_low: 0.0,
            share_high: 1.0,
            self_share: 0.0,
            ns_per_op: n as f64,
            ns_per_op_low: 0.0,
            ns_per_op_high: 0.0,
            spanned_samples: 0,
            spanned_ns_per_op: 0.0,
            round_samples: Vec::new(),
        }
    }

    #[test]
    fn lsm_functions_sit_under_their_hook_and_syscalls_come_first() {
        let paths = vec![
            path(
                PathKind::Lsm,
                "hook_file_open",
                Some("security_file_open"),
                3,
            ),
            path(PathKind::Hook, "security_file_open", None, 5),
            path(PathKind::Syscall, "close", None, 10),
            path(PathKind::Syscall, "openat", None, 60),
            path(PathKind::Hook, "security_file_free", None, 8),
        ];
        let names: Vec<(usize, &str)> = ordered(&paths)
            .into_iter()
            .map(|(d, r)| (d, r.name.as_str()))
            .collect();
        assert_eq!(
            names,
            [
                (0, "openat"),
                (0, "close"),
                (0, "security_file_free"),
                (0, "security_file_open"),
                (1, "hook_file_open"),
            ]
        );
    }

    #[test]
    fn the_accounting_line_says_whether_the_parts_make_the_wall_time() {
        let mut a = Accounting {
            wall_ns_per_op: 1000.0,
            on_cpu_ns_per_op: 700.0,
            off_cpu_runnable_ns_per_op: 100.0,
            off_cpu_blocked_ns_per_op: 200.0,
            user_ns_per_op: Some(100.0),
            kernel_ns_per_op: Some(550.0),
            probe_ns_per_op: Some(50.0),
            tasks: 1.0,
        };
        let line = accounting_line(&a);
        assert!(
            line.contains("on CPU 0.7000 us (user 0.1000 us, kernel 0.5500 us, probes 0.0500 us)"),
            "{line}"
        );
        assert!(
            line.contains("= 100.0% of the wall time 1.000 us"),
            "{line}"
        );
        a.tasks = 2.0;
        a.on_cpu_ns_per_op = 1700.0;
        let line = accounting_line(&a);
        assert!(line.contains("2.000 tasks' time per op"), "{line}");
    }
}
