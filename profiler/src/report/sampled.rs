//! The sampled side of a workload in text and markdown: the op's time on and off a CPU (the
//! accounting) and the sampled stacks' table, each hook with its LSM functions under it.
use std::fmt::Write;

use super::figures::{num, Scale};
use crate::results::{Accounting, StackProfile, Unit, WorkloadResult};

/// `Per op (probed passes): on CPU 4.905 us (user ..., kernel ..., probes ...) + off CPU ...
/// (runnable ..., blocked ...); wall 4.907 us`, and for several tasks their number. Every
/// figure here is of the probed op, from one measurement: sched_switch's totals, split by the
/// same passes' samples where they were the ones sampled.
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
        "Per op (probed passes): on CPU {}{split} + off CPU {} (runnable {}, blocked {})",
        show(a.on_cpu_ns_per_op),
        show(a.off_cpu_ns_per_op()),
        show(a.off_cpu_runnable_ns_per_op),
        show(a.off_cpu_blocked_ns_per_op),
    );
    if (a.tasks - 1.0).abs() < 0.05 {
        // One task: the two add up to its wall time, within the two clocks' difference.
        let _ = write!(line, "; wall time {}", show(a.wall_ns_per_op));
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

/// What the timing probes added to the op's CPU time, where the stacks were sampled without
/// them: `Probes' cost: +0.44 us of CPU time per op (+-0.05 us; ...)`, or within noise.
pub fn probes_cost_line(a: &Accounting, p: &StackProfile) -> Option<String> {
    let cost = a.probes_cost?;
    let scale = Scale::of(Unit::Nanoseconds, a.on_cpu_ns_per_op);
    let of = format!(
        "the probed op's {} on CPU against the unprobed op's own {}",
        scale.show(a.on_cpu_ns_per_op),
        scale.show(p.own_ns_per_op())
    );
    let within = |v: f64| {
        format!(
            "{} {}",
            scale.number_within(v, Some(cost.half_width)),
            scale.symbol
        )
    };
    let half = within(cost.half_width);
    Some(if cost.within_noise() {
        format!("Probes' cost: within noise (+-{half}) of CPU time per op ({of})")
    } else if cost.value > 0.0 {
        format!(
            "Probes' cost: {} of CPU time per op (+-{half}; {of})",
            within(cost.value)
        )
    } else {
        format!(
            "Probes' cost: not told: the probed op took {} less CPU time per op (+-{}) than the \
             passes for the stacks alone ({of}), whose own sampling slowed them",
            scale.show(-cost.value),
            half
        )
    })
}

/// The op's accounting, what the probes cost it, and the profile's heading: the lines every
/// format prints above the workload's table.
pub fn op_lines(w: &WorkloadResult) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(a) = &w.accounting {
        lines.push(accounting_line(a));
    }
    if let (Some(a), Some(p)) = (&w.accounting, &w.profile) {
        lines.extend(probes_cost_line(a, p));
    }
    if let Some(p) = &w.profile {
        lines.extend(sampled_heading(p).lines().map(String::from));
    }
    lines
}

/// How well these samples know a 5% share, and how to know it better, when they know it worse
/// than +-1 percentage point.
fn precision_line(p: &StackProfile) -> String {
    let own = p.own_samples();
    if own == 0 || own >= crate::stats::shares::PRECISE_STACK_SAMPLES {
        return String::new();
    }
    let half = 1.96 * (0.05 * 0.95 / own as f64).sqrt();
    format!(
        "  {own} own samples know a 5% share of the op's own CPU time within +-{:.1} \
         percentage points (95%); about +-1 \
         takes 2,000 (run --stack-samples, whose passes stop at 2 s a round: more --rounds \
         for a workload mostly off its CPU; or more stat --runs)\n",
        half * 100.0
    )
}

/// The profile's heading: the samples, how they came, which of them are the op's own, and the
/// op's own CPU time they give, the one whole every share below is of (the paths are in the
/// workload's table, `paths_table`).
pub fn sampled_heading(p: &StackProfile) -> String {
    let cpu = Scale::of(Unit::Nanoseconds, p.own_ns_per_op()).show(p.own_ns_per_op());
    let whole = if p.of_unprobed_op() {
        format!("the unprobed op's own CPU time {cpu} per op")
    } else {
        format!("the op's own CPU time {cpu} per op")
    };
    let mut out = format!(
        "Sampled kernel stacks: {} samples ({}); {} the op's own ({} user), {} in the probes, {} \
         stacks lost: {whole}\n",
        p.samples,
        p.rates(),
        p.own_samples(),
        p.user_samples,
        p.probe_samples,
        p.lost_stacks,
    );
    out.push_str(&precision_line(p));
    if p.paths.is_empty() {
        out.push_str("(no sample fell in a syscall, hook or task path)\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
            probes_cost: None,
        };
        let line = accounting_line(&a);
        assert!(
            line.contains("on CPU 0.7000 us (user 0.1000 us, kernel 0.5500 us, probes 0.0500 us)"),
            "{line}"
        );
        assert!(line.ends_with("; wall time 1.000 us"), "{line}");
        a.tasks = 2.0;
        a.on_cpu_ns_per_op = 1700.0;
        let line = accounting_line(&a);
        assert!(line.contains("2.000 tasks' time per op"), "{line}");
    }
}
