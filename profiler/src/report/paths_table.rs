//! A workload's one table of where its op goes: every path once, nested as it runs (a hook or
//! task path under the syscall most of its samples ran in, an LSM function under its hook, a
//! task path's steps under it), each method's figures in columns of their own (timed where a
//! probe pair timed the path, sampled where kernel stacks caught it), and one whole, named in
//! the heading, that every share is of. Each time column has its own unit and every figure
//! the digits its 95% interval allows. Text, markdown and HTML print this table.
use std::{
    collections::{HashMap, VecDeque},
    fmt::Write,
};

use super::{
    figures::{num, num_within, Scale},
    long_table,
    markup::Markup,
};
use crate::{
    attribution::{Breakdown, PathShare},
    results::{
        AttributionRow, CorrectionMethod, PathKind, SampledPath, StackProfile, Unit, WorkloadResult,
    },
    stats,
    stats::shares::{self, RoundCount},
    text::esc,
};

/// The table as every markup prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct PathsTable {
    /// What the shares are of (named, with its ns per op) and what each method's columns
    /// hold.
    pub heading: Vec<String>,
    /// The columns with something in them.
    pub header: Vec<String>,
    pub rows: Vec<PathLine>,
    /// Sentences under the table: a call that never returns, and what says its time.
    pub notes: Vec<String>,
}

/// One path's line: its cells in the header's order.
#[derive(Debug, Clone, PartialEq)]
pub struct PathLine {
    pub kind: PathKind,
    /// 0 for a path under no other row; one more for each row it runs inside.
    pub depth: usize,
    pub name: String,
    pub cells: Vec<String>,
}

/// What each method has of one path.
struct Node<'a> {
    kind: PathKind,
    name: &'a str,
    /// The row this one runs inside, by index, once the tree is made.
    parent: Option<usize>,
    /// An LSM function whose hook has no row: that hook.
    under: Option<&'a str>,
    timed: Option<PathShare<'a>>,
    /// The half-width of the 95% interval of the timed ns per op, worked out once: several
    /// columns show it.
    timed_half: Option<f64>,
    sampled: Option<&'a SampledPath>,
}

impl<'a> Node<'a> {
    /// The timed figures, where a probe pair timed the path's calls.
    fn timed_span(&self) -> Option<PathShare<'a>> {
        self.timed.filter(|_| !self.never_returns())
    }

    /// What orders rows of one level: the sampled figure where there is one (the same
    /// method for every row of a profile), else the timed one.
    fn size(&self) -> f64 {
        self.sampled
            .map(|s| s.ns_per_op)
            .or(self.timed.map(|t| t.ns_per_op))
            .unwrap_or(0.0)
    }

    /// A call counted on entry and never timed: no exit ends its span (exit_group).
    fn never_returns(&self) -> bool {
        self.timed.is_some_and(|t| never_returns(t.row))
    }
}

/// Counted calls, none of them timed, and some without an exit to match.
fn never_returns(r: &AttributionRow) -> bool {
    r.calls_per_op > 0.0 && r.ns_per_call == 0.0 && r.untimed_calls > 0
}

/// A figure and the half-width of its 95% interval, where known.
#[derive(Debug, Clone, Copy)]
struct Figure {
    value: f64,
    half: Option<f64>,
}

/// What one cell holds before its column's unit is chosen.
enum Value {
    Empty,
    Count(f64),
    Time(Figure),
    /// A time with words after it (how a correction was made).
    TimeWith(Figure, String),
    Words(String),
    Share(Figure),
    /// A share's 95% interval, with the digits of the share it is of.
    Interval(Figure, f64, f64),
}

impl Value {
    fn says_something(&self) -> bool {
        match self {
            Value::Empty => false,
            Value::Time(f) => f.value != 0.0,
            _ => true,
        }
    }
}

/// A column: its heading (`{unit}` stands for the time unit chosen for it) and its cells.
struct Column {
    heading: &'static str,
    values: Vec<Value>,
}

/// The deepest a path is indented: deeper than any kernel nests its paths (syscall, hook, LSM
/// function; a task path's steps), so only a forged file's chain is drawn flatter, and its
/// table stays linear in size, not in rows times depth.
const DEEPEST_SHOWN: usize = 8;

impl PathsTable {
    /// The table of `w`'s timed rows and sampled paths; None with neither.
    pub fn of(w: &WorkloadResult) -> Option<PathsTable> {
        let breakdown = Breakdown::of(w);
        let profile = w.profile.as_ref().filter(|p| !p.paths.is_empty());
        if breakdown.is_none() && profile.is_none() {
            return None;
        }
        let nodes = nodes(breakdown.as_ref(), profile.map(|p| &p.paths[..]));
        let order = display_order(&nodes);
        let columns = columns(&nodes, &order, breakdown.as_ref(), profile.is_some());
        // A column with nothing in it, or nothing but zeros (no call waited), says nothing.
        let kept: Vec<&Column> = columns
            .iter()
            .filter(|c| c.values.iter().any(Value::says_something))
            .collect();
        let scales: Vec<Scale> = kept.iter().map(|c| time_scale(c)).collect();
        let header = kept
            .iter()
            .zip(&scales)
            .map(|(c, scale)| c.heading.replace("{unit}", scale.symbol))
            .collect();
        let rows: Vec<PathLine> = order
            .iter()
            .enumerate()
            .map(|(line, &(i, depth))| {
                let n = &nodes[i];
                PathLine {
                    kind: n.kind,
                    depth: depth.min(DEEPEST_SHOWN),
                    name: match n.under {
                        Some(hook) => format!("{} (under {hook})", n.name),
                        None => n.name.to_string(),
                    },
                    cells: kept
                        .iter()
                        .zip(&scales)
                        .map(|(c, scale)| show(&c.values[line], *scale))
                        .collect(),
                }
            })
            .collect();
        let heading = heading(breakdown.as_ref(), profile, &rows);
        let mut notes: Vec<String> = nodes
            .iter()
            .filter(|n| n.never_returns())
            .map(|n| never_returns_note(n))
            .collect();
        if let Some(p) = profile {
            notes.extend(p.paths.iter().filter_map(|path| varies_note(path, p)));
        }
        Some(PathsTable {
            heading,
            header,
            rows,
            notes,
        })
    }

    /// Text or markdown: the heading, the table, the notes.
    pub fn render(&self, markup: Markup) -> String {
        let mut out = String::new();
        for line in &self.heading {
            let _ = writeln!(out, "{line}");
        }
        if markup == Markup::Markdown {
            out.push('\n'); // a table does not interrupt a paragraph
        }
        let mut header = vec!["kind", "path"];
        header.extend(self.header.iter().map(String::as_str));
        let names: Vec<String> = self.rows.iter().map(|r| shown_name(markup, r)).collect();
        let _ = writeln!(out, "{}", self.table(markup, &header, &names));
        if markup == Markup::Markdown && !self.notes.is_empty() {
            out.push('\n');
        }
        for note in &self.notes {
            let _ = writeln!(out, "{note}");
        }
        out
    }

    /// The table itself, `names` the rows' paths as `markup` shows them: by comfy-table, or
    /// laid out the same way in one string where the rows are too many for its cost per cell.
    fn table(&self, markup: Markup, header: &[&str], names: &[String]) -> String {
        if self.rows.len() > long_table::LONG {
            let rows: Vec<Vec<&str>> = self
                .rows
                .iter()
                .zip(names)
                .map(|(r, n)| row_cells(r, n))
                .collect();
            if let Some(laid_out) = long_table::render(markup, header, &rows, 2) {
                return laid_out;
            }
        }
        let mut table = markup.table(header);
        for row in self.rows.iter().zip(names).map(|(r, n)| row_cells(r, n)) {
            table.add_row(row);
        }
        markup.align_numbers(&mut table, 2);
        table.to_string()
    }

    /// The same table as HTML: the heading its caption, nested names indented.
    pub fn html(&self) -> String {
        let mut out = format!(
            "<table class=\"paths\"><caption>{}</caption>\n<tr><th>path</th><th>kind</th>",
            self.heading
                .iter()
                .map(|l| esc(l))
                .collect::<Vec<_>>()
                .join("<br>")
        );
        for h in &self.header {
            let _ = write!(out, "<th>{}</th>", esc(h));
        }
        out.push_str("</tr>\n");
        for r in &self.rows {
            let _ = write!(
                out,
                "<tr><td style=\"padding-left:{:.1}em\">{}{}</td><td>{}</td>",
                0.5 + 1.5 * r.depth as f64,
                if r.depth > 0 { "└ " } else { "" },
                esc(&r.name),
                r.kind.name()
            );
            for c in &r.cells {
                let _ = write!(out, "<td>{}</td>", esc(c));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        for note in &self.notes {
            let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(note));
        }
        out
    }
}

/// A row's cells: its kind, its path as shown (`name`), its figures.
fn row_cells<'a>(r: &'a PathLine, name: &'a str) -> Vec<&'a str> {
    let mut cells = vec![r.kind.name(), name];
    cells.extend(r.cells.iter().map(String::as_str));
    cells
}

/// A row's path as `markup` shows it: indented by its depth.
fn shown_name(markup: Markup, r: &PathLine) -> String {
    match (markup, r.depth) {
        (Markup::Terminal, d) => format!("{}{}", "  ".repeat(d), r.name),
        (Markup::Markdown, 0) => format!("`{}`", r.name),
        // Markdown collapses spaces: no-break ones indent inside the code span.
        (Markup::Markdown, d) => format!("`{}└ {}`", "\u{a0}\u{a0}".repeat(d - 1), r.name),
    }
}

/// Every path once: the timed rows (the breakdown's) and the sampled paths matched by kind and
/// name, each with the row it runs inside.
fn nodes<'a>(b: Option<&Breakdown<'a>>, sampled: Option<&'a [SampledPath]>) -> Vec<Node<'a>> {
    let mut nodes: Vec<Node<'a>> = Vec::new();
    for t in b.map(|b| &b.paths[..]).unwrap_or_default() {
        nodes.push(Node {
            kind: t.row.kind,
            name: &t.row.name,
            parent: None,
            under: None,
            timed: Some(*t),
            timed_half: interval_half(&t.row.samples_ns_per_op),
            sampled: None,
        });
    }
    // The timed nodes each sampled path may join, by kind and name, first first: looked up,
    // not scanned, so a file of many paths is tabled in linear time.
    let sampled = sampled.unwrap_or_default();
    let mut unmatched: HashMap<(PathKind, &str), VecDeque<usize>> = HashMap::new();
    if !sampled.is_empty() {
        unmatched.reserve(nodes.len());
        for (at, n) in nodes.iter().enumerate() {
            unmatched.entry((n.kind, n.name)).or_default().push_back(at);
        }
    }
    for s in sampled {
        let timed = unmatched
            .get_mut(&(s.kind, s.name.as_str()))
            .and_then(VecDeque::pop_front);
        match timed {
            Some(at) => nodes[at].sampled = Some(s),
            None => nodes.push(Node {
                kind: s.kind,
                name: &s.name,
                parent: None,
                under: None,
                timed: None,
                timed_half: None,
                sampled: Some(s),
            }),
        }
    }
    let mut first: HashMap<(PathKind, &str), usize> = HashMap::with_capacity(nodes.len());
    for (at, n) in nodes.iter().enumerate() {
        first.entry((n.kind, n.name)).or_insert(at);
    }
    let find = |kind: PathKind, name: &str| first.get(&(kind, name)).copied();
    let links: Vec<(Option<usize>, Option<&'a str>)> = nodes
        .iter()
        .map(|n| {
            let named_parent = n
                .timed
                .and_then(|t| t.row.parent.as_deref())
                .or(n.sampled.and_then(|s| s.parent.as_deref()));
            match n.kind {
                PathKind::Syscall => (None, None),
                PathKind::Lsm => match named_parent {
                    Some(hook) => match find(PathKind::Hook, hook) {
                        Some(i) => (Some(i), None),
                        None => (None, Some(hook)),
                    },
                    None => (None, None),
                },
                PathKind::TaskPath if named_parent.is_some() => {
                    (named_parent.and_then(|p| find(PathKind::TaskPath, p)), None)
                }
                PathKind::Hook
                | PathKind::TaskPath
                | PathKind::Seccomp
                | PathKind::Audit
                | PathKind::Netfilter
                | PathKind::BpfProgram => (
                    n.sampled
                        .and_then(|s| s.syscall.as_deref())
                        .and_then(|call| find(PathKind::Syscall, call)),
                    None,
                ),
            }
        })
        .collect();
    for (n, (parent, under)) in nodes.iter_mut().zip(links) {
        n.parent = parent;
        n.under = under;
    }
    nodes
}

/// The kinds of a level in the order they are listed.
fn kind_rank(kind: PathKind) -> usize {
    match kind {
        PathKind::Syscall => 0,
        PathKind::Hook => 1,
        PathKind::TaskPath => 2,
        PathKind::Seccomp => 3,
        PathKind::Audit => 4,
        PathKind::Netfilter => 5,
        PathKind::BpfProgram => 6,
        PathKind::Lsm => 7,
    }
}

/// Each node's index and depth, parents before their children, each level by kind and then
/// by size.
fn display_order(nodes: &[Node]) -> Vec<(usize, usize)> {
    // Each node's children listed once (the roots last), so the walk is linear in nodes; an
    // explicit stack, so a forged chain of task paths nested a million deep cannot overflow.
    let roots = nodes.len();
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); roots + 1];
    for (i, n) in nodes.iter().enumerate() {
        children[n.parent.unwrap_or(roots)].push(i);
    }
    for level in &mut children {
        level.sort_by(|&a, &b| {
            kind_rank(nodes[a].kind)
                .cmp(&kind_rank(nodes[b].kind))
                .then(nodes[b].size().total_cmp(&nodes[a].size()))
                .then(nodes[a].name.cmp(nodes[b].name))
        });
    }
    let mut out = Vec::with_capacity(nodes.len());
    let mut stack: Vec<(usize, usize)> = children[roots].iter().rev().map(|&i| (i, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        out.push((i, depth));
        stack.extend(children[i].iter().rev().map(|&c| (c, depth + 1)));
    }
    out
}

/// How the unprobed op's CPU time was counted: by the samples of the passes for the stacks
/// alone, with what their sampling added to the op's time.
pub fn unprobed_whole(p: &StackProfile) -> String {
    let passes = p.stack_passes.as_ref();
    let cost = passes.and_then(|s| s.sampling_cost);
    let half = passes.and_then(|s| s.sampling_cost_half_width);
    let counted = "as the passes for the stacks alone counted it";
    match (cost, half) {
        (Some(c), Some(h)) if c.abs() <= h => format!(
            "{counted}, whose sampling's cost to the op is within noise (+-{:.1}% of the clean op)",
            h * 100.0
        ),
        (Some(c), Some(h)) if c > 0.0 => format!(
            "{counted}, whose sampling made the op {:.1}% slower than the clean one (+-{:.1}%)",
            c * 100.0,
            h * 100.0
        ),
        (Some(c), Some(h)) => format!(
            "{counted}, which ran {:.1}% faster than the clean passes (+-{:.1}%): the two ran \
             under different conditions",
            -c * 100.0,
            h * 100.0
        ),
        // A file from before the interval was kept: its figure, clamped at 0, says nothing
        // below it.
        (Some(c), None) if c > 0.0 => format!(
            "{counted}, whose sampling made the op {:.1}% slower than the clean one",
            c * 100.0
        ),
        _ => counted.into(),
    }
}

/// The whole every share is of, named with its size, and what each method's columns hold.
fn heading(
    b: Option<&Breakdown>,
    profile: Option<&StackProfile>,
    rows: &[PathLine],
) -> Vec<String> {
    let time = |ns: f64| Scale::of(Unit::Nanoseconds, ns).show(ns);
    let whole = match (profile, b) {
        (Some(p), _) if p.of_unprobed_op() => format!(
            "shares of the unprobed op's own CPU time, {}, {}",
            time(p.own_ns_per_op()),
            unprobed_whole(p)
        ),
        (Some(p), _) => format!(
            "shares of the op's own CPU time, {}, the probes' samples left out",
            time(p.own_ns_per_op())
        ),
        (None, Some(b)) => format!("shares {}, {}", b.whole.of(), time(b.whole_ns)),
        (None, None) => unreachable!("a table has a breakdown or a profile"),
    };
    let mut lines = vec![format!(
        "Paths per op (each runs inside the one it is indented under); {whole}"
    )];
    if b.is_some() && profile.is_some() {
        lines.push(
            "timed: enter to exit by a probe pair, the probes' cost in it; sampled: share x that \
             CPU time"
                .into(),
        );
    }
    // A hook or task path no syscall row holds still ran in a syscall: beside the syscalls'
    // rows it is part of their time, and the rows at the left edge do not add up.
    let top = |kind: PathKind| rows.iter().any(|r| r.depth == 0 && r.kind == kind);
    if top(PathKind::Syscall) && (top(PathKind::Hook) || top(PathKind::TaskPath)) {
        lines.push(
            "hooks and task paths at the left edge ran inside the syscalls (in no one syscall \
             mostly, or none was sampled): their time is part of the syscalls', not beside it"
                .into(),
        );
    }
    lines
}

/// Every column the table may have, in order, each cell in `order`'s order.
fn columns(
    nodes: &[Node],
    order: &[(usize, usize)],
    b: Option<&Breakdown>,
    sampled: bool,
) -> Vec<Column> {
    let rows: Vec<&Node> = order.iter().map(|&(i, _)| &nodes[i]).collect();
    let column = |heading: &'static str, value: &dyn Fn(&Node) -> Value| Column {
        heading,
        values: rows.iter().map(|n| value(n)).collect(),
    };
    let per_op = |n: &Node, t: &PathShare| Figure {
        value: t.ns_per_op,
        half: n.timed_half,
    };
    let mut columns = vec![
        column("calls/op", &|n| {
            n.timed
                .map_or(Value::Empty, |t| Value::Count(t.row.calls_per_op))
        }),
        column("timed {unit}/call", &|n| match n.timed_span() {
            Some(t) => Value::Time(Figure {
                value: t.row.ns_per_call,
                half: None,
            }),
            None => Value::Empty,
        }),
        column("timed {unit}/op", &|n| match n.timed_span() {
            Some(t) => Value::Time(per_op(n, &t)),
            None if n.never_returns() => Value::Words("never returns".into()),
            None => Value::Empty,
        }),
        column(
            "wait {unit}/op",
            &|n| match n.timed_span().and_then(|t| t.row.off_cpu_ns_per_op) {
                Some(ns) => Value::Time(Figure {
                    value: ns,
                    half: None,
                }),
                None => Value::Empty,
            },
        ),
        column("corrected {unit}/op", &|n| match n.timed_span() {
            Some(t) if corrected(t.row) => Value::TimeWith(
                Figure {
                    value: t.row.corrected_ns_per_op,
                    half: None,
                },
                correction_words(t.row),
            ),
            _ => Value::Empty,
        }),
        column("sampled {unit}/op", &|n| match n.sampled {
            Some(s) => Value::Time(Figure {
                value: s.ns_per_op,
                half: Some((s.ns_per_op_high - s.ns_per_op_low) / 2.0),
            }),
            None => Value::Empty,
        }),
    ];
    let share = |n: &Node| -> Option<Figure> {
        if sampled {
            n.sampled.map(|s| Figure {
                value: s.inclusive_share,
                half: Some((s.share_high - s.share_low) / 2.0),
            })
        } else {
            let whole = b.map_or(1.0, |b| b.whole_ns);
            n.timed_span().map(|t| Figure {
                value: t.share,
                half: per_op(n, &t).half.map(|h| h / whole),
            })
        }
    };
    columns.push(column("share", &|n| {
        share(n).map_or(Value::Empty, Value::Share)
    }));
    columns.push(column("95% interval", &|n| match (n.sampled, share(n)) {
        (Some(s), Some(f)) if sampled => Value::Interval(f, s.share_low, s.share_high),
        _ => Value::Empty,
    }));
    columns.push(column("self", &|n| match (n.sampled, share(n)) {
        (Some(s), Some(f)) if sampled => Value::Share(Figure {
            value: s.self_share,
            half: f.half,
        }),
        _ => Value::Empty,
    }));
    columns
}

/// The half-width of the 95% interval of a mean over `samples`, where they give one.
fn interval_half(samples: &[f64]) -> Option<f64> {
    stats::summarize(samples)
        .filter(|s| s.ci.is_some())
        .map(|s| s.ci_half_width())
}

/// A time column's unit: the one that puts its largest figure between 1 and 1000.
fn time_scale(c: &Column) -> Scale {
    let largest = c
        .values
        .iter()
        .filter_map(|v| match v {
            Value::Time(f) | Value::TimeWith(f, _) => Some(f.value.abs()),
            _ => None,
        })
        .fold(0.0, f64::max);
    Scale::of(Unit::Nanoseconds, largest)
}

fn show(v: &Value, scale: Scale) -> String {
    let time = |f: &Figure| scale.number_within(f.value, f.half);
    match v {
        Value::Empty => String::new(),
        Value::Count(n) => num(*n),
        Value::Time(f) => time(f),
        Value::TimeWith(f, words) => format!("{} {words}", time(f)),
        Value::Words(w) => w.clone(),
        Value::Share(f) => percent_within(f.value, f.half),
        Value::Interval(f, low, high) => format!(
            "{}-{}",
            percent_within(*low, f.half),
            percent_within(*high, f.half)
        ),
    }
}

/// A share as a percentage, with the digits its interval's half-width allows (one decimal
/// without an interval).
fn percent_within(share: f64, half: Option<f64>) -> String {
    match half {
        Some(h) if h > 0.0 => format!("{}%", num_within(share * 100.0, Some(h * 100.0))),
        _ => format!("{:.1}%", share * 100.0),
    }
}

/// A row whose probes' cost was taken out.
fn corrected(r: &AttributionRow) -> bool {
    r.kind != PathKind::Syscall && r.correction.is_some()
}

/// How the correction was made, and a hook's own dispatch cost beside its LSM functions.
fn correction_words(r: &AttributionRow) -> String {
    let method = r.correction.map_or("", CorrectionMethod::label);
    match r.dispatch_ns_per_op {
        Some(d) => format!("{method} (dispatch {} ns)", num(d)),
        None => method.to_string(),
    }
}

/// A sampled path whose share moves between rounds (each a fresh runner process) more than
/// its samples' noise explains, said on that path: its interval spans the rounds', and a
/// profiler that samples one process reads one of those shares.
fn varies_note(path: &SampledPath, profile: &StackProfile) -> Option<String> {
    if path.round_samples.len() != profile.round_samples.len() {
        return None;
    }
    let rounds: Vec<RoundCount> = path
        .round_samples
        .iter()
        .zip(&profile.round_samples)
        .map(|(&path, &all)| RoundCount { path, all })
        .collect();
    let (low, high) = shares::varies_between_rounds(&rounds)?;
    let name = match &path.parent {
        Some(parent) => format!("{} (under {parent})", path.name),
        None => path.name.clone(),
    };
    Some(format!(
        "{name} varies between runner processes: {}-{} of the op's sampled CPU time across \
         rounds, more than its samples' noise explains (its interval spans the rounds')",
        percent_within(low, None),
        percent_within(high, None)
    ))
}

/// `exit_group never returns: no exit ends its span, so it is not timed; ...`.
fn never_returns_note(n: &Node) -> String {
    match n.sampled {
        Some(s) => format!(
            "{} never returns: no exit ends its span, so no probe pair times it; the sampled \
             stacks put {} ns/op in it ({:.1}% of the op's own CPU time)",
            n.name,
            num(s.ns_per_op),
            s.inclusive_share * 100.0
        ),
        None => format!(
            "{} never returns: no exit ends its span, so no probe pair times it; sampled \
             stacks (--probes stacks) would say what it costs",
            n.name
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::{accounting, row, sample_results};

    fn sampled(kind: PathKind, name: &str, parent: Option<&str>, share: f64) -> SampledPath {
        let own_ns = 4000.0;
        SampledPath {
            kind,
            name: name.into(),
            parent: parent.map(String::from),
            lsm: None,
            syscall: None,
            inclusive_samples: (share * 1000.0) as u64,
            self_samples: 0,
            inclusive_share: share,
            share_low: share - 0.05,
            share_high: share + 0.05,
            self_share: 0.0,
            ns_per_op: share * own_ns,
            ns_per_op_low: (share - 0.05) * own_ns,
            ns_per_op_high: (share + 0.05) * own_ns,
            spanned_samples: 0,
            spanned_ns_per_op: 0.0,
            round_samples: Vec::new(),
        }
    }

    /// open_close timed (openat, a hook and its LSM function, another hook) with exit_group
    /// counted and never timed, and sampled stacks that put the hook inside openat.
    fn both_methods() -> WorkloadResult {
        let mut w = sample_results().workloads.remove(0);
        let mut exit = row(PathKind::Syscall, "exit_group", None, 1.0, 0.0);
        exit.untimed_calls = 1000;
        w.attribution.push(exit);
        w.accounting = Some(accounting(4000.0, 0.0));
        let mut hook = sampled(PathKind::Hook, "security_file_open", None, 0.4);
        hook.syscall = Some("openat".into());
        w.profile = Some(StackProfile {
            samples: 1000,
            on_cpu_ns_per_op: 4000.0,
            paths: vec![
                sampled(PathKind::Syscall, "openat", None, 0.6),
                hook,
                sampled(
                    PathKind::Lsm,
                    "apparmor_file_open",
                    Some("security_file_open"),
                    0.3,
                ),
                sampled(PathKind::Syscall, "exit_group", None, 0.2),
            ],
            ..StackProfile::default()
        });
        w
    }

    fn line<'a>(t: &'a PathsTable, name: &str) -> &'a PathLine {
        t.rows.iter().find(|r| r.name == name).expect(name)
    }

    fn cell<'a>(t: &'a PathsTable, name: &str, column: &str) -> &'a str {
        let i = t.header.iter().position(|h| h == column).expect(column);
        &line(t, name).cells[i]
    }

    #[test]
    fn each_path_is_one_row_nested_where_it_runs_with_each_method_in_its_columns() {
        let t = PathsTable::of(&both_methods()).unwrap();
        let names: Vec<(usize, &str)> = t.rows.iter().map(|r| (r.depth, r.name.as_str())).collect();
        assert_eq!(
            names,
            [
                (0, "openat"),
                (1, "security_file_open"),
                (2, "apparmor_file_open"),
                (0, "exit_group"),
                (0, "security_file_free"),
            ]
        );
        assert_eq!(
            t.header,
            [
                "calls/op",
                "timed us/call",
                "timed us/op",
                "sampled us/op",
                "share",
                "95% interval",
                "self"
            ]
        );
        // Timed 400 ns of a hook beside its sampled 40% of 4,000 ns; the share's interval
        // (+-5 points) leaves whole percents, the time's (+-200 ns) tenths of a us.
        assert_eq!(cell(&t, "security_file_open", "timed us/op"), "0.4000");
        assert_eq!(cell(&t, "security_file_open", "sampled us/op"), "1.6");
        assert_eq!(cell(&t, "security_file_open", "share"), "40%");
        assert_eq!(cell(&t, "security_file_open", "95% interval"), "35%-45%");
        // Timed only: no sampled cells.
        assert_eq!(cell(&t, "security_file_free", "share"), "");
        // The one whole, named with its size, and what each method's columns hold.
        assert!(
            t.heading[0].contains("shares of the op's own CPU time, 4.000 us"),
            "{:?}",
            t.heading
        );
        assert!(t.heading[1].starts_with("timed: "), "{:?}", t.heading);
        // security_file_free has no syscall row over it: the heading says the left edge
        // does not add up; with every hook under a syscall it says nothing of the kind.
        assert!(
            t.heading[2].starts_with("hooks and task paths at the left edge ran inside"),
            "{:?}",
            t.heading
        );
        let mut nested = both_methods();
        nested
            .attribution
            .retain(|r| r.name != "security_file_free");
        assert_eq!(PathsTable::of(&nested).unwrap().heading.len(), 2);
    }

    #[test]
    fn a_path_whose_share_moves_between_runner_processes_is_said_to_in_every_markup() {
        let mut w = both_methods();
        let p = w.profile.as_mut().unwrap();
        // Three rounds of 20,000 own samples: the hook at 38% and 42% (far beyond sampling's
        // noise), openat at the same share in each.
        p.round_samples = vec![20_000; 3];
        p.paths[1].round_samples = vec![7_600, 8_400, 8_000];
        p.paths[0].round_samples = vec![12_000, 12_010, 11_990];
        let t = PathsTable::of(&w).unwrap();
        let said = "security_file_open varies between runner processes: 38.0%-42.0% of the op's sampled CPU \
                    time across rounds";
        for shown in [
            t.render(Markup::Terminal),
            t.render(Markup::Markdown),
            t.html(),
        ] {
            assert!(shown.contains(said), "{shown}");
            assert!(!shown.contains("openat varies"), "{shown}");
        }
        // Without rounds kept, nothing is said.
        let t = PathsTable::of(&both_methods()).unwrap();
        assert!(
            !t.notes.iter().any(|n| n.contains("varies")),
            "{:?}",
            t.notes
        );
    }

    #[test]
    fn a_call_that_never_returns_takes_its_time_from_the_samples_not_zero() {
        let t = PathsTable::of(&both_methods()).unwrap();
        assert_eq!(cell(&t, "exit_group", "timed us/op"), "never returns");
        assert_eq!(cell(&t, "exit_group", "timed us/call"), "");
        assert_eq!(cell(&t, "exit_group", "sampled us/op"), "0.8");
        assert_eq!(
            t.notes,
            [
                "exit_group never returns: no exit ends its span, so no probe pair times it; the \
              sampled stacks put 800.0 ns/op in it (20.0% of the op's own CPU time)"
            ]
        );
    }

    #[test]
    fn timed_alone_the_share_is_the_breakdown_s_and_empty_columns_are_left_out() {
        let r = sample_results();
        let t = PathsTable::of(&r.workloads[0]).unwrap();
        assert_eq!(
            t.header,
            ["calls/op", "timed us/call", "timed us/op", "share"]
        );
        assert_eq!(
            t.heading,
            [
                "Paths per op (each runs inside the one it is indented under); shares of the \
                 probed op, 5.000 us",
                "hooks and task paths at the left edge ran inside the syscalls (in no one \
                 syscall mostly, or none was sampled): their time is part of the syscalls', not \
                 beside it"
            ]
        );
        // Without sampled stacks nothing says which syscall a hook ran in: hooks stand alone,
        // each LSM function under its hook.
        let depth = |name: &str| line(&t, name).depth;
        assert_eq!(
            [
                depth("openat"),
                depth("security_file_open"),
                depth("apparmor_file_open")
            ],
            [0, 0, 1]
        );
        assert_eq!(cell(&t, "openat", "share"), "60.0%");
        // A function whose hook has no row names it.
        let mut w = r.workloads[0].clone();
        w.attribution.remove(1);
        let t = PathsTable::of(&w).unwrap();
        assert_eq!(
            line(&t, "apparmor_file_open (under security_file_open)").depth,
            0
        );
    }

    #[test]
    fn every_markup_draws_the_nesting() {
        let t = PathsTable::of(&both_methods()).unwrap();
        let text = t.render(Markup::Terminal);
        let row = |name: &str| {
            text.lines()
                .find(|l| l.contains(&format!(" {name} ")))
                .unwrap_or_else(|| panic!("{name}: {text}"))
                .to_string()
        };
        let column = |name: &str| row(name).find(name).unwrap();
        assert_eq!(column("security_file_open"), column("openat") + 2, "{text}");
        assert_eq!(column("apparmor_file_open"), column("openat") + 4, "{text}");
        let md = t.render(Markup::Markdown);
        assert!(md.contains("| `└ security_file_open` "), "{md}");
        assert!(md.contains("| `\u{a0}\u{a0}└ apparmor_file_open` "), "{md}");
        let html = t.html();
        assert!(html.contains("<caption>Paths per op"), "{html}");
        assert!(
            html.contains("padding-left:3.5em\">└ apparmor_file_open</td>"),
            "{html}"
        );
    }
}
