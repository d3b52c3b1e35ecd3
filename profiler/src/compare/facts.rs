//! Facts before statistics: the paths (hooks, LSM functions, syscalls, task paths) and task
//! events (fork, exec, exit) that appear, disappear or run a different number of times per op
//! between the sides. A count is not a timing: it needs no test and holds under emulation, so
//! it is shown before any verdict.
//!
//! A fact is only as good as both sides' measurement: a path counts as 0 on a side only where
//! that side's probes could have seen it (a syscall where the syscall tracepoints were
//! attached, a function where a timing pair was). A path one side never probed is "not
//! measured" there, never "appeared" or "disappeared".
//!
//! A file records a path's calls per op as a mean over all its probed ops (no per-sample
//! counts), so "beyond rounding" is judged against that resolution and the spread of the
//! side's own files: the two sides differ when the gap between their ranges of per-file values
//! exceeds [`MIN_CALLS_PER_OP`] or [`MIN_RELATIVE`] of the larger count, whichever is larger.
use std::{collections::BTreeSet, fmt::Write, rc::Rc};

use foldhash::HashMap;
use serde::Serialize;

use crate::{
    results::{PathKind, ProbeKind, Results, RunOptions, WorkloadResult},
    text::esc,
};

/// A difference in calls per op smaller than this is rounding (a path taken once in a hundred
/// ops is still a fact; one taken once in a thousand is background).
pub const MIN_CALLS_PER_OP: f64 = 0.01;
/// ... and smaller than this fraction of the larger count.
pub const MIN_RELATIVE: f64 = 0.01;

/// The task events whose count per op is the workload's own (diagnostics are left out).
const TASK_EVENTS: [&str; 3] = ["fork", "exec", "exit"];

/// What a counted thing is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    Syscall,
    Hook,
    Lsm,
    TaskPath,
    /// fork, exec or exit per op (from the task tracepoints).
    TaskEvent,
    /// A layer of the security stack beside the LSMs (seccomp, audit, netfilter, another
    /// tool's BPF program).
    Layer,
}

impl Counted {
    fn of(kind: PathKind) -> Counted {
        match kind {
            PathKind::Syscall => Counted::Syscall,
            PathKind::Hook => Counted::Hook,
            PathKind::Lsm => Counted::Lsm,
            PathKind::TaskPath => Counted::TaskPath,
            PathKind::Seccomp | PathKind::Audit | PathKind::Netfilter | PathKind::BpfProgram => {
                Counted::Layer
            }
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Counted::Syscall => "syscall",
            Counted::Hook => "hook",
            Counted::Lsm => "LSM function",
            Counted::TaskPath => "task path",
            Counted::TaskEvent => "task event",
            Counted::Layer => "security layer",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CountChange {
    /// Never called on the old side, called on the new.
    Appeared,
    /// Called on the old side, never on the new.
    Disappeared,
    /// Called on both sides, a different number of times per op.
    Changed,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CountDifference {
    pub workload: String,
    pub kind: Counted,
    pub name: String,
    /// The hook an LSM function runs under, or the task path a step runs under.
    pub parent: Option<String>,
    /// The mean over the side's files that counted this kind (0 where never called).
    pub old_calls_per_op: f64,
    pub new_calls_per_op: f64,
    pub change: CountChange,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallCounts {
    /// The rule a difference had to pass, in words.
    pub rule: String,
    /// Workloads with counts on both sides (probed on both).
    pub workloads_compared: Vec<String>,
    pub differences: Vec<CountDifference>,
    /// Set when the sides chose what to probe differently: a function counted on one side
    /// only may then not have been looked for on the other.
    pub selection_note: Option<String>,
    /// Paths counted on one side that the other side's probes did not cover: no fact.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_measured: Vec<NotMeasured>,
}

/// A path counted on one side and not probed on the other.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotMeasured {
    pub workload: String,
    pub kind: Counted,
    pub name: String,
    /// The side whose probes did not cover it: "old" or "new".
    pub side: &'static str,
    /// Its calls per op on the side that counted it.
    pub calls_per_op: f64,
}

/// Borrowed from the files: many paths are counted without a string copied per path.
type Key<'a> = (Counted, &'a str, Option<&'a str>);

/// What one file's probes could see: every syscall where the syscall tracepoints were
/// attached, each function a timing pair was attached to, the task events where all three
/// task tracepoints were.
#[derive(Debug, Default)]
struct Coverage {
    syscalls: bool,
    tasks: bool,
    functions: BTreeSet<String>,
}

impl Coverage {
    fn of(r: &Results) -> Coverage {
        let attached = |target: &str| r.probes.attached.iter().any(|a| a.target == target);
        Coverage {
            syscalls: attached("sys_enter"),
            tasks: tasks_probed(r),
            functions: r
                .probes
                .attached
                .iter()
                .filter(|a| a.kind == ProbeKind::FEntry)
                .map(|a| a.target.clone())
                .collect(),
        }
    }

    /// Whether a path of this kind and name would have been counted had it run.
    fn covers(&self, kind: Counted, name: &str) -> bool {
        match kind {
            Counted::Syscall => self.syscalls,
            Counted::TaskEvent => self.tasks,
            Counted::Hook | Counted::Lsm | Counted::TaskPath => self.functions.contains(name),
            // Sampled only: no timed probe counts their calls.
            Counted::Layer => false,
        }
    }
}

/// One file's counts for one workload, with what its probes covered. Task events count only
/// where the file's probes include all three task tracepoints: without them the counters stay
/// at 0.
struct FileCounts<'a> {
    coverage: Rc<Coverage>,
    counts: HashMap<Key<'a>, f64>,
}

impl<'a> FileCounts<'a> {
    fn of(w: &'a WorkloadResult, coverage: Rc<Coverage>) -> FileCounts<'a> {
        let mut counts = HashMap::with_capacity_and_hasher(
            w.attribution.len() + TASK_EVENTS.len(),
            Default::default(),
        );
        for r in &w.attribution {
            *counts
                .entry((Counted::of(r.kind), r.name.as_str(), r.parent.as_deref()))
                .or_insert(0.0) += r.calls_per_op;
        }
        for event in TASK_EVENTS.iter().filter(|_| coverage.tasks) {
            if let Some(&n) = w.events_per_op.get(*event) {
                counts.insert((Counted::TaskEvent, *event, None), n);
            }
        }
        FileCounts { coverage, counts }
    }

    /// Whether this file measured `key`: it counted it, or its probes would have.
    fn measured(&self, key: &Key) -> bool {
        self.counts.contains_key(key) || self.coverage.covers(key.0, key.1)
    }

    /// Whether it measured anything at all (a clean-only workload did not).
    fn counted_anything(&self) -> bool {
        !self.counts.is_empty()
    }
}

/// True if the run attached the fork, exec and exit tracepoints.
fn tasks_probed(r: &Results) -> bool {
    TASK_EVENTS.iter().all(|event| {
        let target = format!("sched_process_{event}");
        r.probes.attached.iter().any(|a| a.target == target)
    })
}

/// Each file's counts of workload `name` on one side.
fn side_counts<'a>(side: &'a [Results], name: &str) -> Vec<FileCounts<'a>> {
    side.iter()
        .flat_map(|r| {
            let coverage = Rc::new(Coverage::of(r));
            r.workloads
                .iter()
                .filter(|w| w.name == name)
                .map(move |w| FileCounts::of(w, coverage.clone()))
        })
        .filter(FileCounts::counted_anything)
        .collect()
}

/// The values of `key` in the files that measured it (0 where it was never called).
fn values(files: &[FileCounts], key: &Key) -> Vec<f64> {
    files
        .iter()
        .filter_map(|f| match f.counts.get(key) {
            Some(&n) => Some(n),
            None => f.measured(key).then_some(0.0),
        })
        .collect()
}

fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (lo.min(v), hi.max(v))
        })
}

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The change between two sides' per-file counts, or None when it is within rounding.
fn judge(old: &[f64], new: &[f64]) -> Option<CountChange> {
    let ((old_lo, old_hi), (new_lo, new_hi)) = (range(old), range(new));
    let gap = (new_lo - old_hi).max(old_lo - new_hi);
    let tolerance = MIN_CALLS_PER_OP.max(MIN_RELATIVE * old_hi.max(new_hi));
    if gap <= tolerance {
        return None;
    }
    Some(if old_hi == 0.0 {
        CountChange::Appeared
    } else if new_hi == 0.0 {
        CountChange::Disappeared
    } else {
        CountChange::Changed
    })
}

/// A list option's name and how to read it from a file's options.
type ListOption = (&'static str, fn(&RunOptions) -> &[String]);

/// What differs in the option `name` (read by `field`) between the two sides, if anything.
fn option_difference(
    old: &[Results],
    new: &[Results],
    (name, field): ListOption,
) -> Option<String> {
    let distinct = |side: &[Results]| -> Vec<String> {
        let mut values: Vec<String> = Vec::new();
        for v in side
            .iter()
            .map(|r| field(&r.options))
            .filter(|v| !v.is_empty())
        {
            let v = v.join(",");
            if !values.contains(&v) {
                values.push(v);
            }
        }
        values
    };
    let (o, n) = (distinct(old), distinct(new));
    (!o.is_empty() && !n.is_empty() && o != n)
        .then(|| format!("--{name} {} -> {}", o.join(" | "), n.join(" | ")))
}

/// The call-count differences of the workloads both sides probed, in the old side's order.
pub fn call_counts(old: &[Results], new: &[Results]) -> CallCounts {
    let mut names: Vec<&str> = Vec::new();
    for w in old.iter().flat_map(|r| &r.workloads) {
        if !names.contains(&w.name.as_str()) {
            names.push(&w.name);
        }
    }
    let mut workloads_compared = Vec::new();
    let mut differences = Vec::new();
    let mut not_measured = Vec::new();
    for name in names {
        let (o, n) = (side_counts(old, name), side_counts(new, name));
        if o.is_empty() || n.is_empty() {
            continue;
        }
        // Every path either side counted, once, in order: sorted, not kept in a tree, as
        // each file's counts are looked up in a hash map, for a file of many paths.
        let mut keys: Vec<&Key> = o.iter().chain(&n).flat_map(|f| f.counts.keys()).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut compared = false;
        for key in keys {
            let (ov, nv) = (values(&o, key), values(&n, key));
            let missing = match (ov.is_empty(), nv.is_empty()) {
                (false, false) => None,
                (true, true) => continue,
                (true, false) => Some(("old", mean(&nv))),
                (false, true) => Some(("new", mean(&ov))),
            };
            if let Some((side, calls_per_op)) = missing {
                // Counted on one side, not looked for on the other: nothing to judge, and
                // nothing worth saying for a path that hardly runs.
                if calls_per_op > MIN_CALLS_PER_OP {
                    not_measured.push(NotMeasured {
                        workload: name.to_string(),
                        kind: key.0,
                        name: key.1.to_string(),
                        side,
                        calls_per_op,
                    });
                }
                continue;
            }
            compared = true;
            if let Some(change) = judge(&ov, &nv) {
                differences.push(CountDifference {
                    workload: name.to_string(),
                    kind: key.0,
                    name: key.1.to_string(),
                    parent: key.2.map(String::from),
                    old_calls_per_op: mean(&ov),
                    new_calls_per_op: mean(&nv),
                    change,
                });
            }
        }
        if compared {
            workloads_compared.push(name.to_string());
        }
    }
    let chosen: [ListOption; 2] = [("hooks", |o| &o.hooks), ("probes", |o| &o.probes)];
    let selection: Vec<String> = chosen
        .into_iter()
        .filter_map(|option| option_difference(old, new, option))
        .collect();
    CallCounts {
        rule: format!(
            "a difference counts when the sides' per-file calls per op are apart by more than \
             {MIN_CALLS_PER_OP} or {}% of the larger count",
            MIN_RELATIVE * 100.0
        ),
        workloads_compared,
        differences,
        selection_note: (!selection.is_empty()).then(|| {
            format!(
                "the sides chose what to probe differently ({}): a path counted on one side \
                 only may not have been looked for on the other",
                selection.join(", ")
            )
        }),
        not_measured,
    }
}

/// `open_close: hook security_file_free (1.00 per op on old) not measured on new`.
pub fn not_measured_line(m: &NotMeasured) -> String {
    let other = if m.side == "old" { "new" } else { "old" };
    format!(
        "{}: {} {} ({} per op on {other}) not measured on {}: its probes did not cover it",
        m.workload,
        m.kind.describe(),
        m.name,
        count(m.calls_per_op),
        m.side
    )
}

/// `open_close: hook security_file_post_open appeared (0 -> 1.00 per op)`.
pub fn difference_line(d: &CountDifference) -> String {
    let parent = d
        .parent
        .as_ref()
        .map(|p| format!(" (under {p})"))
        .unwrap_or_default();
    let change = match d.change {
        CountChange::Appeared => "appeared ",
        CountChange::Disappeared => "disappeared ",
        CountChange::Changed => "",
    };
    format!(
        "{}: {} {}{parent} {change}({} -> {} per op)",
        d.workload,
        d.kind.describe(),
        d.name,
        count(d.old_calls_per_op),
        count(d.new_calls_per_op)
    )
}

/// Calls per op with the two decimals the rule can tell apart (0 stays 0).
pub fn count(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else {
        format!("{v:.2}")
    }
}

/// The section's heading sentence: what was compared and under which rule.
pub fn summary_line(c: &CallCounts) -> String {
    let n = c.workloads_compared.len();
    let plural = if n == 1 { "" } else { "s" };
    match c.differences.len() {
        0 => format!(
            "Call counts per op: no path or task event appears, disappears or changes in the \
             {n} workload{plural} probed on both sides ({}).",
            c.rule
        ),
        d => format!(
            "Call counts per op: {d} difference{} in the {n} workload{plural} probed on both \
             sides ({}; no timing statistics involved):",
            if d == 1 { "" } else { "s" },
            c.rule
        ),
    }
}

/// The section as text lines (none when no workload was probed on both sides).
pub fn lines(c: &CallCounts) -> Vec<String> {
    if c.workloads_compared.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![summary_line(c)];
    lines.extend(
        c.differences
            .iter()
            .map(|d| format!("  {}", difference_line(d))),
    );
    lines.extend(
        c.not_measured
            .iter()
            .map(|m| format!("  {}", not_measured_line(m))),
    );
    if let Some(note) = &c.selection_note {
        lines.push(format!("  Note: {note}."));
    }
    lines
}

/// The section as markdown: the summary, then one bullet per difference.
pub fn markdown(c: &CallCounts) -> String {
    let lines = lines(c);
    let Some((summary, rest)) = lines.split_first() else {
        return String::new();
    };
    let mut out = format!("**{summary}**\n\n");
    for line in rest {
        let _ = writeln!(out, "- {}", line.trim());
    }
    if !rest.is_empty() {
        out.push('\n');
    }
    out
}

/// The section as HTML: the summary, and a table of the differences.
pub fn html(c: &CallCounts) -> String {
    if c.workloads_compared.is_empty() {
        return String::new();
    }
    let mut out = format!("<p><strong>{}</strong></p>\n", esc(&summary_line(c)));
    if !c.differences.is_empty() {
        out.push_str(
            "<table><tr><th>workload</th><th>path</th><th>old calls/op</th>\
             <th>new calls/op</th><th>change</th></tr>\n",
        );
        for d in &c.differences {
            let parent = d.parent.as_ref().map(|p| format!(" (under {p})"));
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{} {}{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&d.workload),
                d.kind.describe(),
                esc(&d.name),
                esc(&parent.unwrap_or_default()),
                count(d.old_calls_per_op),
                count(d.new_calls_per_op),
                match d.change {
                    CountChange::Appeared => "appeared",
                    CountChange::Disappeared => "disappeared",
                    CountChange::Changed => "changed",
                }
            );
        }
        out.push_str("</table>\n");
    }
    for m in &c.not_measured {
        let _ = writeln!(out, "<p>{}</p>", esc(&not_measured_line(m)));
    }
    if let Some(note) = &c.selection_note {
        let _ = writeln!(out, "<p>Note: {}.</p>", esc(note));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::{row, sample_results};

    fn calls(r: &mut Results, name: &str, calls_per_op: f64) {
        let rows = &mut r.workloads[0].attribution;
        match rows.iter_mut().find(|row| row.name == name) {
            Some(row) => row.calls_per_op = calls_per_op,
            None => rows.push(row(PathKind::Hook, name, None, calls_per_op, 100.0)),
        }
    }

    #[test]
    fn a_hook_that_appears_and_one_called_twice_as_often_are_facts() {
        // The old side timed security_file_post_open and never saw it called.
        let old = timed(sample_results(), "security_file_post_open");
        let mut new = sample_results();
        calls(&mut new, "security_file_post_open", 1.0);
        calls(&mut new, "security_file_open", 2.0);
        // The old side counted task events (fork, exit) but never an exec.
        new.workloads[0].events_per_op.insert("exec".into(), 1.0);
        let (old, new) = (with_task_probes(old), with_task_probes(new));
        let c = call_counts(&[old], &[new]);
        assert_eq!(c.workloads_compared, ["open_close"]);
        let lines: Vec<String> = c.differences.iter().map(difference_line).collect();
        assert_eq!(
            lines,
            [
                "open_close: hook security_file_open (1.00 -> 2.00 per op)",
                "open_close: hook security_file_post_open appeared (0 -> 1.00 per op)",
                "open_close: task event exec appeared (0 -> 1.00 per op)",
            ]
        );
        assert_eq!(c.differences[0].change, CountChange::Changed);
        assert_eq!(c.selection_note, None);
    }

    fn with_task_probes(mut r: Results) -> Results {
        for event in TASK_EVENTS {
            r.probes.attached.push(crate::results::ProbeRecord {
                kind: crate::results::ProbeKind::TpBtf,
                target: format!("sched_process_{event}"),
            });
        }
        r
    }

    #[test]
    fn task_events_without_their_tracepoints_are_not_counted() {
        // The old run had no task tracepoints: its zero execs say nothing.
        let mut new = with_task_probes(sample_results());
        new.workloads[0].events_per_op.insert("exec".into(), 1.0);
        let c = call_counts(&[sample_results()], &[new]);
        assert!(c.differences.is_empty(), "{:?}", c.differences);
    }

    #[test]
    fn counts_equal_beyond_rounding_show_nothing() {
        let old = sample_results();
        let mut new = sample_results();
        // 0.5% more calls on a path taken once per op, and a background path 0.004 per op.
        calls(&mut new, "security_file_open", 1.005);
        calls(&mut new, "security_inode_getattr", 0.004);
        let c = call_counts(&[old], &[new]);
        assert_eq!(c.workloads_compared, ["open_close"]);
        assert!(c.differences.is_empty(), "{:?}", c.differences);
        assert!(summary_line(&c).contains("no path or task event appears"));
    }

    /// `r` with a timing pair attached to `function`, as a run that probed it records.
    fn timed(mut r: Results, function: &str) -> Results {
        r.probes.attached.push(crate::results::ProbeRecord {
            kind: ProbeKind::FEntry,
            target: function.into(),
        });
        r
    }

    #[test]
    fn a_hook_gone_is_a_fact_but_a_kind_one_side_did_not_probe_is_not() {
        let old = timed(sample_results(), "security_file_free");
        let mut new = timed(sample_results(), "security_file_free");
        new.workloads[0]
            .attribution
            .retain(|r| r.name != "security_file_free");
        let c = call_counts(std::slice::from_ref(&old), std::slice::from_ref(&new));
        assert_eq!(c.differences.len(), 1);
        assert_eq!(c.differences[0].change, CountChange::Disappeared);
        assert_eq!(c.differences[0].old_calls_per_op, 1.0);
        // Without hook rows or timing pairs, the new side says nothing about hooks: only
        // syscalls compare, and the hooks it never looked for are said to be not measured.
        new.workloads[0]
            .attribution
            .retain(|r| r.kind == PathKind::Syscall);
        new.probes.attached.retain(|a| a.kind != ProbeKind::FEntry);
        let c = call_counts(&[old], &[new]);
        assert!(c.differences.is_empty(), "{:?}", c.differences);
        // build is clean only on both sides: nothing to compare.
        assert_eq!(c.workloads_compared, ["open_close"]);
        assert!(c.not_measured.iter().all(|m| m.side == "new"));
        assert!(c
            .not_measured
            .iter()
            .any(|m| m.name == "security_file_free"));
    }

    #[test]
    fn a_function_the_plan_left_out_on_one_side_is_not_measured_there_never_gone() {
        // Both sides timed hooks; the new side's plan did not pick security_file_free.
        let old = timed(sample_results(), "security_file_free");
        let mut new = sample_results();
        new.workloads[0]
            .attribution
            .retain(|r| r.name != "security_file_free");
        for (old, new) in [(&old, &new), (&new, &old)] {
            let c = call_counts(std::slice::from_ref(old), std::slice::from_ref(new));
            assert!(
                c.differences.iter().all(|d| d.name != "security_file_free"),
                "{:?}",
                c.differences
            );
            let m = c
                .not_measured
                .iter()
                .find(|m| m.name == "security_file_free")
                .expect("said to be not measured");
            let text = lines(&c).join("\n");
            assert!(
                !text.contains("disappeared") && !text.contains("appeared"),
                "{text}"
            );
            let on = if m.side == "new" { "new" } else { "old" };
            assert!(
                text.contains(&format!(
                    "security_file_free (1.00 per op on {}) not measured on {on}",
                    if on == "new" { "old" } else { "new" }
                )),
                "{text}"
            );
        }
    }

    #[test]
    fn a_side_s_own_spread_between_files_is_not_a_difference() {
        let files = |counts: &[f64]| -> Vec<Results> {
            counts
                .iter()
                .map(|&n| {
                    let mut r = sample_results();
                    calls(&mut r, "security_file_open", n);
                    r
                })
                .collect()
        };
        // Old files span 1.00..1.10; new 1.11 is 0.01 beyond, within 1% of 1.11.
        let c = call_counts(&files(&[1.0, 1.1]), &files(&[1.11, 1.11]));
        assert!(c.differences.is_empty(), "{:?}", c.differences);
        let c = call_counts(&files(&[1.0, 1.1]), &files(&[1.2, 1.3]));
        assert_eq!(c.differences.len(), 1);
        assert!((c.differences[0].old_calls_per_op - 1.05).abs() < 1e-12);
        assert!((c.differences[0].new_calls_per_op - 1.25).abs() < 1e-12);
    }

    #[test]
    fn a_different_hook_selection_is_said() {
        let mut old = sample_results();
        let mut new = sample_results();
        old.options.hooks = vec!["default".into()];
        new.options.hooks = vec!["all".into()];
        let c = call_counts(&[old], &[new]);
        let note = c.selection_note.unwrap();
        assert!(note.contains("--hooks default -> all"), "{note}");
    }

    #[test]
    fn every_format_lists_the_differences_before_any_verdict() {
        let old = timed(sample_results(), "security_file_post_open");
        let mut new = sample_results();
        new.environment.kernel_release = "6.12.0-1-amd64".into();
        calls(&mut new, "security_file_post_open", 1.0);
        let c = crate::compare::compare(&[old], &[new], &Default::default()).unwrap();
        let fact = "open_close: hook security_file_post_open appeared (0 -> 1.00 per op)";
        let before_verdicts = |out: &str, fact: &str, first_verdict: &str| {
            let at = out.find(fact).unwrap_or_else(|| panic!("{out}"));
            assert!(at < out.find(first_verdict).expect(first_verdict), "{out}");
        };
        let text = crate::compare::render_text(&c);
        before_verdicts(&text, fact, "p-values are Holm-adjusted");
        let markdown = crate::compare::render_markdown(&c);
        before_verdicts(&markdown, fact, "| workload |");
        let html = crate::compare::render_html(&c);
        let row = "<td>hook security_file_post_open</td><td>0</td><td>1.00</td><td>appeared</td>";
        before_verdicts(&html, row, "<th>p (Holm)</th>");
        let xml = crate::compare::render_junit(&c);
        before_verdicts(&xml, &esc(fact), "name=\"open_close\"");
        assert!(xml.contains("tests=\"3\""), "{xml}");
        let json = serde_json::to_value(&c).unwrap();
        assert_eq!(
            json["call_counts"]["differences"][0]["change"],
            serde_json::json!("appeared")
        );
    }

    #[test]
    fn nothing_is_said_when_no_workload_was_probed_on_both_sides() {
        let old = sample_results();
        let mut new = sample_results();
        new.workloads[0].attribution.clear();
        new.workloads[0].events_per_op.clear();
        let c = crate::compare::compare(&[old], &[new], &Default::default()).unwrap();
        assert!(c.call_counts.workloads_compared.is_empty());
        assert!(!crate::compare::render_text(&c).contains("Call counts"));
        assert!(!crate::compare::render_markdown(&c).contains("Call counts"));
    }
}
