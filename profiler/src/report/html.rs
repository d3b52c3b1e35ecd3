//! One self-contained HTML page (inline CSS and SVG, nothing fetched): an overview of the whole
//! suite first (where each workload's op goes), then per workload clean vs probed bars with 95%
//! CI whiskers, a stacked bar of where an operation's time goes, log2 latency histograms per
//! hook, and a flame graph of the sampled kernel stacks (`flame`).
use std::fmt::Write;

use super::{
    chart::{BarRow, Bars, Mark, Plot, Values},
    figures::{num, Scale},
    flame::palette::{kind_colour, RESIDUAL_COLOUR},
    text::environment_line,
};
use crate::{
    attribution::{Breakdown, Part},
    results::{AttributionRow, PathKind, Results, Unit, WorkloadResult},
    stats,
    text::esc,
};

const STYLE: &str = "body{font-family:sans-serif;max-width:70em;margin:1em auto;color:#222}\
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;\
text-align:right}td:first-child,th:first-child{text-align:left}\
svg text{font-size:11px;font-family:sans-serif}.chart{margin:4px 24px 4px 0}\
figure{margin:1em 0}figcaption{font-size:90%;color:#555;max-width:60em}\
figure.flame{margin:1em 0 2em}table.paths{margin:1em 0}table.paths caption{text-align:left;\
padding-bottom:4px}table.paths td:nth-child(2),table.paths th:nth-child(2){text-align:left;color:#555}table.paths td:first-child{white-space:nowrap}tr.regressed td{background:#fde0e0}tr.improved td{background:#e0f4e0}.failed{color:#b00;fill:#b00}";

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

/// One row of the suite overview: a workload's breakdown in its exclusive parts.
struct Split {
    name: String,
    /// (segment, ns per op), in the order drawn.
    parts: Vec<(Segment, f64)>,
    op_ns: f64,
    /// The clean mean as printed, with its unit, or why there is none.
    shown: String,
}

/// A bar's segment: one of the breakdown's parts, or a workload with nothing attributed.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Segment {
    Of(Part),
    NotProbed,
    /// Timed parts that do not fit the op (the probes' cost in their spans).
    NotSplit,
}

impl Segment {
    const ALL: [Segment; 7] = [
        Segment::Of(Part::Syscall),
        Segment::Of(Part::Hook),
        Segment::Of(Part::Lsm),
        Segment::Of(Part::TaskPath),
        Segment::Of(Part::Residual),
        Segment::NotProbed,
        Segment::NotSplit,
    ];

    fn name(self) -> &'static str {
        match self {
            Segment::Of(Part::Syscall) => "syscalls (outside hooks and task paths)",
            Segment::Of(Part::Hook) => "security hooks (their own dispatch)",
            Segment::Of(Part::Lsm) => "LSM functions under the hooks",
            Segment::Of(Part::TaskPath) => "fork/exit/exec task paths",
            Segment::Of(Part::Residual) => "residual (outside the outermost probed paths)",
            Segment::NotProbed => "nothing attributed (clean figure only)",
            Segment::NotSplit => {
                "not split: the timed parts hold more of the probes' cost than fits the op"
            }
        }
    }

    fn colour(self) -> &'static str {
        match self {
            Segment::Of(Part::Syscall) => kind_colour(PathKind::Syscall),
            Segment::Of(Part::Hook) => kind_colour(PathKind::Hook),
            Segment::Of(Part::Lsm) => kind_colour(PathKind::Lsm),
            Segment::Of(Part::TaskPath) => kind_colour(PathKind::TaskPath),
            Segment::Of(Part::Residual) => RESIDUAL_COLOUR,
            Segment::NotProbed | Segment::NotSplit => "#e8e8e8",
        }
    }
}

/// A workload's row of the overview: its breakdown's parts (LSM functions, the hooks' own
/// dispatch, task paths, the syscalls' own time, the residual), each drawn as its share of
/// the breakdown's whole. Probes inflate what they time, so a part can be below zero and the
/// others then run past the 100% line. A workload with nothing attributed is one bar of clean
/// figure; a failed one has no bar, only why.
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
    let Some(b) = Breakdown::of(w) else {
        return Split {
            name: w.name.clone(),
            parts: vec![(Segment::NotProbed, 1.0)],
            op_ns: 1.0,
            shown,
        };
    };
    if !b.parts.fit() {
        return Split {
            name: w.name.clone(),
            parts: vec![(Segment::NotSplit, 1.0)],
            op_ns: 1.0,
            shown,
        };
    }
    // LSM functions first: they are drawn inside their hooks' share.
    let order = [
        Part::Lsm,
        Part::Hook,
        Part::TaskPath,
        Part::Syscall,
        Part::Residual,
    ];
    Split {
        name: w.name.clone(),
        parts: order
            .into_iter()
            .map(|p| b.parts.figure(p))
            .filter(|f| f.ns > 0.0)
            .map(|f| (Segment::Of(f.part), f.ns))
            .collect(),
        op_ns: b.parts.whole_ns,
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
    // The legend: what some bar draws.
    let legend = Segment::ALL
        .into_iter()
        .filter(|seg| {
            rows.iter()
                .any(|s| s.parts.iter().any(|(p, ns)| p == seg && *ns > 0.0))
        })
        .map(|seg| (seg.name().to_string(), seg.colour()))
        .collect();
    let bars = Bars {
        label: "suite overview",
        columns: (130, 560, 90),
        row_height: 20,
        values: Values::Share,
        range: (0.0, widest),
        rule: Some((1.0, "100% of the op".into())),
        legend,
        legend_columns: 2,
        rows: rows.iter().map(overview_row).collect(),
    };
    format!(
        "<figure id=\"overview\">{}<figcaption>Where each operation's time goes, each part \
         exclusive of what runs inside it (an LSM function inside its hook, a hook inside its \
         syscall). Where kernel stacks were sampled, every bar is the op's own CPU time split by \
         where its samples fell: LSM functions, the hooks' own dispatch, task paths, the timed \
         syscalls' own code, and the residual (user time, syscalls not timed, faults, \
         interrupts, the scheduler), so the bars end at 100% and agree with each workload's \
         table. A workload without samples is split by its timed rows, of its CPU time (or clean \
         time); a timed part the probes' own cost made negative is not drawn.</figcaption>\
         </figure>\n",
        bars.svg()
    )
}

/// A workload's bar in the overview: its parts end to end as shares of its op, each saying
/// its figures on hover; a failed workload's row says why instead.
fn overview_row(s: &Split) -> BarRow {
    let mut at = 0.0;
    let segments = s
        .parts
        .iter()
        .filter(|(_, ns)| *ns > 0.0)
        .map(|&(part, ns)| {
            let share = ns / s.op_ns;
            let what = match part {
                Segment::NotProbed | Segment::NotSplit => String::new(),
                _ => format!(": {} ns/op, {:.1}% of the op", num(ns), share * 100.0),
            };
            let tip = format!("{}: {}{what}", s.name, part.name());
            at += share;
            (at - share, at, part.colour(), false, tip)
        })
        .collect();
    BarRow {
        name: s.name.clone(),
        segments,
        whisker: None,
        note: s.shown.clone(),
        failed: s.parts.is_empty(),
    }
}

fn workload_section(w: &WorkloadResult) -> String {
    let mut out = format!("<h3>{} <small>({})</small></h3>\n", esc(&w.name), w.family);
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
    if let Some(table) = super::paths_table::PathsTable::of(w) {
        out.push_str(&table.html());
    }
    if let Some(b) = Breakdown::of(w) {
        out.push_str(&stacked_bar(&b));
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
    let bars: Vec<(&str, &stats::Summary, &'static str)> =
        std::iter::once(("clean", clean, CLEAN_COLOUR))
            .chain(probed.map(|p| ("probed", p, PROBED_COLOUR)))
            .collect();
    let top = bars
        .iter()
        .map(|(_, s, _)| s.ci.map_or(s.mean, |c| c.1).max(s.max))
        .fold(0.0_f64, f64::max);
    let rows = bars
        .iter()
        .map(|&(name, s, colour)| BarRow {
            name: name.into(),
            segments: vec![(
                0.0,
                s.mean,
                colour,
                false,
                format!("{name} mean {}", shown.show(s.mean)),
            )],
            whisker: s.ci,
            note: shown.show(s.mean),
            failed: false,
        })
        .collect();
    Bars {
        label: "clean vs probed mean",
        columns: (60, 420, 100),
        row_height: 24,
        values: Values::Of(unit),
        range: (0.0, top),
        rule: None,
        legend: Vec::new(),
        legend_columns: 1,
        rows,
    }
    .svg()
        + "\n"
}

/// The breakdown's whole split into its parts, each drawn as its share of it, with the
/// residual the text prints; nothing where timed parts do not fit the op (the residual
/// sentence says why). Segments take their kind's colour, alternately lighter.
fn stacked_bar(b: &Breakdown) -> String {
    let op_ns = b.parts.whole_ns;
    if op_ns <= 0.0 || !b.parts.fit() {
        return String::new();
    }
    let mut at = 0.0;
    let mut segments = Vec::new();
    let mut legend = Vec::new();
    for (i, f) in b.parts.figures.iter().filter(|f| f.ns > 0.0).enumerate() {
        let name = match f.part {
            Part::Residual => format!("residual ({})", b.parts.outside),
            _ => Segment::Of(f.part).name().to_string(),
        };
        let (colour, share) = (Segment::Of(f.part).colour(), f.ns / op_ns);
        let said = format!("{name} {} ns/op", num(f.ns));
        legend.push((format!("{said} ({:.1}%)", share * 100.0), colour));
        segments.push((at, at + share, colour, i % 2 == 1, said));
        at += share;
    }
    Bars {
        label: "where an operation's time goes",
        columns: (10, 520, 90),
        row_height: 24,
        values: Values::Share,
        range: (0.0, at.clamp(1.0, 3.0)),
        rule: Some((1.0, format!("100% {}", b.parts.whole.of()))),
        legend,
        legend_columns: 1,
        rows: vec![BarRow {
            name: String::new(),
            segments,
            whisker: None,
            note: String::new(),
            failed: false,
        }],
    }
    .svg()
        + "\n"
}

/// Bucket b counts calls of 2^(b-1) <= ns < 2^b; only the span of non-empty buckets is drawn,
/// its bars in the row's kind colour, the axis marked at bucket edges in a unit scaled to them
/// (every other edge, or fewer, so the marks never touch).
fn histogram(row: &AttributionRow) -> String {
    let h = &row.histogram;
    let first = h.iter().position(|&c| c > 0).unwrap_or(0);
    let last = h.iter().rposition(|&c| c > 0).unwrap_or(0);
    let title = format!(
        "{} {} (calls per latency bucket)",
        row.kind.name(),
        row.name
    );
    let buckets = last - first + 1;
    let (bar, width): (f64, f64) = (28.0, (buckets as f64 * 28.0 + 120.0).max(360.0));
    // An edge label is at most 8 characters (`1.049 ms`), about 50 px.
    let step = (60.0 / bar).ceil() as usize;
    let low = |b: usize| if b == 0 { 0 } else { 1u64 << (b - 1).min(63) };
    let edge = |b: usize| {
        let ns = low(b) as f64;
        Scale::of(Unit::Nanoseconds, ns).show(ns)
    };
    let marks = (first..=last)
        .enumerate()
        .map(|(i, b)| Mark::Bar {
            x: (i as f64 + 0.06, i as f64 + 0.94),
            height: h[b] as f64,
            colour: kind_colour(row.kind),
            tip: format!("{} to {}: {} calls", edge(b), edge(b + 1), h[b]),
        })
        .collect();
    let label = format!("latency histogram: {title}");
    let plot = Plot {
        label: &label,
        size: (width as u32, 170),
        x_name: "latency",
        x_range: (0.0, buckets as f64),
        x_ticks: (0..=buckets)
            .step_by(step)
            .map(|i| (i as f64, edge(first + i)))
            .collect(),
        y_name: "calls",
        values: Values::Count,
        marks,
    };
    format!(
        "<figure class=\"histogram\">{}<figcaption>{}</figcaption></figure>\n",
        plot.svg(),
        esc(&title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{
        fixtures::{places_profile, sample_results},
        Place,
    };

    #[test]
    fn the_page_is_self_contained_with_the_three_charts() {
        let html = render(&[sample_results()]);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(!html.contains("http"), "nothing may be fetched");
        assert!(html.contains("aria-label=\"clean vs probed mean\""));
        assert!(html.contains("aria-label=\"where an operation's time goes\""));
        // One histogram per attribution row that has counts.
        assert_eq!(html.matches("aria-label=\"latency histogram: ").count(), 4);
        // The residual segment: 2000 of 5000 ns, as the text says.
        assert!(
            html.contains("residual (outside the probed syscalls) 2000 ns/op (40.0%)"),
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
        let part = |p: Part| {
            w.parts
                .iter()
                .find(|(q, _)| *q == Segment::Of(p))
                .map(|(_, ns)| *ns)
        };
        assert_eq!(part(Part::Lsm), Some(380.0));
        assert_eq!(part(Part::Hook), Some(120.0));
        assert_eq!(part(Part::Syscall), Some(2500.0));
        assert_eq!(part(Part::Residual), Some(2000.0));
        // build was not probed: one bar of clean time.
        let b = split(&sample_results().workloads[1]);
        assert_eq!(b.parts.len(), 1);
        assert!(b.parts[0].0 == Segment::NotProbed);
    }

    #[test]
    fn the_overview_draws_the_sampled_hooks_where_none_was_timed_and_its_bars_end_at_the_op() {
        let timed = overview(&sample_results());
        assert!(timed.contains("\nsecurity hooks (their own dispatch)\n"));
        // Syscalls timed, hooks only sampled (a kernel that refuses trampolines): the samples'
        // places draw the hooks and LSM functions, of the op's own CPU time.
        let mut r = sample_results();
        for w in &mut r.workloads {
            w.attribution.retain(|a| a.kind == PathKind::Syscall);
        }
        r.workloads[0].profile = Some(places_profile(
            4000.0,
            &[
                (Place::Syscall, Some("openat"), 50),
                (Place::Hook, None, 10),
                (Place::Lsm, None, 5),
                (Place::User, None, 30),
                (Place::PageFault, None, 5),
            ],
        ));
        let sampled = overview(&r);
        assert!(
            sampled.contains("\nsecurity hooks (their own dispatch)\n"),
            "{sampled}"
        );
        assert!(
            sampled.contains("\nLSM functions under the hooks\n"),
            "{sampled}"
        );
        assert!(
            sampled.contains("security hooks (their own dispatch): 400.0 ns/op, 10.0% of the op"),
            "{sampled}"
        );
        let w = split(&r.workloads[0]);
        let drawn: f64 = w.parts.iter().map(|(_, ns)| ns).sum();
        assert!((drawn - w.op_ns).abs() < 1e-6, "{drawn} of {}", w.op_ns);
        assert!(!sampled.contains("No security hook"), "{sampled}");
    }

    #[test]
    fn timed_parts_that_overrun_the_op_are_not_drawn_as_if_they_fit() {
        let mut w = sample_results().workloads[0].clone();
        // The hooks take 9100 ns of a 5000 ns op, more than openat around them.
        w.attribution[1].ns_per_op = 9000.0;
        let b = Breakdown::of(&w).unwrap();
        assert!(!b.parts.fit());
        assert_eq!(stacked_bar(&b), "");
        let s = split(&w);
        assert_eq!(s.parts.len(), 1);
        assert!(s.parts[0].0 == Segment::NotSplit);
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
        assert!(html.contains("\n977.6 MB/s\n"), "{html}");
        // The failed row says why, in red, where its bar would be.
        assert!(
            html.contains("fill=\"#BB0000\">\nfailed in set-up: no such file\n</text>"),
            "{html}"
        );
        let page = render(&[r]);
        assert!(page.contains("<p class=\"failed\">Workload failed in set-up: no such file</p>"));
    }

    #[test]
    fn every_chart_colours_a_path_by_its_kind() {
        let html = render(&[sample_results()]);
        let w = &sample_results().workloads[0];
        let bar = stacked_bar(&Breakdown::of(w).unwrap()).to_lowercase();
        // The hooks' part orange (its segment and its legend), as in the overview's legend;
        // the residual grey.
        assert_eq!(bar.matches("fill=\"#f28e2b\"").count(), 2, "{bar}");
        assert!(bar.contains(&format!("fill=\"{RESIDUAL_COLOUR}\"")));
        assert_eq!(Segment::Of(Part::Hook).colour(), "#f28e2b");
        // A histogram's bars take their row's kind colour: the LSM function's is red.
        let lsm = histogram(&w.attribution[2]).to_lowercase();
        assert!(lsm.contains("fill=\"#e15759\""), "{lsm}");
        // The clean and probed means are no path's colour.
        let means = html
            .split("aria-label=\"clean vs probed mean\"")
            .nth(1)
            .unwrap();
        let means = means.split("</svg>").next().unwrap().to_lowercase();
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
            svg.contains("\n128.0 ns\n") && svg.contains("\n8.192 us\n"),
            "{svg}"
        );
        assert!(
            svg.contains("\n524.3 us\n") || svg.contains("\n1.049 ms\n"),
            "{svg}"
        );
        // The edges' labels, left to right: never closer than a label's width.
        let xs: Vec<f64> = svg
            .split("<text x=\"")
            .skip(1)
            .filter(|t| [" ns\n", " us\n", " ms\n"].iter().any(|u| t.contains(u)))
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
