//! Results as GitHub-flavoured markdown (a CI step summary, a pull-request comment).
use std::fmt::Write;

use super::{
    figures::{other_program_lines, probe_overhead, residual_sentence, Scale},
    markup::Markup,
    text::environment_line,
};
use crate::{attribution::Breakdown, results::Results, stats};

pub fn render(results: &[Results]) -> String {
    let mut out = String::new();
    for r in results {
        out.push_str(&one(r));
    }
    out
}

fn one(r: &Results) -> String {
    let mut out = format!("## hookprof: {}\n\n", r.label);
    // The environment line ends in a newline; a blank line ends the paragraph.
    let _ = writeln!(out, "{}", environment_line(r));
    let mut t = Markup::Markdown.table(&[
        "workload",
        "mean ± 95% CI",
        "median",
        "probed mean",
        "probe overhead",
        "n",
    ]);
    for w in &r.workloads {
        let Some(s) = stats::summarize(&w.clean) else {
            continue;
        };
        let scale = Scale::of(w.unit, s.mean);
        let probed = stats::summarize(&w.probed);
        t.add_row(vec![
            w.name.clone(),
            format!(
                "{} ± {} {}",
                scale.number(s.mean),
                scale.number(s.ci_half_width()),
                scale.symbol
            ),
            scale.show(s.median),
            probed.as_ref().map_or("".into(), |p| scale.show(p.mean)),
            probed
                .and_then(|p| probe_overhead(w.unit, &s, &p))
                .unwrap_or_default(),
            s.n.to_string(),
        ]);
    }
    let _ = writeln!(out, "{t}\n");
    if let Some(summary) = super::suite_summary::SuiteSummary::of(r) {
        let _ = writeln!(out, "{}", summary.render(Markup::Markdown));
    }
    for w in &r.workloads {
        if let Some(f) = &w.failure {
            let _ = writeln!(out, "- **{}** {}", w.name, f.sentence());
        }
    }
    if r.workloads.iter().any(|w| w.failure.is_some()) {
        out.push('\n');
    }
    for w in r
        .workloads
        .iter()
        .filter(|w| !w.attribution.is_empty() || w.profile.is_some())
    {
        let _ = writeln!(out, "### {}\n", w.name);
        for line in super::sampled::op_lines(w) {
            let _ = writeln!(out, "{line}\n");
        }
        if let Some(table) = super::paths_table::PathsTable::of(w) {
            let _ = writeln!(out, "{}", table.render(Markup::Markdown));
        }
        if let Some(b) = Breakdown::of(w) {
            let _ = writeln!(out, "{}\n", residual_sentence(&b));
        }
        for line in other_program_lines(w) {
            let _ = writeln!(out, "{line}\n");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn tables_are_markdown_with_lsm_rows_marked() {
        let md = render(&[sample_results()]);
        assert!(md.starts_with("## hookprof: base\n"), "{md}");
        assert!(md.contains("| open_close "), "{md}");
        assert!(md.contains("within noise (+-"), "{md}");
        assert!(md.contains("`└ apparmor_file_open`"), "{md}");
        assert!(
            md.contains(
                "Residual: 2.000 us/op (40.0% of the probed op) outside the probed syscalls"
            ),
            "{md}"
        );
        assert!(
            md.lines()
                .any(|l| l.starts_with("|--") || l.starts_with("|-")),
            "{md}"
        );
    }
}
