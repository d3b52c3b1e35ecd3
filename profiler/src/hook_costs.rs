//! Turning counter deltas into "where does each op's time go": calls per op, ns per call and
//! per op, and the share of the clean op time, per syscall and per timed kernel function.
use std::collections::BTreeMap;

use profiler_common::{event, Tally};

use crate::{
    probes::{tally_sum, Snapshot, Target},
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

/// `functions[slot]` is what hook slot `slot` timed (None for an unused slot).
pub fn attribute(
    samples: &[ProbedSample],
    functions: &[Option<Target>],
    clean_ns_per_op: f64,
) -> Attribution {
    let total_ops: u64 = samples.iter().map(|s| s.ops).sum();
    let mut rows = Vec::new();
    for (slot, target) in functions.iter().enumerate() {
        let Some(target) = target else { continue };
        let per_sample: Vec<&Tally> = samples.iter().map(|s| &s.delta.hooks[slot]).collect();
        // A probed function stays in the table even at zero calls: that is a finding too.
        let kind = function_kind(target);
        let mut r = row(
            kind,
            &target.function,
            &per_sample,
            samples,
            total_ops,
            clean_ns_per_op,
        );
        r.parent = target.parent.clone();
        r.lsm = target.lsm.clone();
        rows.push(r);
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

/// Takes the cost of nested probes out of each enclosing function's time: every probed call
/// inside a call adds one timed pair (`timed_pair_ns`) to the outer measurement. A hook with
/// LSM rows under it also gets its own dispatch cost (what is left after its LSM functions).
pub fn correct_nesting(rows: &mut [AttributionRow], timed_pair_ns: f64) {
    let nested: Vec<(f64, f64)> = rows
        .iter()
        .map(|outer| {
            let children = rows
                .iter()
                .filter(|r| r.parent.as_deref() == Some(outer.name.as_str()));
            children.fold((0.0, 0.0), |(calls, ns), c| {
                (calls + c.calls_per_op, ns + c.calls_per_op * c.ns_per_call)
            })
        })
        .collect();
    for (row, &(child_calls_per_op, _)) in rows.iter_mut().zip(&nested) {
        if row.kind == PathKind::Syscall || row.calls_per_op == 0.0 {
            continue;
        }
        let nested_per_call = child_calls_per_op / row.calls_per_op;
        row.corrected_ns_per_call = (row.ns_per_call - nested_per_call * timed_pair_ns).max(0.0);
        row.corrected_ns_per_op = row.calls_per_op * row.corrected_ns_per_call;
    }
    for (i, &(child_calls, children_ns)) in nested.iter().enumerate() {
        if rows[i].kind == PathKind::Hook && child_calls > 0.0 {
            // The LSM functions are leaves: their corrected time is their raw time.
            rows[i].dispatch_ns_per_op = Some(rows[i].corrected_ns_per_op - children_ns);
        }
    }
}

fn function_kind(target: &Target) -> PathKind {
    if target.lsm.is_some() {
        PathKind::Lsm
    } else if target.function.starts_with("security_") {
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
        lsm: None,
        calls_per_op,
        ns_per_call: ns_per_call(&total),
        ns_per_op,
        corrected_ns_per_call: ns_per_call(&total),
        corrected_ns_per_op: ns_per_op,
        dispatch_ns_per_op: None,
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
        let a = attribute(&samples, &[Some(Target::top("security_file_open"))], 100.0);
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

    fn hook_row(
        name: &str,
        parent: Option<&str>,
        calls_per_op: f64,
        ns_per_call: f64,
    ) -> AttributionRow {
        let mut r = row(PathKind::Hook, name, &[], &[], 1, 0.0);
        r.kind = if parent.is_some() {
            PathKind::Lsm
        } else {
            PathKind::Hook
        };
        r.parent = parent.map(String::from);
        r.calls_per_op = calls_per_op;
        r.ns_per_call = ns_per_call;
        r.corrected_ns_per_call = ns_per_call;
        r.ns_per_op = calls_per_op * ns_per_call;
        r.corrected_ns_per_op = r.ns_per_op;
        r
    }

    #[test]
    fn nested_probe_cost_comes_out_of_the_outer_hook() {
        // One hook call per op, running two LSM functions (each probed once per hook call).
        let mut rows = vec![
            hook_row("security_file_open", None, 1.0, 1000.0),
            hook_row("apparmor_file_open", Some("security_file_open"), 1.0, 400.0),
            hook_row("bpf_lsm_file_open", Some("security_file_open"), 1.0, 100.0),
        ];
        correct_nesting(&mut rows, 50.0);
        assert!((rows[0].corrected_ns_per_call - 900.0).abs() < 1e-9);
        assert!((rows[1].corrected_ns_per_call - 400.0).abs() < 1e-9);
        // 900 inclusive - 400 - 100 under it = 400 of the hook's own dispatch.
        assert!((rows[0].dispatch_ns_per_op.expect("dispatch") - 400.0).abs() < 1e-9);
        assert_eq!(rows[1].dispatch_ns_per_op, None);
    }

    #[test]
    fn unused_syscalls_are_left_out() {
        let a = attribute(
            &[sample(10, 0, 0, 5)],
            &[Some(Target::top("security_file_open"))],
            1000.0,
        );
        assert_eq!(a.rows.len(), 1);
        assert!((a.rows[0].ns_per_op - 50.0).abs() < 1e-12);
    }
}
