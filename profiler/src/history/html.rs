//! The history as one self-contained HTML page: the points in order, then per metric a chart
//! of its value over the series with the level between change points and each step marked,
//! and under it the hooks (and other paths) whose cost moved at that step.
use std::fmt::Write;

use super::{could_find, format_alpha, format_p, noise_line, History, MetricHistory};
use crate::{
    compare::{attribution_lines, html::delta_chart, sampled_lines},
    export::rfc3339,
    report::{figures::Scale, html::page},
    text::esc,
};

/// The points, the levels, the change points: one colour each, on every chart.
const POINT_COLOUR: &str = "#4e79a7";
const LEVEL_COLOUR: &str = "#f28e2b";
const STEP_COLOUR: &str = "#e15759";

pub fn render_html(h: &History) -> String {
    let title = format!("hookprof history: {} results", h.points.len());
    let mut body = format!("<h1>{}</h1>\n", esc(&title));
    let family = match h.metrics.len() {
        1 => String::new(),
        n => format!(" (Bonferroni over {n} metrics)"),
    };
    let _ = writeln!(
        body,
        "<p>Change points: {}, {} shuffles, p &lt; {}{}.</p>",
        esc(h.method),
        h.permutations,
        format_alpha(h.alpha_per_metric),
        esc(&family)
    );
    let moved: Vec<&MetricHistory> = h.metrics.iter().filter(|m| !m.steps.is_empty()).collect();
    if moved.is_empty() {
        body.push_str("<p>No metric changed level.</p>\n");
    } else {
        let links: Vec<String> = moved
            .iter()
            .map(|m| {
                format!(
                    "<a href=\"#{}\">{}</a> ({} step{})",
                    anchor(&m.metric),
                    esc(&m.metric),
                    m.steps.len(),
                    if m.steps.len() == 1 { "" } else { "s" }
                )
            })
            .collect();
        let _ = writeln!(body, "<p>Changed level: {}.</p>", links.join(", "));
    }
    body.push_str("<table><tr><th>#</th><th>label</th><th>file</th><th>started</th></tr>\n");
    for (i, p) in h.points.iter().enumerate() {
        let _ = writeln!(
            body,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            i + 1,
            esc(&p.label),
            esc(&p.file),
            rfc3339(p.started_at).unwrap_or_else(|| "not recorded".into())
        );
    }
    body.push_str("</table>\n");
    for m in &h.metrics {
        body.push_str(&metric_section(h, m));
    }
    page(&title, &body)
}

fn anchor(metric: &str) -> String {
    format!(
        "m-{}",
        metric.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    )
}

fn metric_section(h: &History, m: &MetricHistory) -> String {
    let mut out = format!(
        "<h2 id=\"{}\">{} <small>({})</small></h2>\n",
        anchor(&m.metric),
        esc(&m.metric),
        esc(m.unit.symbol())
    );
    out.push_str(&chart(h, m));
    if m.steps.is_empty() {
        let _ = writeln!(
            out,
            "<p>No change point: {}.</p>",
            esc(&could_find(m, h.alpha_per_metric))
        );
    }
    let scale = Scale::of(m.unit, m.sensitivity.level);
    for (k, s) in m.steps.iter().enumerate() {
        let _ = writeln!(
            out,
            "<h3>Step {} at point {} ({}): {} → {} ({:+.1}%), p = {}</h3>",
            k + 1,
            s.at + 1,
            esc(&h.points[s.at].label),
            scale.show(s.before),
            scale.show(s.after),
            s.relative * 100.0,
            format_p(s.p_value)
        );
        match &s.attribution {
            Some(a) => {
                for line in attribution_lines(&m.metric, a) {
                    let _ = writeln!(out, "<p><code>{}</code></p>", esc(line.trim()));
                }
                out.push_str(&delta_chart(&format!("{} step {}", m.metric, k + 1), a));
            }
            None => out.push_str("<p>No attribution: the points were not probed.</p>\n"),
        }
        for line in s.sampled.iter().flat_map(sampled_lines) {
            let _ = writeln!(out, "<p><code>{}</code></p>", esc(line.trim()));
        }
    }
    if let Some(line) = noise_line(m) {
        let _ = writeln!(out, "<p>{}</p>", esc(&line));
    }
    out
}

/// The metric's value at each point, the level of each stretch between change points, and a
/// dashed line where each step starts.
fn chart(h: &History, m: &MetricHistory) -> String {
    let (left, top, plot_w, plot_h, bottom) = (90.0, 30.0, 760.0, 160.0, 22.0);
    let n = h.points.len().max(1);
    let slot = plot_w / n as f64;
    let x = |i: usize| left + (i as f64 + 0.5) * slot;
    let values: Vec<f64> = m.values.iter().flatten().copied().collect();
    let levels = levels(m, h.points.len());
    let all = values.iter().chain(levels.iter().map(|l| &l.2));
    let (lo, hi) = all.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(*v), hi.max(*v))
    });
    // A flat series still gets an axis a few percent wide, its labels apart.
    let pad = ((hi - lo) * 0.1)
        .max(hi.abs().max(lo.abs()) * 0.01)
        .max(f64::MIN_POSITIVE);
    let (lo, hi) = (lo - pad, hi + pad);
    let y = |v: f64| top + (hi - v) / (hi - lo) * plot_h;
    let scale = Scale::of(m.unit, m.sensitivity.level);
    let mut svg = format!(
        "<figure><svg class=\"chart\" width=\"{}\" height=\"{}\" role=\"img\" \
         aria-label=\"history of {}\">",
        left + plot_w + 10.0,
        top + plot_h + bottom,
        esc(&m.metric)
    );
    // The value axis: its ends and middle, in the unit the metric's size calls for.
    for v in [hi, (hi + lo) / 2.0, lo] {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\
             <path d=\"M{left} {:.1}h{plot_w}\" stroke=\"#eee\"/>",
            left - 6.0,
            y(v) + 4.0,
            esc(&scale.show(v)),
            y(v)
        );
    }
    // The point axis: numbers as in the table, thinned so they stay apart.
    let every = (28.0 / slot).ceil().max(1.0) as usize;
    for i in (0..h.points.len()).filter(|i| i % every == 0) {
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x(i),
            top + plot_h + 16.0,
            i + 1
        );
    }
    for &(from, to, level) in &levels {
        let _ = write!(
            svg,
            "<path d=\"M{:.1} {:.1}H{:.1}\" stroke=\"{LEVEL_COLOUR}\" stroke-width=\"3\">\
             <title>level {}</title></path>",
            x(from) - slot / 2.0,
            y(level),
            x(to - 1) + slot / 2.0,
            esc(&scale.show(level))
        );
    }
    for (k, s) in m.steps.iter().enumerate() {
        let at = left + s.at as f64 * slot;
        // Labels of steps close together are set on different lines.
        let (anchor, dx) = if at > left + plot_w * 0.8 {
            ("end", -4.0)
        } else {
            ("start", 4.0)
        };
        let _ = write!(
            svg,
            "<path d=\"M{at:.1} {top}v{plot_h}\" stroke=\"{STEP_COLOUR}\" stroke-width=\"2\" \
             stroke-dasharray=\"6 3\"/><text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\" \
             class=\"step\">step {}: {:+.1}%</text>",
            at + dx,
            12.0 + (k % 2) as f64 * 13.0,
            k + 1,
            s.relative * 100.0
        );
    }
    // The values, joined where the points follow each other.
    let mut path = String::new();
    let mut joined = false;
    for (i, v) in m.values.iter().enumerate() {
        match v {
            Some(v) => {
                let _ = write!(
                    path,
                    "{}{:.1} {:.1}",
                    if joined { "L" } else { "M" },
                    x(i),
                    y(*v)
                );
                joined = true;
            }
            None => joined = false,
        }
    }
    let _ = write!(
        svg,
        "<path d=\"{path}\" fill=\"none\" stroke=\"{POINT_COLOUR}\" stroke-width=\"1.5\"/>"
    );
    for (i, v) in m.values.iter().enumerate() {
        if let Some(v) = v {
            let _ = write!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{POINT_COLOUR}\">\
                 <title>{} {}: {}</title></circle>",
                x(i),
                y(*v),
                i + 1,
                esc(&h.points[i].label),
                esc(&scale.show(*v))
            );
        }
    }
    svg.push_str("</svg>");
    let _ = writeln!(
        svg,
        "<figcaption>{} per point ({}) and its level{} (orange){}.</figcaption></figure>",
        esc(&m.metric),
        match m.values.iter().flatten().count() {
            1 => "1 point".to_string(),
            c => format!("{c} points, mean {}", scale.show(m.sensitivity.level)),
        },
        if m.steps.is_empty() {
            ""
        } else {
            " between change points"
        },
        if m.steps.is_empty() {
            ""
        } else {
            ", where each step starts (dashed red)"
        }
    );
    svg
}

/// Each stretch of points between change points, `[from, to)` in the points' order, with its
/// level: the mean before the first step, then each step's level after.
fn levels(m: &MetricHistory, points: usize) -> Vec<(usize, usize, f64)> {
    if m.values.iter().flatten().next().is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut from = 0;
    let mut level = m.steps.first().map_or(m.sensitivity.level, |s| s.before);
    for s in &m.steps {
        out.push((from, s.at, level));
        (from, level) = (s.at, s.after);
    }
    out.push((from, points, level));
    out
}
