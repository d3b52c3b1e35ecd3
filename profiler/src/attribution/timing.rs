//! Exact timing: counter deltas become rows (calls per op, ns per call and per op, share of
//! the clean op) per syscall and per timed kernel function, raw and corrected for the probes'
//! own cost in the same pass. Where sched_switch was probed, a syscall's time switched out is
//! its wait, kept apart from its CPU time. The arithmetic the reports and `compare` do on
//! those rows is `results::rows`'s.
use std::collections::{BTreeMap, BTreeSet};

use profiler_common::{event, Tally};

use crate::{
    probes::{calibration::Correction, tally_sum, Delta, Target},
    results::{AttributionRow, CorrectionMethod, PathKind},
};

/// The counters of one probed sample and how many ops it ran.
pub struct ProbedSample {
    pub delta: Delta,
    pub ops: u64,
}

pub struct Attribution {
    pub rows: Vec<AttributionRow>,
    pub events_per_op: BTreeMap<String, f64>,
}

/// `functions[slot]` is what hook slot `slot` timed (None for an unused slot).
/// `waits_measured`: sched_switch was probed, so each syscall's time switched out is known.
pub fn attribute(
    samples: &[ProbedSample],
    functions: &[Option<Target>],
    clean_ns_per_op: f64,
    correction: Option<Correction>,
    waits_measured: bool,
) -> Attribution {
    let pass = Pass {
        samples,
        total_ops: samples.iter().map(|s| s.ops).sum(),
        clean_ns_per_op,
        correction,
    };
    let mut rows = pass.function_rows(functions);
    rows.extend(pass.syscall_rows(waits_measured));
    add_dispatch(&mut rows);
    rows.sort_by(|a, b| {
        a.kind
            .cmp(&b.kind)
            .then(b.ns_per_op.total_cmp(&a.ns_per_op))
    });
    Attribution {
        rows,
        events_per_op: pass.events_per_op(),
    }
}

/// The probed samples of one workload, and what their rows are measured against.
struct Pass<'a> {
    samples: &'a [ProbedSample],
    total_ops: u64,
    clean_ns_per_op: f64,
    correction: Option<Correction>,
}

impl Pass<'_> {
    /// A row per timed kernel function: a probed function stays in the table even at zero
    /// calls, for that is a finding too.
    fn function_rows(&self, functions: &[Option<Target>]) -> Vec<AttributionRow> {
        let mut rows = Vec::new();
        for (slot, target) in functions.iter().enumerate() {
            let Some(target) = target else { continue };
            let per_sample: Vec<&Tally> = self.samples.iter().map(|s| s.delta.hook(slot)).collect();
            let mut r = self.row(function_kind(target), &target.function, &per_sample);
            r.parent = target.parent.clone();
            r.lsm = target.lsm.clone();
            rows.push(r);
        }
        rows
    }

    /// A row per syscall the workload made, of its CPU time: the time it spent switched out
    /// (where sched_switch was probed) is its wait, not its cost.
    fn syscall_rows(&self, waits_measured: bool) -> Vec<AttributionRow> {
        let syscalls: BTreeSet<usize> = self
            .samples
            .iter()
            .flat_map(|s| s.delta.syscalls_moved())
            .collect();
        let mut rows = Vec::new();
        for nr in syscalls {
            if self.samples.iter().all(|s| s.delta.syscall(nr).calls == 0) {
                continue;
            }
            let on_cpu: Vec<Tally> = self
                .samples
                .iter()
                .map(|s| {
                    let mut t = *s.delta.syscall(nr);
                    if waits_measured {
                        t.total_ns -= t.off_cpu_ns.min(t.total_ns);
                    }
                    t
                })
                .collect();
            let per_sample: Vec<&Tally> = on_cpu.iter().collect();
            let mut r = self.row(PathKind::Syscall, &syscall_name(nr), &per_sample);
            if waits_measured {
                let (off, timed) = on_cpu
                    .iter()
                    .fold((0, 0), |(o, t), x| (o + x.off_cpu_ns, t + x.timed));
                r.off_cpu_ns_per_op = Some(if timed == 0 {
                    0.0
                } else {
                    r.calls_per_op * off as f64 / timed as f64
                });
            }
            rows.push(r);
        }
        rows
    }

    /// The task events per op; the diagnostics only where they happened.
    fn events_per_op(&self) -> BTreeMap<String, f64> {
        let per_op = |index: u32| {
            let n: u64 = self
                .samples
                .iter()
                .map(|s| s.delta.events[index as usize])
                .sum();
            (n, n as f64 / self.total_ops.max(1) as f64)
        };
        let mut events_per_op = BTreeMap::new();
        for (name, index) in [
            ("fork", event::FORK),
            ("exec", event::EXEC),
            ("exit", event::EXIT),
        ] {
            events_per_op.insert(name.to_string(), per_op(index).1);
        }
        for (name, index) in [
            ("untracked_children", event::TRACK_FULL),
            ("unmatched_exits", event::UNMATCHED_EXIT),
            ("stale_exits", event::STALE_EXIT),
            ("stack_full", event::STACK_FULL),
            ("gate_misuse", event::GATE_MISUSE),
            ("stack_samples_dropped", event::SAMPLES_FULL),
        ] {
            let (n, rate) = per_op(index);
            if n > 0 {
                events_per_op.insert(name.into(), rate);
            }
        }
        events_per_op
    }

    /// One path's row from its tallies in each sample.
    fn row(&self, kind: PathKind, name: &str, per_sample: &[&Tally]) -> AttributionRow {
        let total = per_sample
            .iter()
            .fold(Tally::ZERO, |acc, t| tally_sum(&acc, t));
        let calls_per_op = total.calls as f64 / self.total_ops.max(1) as f64;
        let ns_per_op = calls_per_op * ns_per_call(&total);
        let clean_share = if self.clean_ns_per_op > 0.0 {
            ns_per_op / self.clean_ns_per_op
        } else {
            0.0
        };
        let samples_ns_per_op = per_sample
            .iter()
            .zip(self.samples)
            .map(|(t, s)| t.calls as f64 / s.ops.max(1) as f64 * ns_per_call(t))
            .collect();
        let mut histogram = total.hist.to_vec();
        while histogram.last() == Some(&0) {
            histogram.pop();
        }
        let corrected_ns_per_call = corrected_ns_per_call(&total, kind, self.correction);
        AttributionRow {
            kind,
            name: name.to_string(),
            parent: None,
            lsm: None,
            calls_per_op,
            ns_per_call: ns_per_call(&total),
            ns_per_op,
            corrected_ns_per_call,
            corrected_ns_per_op: calls_per_op * corrected_ns_per_call,
            correction: self
                .correction
                .filter(|_| total.timed > 0)
                .map(|_| CorrectionMethod::Calibrated),
            dispatch_ns_per_op: None,
            // Of the clean op until the run's breakdown takes it of its whole (`derive_shares`).
            share: Some(clean_share),
            share_of_clean_op: Some(clean_share),
            untimed_calls: total.calls - total.timed,
            histogram,
            samples_ns_per_op,
            off_cpu_ns_per_op: None,
        }
    }
}

/// A hook with LSM rows under it gets its own dispatch cost: its corrected time less its LSM
/// functions' (leaves, whose corrected time is all their own). None where an LSM function was
/// corrected by another method than its hook: the difference of two methods is neither's; and
/// None where that difference falls below zero: the pairs nested in the hook cost otherwise
/// than the calibration priced them (under TCG by more than the dispatch itself), so the
/// dispatch is below what the correction resolves.
pub(super) fn add_dispatch(rows: &mut [AttributionRow]) {
    let dispatch: Vec<Option<Option<f64>>> = rows
        .iter()
        .map(|outer| {
            let mut children = rows
                .iter()
                .filter(|r| r.parent.as_deref() == Some(outer.name.as_str()))
                .peekable();
            children.peek()?;
            let mut ns = outer.corrected_ns_per_op;
            for c in children {
                if c.correction.is_some() && c.correction != outer.correction {
                    return Some(None);
                }
                ns -= c.corrected_ns_per_op;
            }
            Some((ns >= 0.0).then_some(ns))
        })
        .collect();
    for (row, dispatch) in rows.iter_mut().zip(dispatch) {
        if let (PathKind::Hook, Some(ns)) = (row.kind, dispatch) {
            row.dispatch_ns_per_op = ns;
        }
    }
}

pub fn function_kind(target: &Target) -> PathKind {
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

/// A tally's ns per timed call with the probes' own cost taken out (never below zero).
fn corrected_ns_per_call(t: &Tally, kind: PathKind, correction: Option<Correction>) -> f64 {
    let Some(c) = correction.filter(|_| t.timed > 0) else {
        return ns_per_call(t);
    };
    let own = if kind == PathKind::Syscall {
        0.0
    } else {
        c.self_ns
    };
    let probes_ns = t.timed as f64 * own + t.nested as f64 * c.pair_ns;
    ((t.total_ns as f64 - probes_ns) / t.timed as f64).max(0.0)
}

#[cfg(test)]
mod tests {
    use profiler_common::MAX_SYSCALLS;

    use super::*;
    use crate::probes::Snapshot;

    fn sample(ops: u64, getppid_calls: u64, ns: u64, hook_calls: u64) -> ProbedSample {
        ProbedSample {
            delta: counters(ops, getppid_calls, ns, hook_calls).into(),
            ops,
        }
    }

    /// A sample's counters: `ops` forks, getppid's calls and time, one hook's calls.
    fn counters(ops: u64, getppid_calls: u64, ns: u64, hook_calls: u64) -> Snapshot {
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
        Snapshot {
            syscalls,
            hooks,
            events,
        }
    }

    #[test]
    fn per_op_figures_pool_all_samples() {
        let samples = [sample(100, 100, 5000, 0), sample(300, 300, 15000, 0)];
        let a = attribute(
            &samples,
            &[Some(Target::top("security_file_open"))],
            100.0,
            None,
            false,
        );
        let getppid = a
            .rows
            .iter()
            .find(|r| r.name == "getppid")
            .expect("getppid row");
        assert_eq!(getppid.kind, PathKind::Syscall);
        assert!((getppid.calls_per_op - 1.0).abs() < 1e-12);
        assert!((getppid.ns_per_call - 50.0).abs() < 1e-12);
        assert_eq!(getppid.share_of_clean_op, getppid.share);
        assert!((getppid.share.unwrap() - 0.5).abs() < 1e-12);
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

    fn timed(total_ns: u64, nested: u64) -> Tally {
        Tally {
            calls: 1,
            timed: 1,
            total_ns,
            nested,
            ..Tally::ZERO
        }
    }

    #[test]
    fn corrected_rows_take_out_each_call_s_own_probe_and_every_nested_pair() {
        // One open per op: openat runs security_file_open, which runs two LSM functions.
        let mut syscalls = vec![Tally::ZERO; MAX_SYSCALLS as usize];
        syscalls[257] = timed(3000, 3);
        let hooks = vec![timed(1000, 2), timed(400, 0), timed(100, 0)];
        let sample = ProbedSample {
            delta: Delta::from(Snapshot {
                syscalls,
                hooks,
                events: vec![0; event::COUNT as usize],
            }),
            ops: 1,
        };
        let lsm = |function: &str, lsm: &str| Target {
            function: function.into(),
            parent: Some("security_file_open".into()),
            lsm: Some(lsm.into()),
        };
        let functions = [
            Some(Target::top("security_file_open")),
            Some(lsm("apparmor_file_open", "apparmor")),
            Some(lsm("bpf_lsm_file_open", "bpf")),
        ];
        let correction = Correction {
            self_ns: 10.0,
            pair_ns: 50.0,
        };
        let a = attribute(&[sample], &functions, 5000.0, Some(correction), false);
        let corrected = |name: &str| {
            let r = a.rows.iter().find(|r| r.name == name).expect(name);
            (r.ns_per_call, r.corrected_ns_per_call)
        };
        assert_eq!(corrected("security_file_open"), (1000.0, 890.0));
        assert_eq!(corrected("apparmor_file_open"), (400.0, 390.0));
        assert_eq!(corrected("bpf_lsm_file_open"), (100.0, 90.0));
        // A syscall row loses the three pairs inside it, not a pair of its own.
        assert_eq!(corrected("openat"), (3000.0, 2850.0));
        // 890 inclusive - 390 - 90 under it = 410 of the hook's own dispatch.
        let hook = a.rows.iter().find(|r| r.name == "security_file_open");
        assert_eq!(hook.and_then(|r| r.dispatch_ns_per_op), Some(410.0));
        // Without a calibration the corrected figures are the raw ones.
        let raw = attribute(&[], &functions, 5000.0, None, false);
        assert!(raw
            .rows
            .iter()
            .all(|r| r.corrected_ns_per_call == r.ns_per_call));
    }

    #[test]
    fn a_hook_corrected_below_its_lsm_functions_has_no_dispatch() {
        use crate::results::fixtures::row;
        let corrected = |kind, name: &str, parent: Option<&str>, ns: f64| AttributionRow {
            corrected_ns_per_op: ns,
            correction: Some(CorrectionMethod::Calibrated),
            ..row(kind, name, parent, 1.0, 2.0 * ns)
        };
        let hook = "security_file_free";
        for (hook_ns, dispatch) in [(900.0, Some(300.0)), (600.0, Some(0.0)), (0.0, None)] {
            let mut rows = [
                corrected(PathKind::Hook, hook, None, hook_ns),
                corrected(
                    PathKind::Lsm,
                    "apparmor_file_free_security",
                    Some(hook),
                    400.0,
                ),
                corrected(PathKind::Lsm, "bpf_lsm_file_free", Some(hook), 200.0),
            ];
            add_dispatch(&mut rows);
            assert_eq!(rows[0].dispatch_ns_per_op, dispatch, "hook at {hook_ns} ns");
            assert!(rows[1..].iter().all(|r| r.dispatch_ns_per_op.is_none()));
        }
    }

    #[test]
    fn diagnostics_are_listed_per_op_only_when_they_happened() {
        let mut s = sample(10, 0, 0, 5);
        s.delta.events[event::UNMATCHED_EXIT as usize] = 2;
        let a = attribute(&[s], &[], 1000.0, None, false);
        assert_eq!(a.events_per_op.get("unmatched_exits"), Some(&0.2));
        assert_eq!(a.events_per_op.get("stack_full"), None);
    }

    #[test]
    fn a_syscall_s_time_switched_out_is_its_wait_not_its_cost() {
        let mut counters = counters(10, 10, 50_000, 0);
        counters.syscalls[110].off_cpu_ns = 40_000;
        let s = ProbedSample {
            delta: counters.into(),
            ops: 10,
        };
        let a = attribute(std::slice::from_ref(&s), &[], 5000.0, None, true);
        let r = &a.rows[0];
        assert_eq!((r.ns_per_call, r.off_cpu_ns_per_op), (1000.0, Some(4000.0)));
        // Without sched_switch the wait is unknown and stays in.
        let a = attribute(&[s], &[], 5000.0, None, false);
        assert_eq!(
            (a.rows[0].ns_per_call, a.rows[0].off_cpu_ns_per_op),
            (5000.0, None)
        );
    }

    #[test]
    fn unused_syscalls_are_left_out() {
        let a = attribute(
            &[sample(10, 0, 0, 5)],
            &[Some(Target::top("security_file_open"))],
            1000.0,
            None,
            false,
        );
        assert_eq!(a.rows.len(), 1);
        assert!((a.rows[0].ns_per_op - 50.0).abs() < 1e-12);
    }
}
