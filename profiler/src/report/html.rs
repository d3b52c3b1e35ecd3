//! One self-contained HTML page (inline CSS and SVG, nothing fetched): an overview of the whole
//! suite first (where each workload's op goes), then per workload clean vs probed bars with 95%
//! CI whiskers, a stacked bar of where an operation's time goes, log2 latency histograms per
//! hook, and a flame graph of the sampled kernel stacks (`flame`).
use std::fmt::Write;

use super::{
    figures::{clean_op_ns, num, Residual, Scale},
    flame::palette::{kind_colour, RESIDUAL_COLOUR},
    text::environment_line,
};
use crate::{
    results::{rows, AttributionRow, PathKind, Results, Unit, WorkloadResult},
    stats,
    text::esc,
};

const STYLE: &str = "body{font-family:sans-serif;max-width:70em;margin:1em auto;color:#222}\
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;\
text-align:right}td:first-child,th:first-child{text-align:left}\
svg text{font-size:11px;font-family:sans-serif}.chart{margin:4px 24px 4px 0}\
figure{margin:1em 0}figcaption{font-size:90%;color:#555;max-width:60em}\
figure.flame{margin:1em 0 2em}tr.regressed td{background:#fde0e0}tr.improved td{background:#e0f4e0}.failed{color:#b00;fill:#b00}";

/// The clean and probed means: neutral greys, not a path kind's colour.
const CLEAN_COLOUR: &str = "#555555";
const PROBED_COLOUR: &str = "#999999";

/// A whole page around `body`: inline style, nothing to fetch.
pub(crate) fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title>\
         <style>{STYLE}</style></head><body>\n{body}</body></html>\n",
        esc(title)
    )
}

pub fn render(results: &[Results]) -> String {
    let mut body = String::from("<h1>hookprof report</h1>\n");
    // The overviews first: one picture of each run before the details.
    for r in results {
        if let Some(summary) = super::suite_summary::SuiteSummary::of(r) {
            let _ = writeln!(
                body,
                "<h2>{}: what the security stack costs</h2>",
                esc(&r.label)
            );
            body.push_str(&summary.html_figure());
        }
        let _ = writeln!(body, "<h2>{}: where each op goes</h2>", esc(&r.label));
        body.push_str(&overview(r));
    }
    for r in results {
        let _ = writeln!(
            body,
            "<h2>{}</h2>\n<p>{}</p>",
            esc(&r.label),
            esc(&environment_line(r))
        );
        for w in &r.workloads {
            body.push_str(&workload_section(w));
        }
    }
    page("hookprof report", &body)
}

/// One row of the suite overview: a workload's clean op split into exclusive parts.
struct Split {
    name: String,
    /// (part, ns per op), in the order drawn; LSM functions first, inside their hooks' share.
    parts: Vec<(Part, f64)>,
    op_ns: f64,
    /// The clean mean as printed, with its unit, or why there is none.
    shown: String,
}

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Lsm,
    Hook,
    TaskPath,
    Syscall,
    Residual,
    NotProbed,
}

impl Part {
    const ALL: [Part; 6] = [
        Part::Syscall,
        Part::Hook,
        Part::Lsm,
        Part::TaskPath,
        Part::Residual,
        Part::NotProbed,
    ];

    fn name(self) -> &'static str {
        match self {
            Part::Syscall => "syscalls (outside hooks and task paths)",
            Part::Hook => "security hooks (their own dispatch)",
            Part::Lsm => "LSM functions under the hooks",
            Part::TaskPath => "fork/exit/exec task paths",
            Part::Residual => "residual (user space, unprobed kernel work)",
            Part::NotProbed => "nothing attributed (clean figure only)",
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Part::Syscall => kind_colour(PathKind::Syscall),
            Part::Hook => kind_colour(PathKind::Hook),
            Part::Lsm => kind_colour(PathKind::Lsm),
            Part::TaskPath => kind_colour(PathKind::TaskPath),
            Part::Residual => RESIDUAL_COLOUR,
            Part::NotProbed => "#e8e8e8",
        }
    }
}

/// Splits a workload's clean op. Hooks run inside syscalls or task paths, and task paths
/// (fork, exit, exec) inside syscalls, so each part is what its paths take less what runs
/// inside them; the residual is the op less every syscall (less every hook and task path when
/// syscalls were not probed). Probes inflate what they time, so the parts can add up to more
/// than the clean op: the bar then runs past the 100% line. A workload with nothing
/// attributed is one bar of clean figure; a failed one has no bar, only why.
fn split(w: &WorkloadResult) -> Split {
    let Some(clean) = stats::summarize(&w.clean) else {
        let why = match &w.failure {
            Some(f) => f.sentence(),
            None => "no clean samples".into(),
        };
        return Split {
            name: w.name.clone(),
            parts: Vec::new(),
            op_ns: 1.0,
            shown: why,
        };
    };
    let shown = Scale::of(w.unit, clean.mean).show(clean.mean);
    // The whole the rows are parts of: the probed op's CPU time where sched_switch measured
    // it (the rows are CPU time then, over all the op's tasks), else the clean op.
    let whole = match &w.accounting {
        Some(a) => Some(a.on_cpu_ns_per_op),
        None => clean_op_ns(w, clean.mean),
    };
    let op_ns = whole.filter(|_| !w.attribution.is_empty());
    let Some(op_ns) = op_ns else {
        return Split {
            name: w.name.clone(),
            parts: vec![(Part::NotProbed, 1.0)],
            op_ns: 1.0,
            shown,
        };
    };
    let total = |kind: PathKind| -> f64 {
        w.attribution
            .iter()
            .filter(|r| r.kind == kind && (kind == PathKind::Lsm || r.parent.is_none()))
            .map(|r| rows::ns_per_op(r).max(0.0))
            .sum()
    };
    let (lsm, hooks, tasks, syscalls) = (
        total(PathKind::Lsm),
        total(PathKind::Hook),
        total(PathKind::TaskPath),
        total(PathKind::Syscall),
    );
    let inside_syscalls = if syscalls > 0.0 {
        syscalls
    } else {
        hooks + tasks
    };
    let parts = vec![
        (Part::Lsm, lsm),
        (Part::Hook, (hooks - lsm).max(0.0)),
        (Part::TaskPath, tasks),
        (Part::Syscall, (syscalls - hooks - tasks).max(0.0)),
        (Part::Residual, (op_ns - inside_syscalls).max(0.0)),
    ];
    Split {
        name: w.name.clone(),
        parts,
        op_ns,
        shown,
    }
}

/// The whole suite in one figure: a horizontal stacked bar per workload, its clean op split into
/// syscalls, hooks with their LSM functions, task paths and the residual, as shares of the op.
pub fn overview(r: &Results) -> String {
    let rows: Vec<Split> = r.workloads.iter().map(split).collect();
    if rows.is_empty() {
        return String::new();
    }
    // 100% of the op (its CPU time or its clean time), and room for bars that run past it.
    let widest = rows
        .iter()
        .map(|s| s.parts.iter().map(|(_, ns)| ns).sum::<f64>() / s.op_ns.max(f64::MIN_POSITIVE))
        .fold(1.0_f64, f64::max)
        .min(3.0);
    let (label_w, bar_w, value_w, row_h, legend_h) = (130.0, 560.0, 90.0, 18.0, 22.0);
    let full = bar_w / widest;
    let height = legend_h * 2.0 + row_h * rows.len() as f64 + 24.0;
    let mut svg = format!(
        "<figure><svg class=\"chart\" id=\"overview\" width=\"{}\" height=\"{height}\" \
         role=\"img\" aria-label=\"suite overview\">",
        label_w + bar_w + value_w
    );
    // Legend: two rows of three.
    for (i, part) in Part::ALL.iter().enumerate() {
        let (x, y) = ((i % 3) as f64 * 260.0, (i / 3) as f64 * legend_h);
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>\
             <text x=\"{}\" y=\"{}\">{}</text>",
            y + 2.0,
            part.colour(),
            x + 14.0,
            y + 11.0,
            part.name()
        );
    }
    let top = legend_h * 2.0 + 4.0;
    for (i, s) in rows.iter().enumerate() {
        let y = top + i as f64 * row_h;
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
            label_w - 6.0,
            y + 12.0,
            esc(&s.name)
        );
        if s.parts.is_empty() {
            let _ = write!(
                svg,
                "<text class=\"failed\" x=\"{}\" y=\"{}\">{}</text>",
                label_w + 4.0,
                y + 12.0,
                esc(&s.shown)
            );
            continue;
        }
        let mut x = label_w;
        for &(part, ns) in s.parts.iter().filter(|(_, ns)| *ns > 0.0) {
            let share = ns / s.op_ns;
            let w = (share * full).min(label_w + bar_w - x);
            let what = match part {
                Part::NotProbed => String::new(),
                _ => format!(": {} ns/op, {:.1}% of the op", num(ns), share * 100.0),
            };
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"{}\" fill=\"{}\">\
                 <title>{}: {}{what}</title></rect>",
                row_h - 4.0,
                part.colour(),
                esc(&s.name),
                part.name(),
            );
            x += w;
        }
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{}\">{}</text>",
            label_w + bar_w + 6.0,
            y + 12.0,
            esc(&s.shown)
        );
    }
    // The clean op: 100%.
    let bottom = top + rows.len() as f64 * row_h;
    let _ = writeln!(
        svg,
        "<path d=\"M{x:.1} {}V{bottom}\" stroke=\"#000\" stroke-dasharray=\"3 2\"/>\
         <text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">100% of the op</text></svg>\
         <figcaption>Where each operation's time goes, split by the probed pass. The whole is \
         the op's CPU time over all its tasks where sched_switch measured it (the syscall rows \
         are CPU time then, a blocking call's wait left out), else the clean op time (right). \
         Hooks run inside syscalls or task paths and task paths inside syscalls, so each part \
         excludes what runs inside it. Against the clean op, probes inflate what they time and \
         a bar can run past 100%.</figcaption></figure>",
        top - 2.0,
        bottom + 14.0,
        x = label_w + full
    );
    svg
}

fn workload_section(w: &WorkloadResult) -> String {
    let mut out = format!(
        "<h3>{} <small>({})</small></h3>\n",
        esc(&w.name),
        esc(&w.family)
    );
    if let Some(f) = &w.failure {
        let _ = writeln!(
            out,
            "<p class=\"failed\">Workload {}</p>",
            esc(&f.sentence())
        );
    }
    let (Some(clean), probed) = (stats::summarize(&w.clean), stats::summarize(&w.probed)) else {
        out.push_str("<p>no clean samples</p>\n");
        return out;
    };
    out.push_str(&mean_bars(&clean, probed.as_ref(), w.unit));
    if !w.attribution.is_empty() {
        // The residual rule every format uses (`Residual::of`): of the probed op's CPU time
        // where sched_switch measured it, else of the clean op.
        if let Some(residual) = Residual::of(w, clean.mean) {
            out.push_str(&stacked_bar(&residual, &w.attribution));
        }
        out.push_str(&attribution_table(w));
        for row in w
            .attribution
            .iter()
            .filter(|r| r.histogram.iter().any(|&c| c > 0))
        {
            out.push_str(&histogram(row));
        }
    }
    out.push_str(&super::flame::figure(w));
    out
}

/// Clean and probed means as horizontal bars, each with its 95% CI as a whisker.
fn mean_bars(clean: &stats::Summary, probed: Option<&stats::Summary>, unit: Unit) -> String {
    let shown = Scale::of(unit, clean.mean);
    let bars: Vec<(&str, &stats::Summary, &str)> = std::iter::once(("clean", clean, CLEAN_COLOUR))
        .chain(probed.map(|p| ("probed", p, PROBED_COLOUR)))
        .collect();
    let top = bars
        .iter()
        .map(|(_, s, _)| s.ci.map_or(s.mean, |c| c.1).max(s.max))
        .fold(0.0_f64, f64::max);
    let (left, width, row) = (60.0, 420.0, 24.0);
    let scale = |v: f64| left + if top > 0.0 { v / top * width } else { 0.0 };
    let height = row * bars.len() as f64 + 6.0;
    let mut svg = format!(
        "<svg class=\"chart\" width=\"620\" height=\"{height}\" role=\"img\" \
         aria-label=\"clean vs probed mean\">"
    );
    for (i, (name, s, colour)) in bars.iter().enumerate() {
        let y = 4.0 + i as f64 * row;
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{}\">{name}</text><rect x=\"{left}\" y=\"{y}\" width=\"{:.1}\" \
             height=\"16\" fill=\"{colour}\"/>",
            y + 12.0,
            scale(s.mean) - left
        );
        if let Some((lo, hi)) = s.ci {
            let (x0, x1, ym) = (scale(lo.max(0.0)), scale(hi), y + 8.0);
            let _ = write!(
                svg,
                "<path d=\"M{x0:.1} {ym}H{x1:.1}M{x0:.1} {}V{}M{x1:.1} {}V{}\" stroke=\"#000\"/>",
                ym - 5.0,
                ym + 5.0,
                ym - 5.0,
                ym + 5.0
            );
        }
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\">{}</text>",
            scale(s.ci.map_or(s.mean, |c| c.1)) + 6.0,
            y + 12.0,
            esc(&shown.show(s.mean))
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The op (the residual's whole) split into the top-level paths and the residual, each drawn
/// as its share of it: paths that take more than the op run past the dashed 100% line, as in
/// the overview. Segments take their kind's colour, alternately lighter.
fn stacked_bar(residual: &Residual, rows: &[AttributionRow]) -> String {
    let Some((_, top)) = rows::top_level(rows) else {
        return String::new();
    };
    let op_ns = residual.op_ns;
    if op_ns <= 0.0 {
        return String::new();
    }
    let mut segments: Vec<(String, &str, f64)> = top
        .iter()
        .map(|r| {
            (
                format!("{} {}", r.kind.name(), r.name),
                kind_colour(r.kind),
                rows::ns_per_op(r).max(0.0),
            )
        })
        .collect();
    segments.push((
        format!("residual ({})", residual.level.describe()),
        RESIDUAL_COLOUR,
        residual.ns,
    ));
    let drawn: f64 = segments.iter().map(|(_, _, ns)| ns.max(0.0)).sum();
    let width = 600.0;
    let full = width / (drawn / op_ns).clamp(1.0, 3.0);
    let mut svg = format!(
        "<svg class=\"chart\" width=\"620\" height=\"{}\" role=\"img\" \
         aria-label=\"where an operation's time goes\">",
        44 + 16 * segments.len()
    );
    let mut x = 0.0;
    for (i, (name, colour, ns)) in segments.iter().enumerate() {
        let share = ns / op_ns;
        let w = (share.max(0.0) * full).min(width - x);
        let opacity = if i % 2 == 0 { 1.0 } else { 0.7 };
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"20\" fill=\"{colour}\" \
             fill-opacity=\"{opacity}\" stroke=\"#fff\"><title>{} {} ns/op</title></rect>",
            esc(name),
            num(*ns)
        );
        let ly = 46 + 16 * i;
        let _ = write!(
            svg,
            "<rect x=\"0\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\" \
             fill-opacity=\"{opacity}\"/><text x=\"14\" y=\"{ly}\">{} {} ns/op ({:.1}%)</text>",
            ly - 9,
            esc(name),
            num(*ns),
            share * 100.0
        );
        x += w;
    }
    let _ = writeln!(
        svg,
        "<path d=\"M{full:.1} 0V24\" stroke=\"#000\" stroke-dasharray=\"3 2\"/>\
         <text x=\"{:.1}\" y=\"34\" text-anchor=\"{}\">100% {}</text></svg>",
        full,
        if full > width - 60.0 { "end" } else { "middle" },
        residual.whole()
    );
    svg
}

fn attribution_table(w: &WorkloadResult) -> String {
    let accounting = w.accounting.as_ref();
    let mut out = format!(
        "<table><tr><th>path</th><th>kind</th><th>calls/op</th><th>ns/call</th><th>ns/op</th>\
         <th>{}</th></tr>\n",
        rows::share_heading(accounting)
    );
    for (name, r) in rows::ordered_rows(&w.attribution) {
        let name = match name.strip_prefix("  ") {
            Some(lsm) => format!("&nbsp;&nbsp;└ {}", esc(lsm)),
            None => esc(&name),
        };
        let _ = writeln!(
            out,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            r.kind.name(),
            num(r.calls_per_op),
            num(r.ns_per_call),
            num(rows::ns_per_op(r)),
            rows::share(r, accounting) * 100.0
        );
    }
    out.push_str("</table>\n");
    out
}

/// Bucket b counts calls of 2^(b-1) <= ns < 2^b; only the span of non-empty buckets is drawn,
/// its bars in the row's kind colour, the axis marked at bucket edges in a unit scaled to them
/// (every other edge, or fewer, so the marks never touch).
fn histogram(row: &AttributionRow) -> String {
    let h = &row.histogram;
    let first = h.iter().position(|&c| c > 0).unwrap_or(0);
    let last = h.iter().rposition(|&c| c > 0).unwrap_or(0);
    let peak = h.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (bar, gap, height, top): (f64, f64, f64, f64) = (24.0, 4.0, 60.0, 16.0);
    let title = format!(
        "{} {} (calls per latency bucket)",
        row.kind.name(),
        row.name
    );
    let buckets = last - first + 1;
    // An edge label is at most 8 characters (`1.049 ms`), about 50 px.
    let step = (60.0 / (bar + gap)).ceil() as usize;
    let width = (buckets as f64 * (bar + gap) + 30.0).max(title.len() as f64 * 6.5);
    let mut svg = format!(
        "<svg class=\"chart\" width=\"{width:.0}\" height=\"{}\" role=\"img\" \
         aria-label=\"latency histogram\"><text x=\"0\" y=\"11\">{}</text>",
        top + height + 30.0,
        esc(&title)
    );
    let low = |b: usize| if b == 0 { 0 } else { 1u64 << (b - 1).min(63) };
    let edge = |b: usize| {
        let ns = low(b) as f64;
        Scale::of(Unit::Nanoseconds, ns).show(ns)
    };
    for (i, b) in (first..=last).enumerate() {
        let count = h[b];
        let bh = count as f64 / peak * height;
        let x = i as f64 * (bar + gap);
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar}\" height=\"{bh:.1}\" fill=\"{}\">\
             <title>{} to {}: {count} calls</title></rect>",
            top + height - bh,
            kind_colour(row.kind),
            edge(b),
            edge(b + 1)
        );
    }
    let axis = top + height;
    let _ = write!(
        svg,
        "<path d=\"M0 {axis}H{:.1}\" stroke=\"#888\"/>",
        buckets as f64 * (bar + gap)
    );
    for i in (0..=buckets).step_by(step) {
        let x = i as f64 * (bar + gap);
        let _ = write!(
            svg,
            "<path d=\"M{x:.1} {axis}v4\" stroke=\"#888\"/><text x=\"{x:.1}\" y=\"{}\" \
             text-anchor=\"{}\" font-size=\"10\">{}</text>",
            axis + 15.0,
            if i == 0 { "start" } else { "middle" },
            edge(first + i)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::text::tests::sample_results;

    #[test]
    fn the_page_is_self_contained_with_the_three_charts() {
        let html = render(&[sample_results()]);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("http"), "nothing may be fetched");
        assert!(html.contains("aria-label=\"clean vs probed mean\""));
        assert!(html.contains("aria-label=\"where an operation's time goes\""));
        // One histogram per attribution row that has counts.
        assert_eq!(html.matches("aria-label=\"latency histogram\"").count(), 4);
        // The residual segment: 4500 of 5000 ns.
        assert!(
            html.contains("residual (outside the probed hooks) 4500 ns/op (90.0%)"),
            "{html}"
        );
    }

    #[test]
    fn the_overview_comes_first_and_splits_each_op() {
        let html = render(&[sample_results()]);
        let overview = html.find("aria-label=\"suite overview\"").unwrap();
        assert!(overview < html.find("<h3>").unwrap());
        // open_close: 5000 ns clean; apparmor 380 ns inside security_file_open's 400 (+ the
        // 100 of security_file_free), openat 3000 ns around them.
        let w = split(&sample_results().workloads[0]);
        let part = |p: Part| w.parts.iter().find(|(q, _)| *q == p).map(|(_, ns)| *ns);
        assert_eq!(part(Part::Lsm), Some(380.0));
        assert_eq!(part(Part::Hook), Some(120.0));
        assert_eq!(part(Part::Syscall), Some(2500.0));
        assert_eq!(part(Part::Residual), Some(2000.0));
        // build was not probed: one bar of clean time.
        let b = split(&sample_results().workloads[1]);
        assert_eq!(b.parts.len(), 1);
        assert!(b.parts[0].0 == Part::NotProbed);
    }

    #[test]
    fn bandwidth_and_failed_workloads_have_their_row_in_the_overview() {
        let mut r = sample_results();
        let mut bw = r.workloads[0].clone();
        bw.name = "bw_pipe".into();
        bw.unit = Unit::MegabytesPerSecond;
        bw.clean = vec![977.6; 3];
        let mut failed = r.workloads[1].clone();
        failed.name = "broken".into();
        failed.clean.clear();
        failed.failure = Some(crate::results::WorkloadFailure {
            phase: "set-up".into(),
            error: "no such file".into(),
        });
        r.workloads.extend([bw, failed]);
        let html = overview(&r);
        // The bandwidth op is what its rows' shares were taken of: split like a latency.
        assert!(
            html.contains("bw_pipe: LSM functions under the hooks: 380.0 ns/op, 7.6% of the op"),
            "{html}"
        );
        assert!(html.contains(">977.6 MB/s<"), "{html}");
        assert!(
            html.contains(
                "<text class=\"failed\" x=\"134\" y=\"114\">failed in set-up: no such file</text>"
            ),
            "{html}"
        );
        let page = render(&[r]);
        assert!(page.contains("<p class=\"failed\">Workload failed in set-up: no such file</p>"));
    }

    #[test]
    fn the_breakdown_bar_draws_the_table_s_shares_and_the_residual_as_text_says() {
        let mut w = sample_results().workloads[0].clone();
        // The hooks take 9100 ns of a 5000 ns op: 182% of it, as the table says.
        w.attribution[1].ns_per_op = 9000.0;
        let bar = stacked_bar(
            &Residual::of_rows(5000.0, &w.attribution).unwrap(),
            &w.attribution,
        );
        assert!(
            bar.contains("hook security_file_open 9000 ns/op (180.0%)"),
            "{bar}"
        );
        assert!(
            bar.contains("residual (outside the probed hooks) -4100 ns/op (-82.0%)"),
            "{bar}"
        );
        // 100% of the op at 600 / 1.82 px: the bar runs past the line, never renormalised.
        assert!(bar.contains("<path d=\"M329.7 0V24\""), "{bar}");
    }

    #[test]
    fn every_chart_colours_a_path_by_its_kind() {
        let html = render(&[sample_results()]);
        let w = &sample_results().workloads[0];
        let bar = stacked_bar(
            &Residual::of_rows(5000.0, &w.attribution).unwrap(),
            &w.attribution,
        );
        // Both hooks orange, as in the overview's legend; the residual grey.
        assert_eq!(bar.matches("fill=\"#f28e2b\"").count(), 4, "{bar}");
        assert!(bar.contains(&format!("fill=\"{RESIDUAL_COLOUR}\"")));
        assert_eq!(Part::Hook.colour(), "#f28e2b");
        // A histogram's bars take their row's kind colour: the LSM function's is red.
        let lsm = histogram(&w.attribution[2]);
        assert!(lsm.contains("fill=\"#e15759\""), "{lsm}");
        // The clean and probed means are no path's colour.
        let means = html
            .split("aria-label=\"clean vs probed mean\"")
            .nth(1)
            .unwrap();
        let means = means.split("</svg>").next().unwrap();
        for kind in [
            PathKind::Syscall,
            PathKind::Hook,
            PathKind::Lsm,
            PathKind::TaskPath,
        ] {
            assert!(!means.contains(kind_colour(kind)), "{means}");
        }
    }

    #[test]
    fn histogram_edges_are_scaled_and_spaced_apart() {
        let mut row = sample_results().workloads[0].attribution[0].clone();
        // Buckets 8..=20: 128 ns up to 1 ms.
        row.histogram = vec![0; 21];
        row.histogram[8] = 3;
        row.histogram[20] = 1;
        let svg = histogram(&row);
        assert!(
            svg.contains(">128.0 ns<") && svg.contains(">8.192 us<"),
            "{svg}"
        );
        assert!(
            svg.contains(">524.3 us<") || svg.contains(">1.049 ms<"),
            "{svg}"
        );
        let xs: Vec<f64> = svg
            .split("<text x=\"")
            .skip(2)
            .map(|t| t.split('"').next().unwrap().parse().unwrap())
            .collect();
        assert!(xs.len() >= 4, "{svg}");
        assert!(xs.windows(2).all(|p| p[1] - p[0] >= 55.0), "{xs:?}");
    }

    #[test]
    fn text_is_escaped() {
        let mut r = sample_results();
        r.label = "<script>".into();
        let html = render(&[r]);
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>"));
    }
}
