//! One self-contained HTML page (inline CSS and SVG, nothing fetched): per workload clean vs
//! probed bars with 95% CI whiskers, a stacked bar of where an operation's time goes, and log2
//! latency histograms per hook.
use std::fmt::Write;

use super::text::{environment_line, kind_name, num, ordered_rows};
use crate::{
    attribution,
    results::{AttributionRow, Results, WorkloadResult},
    stats,
};

const STYLE: &str = "body{font-family:sans-serif;max-width:70em;margin:1em auto;color:#222}\
table{border-collapse:collapse}td,th{padding:2px 8px;border-bottom:1px solid #ddd;\
text-align:right}td:first-child,th:first-child{text-align:left}\
svg text{font-size:11px;font-family:sans-serif}.chart{margin:4px 0}";

/// Segment colours of the stacked bars; the residual is grey.
const PALETTE: &[&str] = &[
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
];

/// Escapes text for HTML element content and attribute values.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

pub fn render(results: &[Results]) -> String {
    let mut out = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>hookprof report</title>\
         <style>{STYLE}</style></head><body>\n<h1>hookprof report</h1>\n"
    );
    for r in results {
        let _ = writeln!(
            out,
            "<h2>{}</h2>\n<p>{}</p>",
            esc(&r.label),
            esc(&environment_line(r))
        );
        for w in &r.workloads {
            out.push_str(&workload_section(w));
        }
    }
    out.push_str("</body></html>\n");
    out
}

fn workload_section(w: &WorkloadResult) -> String {
    let mut out = format!(
        "<h3>{} <small>({})</small></h3>\n",
        esc(&w.name),
        esc(&w.family)
    );
    let (Some(clean), probed) = (stats::summarize(&w.clean), stats::summarize(&w.probed)) else {
        out.push_str("<p>no clean samples</p>\n");
        return out;
    };
    out.push_str(&mean_bars(&clean, probed.as_ref(), w.unit.symbol()));
    if !w.attribution.is_empty() {
        if let Some(op) = attribution::op_ns(w.unit, clean.mean) {
            out.push_str(&stacked_bar(op, &w.attribution));
        }
        out.push_str(&attribution_table(&w.attribution));
        for row in w
            .attribution
            .iter()
            .filter(|r| r.histogram.iter().any(|&c| c > 0))
        {
            out.push_str(&histogram(row));
        }
    }
    out
}

/// Clean and probed means as horizontal bars, each with its 95% CI as a whisker.
fn mean_bars(clean: &stats::Summary, probed: Option<&stats::Summary>, unit: &str) -> String {
    let bars: Vec<(&str, &stats::Summary, &str)> = std::iter::once(("clean", clean, "#4e79a7"))
        .chain(probed.map(|p| ("probed", p, "#f28e2b")))
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
            "<text x=\"{:.1}\" y=\"{}\">{} {unit}</text>",
            scale(s.ci.map_or(s.mean, |c| c.1)) + 6.0,
            y + 12.0,
            esc(&num(s.mean))
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The clean op split into the top-level paths and the residual.
fn stacked_bar(op_ns: f64, rows: &[AttributionRow]) -> String {
    let Some((level, top)) = attribution::top_level(rows) else {
        return String::new();
    };
    let mut segments: Vec<(String, f64)> = top
        .iter()
        .map(|r| (r.name.clone(), attribution::ns_per_op(r).max(0.0)))
        .collect();
    let explained: f64 = segments.iter().map(|(_, ns)| ns).sum();
    let residual = (op_ns - explained).max(0.0);
    segments.push((format!("residual ({})", level.describe()), residual));
    let total = explained + residual;
    if total <= 0.0 {
        return String::new();
    }
    let width = 600.0;
    let legend_rows = segments.len();
    let mut svg = format!(
        "<svg class=\"chart\" width=\"620\" height=\"{}\" role=\"img\" \
         aria-label=\"where an operation's time goes\">",
        30 + 16 * legend_rows
    );
    let mut x = 0.0;
    for (i, (name, ns)) in segments.iter().enumerate() {
        let colour = if i + 1 == segments.len() {
            "#bbb"
        } else {
            PALETTE[i % PALETTE.len()]
        };
        let w = ns / total * width;
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"20\" fill=\"{colour}\">\
             <title>{} {} ns/op</title></rect>",
            esc(name),
            num(*ns)
        );
        let ly = 34 + 16 * i;
        let _ = write!(
            svg,
            "<rect x=\"0\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
             <text x=\"14\" y=\"{ly}\">{} {} ns/op ({:.1}%)</text>",
            ly - 9,
            esc(name),
            num(*ns),
            ns / total * 100.0
        );
        x += w;
    }
    svg.push_str("</svg>\n");
    svg
}

fn attribution_table(rows: &[AttributionRow]) -> String {
    let mut out = String::from(
        "<table><tr><th>path</th><th>kind</th><th>calls/op</th><th>ns/call</th><th>ns/op</th>\
         <th>share</th></tr>\n",
    );
    for (name, r) in ordered_rows(rows) {
        let name = match name.strip_prefix("  ") {
            Some(lsm) => format!("&nbsp;&nbsp;└ {}", esc(lsm)),
            None => esc(&name),
        };
        let _ = writeln!(
            out,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}%</td></tr>",
            kind_name(r.kind),
            num(r.calls_per_op),
            num(r.ns_per_call),
            num(attribution::ns_per_op(r)),
            r.share * 100.0
        );
    }
    out.push_str("</table>\n");
    out
}

/// Bucket b counts calls of 2^(b-1) <= ns < 2^b; only the span of non-empty buckets is drawn.
fn histogram(row: &AttributionRow) -> String {
    let h = &row.histogram;
    let first = h.iter().position(|&c| c > 0).unwrap_or(0);
    let last = h.iter().rposition(|&c| c > 0).unwrap_or(0);
    let peak = h.iter().copied().max().unwrap_or(0).max(1) as f64;
    let (bar, gap, height) = (18.0, 2.0, 60.0);
    let mut svg = format!(
        "<svg class=\"chart\" width=\"{}\" height=\"{}\" role=\"img\" \
         aria-label=\"latency histogram\"><text x=\"0\" y=\"10\">{} {} (log2 ns)</text>",
        ((last - first + 1) as f64 * (bar + gap)).max(260.0),
        height + 30.0,
        kind_name(row.kind),
        esc(&row.name)
    );
    for (i, b) in (first..=last).enumerate() {
        let count = h[b];
        let bh = count as f64 / peak * height;
        let x = i as f64 * (bar + gap);
        let low = if b == 0 { 0 } else { 1u64 << (b - 1).min(63) };
        let _ = write!(
            svg,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar}\" height=\"{bh:.1}\" fill=\"#59a14f\">\
             <title>{low}.. ns: {count}</title></rect>",
            14.0 + height - bh
        );
    }
    let low = |b: usize| if b == 0 { 0 } else { 1u64 << (b - 1).min(63) };
    let _ = writeln!(
        svg,
        "<text x=\"0\" y=\"{}\">{} ns</text><text x=\"{:.1}\" y=\"{}\" \
         text-anchor=\"end\">{} ns</text></svg>",
        height + 28.0,
        low(first),
        ((last - first + 1) as f64 * (bar + gap)).max(260.0),
        height + 28.0,
        low(last + 1)
    );
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
    fn text_is_escaped() {
        let mut r = sample_results();
        r.label = "<script>".into();
        let html = render(&[r]);
        assert!(html.contains("&lt;script&gt;") && !html.contains("<script>"));
    }
}
