//! The sampled side of a workload in text and markdown: the op's time on and off a CPU (the
//! accounting) and the sampled stacks' table, each hook with its LSM functions under it.
use std::fmt::Write;

use super::figures::{num, Scale};
use crate::results::{Accounting, StackProfile, Unit};

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
        "  {own} own samples know a 5% share of the op's own CPU time within +-{:.1} \
         percentage points (95%); about +-1 \
         takes 2,000 (run --stack-samples, whose passes stop at 2 s a round: more --rounds \
         for a workload mostly off its CPU; or more stat --runs)\n",
        half * 100.0
    )
}

/// The profile's heading: the samples, how they came, whose they are, and how well they know
/// a share (the paths are in the workload's table, `paths_table`).
pub fn sampled_heading(p: &StackProfile) -> String {
    let cpu = Scale::of(Unit::Nanoseconds, p.on_cpu_ns_per_op).show(p.on_cpu_ns_per_op);
    let cpu = if p.of_unprobed_op() {
        format!(
            "{cpu} of the unprobed op's CPU time per op, {}",
            super::paths_table::unprobed_whole(p)
        )
    } else {
        format!("{cpu} of CPU time per op")
    };
    let mut out = format!(
        "Sampled kernel stacks: {} samples of the op's CPU time ({}; {} user, {} in the \
         probes), {cpu}\n",
        p.samples,
        p.rates(),
        p.user_samples,
        p.probe_samples,
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
