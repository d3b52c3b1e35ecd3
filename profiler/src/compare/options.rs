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
/// way out, present at any wait, 0 ns included).
#[derive(Default)]
struct Injected {
    waits: BTreeMap<String, f64>,
    machinery: bool,
}

impl Injected {
    fn of(side: &[Results]) -> Injected {
        let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
        let mut machinery = false;
        for r in side {
            for injection in r
                .options
                .inject
                .iter()
                .filter_map(|s| Injection::parse(s).ok())
            {
                let (path, ns) = match injection {
                    Injection::Syscall(s) => {
                        machinery = true;
                        (s.name, s.ns)
                    }
                    Injection::Lsm { hook, ns } => (format!("security_{hook}"), ns),
                };
                let sum = sums.entry(path).or_default();
                sum.0 += ns as f64;
                sum.1 += 1;
            }
        }
        // A file without the injection waited 0 ns on that path.
        let files = side.len().max(1) as f64;
        Injected {
            waits: sums
                .into_iter()
                .map(|(p, (ns, _))| (p, ns / files))
                .collect(),
            machinery,
        }
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
        let text = match per_op {
            Some(c) => format!("{path} {differs:+.0} ns a call x {c:.2} calls/op"),
            None => format!("{path} {differs:+.0} ns a call"),
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
        (false, false) => "a BPF LSM injection runs on its own hook alone: the rest of the \
                           change is the kernel's and the noise's"
            .into(),
        (old, _) => format!(
            "only the {} side carries the syscall injection's machinery, a tracepoint on every \
             syscall's way out that puts each syscall of the machine on its slow path: the rest \
             of the change{rest} is mostly that; inject 0 ns on the {} side to carry it on both",
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
