//! The comparison as one self-contained HTML page: the verdict table, then each changed workload
//! with a chart of which paths moved and by how much, then a differential flame graph per
//! workload with sampled stacks on both sides.
use std::fmt::Write;

use super::{render::attribution_lines, ChangeAttribution, Comparison, PathDelta};
use crate::{
    attribution::Part,
    report::{
        chart::{BarRow, Bars, Values},
        figures::Scale,
        flame::{
            self,
            palette::{kind_colour, RESIDUAL_COLOUR},
        },
        html::page,
    },
    results::{PathKind, Unit},
    stats::Verdict,
    text::esc,
};

pub fn render_html(c: &Comparison) -> String {
    let title = format!(
        "hookprof compare: {} → {}",
        c.old_labels.join(", "),
        c.new_labels.join(", ")
    );
    let mut body = format!("<h1>{}</h1>\n", esc(&title));
    body.push_str(&differences_html(c));
    body.push_str(&super::facts::html(&c.call_counts));
    body.push_str(&verdicts_html(c));
    body.push_str(&changed_html(c));
    if !c.stacks.is_empty() {
        body.push_str("<h2 id=\"stacks\">Sampled kernel stacks, old to new</h2>\n");
    }
    for s in &c.stacks {
        let _ = writeln!(body, "<h3>{}</h3>", esc(&s.workload));
        body.push_str(&flame::differential_figure(
            &s.workload,
            &s.old,
            &s.new,
            &s.changed,
        ));
    }
    page(&title, &body)
}

/// The sides' load, then their differences in options and environment.
fn differences_html(c: &Comparison) -> String {
    let mut body = String::new();
    if let Some(load) = &c.load {
        let _ = writeln!(
            body,
            "<p><strong>{}</strong></p>",
            esc(&super::load::sentence(load))
        );
    }
    for (heading, section) in super::render::differences(c) {
        let _ = writeln!(body, "<p><b>{}</b></p>", esc(heading.trim_end_matches(':')));
        for d in section {
            let (old, new) = d.sides();
            let _ = writeln!(
                body,
                "<p>{}: {} → {}</p>",
                esc(d.field),
                esc(&old),
                esc(&new)
            );
        }
    }
    body
}

/// The family's sentences and the table of the workloads' verdicts.
fn verdicts_html(c: &Comparison) -> String {
    let tested = c
        .workloads
        .iter()
        .filter(|w| w.adjusted_p.is_some())
        .count();
    let mut body = format!(
        "<p>{}. {} {} {}</p>\n",
        esc(&super::render::summary(c)),
        esc(&super::render::holm_sentence(c, tested)),
        esc(&super::render::replication_sentence(c)),
        esc(&super::path_text::family_sentence(c)),
    );
    body.push_str(
        "<table><tr><th>workload</th><th>old</th><th>new</th><th>change [interval]</th>\
         <th>p (Holm)</th><th>verdict</th><th>spread and what it detects</th></tr>\n",
    );
    for w in &c.workloads {
        let scale = Scale::of(w.unit, w.old.mean);
        let class = match w.verdict {
            Verdict::Regressed => " class=\"regressed\"",
            Verdict::Improved => " class=\"improved\"",
            _ => "",
        };
        // Only a workload that changed has a section of its own to link to.
        let name = if has_section(w.verdict) {
            format!("<a href=\"#{}\">{}</a>", anchor(&w.name), esc(&w.name))
        } else {
            esc(&w.name)
        };
        let _ = writeln!(
            body,
            "<tr{class}><td>{name}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            scale.show(w.old.mean),
            scale.show(w.new.mean),
            esc(&super::render::change_cell(w)),
            w.adjusted_p
                .map(crate::report::figures::format_p)
                .unwrap_or_else(|| "n/a".into()),
            w.verdict,
            esc(&super::render::spread_line(w)),
        );
    }
    body.push_str("</table>\n");
    body
}

/// A section for each workload that changed: where its time went, and the chart of it.
fn changed_html(c: &Comparison) -> String {
    let changed: Vec<_> = c
        .workloads
        .iter()
        .filter(|w| has_section(w.verdict))
        .collect();
    if changed.is_empty() {
        return "<p>No workload changed significantly.</p>\n".into();
    }
    let mut body = String::new();
    for w in changed {
        let _ = writeln!(
            body,
            "<h2 id=\"{}\">{} <small>({})</small></h2>",
            anchor(&w.name),
            esc(&w.name),
            w.verdict
        );
        match &w.attribution {
            Some(a) => {
                for line in attribution_lines(&w.name, a) {
                    let _ = writeln!(body, "<p><code>{}</code></p>", esc(line.trim()));
                }
                body.push_str(&delta_chart(&w.name, a));
            }
            None => body.push_str("<p>No attribution: one side was not probed.</p>\n"),
        }
    }
    body
}

fn has_section(verdict: Verdict) -> bool {
    matches!(verdict, Verdict::Regressed | Verdict::Improved)
}

fn anchor(name: &str) -> String {
    format!(
        "w-{}",
        name.replace(|c: char| !c.is_ascii_alphanumeric(), "-")
    )
}

/// A diverging bar per path (and the residual): right where the time grew, left where it
/// shrank, each in its kind's colour as on the report page, LSM functions indented under
/// their hooks.
pub(crate) fn delta_chart(name: &str, a: &ChangeAttribution) -> String {
    let mut rows: Vec<(String, &'static str, f64)> = Vec::new();
    let mut top: Vec<&PathDelta> = a.paths.iter().filter(|p| p.top_level).collect();
    top.sort_by(|x, y| y.delta_ns_per_op.abs().total_cmp(&x.delta_ns_per_op.abs()));
    for p in top.iter().take(12) {
        rows.push((
            format!("{} {}", p.kind.name(), p.name),
            kind_colour(p.kind),
            p.delta_ns_per_op,
        ));
        for l in a
            .paths
            .iter()
            .filter(|l| l.kind == PathKind::Lsm && l.parent.as_ref() == Some(&p.name))
        {
            rows.push((
                format!("└ {}", l.name),
                kind_colour(PathKind::Lsm),
                l.delta_ns_per_op,
            ));
        }
    }
    for (name, part, ns) in a.parts_after_paths() {
        let colour = match part {
            Part::Syscall => kind_colour(PathKind::Syscall),
            Part::TaskPath => kind_colour(PathKind::TaskPath),
            _ => RESIDUAL_COLOUR,
        };
        rows.push((name.into(), colour, ns));
    }
    rows.push(("whole op".into(), "#555", a.total_ns));
    let reach = rows
        .iter()
        .map(|(_, _, d)| d.abs())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let label = format!("change attribution of {name}");
    Bars {
        label: &label,
        columns: (260, 440, 90),
        row_height: 18,
        values: Values::Change(Unit::Nanoseconds),
        range: (-reach, reach),
        rule: Some((0.0, String::new())),
        legend: Vec::new(),
        legend_columns: 1,
        rows: rows
            .into_iter()
            .map(|(label, colour, delta)| BarRow {
                segments: vec![(
                    delta.min(0.0),
                    delta.max(0.0),
                    colour,
                    false,
                    format!("{} {delta:+.1} ns/op", label.trim()),
                )],
                name: label,
                whisker: None,
                note: format!("{delta:+.0} ns"),
                failed: false,
            })
            .collect(),
    }
    .svg()
        + "\n"
}
