//! Facts before statistics: the paths (hooks, LSM functions, syscalls, task paths) and task
//! events (fork, exec, exit) that appear, disappear or run a different number of times per op
//! between the sides. A count is not a timing: it needs no test and holds under emulation, so
//! it is shown before any verdict.
//!
//! A file records a path's calls per op as a mean over all its probed ops (no per-sample
//! counts), so "beyond rounding" is judged against that resolution and the spread of the
//! side's own files: the two sides differ when the gap between their ranges of per-file values
//! exceeds [`MIN_CALLS_PER_OP`] or [`MIN_RELATIVE`] of the larger count, whichever is larger.
use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write,
};

use serde::Serialize;

use crate::{
    results::{PathKind, Results, RunOptions, WorkloadResult},
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counted {
    Syscall,
    Hook,
    Lsm,
    TaskPath,
    /// fork, exec or exit per op (from the task tracepoints).
    TaskEvent,
}

impl Counted {
    fn of(kind: PathKind) -> Counted {
        match kind {
            PathKind::Syscall => Counted::Syscall,
            PathKind::Hook => Counted::Hook,
            PathKind::Lsm => Counted::Lsm,
            PathKind::TaskPath => Counted::TaskPath,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Counted::Syscall => "syscall",
            Counted::Hook => "hook",
            Counted::Lsm => "LSM function",
            Counted::TaskPath => "task path",
            Counted::TaskEvent => "task event",
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
}

type Key = (Counted, String, Option<String>);

/// One file's counts for one workload, and the kinds it counted at all (a kind it did not
/// count says nothing about the paths of that kind). Task events count only where the file's
/// probes include all three task tracepoints: without them the counters stay at 0.
fn counts_of(w: &WorkloadResult, tasks_probed: bool) -> (BTreeSet<Counted>, BTreeMap<Key, f64>) {
    let mut kinds = BTreeSet::new();
    let mut counts = BTreeMap::new();
    for r in &w.attribution {
        let kind = Counted::of(r.kind);
        kinds.insert(kind);
        *counts
            .entry((kind, r.name.clone(), r.parent.clone()))
            .or_insert(0.0) += r.calls_per_op;
    }
    for event in TASK_EVENTS.iter().filter(|_| tasks_probed) {
        if let Some(&n) = w.events_per_op.get(*event) {
            kinds.insert(Counted::TaskEvent);
            counts.insert((Counted::TaskEvent, event.to_string(), None), n);
        }
    }
    (kinds, counts)
}

/// True if the run attached the fork, exec and exit tracepoints.
fn tasks_probed(r: &Results) -> bool {
    TASK_EVENTS.iter().all(|event| {
        let target = format!("sched_process_{event}");
        r.probes.attached.iter().any(|a| a.target == target)
    })
}

/// Each file's counts of workload `name` on one side.
fn side_counts(side: &[Results], name: &str) -> Vec<(BTreeSet<Counted>, BTreeMap<Key, f64>)> {
    side.iter()
        .flat_map(|r| {
            let tasks = tasks_probed(r);
            r.workloads
                .iter()
                .filter(|w| w.name == name)
                .map(move |w| counts_of(w, tasks))
        })
        .filter(|(kinds, _)| !kinds.is_empty())
        .collect()
}

/// The values of `key` in the files that counted its kind (0 where it was never called).
fn values(files: &[(BTreeSet<Counted>, BTreeMap<Key, f64>)], key: &Key) -> Vec<f64> {
    files
        .iter()
        .filter(|(kinds, _)| kinds.contains(&key.0))
        .map(|(_, counts)| counts.get(key).copied().unwrap_or(0.0))
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
    for name in names {
        let (o, n) = (side_counts(old, name), side_counts(new, name));
        let kinds = |files: &[(BTreeSet<Counted>, _)]| -> BTreeSet<Counted> {
            files.iter().flat_map(|(k, _)| k.iter().copied()).collect()
        };
        let both: BTreeSet<Counted> = kinds(&o).intersection(&kinds(&n)).copied().collect();
        if both.is_empty() {
            continue;
        }
        workloads_compared.push(name.to_string());
        let keys: BTreeSet<&Key> = o
            .iter()
            .chain(&n)
            .flat_map(|(_, counts)| counts.keys())
            .filter(|key| both.contains(&key.0))
            .collect();
        for key in keys {
            let (ov, nv) = (values(&o, key), values(&n, key));
            if let Some(change) = judge(&ov, &nv) {
                differences.push(CountDifference {
                    workload: name.to_string(),
                    kind: key.0,
                    name: key.1.clone(),
                    parent: key.2.clone(),
                    old_calls_per_op: mean(&ov),
                    new_calls_per_op: mean(&nv),
                    change,
                });
            }
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
    }
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
        let old = sample_results();
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

    #[test]
    fn a_hook_gone_is_a_fact_but_a_kind_one_side_did_not_probe_is_not() {
        let old = sample_results();
        let mut new = sample_results();
        new.workloads[0]
            .attribution
            .retain(|r| r.name != "security_file_free");
        let c = call_counts(std::slice::from_ref(&old), std::slice::from_ref(&new));
        assert_eq!(c.differences.len(), 1);
        assert_eq!(c.differences[0].change, CountChange::Disappeared);
        assert_eq!(c.differences[0].old_calls_per_op, 1.0);
        // Without hook rows, the new side says nothing about hooks: only syscalls compare.
        new.workloads[0]
            .attribution
            .retain(|r| r.kind == PathKind::Syscall);
        let c = call_counts(&[old], &[new]);
        assert!(c.differences.is_empty(), "{:?}", c.differences);
        // build is clean only on both sides: nothing to compare.
        assert_eq!(c.workloads_compared, ["open_close"]);
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
        let old = sample_results();
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
