//! Every chart of the HTML pages, drawn by plotters' SVG backend into a string: value plots
//! (points with their intervals, fitted lines, levels, stacked bands, bars over an x axis,
//! marked steps) and rows of horizontal bars (the parts of an op, changes either side of 0).
//! What every chart keeps true is kept here once: a value axis starts at 0 (or spans 0 for
//! changes), nothing is drawn below it, its ticks are round 1-2-5 figures in the unit the
//! reports print (ns, us, ms: `figures::Scale`), and the text is escaped once: plotters
//! escapes what it draws, [`esc`] what is added here (the chart's aria-label and `<title>`,
//! each mark's tooltip). Text is `<text>` in the page's font: no font file is read.
use std::fmt::Write;

use plotters::{
    coord::ranged1d::{DefaultFormatting, KeyPointHint},
    prelude::*,
    style::text_anchor::{HPos, Pos, VPos},
};

use super::figures::{round_figure, Scale};
use crate::{results::Unit, text::esc};

const FONT: &str = "sans-serif";
/// plotters writes a font size of size / 1.24: 13.6 comes out as the page's 11 px.
const TEXT: f64 = 13.6;
const AXIS: RGBColor = RGBColor(0x88, 0x88, 0x88);
const GRID: RGBColor = RGBColor(0xee, 0xee, 0xee);
const INK: RGBColor = RGBColor(0x22, 0x22, 0x22);

/// What a value axis counts: a unit's figures (times scaled to ns, us, ms or s), or plain
/// counts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Values {
    Of(Unit),
    /// A change in a unit's figures, signed on both sides of 0 (`+200 ns`, `-200 ns`).
    Change(Unit),
    /// Shares of a whole, ticked in percent.
    Share,
    Count,
}

impl Values {
    /// A tick's label on an axis that reaches `top`: a round figure with its unit.
    fn tick(self, v: f64, top: f64) -> String {
        match self {
            Values::Of(unit) => Scale::of(unit, top).tick(v),
            Values::Change(unit) if v > 0.0 => format!("+{}", Scale::of(unit, top).tick(v)),
            Values::Change(unit) => Scale::of(unit, top).tick(v),
            Values::Share => format!("{}%", round_figure(v * 100.0)),
            Values::Count => round_figure(v),
        }
    }
}

/// An x-y chart with a value axis from 0.
pub(crate) struct Plot<'a> {
    /// What the chart shows, for readers that cannot see it (aria-label and `<title>`).
    pub label: &'a str,
    pub size: (u32, u32),
    pub x_name: &'a str,
    /// The x axis' span and its labelled values.
    pub x_range: (f64, f64),
    pub x_ticks: Vec<(f64, String)>,
    pub y_name: &'a str,
    pub values: Values,
    pub marks: Vec<Mark>,
}

/// What a plot draws, in its data's coordinates; a mark with a tooltip says it on hover.
pub(crate) enum Mark {
    /// A point and its 95% interval as a whisker.
    Point {
        at: (f64, f64),
        interval: Option<(f64, f64)>,
        colour: &'static str,
        tip: String,
    },
    /// A straight line (a fit, dashed; a level, wide), cut where it would go below 0.
    Line {
        from: (f64, f64),
        to: (f64, f64),
        colour: &'static str,
        dashed: bool,
        width: u32,
    },
    /// Points joined in order.
    Path {
        points: Vec<(f64, f64)>,
        colour: &'static str,
    },
    /// The region between two runs of points over the same xs (a stacked band).
    Band {
        top: Vec<(f64, f64)>,
        bottom: Vec<(f64, f64)>,
        colour: &'static str,
        tip: String,
    },
    /// A bar from 0 up to `height` over `[x0, x1]`.
    Bar {
        x: (f64, f64),
        height: f64,
        colour: &'static str,
        tip: String,
    },
    /// A dashed line across the plot at `x`, its label at the top (`row` 0 or 1, so labels
    /// of marks close together do not overlap).
    Marker {
        x: f64,
        colour: &'static str,
        label: String,
        row: u32,
    },
}

type Area<'b> = DrawingArea<SVGBackend<'b>, plotters::coord::Shift>;
type Coords = Cartesian2d<Ticked, Ticked>;
type Context<'c, 'b> = ChartContext<'c, SVGBackend<'b>, Coords>;
type Drawn = Result<(), Box<dyn std::error::Error>>;

/// A linear axis over `lo..hi` ticked at the given values, no others.
#[derive(Clone)]
pub(crate) struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let at = (v - self.lo) / (self.hi - self.lo).max(1e-12);
        limit.0 + (at * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

fn ticked(lo: f64, hi: f64, ticks: Vec<f64>) -> Ticked {
    Ticked { lo, hi, ticks }
}

/// The value axis' top and ticks: a round step (1, 2 or 5 times a power of ten) that cuts
/// `lo..hi` into four to eight, widened to the ticks at or beyond its ends.
pub(crate) fn value_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let step = round_step((hi - lo).max(hi.abs()).max(lo.abs()));
    // A figure a rounding error past a tick (a share of 1.0000000001) ends at that tick.
    let first = (lo / step + 1e-9).floor().min(0.0) as i64;
    let last = ((hi / step - 1e-9).ceil() as i64).max(first + 1);
    let ticks: Vec<f64> = (first..=last).map(|k| k as f64 * step).collect();
    (first as f64 * step, last as f64 * step, ticks)
}

/// A round step (1, 2 or 5 times a power of ten) that cuts 0..`top` into four to eight.
fn round_step(top: f64) -> f64 {
    if top <= 0.0 || !top.is_finite() {
        return 1.0;
    }
    let power = 10f64.powf((top / 5.0).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|step| top / step <= 8.0)
        .unwrap_or(10.0 * power)
}

/// Of sorted `xs`, those with room for a label on an axis `width` px wide: values closer
/// to the last labelled one than a label's width (0, 1 and 10 on an axis to 1,000) are left
/// unlabelled; their points still show.
pub(crate) fn spaced(xs: &[f64], range: (f64, f64), width: f64) -> Vec<f64> {
    const GAP: f64 = 28.0;
    let span = (range.1 - range.0).max(1e-9);
    let mut out: Vec<f64> = Vec::new();
    for &x in xs {
        if out
            .last()
            .is_none_or(|last| (x - last) / span * width >= GAP)
        {
            out.push(x);
        }
    }
    out
}

fn rgb(hex: &str) -> RGBColor {
    let byte = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .unwrap_or(0)
    };
    match hex.len() {
        // `#555`: each digit doubled.
        4 => {
            let d = |i: usize| {
                hex.get(i..=i)
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .map_or(0, |v| v * 17)
            };
            RGBColor(d(1), d(2), d(3))
        }
        _ => RGBColor(byte(1), byte(3), byte(5)),
    }
}

fn text_style(anchor: HPos) -> TextStyle<'static> {
    TextStyle::from((FONT, TEXT).into_font())
        .color(&INK)
        .pos(Pos::new(anchor, VPos::Center))
}

/// The SVG plotters drew, made one accessible figure of an HTML page: the root is an image
/// named `label` with its `<title>`, and the k-th circle and polygon (only marks are drawn as
/// those) carry the k-th tooltip of each. The namespace goes: HTML gives inline SVG its own,
/// and a page names no address it does not fetch.
fn finish(svg: String, label: &str, circles: &[String], polygons: &[String]) -> String {
    let svg = svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1);
    let svg = titled(&svg, "<circle", circles);
    let svg = titled(&svg, "<polygon", polygons);
    let (open, rest) = svg.split_at(svg.find('>').unwrap_or(0));
    format!(
        "{open} class=\"chart\" role=\"img\" aria-label=\"{}\"><title>{}</title>{}",
        esc(label),
        esc(label),
        &rest[1..]
    )
}

fn titled(svg: &str, tag: &str, tips: &[String]) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    for tip in tips {
        let Some(end) = rest
            .find(tag)
            .and_then(|at| rest[at..].find("/>").map(|e| at + e))
        else {
            break;
        };
        out.push_str(&rest[..end]);
        if tip.is_empty() {
            out.push_str("/>");
        } else {
            let _ = write!(out, "><title>{}</title></{}>", esc(tip), &tag[1..]);
        }
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// The chart's SVG, or a line saying why there is none (plotters' error, which writing to a
/// string does not raise in practice).
fn or_error(drawn: Drawn, svg: String, label: &str) -> String {
    match drawn {
        Ok(()) => svg,
        Err(e) => format!(
            "<p>Chart {} not drawn: {}</p>",
            esc(label),
            esc(&e.to_string())
        ),
    }
}

impl Plot<'_> {
    /// The plot as an SVG element.
    pub fn svg(&self) -> String {
        let mut svg = String::new();
        let drawn = {
            let area = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            self.draw(&area).and_then(|()| Ok(area.present()?))
        };
        let (circles, polygons) = self.tips();
        or_error(
            drawn,
            finish(svg, self.label, &circles, &polygons),
            self.label,
        )
    }

    fn tips(&self) -> (Vec<String>, Vec<String>) {
        let (mut circles, mut polygons) = (Vec::new(), Vec::new());
        for m in &self.marks {
            match m {
                Mark::Point { tip, .. } => circles.push(tip.clone()),
                Mark::Band { tip, .. } | Mark::Bar { tip, .. } => polygons.push(tip.clone()),
                _ => {}
            }
        }
        (circles, polygons)
    }

    /// The highest figure any mark reaches (at least its intervals' tops), 0 for none.
    fn top(&self) -> f64 {
        let ys = self.marks.iter().flat_map(|m| -> Vec<f64> {
            match m {
                Mark::Point { at, interval, .. } => {
                    vec![at.1, interval.map_or(0.0, |i| i.1)]
                }
                Mark::Line { from, to, .. } => vec![from.1, to.1],
                Mark::Path { points, .. } => points.iter().map(|p| p.1).collect(),
                Mark::Band { top, .. } => top.iter().map(|p| p.1).collect(),
                Mark::Bar { height, .. } => vec![*height],
                Mark::Marker { .. } => Vec::new(),
            }
        });
        ys.filter(|y| y.is_finite()).fold(0.0, f64::max)
    }

    fn draw(&self, area: &Area) -> Drawn {
        let (_, top, ticks) = value_ticks(0.0, self.top());
        let x_keys: Vec<f64> = self.x_ticks.iter().map(|t| t.0).collect();
        let (x_lo, x_hi) = if self.x_range.1 > self.x_range.0 {
            self.x_range
        } else {
            (self.x_range.0 - 0.5, self.x_range.0 + 0.5)
        };
        let mut chart = ChartBuilder::on(area)
            .margin_top(if self.has_markers() { 30 } else { 10 })
            .margin_right(24)
            // Room for the value axis' name, set on its side at the left edge.
            .margin_left(6)
            .x_label_area_size(36)
            .y_label_area_size(76)
            .build_cartesian_2d(ticked(x_lo, x_hi, x_keys), ticked(0.0, top, ticks))?;
        let x_label = |x: &f64| {
            self.x_ticks
                .iter()
                .find(|t| (t.0 - x).abs() < 1e-9)
                .map_or_else(String::new, |t| t.1.clone())
        };
        let y_label = |y: &f64| self.values.tick(*y, top);
        chart
            .configure_mesh()
            .disable_x_mesh()
            .bold_line_style(GRID)
            .axis_style(AXIS)
            .label_style((FONT, TEXT).into_font().color(&INK))
            .axis_desc_style((FONT, TEXT).into_font().color(&INK))
            .x_desc(self.x_name)
            .y_desc(self.y_name)
            .x_label_formatter(&x_label)
            .y_label_formatter(&y_label)
            .draw()?;
        for m in &self.marks {
            draw_mark(&mut chart, m, top)?;
        }
        Ok(())
    }

    fn has_markers(&self) -> bool {
        self.marks.iter().any(|m| matches!(m, Mark::Marker { .. }))
    }
}

/// The part of a line at or above 0: whole, cut where it crosses 0, or nothing.
fn above_zero(from: (f64, f64), to: (f64, f64)) -> Option<((f64, f64), (f64, f64))> {
    match (from.1 >= 0.0, to.1 >= 0.0) {
        (true, true) => Some((from, to)),
        (false, false) => None,
        _ => {
            let x0 = from.0 + (to.0 - from.0) * from.1 / (from.1 - to.1);
            let cut = (x0, 0.0);
            Some(if from.1 < 0.0 { (cut, to) } else { (from, cut) })
        }
    }
}

fn draw_mark(chart: &mut Context, m: &Mark, top: f64) -> Drawn {
    let low = |y: f64| y.max(0.0);
    match m {
        Mark::Point {
            at,
            interval,
            colour,
            ..
        } => {
            let c = rgb(colour);
            if let Some((lo, hi)) = interval {
                let whisker = vec![(at.0, low(*lo)), (at.0, low(*hi))];
                chart.draw_series(std::iter::once(PathElement::new(whisker, c)))?;
            }
            let dot = Circle::new((at.0, low(at.1)), 3, c.filled());
            chart.draw_series(std::iter::once(dot))?;
        }
        Mark::Line {
            from,
            to,
            colour,
            dashed,
            width,
        } => {
            let Some((a, b)) = above_zero(*from, *to) else {
                return Ok(());
            };
            let style = rgb(colour).stroke_width(*width);
            if *dashed {
                chart.draw_series(DashedLineSeries::new([a, b], 4, 3, style))?;
            } else {
                chart.draw_series(std::iter::once(PathElement::new(vec![a, b], style)))?;
            }
        }
        Mark::Path { points, colour } => {
            let points: Vec<(f64, f64)> = points.iter().map(|p| (p.0, low(p.1))).collect();
            let style = rgb(colour).stroke_width(2);
            chart.draw_series(std::iter::once(PathElement::new(points, style)))?;
        }
        Mark::Band {
            top: upper,
            bottom,
            colour,
            ..
        } => {
            let mut outline: Vec<(f64, f64)> = upper.iter().map(|p| (p.0, low(p.1))).collect();
            outline.extend(bottom.iter().rev().map(|p| (p.0, low(p.1))));
            let band = Polygon::new(outline, rgb(colour).filled());
            chart.draw_series(std::iter::once(band))?;
        }
        Mark::Bar {
            x, height, colour, ..
        } => {
            let corners = vec![
                (x.0, 0.0),
                (x.1, 0.0),
                (x.1, low(*height)),
                (x.0, low(*height)),
            ];
            let bar = Polygon::new(corners, rgb(colour).filled());
            chart.draw_series(std::iter::once(bar))?;
        }
        Mark::Marker {
            x,
            colour,
            label,
            row,
        } => {
            let style = rgb(colour).stroke_width(2);
            chart.draw_series(DashedLineSeries::new([(*x, 0.0), (*x, top)], 6, 3, style))?;
            let colour = rgb(colour);
            let text = EmptyElement::at((*x, top))
                + Text::new(
                    label.clone(),
                    (4, -20 + 13 * *row as i32),
                    text_style(HPos::Left).color(&colour),
                );
            chart.draw_series(std::iter::once(text))?;
        }
    }
    Ok(())
}

/// Rows of horizontal bars over one value axis: the parts of a whole laid end to end, or
/// changes either side of 0; each row named at its left, a note at its right.
pub(crate) struct Bars<'a> {
    pub label: &'a str,
    /// Widths of the names' column, the bars' and the notes'.
    pub columns: (u32, u32, u32),
    pub row_height: u32,
    pub values: Values,
    /// The axis' span in the values' figures (widened to round ticks).
    pub range: (f64, f64),
    /// A dashed line across the rows at a value, with its label under them (100% of the
    /// op).
    pub rule: Option<(f64, String)>,
    /// What each colour stands for, in `legend_columns` columns under the rows.
    pub legend: Vec<(String, &'static str)>,
    pub legend_columns: u32,
    pub rows: Vec<BarRow>,
}

pub(crate) struct BarRow {
    pub name: String,
    /// Each segment from one figure to another, its colour, whether drawn lighter, its
    /// tooltip.
    pub segments: Vec<(f64, f64, &'static str, bool, String)>,
    /// A 95% interval drawn as a whisker.
    pub whisker: Option<(f64, f64)>,
    /// At the right: the row's figure, or in red why it has none.
    pub note: String,
    pub failed: bool,
}

impl Bars<'_> {
    const AXIS_H: u32 = 40;
    const LEGEND_ROW: u32 = 18;

    pub fn svg(&self) -> String {
        let legend_rows = (self.legend.len() as u32).div_ceil(self.legend_columns.max(1));
        let (names, bars, notes) = self.columns;
        let rule = if self.rule.is_some() { 14 } else { 0 };
        let body = self.row_height * self.rows.len() as u32 + Self::AXIS_H + rule;
        let size = (
            names + bars + notes,
            body + 6 + legend_rows * Self::LEGEND_ROW,
        );
        let mut svg = String::new();
        let drawn = {
            let area = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            let (chart, legend) = area.split_vertically(body + 6);
            self.draw(&chart)
                .and_then(|()| self.draw_legend(&legend))
                .and_then(|()| Ok(area.present()?))
        };
        let tips: Vec<String> = self
            .rows
            .iter()
            .flat_map(|r| r.segments.iter().map(|s| s.4.clone()))
            .collect();
        or_error(drawn, finish(svg, self.label, &[], &tips), self.label)
    }

    fn draw(&self, area: &Area) -> Drawn {
        let (lo, hi, ticks) = value_ticks(self.range.0, self.range.1);
        let rows = self.rows.len().max(1) as f64;
        let mut chart = ChartBuilder::on(area)
            .margin_top(if self.rule.is_some() { 18 } else { 4 })
            .margin_right(self.columns.2)
            .x_label_area_size(Self::AXIS_H - 6)
            .y_label_area_size(self.columns.0)
            .build_cartesian_2d(ticked(lo, hi, ticks), ticked(0.0, rows, Vec::new()))?;
        let x_label = |x: &f64| self.values.tick(*x, hi.max(-lo));
        chart
            .configure_mesh()
            .disable_y_mesh()
            .disable_y_axis()
            .bold_line_style(GRID)
            .axis_style(AXIS)
            .label_style((FONT, TEXT).into_font().color(&INK))
            .x_label_formatter(&x_label)
            .draw()?;
        for (i, row) in self.rows.iter().enumerate() {
            // Row 0 at the top.
            self.draw_row(&mut chart, row, rows - i as f64 - 1.0, (lo, hi))?;
        }
        if let Some((at, label)) = &self.rule {
            let style = BLACK.stroke_width(1);
            chart.draw_series(DashedLineSeries::new(
                [(*at, 0.0), (*at, rows)],
                3,
                2,
                style,
            ))?;
            let text = EmptyElement::at((*at, rows))
                + Text::new(label.clone(), (0, -6), text_style(HPos::Center));
            chart.draw_series(std::iter::once(text))?;
        }
        Ok(())
    }

    fn draw_row(&self, chart: &mut Context, row: &BarRow, y: f64, (lo, hi): (f64, f64)) -> Drawn {
        let (y0, y1, mid) = (y + 0.12, y + 0.88, y + 0.5);
        let name = EmptyElement::at((lo, mid))
            + Text::new(row.name.clone(), (-8, 0), text_style(HPos::Right));
        chart.draw_series(std::iter::once(name))?;
        let clip = |v: f64| v.clamp(lo, hi);
        for &(from, to, colour, light, _) in &row.segments {
            let fill = if light {
                rgb(colour).mix(0.7).filled()
            } else {
                rgb(colour).filled()
            };
            let (a, b) = (clip(from), clip(to));
            let corners = vec![(a, y0), (b, y0), (b, y1), (a, y1)];
            chart.draw_series(std::iter::once(Polygon::new(corners, fill)))?;
        }
        if let Some((low, high)) = row.whisker {
            let (from, to) = (clip(low.max(0.0)), clip(high));
            let tick = |x: f64| PathElement::new(vec![(x, y + 0.25), (x, y + 0.75)], BLACK);
            let bar = PathElement::new(vec![(from, mid), (to, mid)], BLACK);
            chart.draw_series([bar, tick(from), tick(to)])?;
        }
        let colour = if row.failed {
            RGBColor(0xbb, 0, 0)
        } else {
            INK
        };
        let (at, dx) = if row.failed { (lo, 6) } else { (hi, 8) };
        let note = EmptyElement::at((at, mid))
            + Text::new(
                row.note.clone(),
                (dx, 0),
                text_style(HPos::Left).color(&colour),
            );
        chart.draw_series(std::iter::once(note))?;
        Ok(())
    }

    fn draw_legend(&self, area: &Area) -> Drawn {
        let columns = self.legend_columns.max(1) as usize;
        let width = (self.columns.0 + self.columns.1 + self.columns.2) as i32 / columns as i32;
        for (i, (name, colour)) in self.legend.iter().enumerate() {
            let x = (i % columns) as i32 * width + 4;
            let y = (i / columns) as i32 * Self::LEGEND_ROW as i32 + 4;
            area.draw(&Rectangle::new(
                [(x, y), (x + 10, y + 10)],
                rgb(colour).filled(),
            ))?;
            area.draw(&Text::new(
                name.clone(),
                (x + 14, y + 5),
                text_style(HPos::Left),
            ))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use quick_xml::{escape::resolve_predefined_entity, events::Event, Reader, XmlVersion};

    use super::*;

    /// An element of an SVG: its name, its attributes and its text.
    struct El {
        name: String,
        attrs: Vec<(String, String)>,
        text: String,
    }

    impl El {
        fn attr(&self, name: &str) -> Option<f64> {
            self.attrs
                .iter()
                .find(|a| a.0 == name)
                .and_then(|a| a.1.parse().ok())
        }
    }

    /// Each element of `svg`, read as XML.
    fn parse(svg: &str) -> Vec<El> {
        let mut reader = Reader::from_str(svg);
        let (mut elements, mut open) = (Vec::<El>::new(), Vec::new());
        loop {
            let event = reader.read_event().expect("well-formed SVG");
            if let Event::Start(e) | Event::Empty(e) = &event {
                let attrs = e
                    .attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        let value = a.normalized_value(XmlVersion::Implicit1_0).unwrap();
                        let key = String::from_utf8(a.key.as_ref().to_vec()).unwrap();
                        (key, value.to_string())
                    })
                    .collect();
                let name = String::from_utf8(e.name().as_ref().to_vec()).unwrap();
                if matches!(event, Event::Start(_)) {
                    open.push(elements.len());
                }
                elements.push(El {
                    name,
                    attrs,
                    text: String::new(),
                });
            }
            let inside = open.last().copied();
            match event {
                Event::Text(t) => {
                    if let Some(i) = inside {
                        elements[i].text.push_str(&t.decode().unwrap());
                    }
                }
                Event::GeneralRef(r) => {
                    let entity = resolve_predefined_entity(&r.decode().unwrap()).unwrap();
                    if let Some(i) = inside {
                        elements[i].text.push_str(entity);
                    }
                }
                Event::End(_) => {
                    open.pop();
                }
                Event::Eof => break,
                _ => {}
            }
        }
        for e in &mut elements {
            e.text = e.text.trim().to_string();
        }
        elements
    }

    /// A fitted line that crosses 0 inside the plot and a point whose interval reaches below
    /// it: a sweep of a time that falls.
    fn falling() -> Plot<'static> {
        Plot {
            label: "op <falling> & \"cut\"",
            size: (560, 240),
            x_name: "layers",
            x_range: (1.0, 8.0),
            x_ticks: [1.0, 2.0, 4.0, 8.0].map(|x| (x, round_figure(x))).to_vec(),
            y_name: "op",
            values: Values::Of(Unit::Nanoseconds),
            marks: vec![
                Mark::Line {
                    from: (1.0, 2600.0),
                    to: (8.0, -900.0),
                    colour: "#4e79a7",
                    dashed: true,
                    width: 1,
                },
                Mark::Point {
                    at: (8.0, 150.0),
                    interval: Some((-400.0, 700.0)),
                    colour: "#4e79a7",
                    tip: "8: 150 ns".into(),
                },
                Mark::Point {
                    at: (1.0, 2450.0),
                    interval: Some((2300.0, 2600.0)),
                    colour: "#4e79a7",
                    tip: "1: 2450 ns".into(),
                },
            ],
        }
    }

    #[test]
    fn a_time_axis_starts_at_0_ticks_round_figures_with_units_and_nothing_is_drawn_below_it() {
        let svg = falling().svg();
        let elements = parse(&svg);
        // The ticks: 0 and round steps of 1, 2 or 5 times a power of ten, in us above 1000 ns.
        let ticks: Vec<(f64, f64, &str)> = elements
            .iter()
            .filter(|e| e.name == "text")
            .filter_map(|e| {
                let (n, unit) = e.text.split_once(' ')?;
                Some((n.parse().ok()?, e.attr("y")?, unit))
            })
            .collect();
        assert!(ticks.len() >= 4, "{svg}");
        assert_eq!(ticks[0].0, 0.0, "{ticks:?}");
        assert!(ticks.iter().all(|t| t.2 == "us"), "{ticks:?}");
        let step = ticks[1].0 - ticks[0].0;
        let mantissa = step / 10f64.powf(step.log10().floor());
        assert!(
            [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-9),
            "{ticks:?}"
        );
        assert!(ticks
            .windows(2)
            .all(|w| (w[1].0 - w[0].0 - step).abs() < 1e-9));
        assert!(
            ticks.last().unwrap().0 * 1e3 >= 2600.0,
            "the top tick holds every mark"
        );
        // The marks (circles, whiskers and lines as polylines in their colour): none below
        // the 0 tick.
        let zero = ticks[0].1;
        let mut ys: Vec<f64> = Vec::new();
        let marks = elements.iter().filter(|e| {
            e.attrs
                .iter()
                .any(|a| (a.0 == "stroke" || a.0 == "fill") && a.1.eq_ignore_ascii_case("#4e79a7"))
        });
        for e in marks {
            match e.name.as_str() {
                "circle" => ys.extend(e.attr("cy")),
                "polyline" => {
                    let points = &e.attrs.iter().find(|a| a.0 == "points").unwrap().1;
                    ys.extend(
                        points.split_whitespace().filter_map(|p| {
                            p.split(',').nth(1).and_then(|y| y.parse::<f64>().ok())
                        }),
                    );
                }
                _ => {}
            }
        }
        assert!(ys.len() > 4, "{svg}");
        assert!(ys.iter().all(|&y| y <= zero + 1.0), "{zero} {ys:?}\n{svg}");
        assert!(
            ys.iter().any(|&y| (y - zero).abs() <= 1.0),
            "the cut reaches 0: {ys:?}"
        );
    }

    #[test]
    fn a_chart_is_a_named_image_its_marks_say_their_figures_and_its_text_is_escaped_once() {
        let svg = falling().svg();
        assert!(svg.starts_with("<svg "), "{svg}");
        let label = "op &lt;falling&gt; &amp; &quot;cut&quot;";
        assert!(
            svg.contains(&format!("role=\"img\" aria-label=\"{label}\"")),
            "{svg}"
        );
        assert!(svg.contains(&format!("<title>{label}</title>")), "{svg}");
        assert_eq!(
            svg.matches("<title>").count(),
            3,
            "the chart's and one per point"
        );
        assert!(svg.contains("<title>8: 150 ns</title></circle>"), "{svg}");
        let bars = Bars {
            label: "rows",
            columns: (130, 400, 90),
            row_height: 18,
            values: Values::Share,
            range: (0.0, 1.0),
            rule: Some((1.0, "100% of the op".into())),
            legend: vec![("<b>hooks</b>".into(), "#f28e2b")],
            legend_columns: 3,
            rows: vec![BarRow {
                name: "<script>".into(),
                segments: vec![(0.0, 1.0, "#f28e2b", false, "a & b".into())],
                whisker: None,
                note: "5.000 us".into(),
                failed: false,
            }],
        };
        let svg = bars.svg();
        let texts: Vec<String> = parse(&svg).into_iter().map(|e| e.text).collect();
        assert!(texts.contains(&"<script>".to_string()), "{texts:?}");
        assert!(texts.contains(&"<b>hooks</b>".to_string()), "{texts:?}");
        assert!(!svg.contains("<script>") && !svg.contains("<b>"), "{svg}");
        assert!(svg.contains("<title>a &amp; b</title></polygon>"), "{svg}");
        assert!(texts.contains(&"100%".to_string()) && texts.contains(&"20%".to_string()));
    }

    #[test]
    fn value_ticks_are_round_and_span_0() {
        assert_eq!(
            value_ticks(0.0, 2600.0),
            (0.0, 3000.0, (0..=6).map(|k| k as f64 * 500.0).collect())
        );
        let (lo, hi, ticks) = value_ticks(-120.0, 480.0);
        assert_eq!((lo, hi), (-200.0, 500.0));
        assert!(ticks.contains(&0.0));
        assert_eq!(value_ticks(0.0, 0.0).1, 1.0, "a flat 0 still has a scale");
    }
}
