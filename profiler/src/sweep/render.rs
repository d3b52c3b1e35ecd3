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
    output::{self, Document, Format},
    report::{figures::num, html::page, markup::Markup},
    results::PathKind,
    text::esc,
};

impl Document for Sweep {
    const FORMATS: &'static [Format] =
        &[Format::Text, Format::Markdown, Format::Json, Format::Html];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => Ok(render(self, Markup::Terminal).into_bytes()),
            Format::Markdown => Ok(render(self, Markup::Markdown).into_bytes()),
            Format::Html => Ok(render_html(self).into_bytes()),
            other => output::unlisted(other),
        }
    }
}

/// `+3.10 ns per filter (95%: +2.50 to +3.70)`; `within noise (+-174 ns per layer)` where
/// the interval holds 0; `falls 3.1 ns per filter (95%: 2.5 to 3.7 less)` for a decrease.
fn slope(line: &Line, unit: &str, step: &str) -> String {
    match (line.slope_low, line.slope_high) {
        (Some(lo), Some(hi)) if lo <= 0.0 && hi >= 0.0 => format!(
            "within noise (+-{} {unit} per {step})",
            num((hi - lo) / 2.0)
        ),
        (Some(lo), Some(hi)) if line.slope < 0.0 => format!(
            "falls {} {unit} per {step} (95%: {} to {} less)",
            num(-line.slope),
            num(-hi),
            num(-lo)
        ),
        (Some(lo), Some(hi)) => format!(
            "+{} {unit} per {step} (95%: +{} to +{})",
            num(line.slope),
            num(lo),
            num(hi)
        ),
        _ => format!(
            "{} {unit} per {step} (no interval: too few points)",
            signed(line.slope)
        ),
    }
}

/// A change with its direction in words where it is a decrease (`+3.1`, `falls 3.1`).
fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", num(v))
    } else {
        format!("falls {}", num(-v))
    }
}

/// A path's slope and its interval as two cells: `within noise` and `+-7.6` where the
/// interval holds 0, else the slope and its ends.
fn slope_cells(line: &Line) -> (String, String) {
    match (line.slope_low, line.slope_high) {
        (Some(lo), Some(hi)) if lo <= 0.0 && hi >= 0.0 => {
            ("within noise".into(), format!("+-{}", num((hi - lo) / 2.0)))
        }
        (Some(lo), Some(hi)) if line.slope < 0.0 => (
            signed(line.slope),
            format!("{} to {} less", num(-hi), num(-lo)),
        ),
        (lo, hi) => (signed(line.slope), interval(lo, hi)),
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
    let measured =
        w.op.points
            .iter()
            .find(|p| p.x == s.values[0])
            .map(|p| format!(", measured {} {}", num(p.value), w.unit))
            .unwrap_or_default();
    match &w.op.line {
        Some(line) => format!(
            "{}: {}, the line at {}: {} {} (fitted{measured}); {}",
            w.name,
            slope(line, &w.unit, &s.unit),
            s.values[0],
            num((line.intercept + line.slope * s.values[0] as f64).max(0.0)),
            w.unit,
            linearity(line)
        ),
        None => format!("{}: no line (measured at fewer than two values)", w.name),
    }
}

/// The op's slope as its parts': `slope split: syscall openat +480.2 (95%: +450.0 to
/// +510.0) + outside the probed syscalls +38.70 (within noise, +-41.00) = op +520.1 ns/op per
/// layer`. Every term keeps its signed figure, so the sum can be checked against the op's.
fn split_line(s: &Sweep, w: &WorkloadSweep) -> Option<String> {
    let split = w.split.as_ref()?;
    let op = w.op.line?;
    let term =
        |name: &str, line: &Line| format!("{name} {} ({})", signed(line.slope), within(line));
    let mut terms: Vec<String> = split.parts.iter().map(|p| term(&p.name, &p.line)).collect();
    terms.push(term(&split.remainder.name, &split.remainder.line));
    Some(format!(
        "slope split: {} = op {} ns/op per {}",
        terms.join(" + "),
        signed(op.slope),
        s.unit
    ))
}

/// A slope's interval in words: `95%: +2.5 to +3.7`, `95%: 2.5 to 3.7 less`, `within noise,
/// +-7.6`.
fn within(line: &Line) -> String {
    match (line.slope_low, line.slope_high) {
        (Some(lo), Some(hi)) if lo <= 0.0 && hi >= 0.0 => {
            format!("within noise, +-{}", num((hi - lo) / 2.0))
        }
        (Some(lo), Some(hi)) if hi < 0.0 => format!("95%: {} to {} less", num(-hi), num(-lo)),
        (Some(lo), Some(hi)) => format!("95%: +{} to +{}", num(lo), num(hi)),
        _ => "no interval: too few points".into(),
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
        if let Some(split) = split_line(s, w) {
            let _ = writeln!(out, "{split}");
        }
        let mut points = markup.table(&[&s.parameter, &format!("op ({})", w.unit), "95%"]);
        for p in &w.op.points {
            let cut = if p.truncated { " (cut at 0)" } else { "" };
            points.add_row(vec![
                p.x.to_string(),
                num(p.value),
                format!("{}{cut}", interval(p.low, p.high)),
            ]);
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
            let (change, within) = slope_cells(&line);
            paths.add_row(vec![
                name,
                p.method.to_string(),
                change,
                within,
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
        if let Some(split) = split_line(s, w) {
            let _ = writeln!(body, "<p>{}</p>", esc(&split));
        }
        let op_axis = format!("op ({})", w.unit);
        body.push_str(&plot(
            &format!("{} op ({})", w.name, w.unit),
            &[(&w.op, "#4e79a7")],
            (&s.parameter, &op_axis),
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
                (&s.parameter, "ns/op"),
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
                (&s.parameter, "ns/op"),
            ));
            body.push_str("<table><tr><th>path</th><th>from</th><th>slope</th><th>95%</th></tr>\n");
            for (p, colour) in w
                .paths
                .iter()
                .filter(|p| p.curve.line.is_some())
                .zip(PATH_COLOURS)
            {
                let line = p.curve.line.expect("filtered");
                let (change, within) = slope_cells(&line);
                let _ = writeln!(
                    body,
                    "<tr><td><span style=\"color:{colour}\">&#9632;</span> {} {}</td><td>{}</td>\
                     <td>{}</td><td>{}</td></tr>",
                    p.kind.name(),
                    esc(&p.name),
                    p.method,
                    change,
                    within
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
fn plot(caption: &str, curves: &[(&Curve, &str)], axes: (&str, &str)) -> String {
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
    let (_, y_hi) = bounds(&ys);
    // Times and rates from 0: a fitted line that would cross it is drawn down to it.
    let frame = Frame::new(&xs, y_hi.max(0.0));
    let (sx, sy) = (|x: f64| frame.x(x), |y: f64| frame.y(y));
    let (x_lo, x_hi) = (frame.x_lo, frame.x_hi);
    let mut svg = frame.open(caption, &xs, axes);
    for (curve, colour) in curves {
        if let Some(line) = &curve.line {
            let at = |x: f64| line.intercept + line.slope * x;
            let _ = writeln!(
                svg,
                "<line class=\"fit\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" \
                 stroke=\"{colour}\" stroke-dasharray=\"4 3\"/>",
                sx(x_lo),
                sy(at(x_lo).max(0.0)),
                sx(x_hi),
                sy(at(x_hi).max(0.0))
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
fn stacked(caption: &str, hooks: &[(&str, &Curve)], axes: (&str, &str)) -> String {
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
    let frame = Frame::new(&xs, below.iter().copied().fold(0.0, f64::max));
    let mut svg = frame.open(caption, &xs, axes);
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

/// A chart's scales: a linear x axis over the sweep's values and a y axis from 0 to a round
/// figure at or above the largest value, ticked at round steps, in an SVG of the same size
/// for every chart.
struct Frame {
    x_lo: f64,
    x_hi: f64,
    y_lo: f64,
    y_hi: f64,
    y_step: f64,
}

/// A round step (1, 2 or 5 times a power of ten) that cuts 0..`top` into four to eight.
fn round_step(top: f64) -> f64 {
    if top <= 0.0 || !top.is_finite() {
        return 1.0;
    }
    let raw = top / 5.0;
    let power = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| top / step <= 8.0)
        .unwrap_or(10.0 * power)
}

impl Frame {
    const W: f64 = 560.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 64.0;
    const RIGHT: f64 = 40.0;
    const BOTTOM: f64 = 30.0;

    fn new(xs: &[u64], top: f64) -> Frame {
        let (x_lo, x_hi) = bounds(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>());
        let y_step = round_step(top);
        // The first round figure at or above the top (a flat zero line still gets a scale).
        let y_hi = ((top / y_step).ceil() * y_step).max(y_step);
        Frame {
            x_lo,
            x_hi,
            y_lo: 0.0,
            y_hi,
            y_step,
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
    fn open(&self, caption: &str, xs: &[u64], (x_name, y_name): (&str, &str)) -> String {
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
        let ticks = (self.y_hi / self.y_step).round() as usize;
        for y in (0..=ticks).map(|i| i as f64 * self.y_step) {
            let _ = writeln!(
                svg,
                "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                left - 8.0,
                self.y(y) + 4.0,
                round_figure(y)
            );
        }
        let _ = writeln!(
            svg,
            "<text x=\"12\" y=\"{:.1}\" text-anchor=\"middle\" \
             transform=\"rotate(-90 12 {:.1})\">{}</text>",
            (10.0 + bottom) / 2.0,
            (10.0 + bottom) / 2.0,
            esc(y_name)
        );
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

/// A tick's figure: a round number as it is, without trailing zeros.
fn round_figure(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn bounds(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        })
}
