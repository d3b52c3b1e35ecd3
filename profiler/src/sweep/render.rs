//! The sweep in each format `run --sweep` prints it in: text and markdown (a line per
//! workload, then its points and its paths' slopes), JSON (every point), and an HTML page
//! with a plot per workload (the points with their intervals and the fitted line; under it
//! the paths' lines).
use std::fmt::Write;

use anyhow::Result;

use super::{
    fit::Line,
    report::{Curve, Sweep, WorkloadSweep, PATHS_SHOWN},
};
use crate::{
    output::{self, Document, Exporter, Format},
    report::{figures::num, html::page, markup::Markup},
    results::PathKind,
    text::esc,
};

impl Document for Sweep {
    const FORMATS: &'static [Format] =
        &[Format::Text, Format::Markdown, Format::Json, Format::Html];

    fn exporter(format: Format) -> Option<&'static dyn Exporter<Self>> {
        match format {
            Format::Text => Some(&output::Text),
            Format::Markdown => Some(&output::Markdown),
            Format::Json => Some(&output::Json),
            Format::Html => Some(&output::Html),
            _ => None,
        }
    }
}

impl Exporter<Sweep> for output::Text {
    fn serialize(&self, s: &Sweep) -> Result<Vec<u8>> {
        Ok(render(s, Markup::Terminal).into_bytes())
    }
}

impl Exporter<Sweep> for output::Markdown {
    fn serialize(&self, s: &Sweep) -> Result<Vec<u8>> {
        Ok(render(s, Markup::Markdown).into_bytes())
    }
}

impl Exporter<Sweep> for output::Json {
    fn serialize(&self, s: &Sweep) -> Result<Vec<u8>> {
        output::pretty_json(s)
    }
}

impl Exporter<Sweep> for output::Html {
    fn serialize(&self, s: &Sweep) -> Result<Vec<u8>> {
        Ok(render_html(s).into_bytes())
    }
}

/// `+3.10 ns per filter (95%: +2.50 to +3.70)`.
fn slope(line: &Line, unit: &str, step: &str) -> String {
    let interval = match (line.slope_low, line.slope_high) {
        (Some(lo), Some(hi)) => format!(" (95%: {} to {})", signed(lo), signed(hi)),
        _ => " (no interval: too few points)".into(),
    };
    format!("{} {unit} per {step}{interval}", signed(line.slope))
}

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", num(v))
    } else {
        num(v)
    }
}

/// What the lack-of-fit test says of the line.
fn linearity(line: &Line) -> String {
    match line.linearity_p {
        Some(p) if line.bends() => {
            format!("the points bend away from a line (lack of fit p = {p:.3}): read the points")
        }
        Some(p) => format!("a line fits (lack of fit p = {p:.2})"),
        None => "too few values or rounds to test the line".into(),
    }
}

fn headline(s: &Sweep, w: &WorkloadSweep) -> String {
    match &w.op.line {
        Some(line) => format!(
            "{}: {}, {} {} at {}; {}",
            w.name,
            slope(line, &w.unit, &s.unit),
            num(line.intercept + line.slope * s.values[0] as f64),
            w.unit,
            s.values[0],
            linearity(line)
        ),
        None => format!("{}: no line (measured at fewer than two values)", w.name),
    }
}

fn render(s: &Sweep, markup: Markup) -> String {
    let mut out = format!(
        "Sweep of {} over {} ({} round{}: every value measured in each round, back to back in a \
         random order, a fresh runner each; lines fitted within rounds)\n",
        s.parameter,
        s.values
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        s.rounds,
        if s.rounds == 1 { "" } else { "s" }
    );
    for (x, what) in s.values.iter().zip(&s.variants) {
        let _ = writeln!(out, "  {}={x}: {what}", s.parameter);
    }
    if let Some(note) = &s.note {
        let _ = writeln!(out, "note: {note}");
    }
    for w in &s.workloads {
        let _ = write!(out, "\n{}\n", headline(s, w));
        let mut points = markup.table(&[&s.parameter, &format!("op ({})", w.unit), "95%"]);
        for p in &w.op.points {
            points.add_row(vec![p.x.to_string(), num(p.value), interval(p.low, p.high)]);
        }
        let _ = writeln!(out, "{points}");
        if !w.scaling.is_empty() {
            let each: Vec<String> = w
                .scaling
                .iter()
                .map(|s| {
                    let noun = if s.copies == 1 { "copy" } else { "copies" };
                    format!("{} {noun} {:.0}%", s.copies, 100.0 * s.efficiency)
                })
                .collect();
            let _ = writeln!(
                out,
                "scaling efficiency (throughput per copy against the fewest copies'): {}",
                each.join(", ")
            );
        }
        let moved: Vec<_> = w.paths.iter().filter(|p| p.curve.line.is_some()).collect();
        if moved.is_empty() {
            continue;
        }
        let step = format!("ns/op per {}", s.unit);
        let first = format!("ns/op at {}", s.values[0]);
        let last = format!("at {}", s.values[s.values.len() - 1]);
        let mut paths = markup.table(&["path", "from", &step, "95%", &first, &last]);
        for p in moved.iter().take(PATHS_SHOWN) {
            let line = p.curve.line.expect("filtered");
            let name = match &p.parent {
                Some(parent) => format!("{} {} (under {parent})", p.kind.name(), p.name),
                None => format!("{} {}", p.kind.name(), p.name),
            };
            paths.add_row(vec![
                name,
                p.method.to_string(),
                signed(line.slope),
                interval(line.slope_low, line.slope_high),
                end(&p.curve, 0),
                end(&p.curve, p.curve.points.len() - 1),
            ]);
        }
        let _ = writeln!(out, "{paths}");
        if moved.len() > PATHS_SHOWN {
            let _ = writeln!(
                out,
                "({} more paths in --format json or html)",
                moved.len() - PATHS_SHOWN
            );
        }
    }
    out
}

fn end(c: &Curve, i: usize) -> String {
    c.points.get(i).map_or_else(String::new, |p| num(p.value))
}

fn interval(low: Option<f64>, high: Option<f64>) -> String {
    match (low, high) {
        (Some(lo), Some(hi)) => format!("{} to {}", num(lo), num(hi)),
        _ => String::new(),
    }
}

/// The page: per workload, the op's plot (points, intervals, the line) and the paths' lines.
fn render_html(s: &Sweep) -> String {
    let title = format!("hookprof sweep: {}", s.parameter);
    let mut body = format!("<h1>{}</h1>\n<ul>\n", esc(&title));
    for (x, what) in s.values.iter().zip(&s.variants) {
        let _ = writeln!(body, "<li>{}={x}: {}</li>", esc(&s.parameter), esc(what));
    }
    body.push_str("</ul>\n");
    if let Some(note) = &s.note {
        let _ = writeln!(body, "<p>Note: {}</p>", esc(note));
    }
    for w in &s.workloads {
        let _ = writeln!(
            body,
            "<h2>{}</h2>\n<p>{}</p>",
            esc(&w.name),
            esc(&headline(s, w))
        );
        body.push_str(&plot(
            &format!("{} op ({})", w.name, w.unit),
            &[(&w.op, "#4e79a7")],
            &s.parameter,
        ));
        let hooks: Vec<(&str, &Curve)> = w
            .paths
            .iter()
            .filter(|p| p.kind == PathKind::Hook && p.parent.is_none())
            .map(|p| (p.name.as_str(), &p.curve))
            .collect();
        if !hooks.is_empty() {
            body.push_str(&stacked(
                &format!("{}: security hooks stacked (ns/op)", w.name),
                &hooks,
                &s.parameter,
            ));
        }
        let shown: Vec<(&Curve, &str)> = w
            .paths
            .iter()
            .filter(|p| p.curve.line.is_some())
            .take(PATHS_SHOWN)
            .zip(PATH_COLOURS)
            .map(|(p, c)| (&p.curve, *c))
            .collect();
        if !shown.is_empty() {
            body.push_str(&plot(
                &format!("{}: paths (ns/op)", w.name),
                &shown,
                &s.parameter,
            ));
            body.push_str("<table><tr><th>path</th><th>from</th><th>slope</th><th>95%</th></tr>\n");
            for (p, colour) in w
                .paths
                .iter()
                .filter(|p| p.curve.line.is_some())
                .zip(PATH_COLOURS)
            {
                let line = p.curve.line.expect("filtered");
                let _ = writeln!(
                    body,
                    "<tr><td><span style=\"color:{colour}\">&#9632;</span> {} {}</td><td>{}</td>\
                     <td>{}</td><td>{}</td></tr>",
                    p.kind.name(),
                    esc(&p.name),
                    p.method,
                    signed(line.slope),
                    interval(line.slope_low, line.slope_high)
                );
            }
            body.push_str("</table>\n");
        }
    }
    page(&title, &body)
}

const PATH_COLOURS: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
];

/// One chart: each curve's points (with their intervals as whiskers) and its fitted line, on
/// a linear x axis of the sweep's values.
fn plot(caption: &str, curves: &[(&Curve, &str)], x_name: &str) -> String {
    let xs: Vec<u64> = curves
        .iter()
        .flat_map(|(c, _)| c.points.iter().map(|p| p.x))
        .collect();
    let ys: Vec<f64> = curves
        .iter()
        .flat_map(|(c, _)| {
            c.points
                .iter()
                .flat_map(|p| [Some(p.value), p.low, p.high])
                .flatten()
        })
        .collect();
    let (y_lo, y_hi) = bounds(&ys);
    let frame = Frame::new(&xs, y_lo.min(0.0), y_hi.max(0.0) * 1.05);
    let (sx, sy) = (|x: f64| frame.x(x), |y: f64| frame.y(y));
    let (x_lo, x_hi) = (frame.x_lo, frame.x_hi);
    let mut svg = frame.open(caption, &xs, x_name);
    for (curve, colour) in curves {
        if let Some(line) = &curve.line {
            let at = |x: f64| line.intercept + line.slope * x;
            let _ = writeln!(
                svg,
                "<line class=\"fit\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" \
                 stroke=\"{colour}\" stroke-dasharray=\"4 3\"/>",
                sx(x_lo),
                sy(at(x_lo)),
                sx(x_hi),
                sy(at(x_hi))
            );
        }
        for p in &curve.points {
            let x = sx(p.x as f64);
            if let (Some(lo), Some(hi)) = (p.low, p.high) {
                let _ = writeln!(
                    svg,
                    "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"{colour}\"/>",
                    sy(lo),
                    sy(hi)
                );
            }
            let _ = writeln!(
                svg,
                "<circle class=\"point\" cx=\"{x:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{colour}\">\
                 <title>{}: {}</title></circle>",
                sy(p.value),
                p.x,
                num(p.value)
            );
        }
    }
    let _ = writeln!(
        svg,
        "</svg><figcaption>{}</figcaption></figure>",
        esc(caption)
    );
    svg
}

/// The hooks' ns/op at each value stacked one on the next (each a band of its colour, the
/// largest slope at the bottom), so their sum, what the security stack costs the op, reads at
/// the top; a legend under it.
fn stacked(caption: &str, hooks: &[(&str, &Curve)], x_name: &str) -> String {
    let xs: Vec<u64> = hooks[0].1.points.iter().map(|p| p.x).collect();
    // Each hook's value at each x (0 where it has no point there), and the running sums.
    let value = |c: &Curve, x: u64| {
        c.points
            .iter()
            .find(|p| p.x == x)
            .map_or(0.0, |p| p.value.max(0.0))
    };
    let mut below = vec![0.0; xs.len()];
    let mut bands: Vec<(Vec<f64>, Vec<f64>)> = Vec::new();
    for (_, c) in hooks {
        let top: Vec<f64> = xs
            .iter()
            .zip(&below)
            .map(|(&x, b)| b + value(c, x))
            .collect();
        bands.push((below.clone(), top.clone()));
        below = top;
    }
    let frame = Frame::new(&xs, 0.0, below.iter().copied().fold(0.0, f64::max) * 1.05);
    let mut svg = frame.open(caption, &xs, x_name);
    let at = |x: u64, y: f64| format!("{:.1},{:.1}", frame.x(x as f64), frame.y(y));
    for (((bottom, top), (name, _)), colour) in
        bands.iter().zip(hooks).zip(PATH_COLOURS.iter().cycle())
    {
        let mut points: Vec<String> = xs.iter().zip(top).map(|(&x, y)| at(x, *y)).collect();
        points.extend(xs.iter().zip(bottom).rev().map(|(&x, y)| at(x, *y)));
        let _ = writeln!(
            svg,
            "<polygon class=\"band\" points=\"{}\" fill=\"{colour}\"><title>{}</title></polygon>",
            points.join(" "),
            esc(name)
        );
    }
    let legend: Vec<String> = hooks
        .iter()
        .zip(PATH_COLOURS.iter().cycle())
        .map(|((name, _), colour)| {
            format!(
                "<span style=\"color:{colour}\">&#9632;</span> {}",
                esc(name)
            )
        })
        .collect();
    let _ = writeln!(
        svg,
        "</svg><figcaption>{}: {}</figcaption></figure>",
        esc(caption),
        legend.join(" ")
    );
    svg
}

/// A chart's scales: a linear x axis over the sweep's values and a y axis from `y_lo` to
/// `y_hi`, in an SVG of the same size for every chart.
struct Frame {
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
}

impl Frame {
    const W: f64 = 560.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 64.0;
    const RIGHT: f64 = 40.0;
    const BOTTOM: f64 = 30.0;

    fn new(xs: &[u64], y_lo: f64, y_hi: f64) -> Frame {
        let (x_lo, x_hi) = bounds(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>());
        // A flat zero line still needs a scale.
        let y_hi = if y_hi > y_lo { y_hi } else { y_lo + 1.0 };
        Frame {
            x_lo,
            x_hi,
            y_lo,
            y_hi,
        }
    }

    fn x(&self, x: f64) -> f64 {
        let span = (self.x_hi - self.x_lo).max(1e-9);
        Self::LEFT + (x - self.x_lo) / span * (Self::W - Self::LEFT - Self::RIGHT)
    }

    fn y(&self, y: f64) -> f64 {
        10.0 + (self.y_hi - y) / (self.y_hi - self.y_lo) * (Self::H - Self::BOTTOM - 10.0)
    }

    /// The chart's opening: the SVG element, its axes, three y labels, the x values that have
    /// room for a label, and the x axis' name.
    fn open(&self, caption: &str, xs: &[u64], x_name: &str) -> String {
        let (w, h, left, bottom) = (Self::W, Self::H, Self::LEFT, Self::H - Self::BOTTOM);
        let mut svg = format!(
            "<figure><svg class=\"chart\" width=\"{w}\" height=\"{h}\" role=\"img\" \
             aria-label=\"{}\">\n",
            esc(caption)
        );
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#888\"/>\
             <line x1=\"{left}\" y1=\"10\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#888\"/>",
            w - Self::RIGHT
        );
        for y in [self.y_lo, (self.y_lo + self.y_hi) / 2.0, self.y_hi] {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                left - 8.0,
                self.y(y) + 4.0,
                num(y)
            );
        }
        let mut ticks = xs.to_vec();
        ticks.sort_unstable();
        ticks.dedup();
        for (at, x) in spaced(&ticks, |x| self.x(x as f64)) {
            let _ = writeln!(
                svg,
                "<text x=\"{at:.1}\" y=\"{}\" text-anchor=\"middle\">{x}</text>",
                bottom + 14.0
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            (left + w) / 2.0,
            h - 2.0,
            esc(x_name)
        );
        svg
    }
}

/// The x ticks to label and where: values closer to the last labelled one than a label's
/// width (0, 1 and 10 on an axis to 1,000) are left unlabelled; their points still show.
fn spaced(xs: &[u64], at: impl Fn(u64) -> f64) -> Vec<(f64, u64)> {
    const GAP: f64 = 28.0;
    let mut out: Vec<(f64, u64)> = Vec::new();
    for &x in xs {
        let position = at(x);
        if out.last().is_none_or(|(last, _)| position - last >= GAP) {
            out.push((position, x));
        }
    }
    out
}

fn bounds(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}
