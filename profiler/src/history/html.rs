//! The history as one self-contained HTML page: the points in order, then per metric a chart
//! of its value over the series with the level between change points and each step marked,
//! and under it the hooks (and other paths) whose cost moved at that step.
use std::fmt::Write;

use super::{could_find, format_alpha, format_p, noise_line, History, MetricHistory};
use crate::{
    compare::{attribution_lines, html::delta_chart, sampled_lines},
    export::rfc3339,
    report::{
        chart::{Mark, Plot, Values},
        figures::Scale,
        html::page,
    },
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
/// dashed line where each step starts; the value axis from 0, as every chart's.
fn chart(h: &History, m: &MetricHistory) -> String {
    let scale = Scale::of(m.unit, m.sensitivity.level);
    // Point i (from 1, as in the table) at x = i; a step between two points.
    let n = h.points.len().max(1);
    let every = (28.0 * n as f64 / 760.0).ceil().max(1.0) as usize;
    let mut marks: Vec<Mark> = levels(m, h.points.len())
        .into_iter()
        .map(|(from, to, level)| Mark::Line {
            from: (from as f64 + 0.5, level),
            to: (to as f64 + 0.5, level),
            colour: LEVEL_COLOUR,
            dashed: false,
            width: 3,
        })
        .collect();
    marks.extend(m.steps.iter().enumerate().map(|(k, s)| Mark::Marker {
        x: s.at as f64 + 0.5,
        colour: STEP_COLOUR,
        label: format!("step {}: {:+.1}%", k + 1, s.relative * 100.0),
        row: (k % 2) as u32,
    }));
    // The values, joined where the points follow each other.
    let mut run: Vec<(f64, f64)> = Vec::new();
    for (i, v) in m.values.iter().enumerate() {
        match v {
            Some(v) => run.push(((i + 1) as f64, *v)),
            None => marks.push(Mark::Path {
                points: std::mem::take(&mut run),
                colour: POINT_COLOUR,
            }),
        }
    }
    marks.push(Mark::Path {
        points: run,
        colour: POINT_COLOUR,
    });
    marks.extend(m.values.iter().enumerate().filter_map(|(i, v)| {
        v.map(|v| Mark::Point {
            at: ((i + 1) as f64, v),
            interval: None,
            colour: POINT_COLOUR,
            tip: format!("{} {}: {}", i + 1, h.points[i].label, scale.show(v)),
        })
    }));
    let label = format!("history of {}", m.metric);
    let plot = Plot {
        label: &label,
        size: (860, 240),
        x_name: "point",
        x_range: (0.5, n as f64 + 0.5),
        x_ticks: (1..=n)
            .filter(|i| (i - 1) % every == 0)
            .map(|i| (i as f64, i.to_string()))
            .collect(),
        y_name: &m.metric,
        values: Values::Of(m.unit),
        marks,
    };
    format!(
        "<figure>{}<figcaption>{} per point ({}) and its level{} (orange){}.</figcaption></figure>\n",
        plot.svg(),
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
    )
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
