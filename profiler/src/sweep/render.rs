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
    report::{
        chart::{self, Mark, Plot, Values},
        figures::{num, round_figure},
        html::page,
        markup::Markup,
    },
    results::{PathKind, Unit},
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
        body.push_str(&plot(
            &format!("{} op ({})", w.name, w.unit),
            &[(&w.op, "#4e79a7")],
            (&s.parameter, "op"),
            values(&w.unit),
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
        let shown: Vec<(&Curve, &'static str)> = w
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
                (&s.parameter, "path per op"),
                Values::Of(Unit::Nanoseconds),
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

/// What a sweep curve's figures are: times in ns (each op's and each path's), or the op's
/// own unit where it is not a time.
fn values(unit: &str) -> Values {
    [
        Unit::Nanoseconds,
        Unit::Microseconds,
        Unit::Seconds,
        Unit::MegabytesPerSecond,
        Unit::Percent,
    ]
    .into_iter()
    .find(|u| u.symbol() == unit)
    .map_or(Values::Count, Values::Of)
}

/// The sweep's values on a linear x axis: its span, and the values with room for a label.
fn x_axis(xs: impl Iterator<Item = u64>) -> ((f64, f64), Vec<(f64, String)>) {
    let mut xs: Vec<f64> = xs.map(|x| x as f64).collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let range = (
        xs.first().copied().unwrap_or(0.0),
        xs.last().copied().unwrap_or(0.0),
    );
    let ticks = chart::spaced(&xs, range, f64::from(SIZE.0 - 100));
    (
        range,
        ticks.into_iter().map(|x| (x, round_figure(x))).collect(),
    )
}

const SIZE: (u32, u32) = (560, 240);

/// One chart: each curve's points (with their intervals as whiskers) and its fitted line, on
/// a linear x axis of the sweep's values; a line that would go below 0 is cut there.
fn plot(caption: &str, curves: &[(&Curve, &'static str)], axes: (&str, &str), y: Values) -> String {
    let (x_range, x_ticks) = x_axis(
        curves
            .iter()
            .flat_map(|(c, _)| c.points.iter().map(|p| p.x)),
    );
    let mut marks = Vec::new();
    for &(curve, colour) in curves {
        if let Some(line) = &curve.line {
            let at = |x: f64| (x, line.intercept + line.slope * x);
            marks.push(Mark::Line {
                from: at(x_range.0),
                to: at(x_range.1),
                colour,
                dashed: true,
                width: 1,
            });
        }
        marks.extend(curve.points.iter().map(|p| Mark::Point {
            at: (p.x as f64, p.value),
            interval: p.low.zip(p.high),
            colour,
            tip: format!("{}: {}", p.x, num(p.value)),
        }));
    }
    let plot = Plot {
        label: caption,
        size: SIZE,
        x_name: axes.0,
        x_range,
        x_ticks,
        y_name: axes.1,
        values: y,
        marks,
    };
    format!(
        "<figure>{}<figcaption>{}</figcaption></figure>\n",
        plot.svg(),
        esc(caption)
    )
}

/// The hooks' ns/op at each value stacked one on the next (each a band of its colour, in the
/// order given), so their sum, what the security stack costs the op, reads at the top; a
/// legend under it.
fn stacked(caption: &str, hooks: &[(&str, &Curve)], x_name: &str) -> String {
    let xs: Vec<u64> = hooks[0].1.points.iter().map(|p| p.x).collect();
    // Each hook's value at each x (0 where it has no point there), on the running sums.
    let value = |c: &Curve, x: u64| {
        c.points
            .iter()
            .find(|p| p.x == x)
            .map_or(0.0, |p| p.value.max(0.0))
    };
    let mut below = vec![0.0; xs.len()];
    let mut marks = Vec::new();
    for ((name, c), colour) in hooks.iter().zip(PATH_COLOURS.iter().cycle()) {
        let top: Vec<f64> = xs
            .iter()
            .zip(&below)
            .map(|(&x, b)| b + value(c, x))
            .collect();
        let at = |ys: &[f64]| -> Vec<(f64, f64)> {
            xs.iter().zip(ys).map(|(&x, &y)| (x as f64, y)).collect()
        };
        marks.push(Mark::Band {
            top: at(&top),
            bottom: at(&below),
            colour,
            tip: (*name).to_string(),
        });
        below = top;
    }
    let (x_range, x_ticks) = x_axis(xs.iter().copied());
    let plot = Plot {
        label: caption,
        size: SIZE,
        x_name,
        x_range,
        x_ticks,
        y_name: "hooks per op",
        values: Values::Of(Unit::Nanoseconds),
        marks,
    };
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
    format!(
        "<figure>{}<figcaption>{}: {}</figcaption></figure>\n",
        plot.svg(),
        esc(caption),
        legend.join(" ")
    )
}
