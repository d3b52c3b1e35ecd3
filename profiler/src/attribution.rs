//! Turning counter deltas into "where does each op's time go": calls per op, ns per call and
//! per op, and the share of the clean op time, per syscall and per timed kernel function.
use std::collections::BTreeMap;

use profiler_common::{event, Tally};

use crate::{
    probes::{tally_sum, Snapshot},
    results::{AttributionRow, PathKind},
};

/// The counters of one probed sample and how many ops it ran.
pub struct ProbedSample {
    pub delta: Snapshot,
    pub ops: u64,
}

pub struct Attribution {
    pub rows: Vec<AttributionRow>,
    pub events_per_op: BTreeMap<String, f64>,
}

/// `functions[slot]` names what hook slot `slot` timed ("" for an unused slot).
pub fn attribute(
    samples: &[ProbedSample],
    functions: &[String],
    clean_ns_per_op: f64,
) -> Attribution {
    let total_ops: u64 = samples.iter().map(|s| s.ops).sum();
    let mut rows = Vec::new();
    for (slot, function) in functions.iter().enumerate() {
        if function.is_empty() {
            continue;
        }
        let per_sample: Vec<&Tally> = samples.iter().map(|s| &s.delta.hooks[slot]).collect();
        // A probed function stays in the table even at zero calls: that is a finding too.
        rows.push(row(
            function_kind(function),
            function,
            &per_sample,
            samples,
            total_ops,
            clean_ns_per_op,
        ));
    }
    let syscalls = samples.first().map_or(0, |s| s.delta.syscalls.len());
    for nr in 0..syscalls {
        let per_sample: Vec<&Tally> = samples.iter().map(|s| &s.delta.syscalls[nr]).collect();
        if per_sample.iter().all(|t| t.calls == 0) {
            continue;
        }
        rows.push(row(
            PathKind::Syscall,
            &syscall_name(nr),
            &per_sample,
            samples,
            total_ops,
            clean_ns_per_op,
        ));
    }
    rows.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then(b.ns_per_op.total_cmp(&a.ns_per_op))
    });

    let event_total = |index: u32| {
        samples
            .iter()
            .map(|s| s.delta.events[index as usize])
            .sum::<u64>()
    };
    let mut events_per_op = BTreeMap::new();
    for (name, index) in [
        ("fork", event::FORK),
        ("exec", event::EXEC),
        ("exit", event::EXIT),
    ] {
        events_per_op.insert(
            name.to_string(),
            event_total(index) as f64 / total_ops.max(1) as f64,
        );
    }
    let lost = event_total(event::TRACK_FULL);
    if lost > 0 {
        events_per_op.insert(
            "untracked_children".into(),
            lost as f64 / total_ops.max(1) as f64,
        );
    }
    Attribution {
        rows,
        events_per_op,
    }
}

fn function_kind(name: &str) -> PathKind {
    if name.starts_with("security_") {
        PathKind::Hook
    } else {
        PathKind::TaskPath
    }
}

pub fn syscall_name(nr: usize) -> String {
    syscalls::Sysno::new(nr).map_or_else(|| format!("syscall_{nr}"), |s| s.name().to_string())
}

fn ns_per_call(t: &Tally) -> f64 {
    if t.timed == 0 {
        0.0
    } else {
        t.total_ns as f64 / t.timed as f64
    }
}

fn row(
    kind: PathKind,
    name: &str,
    per_sample: &[&Tally],
    samples: &[ProbedSample],
    total_ops: u64,
    clean_ns_per_op: f64,
) -> AttributionRow {
    let total = per_sample
        .iter()
        .fold(Tally::ZERO, |acc, t| tally_sum(&acc, t));
    let calls_per_op = total.calls as f64 / total_ops.max(1) as f64;
    let ns_per_op = calls_per_op * ns_per_call(&total);
    let samples_ns_per_op = per_sample
        .iter()
        .zip(samples)
        .map(|(t, s)| t.calls as f64 / s.ops.max(1) as f64 * ns_per_call(t))
        .collect();
    let mut histogram = total.hist.to_vec();
    while histogram.last() == Some(&0) {
        histogram.pop();
    }
    AttributionRow {
        kind,
        name: name.to_string(),
        parent: None,
        calls_per_op,
        ns_per_call: ns_per_call(&total),
        ns_per_op,
        share: if clean_ns_per_op > 0.0 {
            ns_per_op / clean_ns_per_op
        } else {
            0.0
        },
        untimed_calls: total.calls - total.timed,
        histogram,
        samples_ns_per_op,
    }
}

#[cfg(test)]
mod tests {
    use profiler_common::MAX_SYSCALLS;

    use super::*;

    fn sample(ops: u64, getppid_calls: u64, ns: u64, hook_calls: u64) -> ProbedSample {
        let mut syscalls = vec![Tally::ZERO; MAX_SYSCALLS as usize];
        syscalls[110] = Tally {
            calls: getppid_calls,
            timed: getppid_calls,
            total_ns: ns,
            ..Tally::ZERO
        };
        let hooks = vec![Tally {
            calls: hook_calls,
            timed: hook_calls,
            total_ns: hook_calls * 100,
            ..Tally::ZERO
        }];
        let mut events = vec![0; event::COUNT as usize];
        events[event::FORK as usize] = ops;
        ProbedSample {
            delta: Snapshot {
                syscalls,
                hooks,
                events,
            },
            ops,
        }
    }

    #[test]
    fn per_op_figures_pool_all_samples() {
        let samples = [sample(100, 100, 5000, 0), sample(300, 300, 15000, 0)];
        let a = attribute(&samples, &["security_file_open".into()], 100.0);
        let getppid = a
            .rows
            .iter()
            .find(|r| r.name == "getppid")
            .expect("getppid row");
        assert_eq!(getppid.kind, PathKind::Syscall);
        assert!((getppid.calls_per_op - 1.0).abs() < 1e-12);
        assert!((getppid.ns_per_call - 50.0).abs() < 1e-12);
        assert!((getppid.share - 0.5).abs() < 1e-12);
        assert_eq!(getppid.samples_ns_per_op, vec![50.0, 50.0]);
        // The probed hook is listed even though it was never called.
        let hook = a
            .rows
            .iter()
            .find(|r| r.name == "security_file_open")
            .expect("hook row");
        assert_eq!((hook.kind, hook.calls_per_op), (PathKind::Hook, 0.0));
        assert!((a.events_per_op["fork"] - 1.0).abs() < 1e-12);
    }

    #[test]
    fn unused_syscalls_are_left_out() {
        let a = attribute(
            &[sample(10, 0, 0, 5)],
            &["security_file_open".into()],
            1000.0,
        );
        assert_eq!(a.rows.len(), 1);
        assert!((a.rows[0].ns_per_op - 50.0).abs() < 1e-12);
    }
}
