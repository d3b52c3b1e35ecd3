//! What a workload's change may owe to the run options that differ between the sides: an
//! injected delay on a path it calls (how much of the change is the injected wait, and how
//! much the injection's machinery, which a `syscall:` injection adds to every syscall of the
//! machine), or any other option that changes what ran.
use std::collections::BTreeMap;

use super::{EnvironmentDifference, WorkloadComparison};
use crate::{
    probes::injection::Injection,
    results::{rows, PathKind, Results},
    stats::Verdict,
};

/// The note for a workload whose options differ: an injection on a path it calls always (the
/// change is then known in part), other options where it was called regressed or improved.
pub(super) fn note(
    options: &[EnvironmentDifference],
    old: &[Results],
    new: &[Results],
    w: &WorkloadComparison,
) -> Option<String> {
    if options.is_empty() {
        return None;
    }
    if options.iter().any(|d| d.field == "inject") {
        if let Some(note) = injection_note(old, new, w) {
            return Some(note);
        }
    }
    if !matches!(w.verdict, Verdict::Regressed | Verdict::Improved) {
        return None;
    }
    let fields: Vec<&str> = options.iter().map(|d| d.field).collect();
    Some(format!(
        "the run options differ ({}): this change may be theirs, not the kernel's",
        fields.join(", ")
    ))
}

/// One side's injections: each injected path's wait (ns a call, the mean over its files), and
/// whether it carries the syscall injection's machinery (its tracepoint on every syscall's
/// way out, present at any wait, 0 ns included, and in both variants of `run --versus`).
#[derive(Default)]
struct Injected {
    waits: BTreeMap<String, f64>,
    /// What each syscall's wait was asked to be, where it differs from the wait measured.
    asked: BTreeMap<String, f64>,
    machinery: bool,
}

impl Injected {
    /// A syscall's wait is the one the injection measured clock to clock where the file
    /// records it (a wait of N ns asked takes about N plus the loop's own clock reads, and 0
    /// asked still takes those), else the one asked.
    fn of(side: &[Results]) -> Injected {
        let mut sums: BTreeMap<String, f64> = BTreeMap::new();
        let mut asked: BTreeMap<String, f64> = BTreeMap::new();
        let mut machinery = false;
        for r in side {
            machinery |= !r.syscall_injections.is_empty();
            for s in &r.syscall_injections {
                let measured = if s.calls > 0 {
                    s.mean_wait_ns
                } else {
                    s.busy_ns as f64
                };
                *sums.entry(s.syscall.clone()).or_default() += measured;
                *asked.entry(s.syscall.clone()).or_default() += s.busy_ns as f64;
            }
            for injection in r
                .options
                .inject
                .iter()
                .filter_map(|s| Injection::parse(s).ok())
            {
                let (path, ns) = match injection {
                    Injection::Syscall(s) if r.syscall_injections.is_empty() => {
                        machinery = true;
                        (s.name, s.ns)
                    }
                    Injection::Syscall(_) => continue,
                    Injection::Lsm { hook, ns } => (format!("security_{hook}"), ns),
                };
                *sums.entry(path).or_default() += ns as f64;
            }
        }
        // A file without the injection waited 0 ns on that path.
        let files = side.len().max(1) as f64;
        let per_file = |m: BTreeMap<String, f64>| -> BTreeMap<String, f64> {
            m.into_iter().map(|(p, ns)| (p, ns / files)).collect()
        };
        Injected {
            waits: per_file(sums),
            asked: per_file(asked),
            machinery,
        }
    }

    /// The wait asked on `path`, where it was recorded.
    fn asked(&self, path: &str) -> Option<f64> {
        self.asked.get(path).copied()
    }

    fn wait(&self, path: &str) -> f64 {
        self.waits.get(path).copied().unwrap_or(0.0)
    }
}

/// How much of `w`'s change the injected waits explain (their difference times the calls per
/// op on the new side, where a timed row counts them) and what the machinery adds; None
/// where `w` calls no injected path or the waits are the same on both sides.
fn injection_note(old: &[Results], new: &[Results], w: &WorkloadComparison) -> Option<String> {
    let (o, n) = (Injected::of(old), Injected::of(new));
    let mut parts = Vec::new();
    let mut expected = Some(0.0);
    for path in o.waits.keys().chain(n.waits.keys()) {
        let differs = n.wait(path) - o.wait(path);
        if !calls(w, path) || differs == 0.0 || parts.iter().any(|(p, _)| p == path) {
            continue;
        }
        let per_op = calls_per_op(new, &w.name, path);
        expected = expected.zip(per_op).map(|(e, c)| e + differs * c);
        let asked = match (o.asked(path), n.asked(path)) {
            (Some(a), Some(b)) if ((b - a) - differs).abs() >= 0.5 => {
                format!(" (as measured; {:+.0} asked)", b - a)
            }
            _ => String::new(),
        };
        let text = match per_op {
            Some(c) => format!("{path} {differs:+.0} ns a call{asked} x {c:.2} calls/op"),
            None => format!("{path} {differs:+.0} ns a call{asked}"),
        };
        parts.push((path.clone(), text));
    }
    if parts.is_empty() {
        return None;
    }
    let texts: Vec<String> = parts.into_iter().map(|(_, t)| t).collect();
    let whole = rows::op_ns(w.unit, w.new.mean).zip(rows::op_ns(w.unit, w.old.mean));
    let waits = match expected {
        Some(e) => format!(
            "the injected wait differs: {} = {e:+.0} ns/op",
            texts.join(" + ")
        ),
        None => format!("the injected wait differs: {}", texts.join(", ")),
    };
    let rest = expected.zip(whole).map(|(e, (n, o))| n - o - e);
    Some(format!("{waits}; {}", machinery(&o, &n, rest)))
}

/// What the injection's machinery does to the comparison.
fn machinery(o: &Injected, n: &Injected, rest: Option<f64>) -> String {
    let rest = rest
        .map(|r| format!(" (the op's change less the waits: {r:+.0} ns/op)"))
        .unwrap_or_default();
    match (o.machinery, n.machinery) {
        (true, true) => "both sides carry the syscall injection's machinery (0 ns waits where \
                         a side injects nothing), so it cancels: the rest of the change is the \
                         kernel's and the noise's"
            .into(),
        // Why not attached where it injects alone: any program on a syscall tracepoint, the
        // per-syscall ones included, turns on the syscall tracepoint work of every task.
        (false, false) => "a BPF LSM injection runs on its own hook alone: the rest of the \
                           change is the kernel's and the noise's"
            .into(),
        (old, _) => format!(
            "only the {} side carries the syscall injection's machinery: a tracepoint on every \
             syscall's way out, which puts each syscall of the machine on its slow path (the \
             kernel does that for any syscall tracepoint, the per-syscall ones too, so it cannot \
             be attached where it injects alone); the rest of the change{rest} is mostly that; \
             inject 0 ns on the {} side to carry it on both",
            if old { "old" } else { "new" },
            if old { "new" } else { "old" }
        ),
    }
}

/// The calls per op of the syscall or hook `path` in `workload` on `side`, from its timed rows
/// (the mean over the files that time it); None where none does.
fn calls_per_op(side: &[Results], workload: &str, path: &str) -> Option<f64> {
    let counts: Vec<f64> = side
        .iter()
        .flat_map(|r| r.workloads.iter().filter(|w| w.name == workload))
        .flat_map(|w| &w.attribution)
        .filter(|r| r.name == path && r.parent.is_none())
        .filter(|r| matches!(r.kind, PathKind::Syscall | PathKind::Hook))
        .map(|r| r.calls_per_op)
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum::<f64>() / counts.len() as f64)
}

/// Whether `w` calls `path` (a syscall or a hook), by its timed or sampled rows.
fn calls(w: &WorkloadComparison, path: &str) -> bool {
    let timed = w
        .attribution
        .iter()
        .flat_map(|a| &a.paths)
        .any(|p| p.name == path);
    let sampled = w
        .sampled
        .iter()
        .flat_map(|s| &s.paths)
        .any(|p| p.name == path);
    timed || sampled
}
