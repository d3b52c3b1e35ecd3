//! The comparison as JUnit XML, the test-report format GitLab (merge-request widget), Jenkins,
//! Azure DevOps and most other CI systems display natively: one test case per workload, a
//! failure for a regression (with its attribution), skipped for an inconclusive one; first, when
//! call counts differ, a passing case that lists them; after each workload with tested paths,
//! a case for its paths, a failure when a path regressed.
use std::fmt::Write;

use super::{render::attribution_lines, Comparison};
use crate::{stats::Verdict, text::esc};

pub fn render_junit(c: &Comparison) -> String {
    let suite = format!(
        "hookprof compare {} -> {}",
        c.old_labels.join(","),
        c.new_labels.join(",")
    );
    let facts =
        Some(super::facts::lines(&c.call_counts)).filter(|_| !c.call_counts.differences.is_empty());
    let with_paths = c.workloads.iter().filter(|w| !w.paths.is_empty()).count();
    let paths_failed = c
        .workloads
        .iter()
        .filter(|w| w.paths.iter().any(|v| v.verdict == Verdict::Regressed))
        .count();
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n<testsuite name=\"{}\" \
         tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\">\n",
        esc(&suite),
        c.workloads.len() + with_paths + usize::from(facts.is_some()),
        c.count(Verdict::Regressed) + paths_failed,
        c.count(Verdict::Inconclusive)
    );
    // Call-count differences first, as a passing case of their own: facts, not failures.
    if let Some(facts) = facts {
        let _ = writeln!(
            out,
            "<testcase classname=\"hookprof.compare\" name=\"call counts\">\
             <system-out>{}</system-out></testcase>",
            esc(&facts.join("\n"))
        );
    }
    for w in &c.workloads {
        let change = w.change.map_or_else(
            || "no relative change (old mean 0)".to_string(),
            |ch| format!("{:+.2}%", ch.relative * 100.0),
        );
        let p = w
            .adjusted_p
            .map_or_else(|| "n/a".to_string(), |p| format!("{p:.3}"));
        let summary = format!("{} {change}, Holm p = {p}: {}", w.name, w.verdict);
        let detail: Vec<String> = w
            .attribution
            .as_ref()
            .map(|a| attribution_lines(&w.name, a))
            .unwrap_or_default();
        let _ = write!(
            out,
            "<testcase classname=\"hookprof.compare\" name=\"{}\">",
            esc(&w.name)
        );
        match w.verdict {
            Verdict::Regressed => {
                let _ = write!(
                    out,
                    "<failure message=\"{}\" type=\"regression\">{}</failure>",
                    esc(&summary),
                    esc(&detail.join("\n"))
                );
            }
            Verdict::Inconclusive => {
                let _ = write!(out, "<skipped message=\"{}\"/>", esc(&summary));
            }
            Verdict::Improved | Verdict::NoChange => {
                let _ = write!(out, "<system-out>{}</system-out>", esc(&summary));
            }
        }
        out.push_str("</testcase>\n");
        paths_case(&mut out, w);
    }
    out.push_str("</testsuite>\n</testsuites>\n");
    out
}

/// `W paths`: a failure listing the regressed paths, else the called ones as output.
fn paths_case(out: &mut String, w: &super::WorkloadComparison) {
    if w.paths.is_empty() {
        return;
    }
    let lines = super::path_text::workload_lines(w);
    let regressed = w.paths.iter().filter(|v| v.verdict == Verdict::Regressed);
    let _ = write!(
        out,
        "<testcase classname=\"hookprof.compare.paths\" name=\"{} paths\">",
        esc(&w.name)
    );
    match regressed.count() {
        0 => {
            let summary = format!("{} paths tested, none regressed", w.paths.len());
            let body = [vec![summary], lines].concat().join("\n");
            let _ = write!(out, "<system-out>{}</system-out>", esc(&body));
        }
        n => {
            let _ = write!(
                out,
                "<failure message=\"{}\" type=\"path-regression\">{}</failure>",
                esc(&format!("{n} of {} paths regressed", w.paths.len())),
                esc(&lines.join("\n"))
            );
        }
    }
    out.push_str("</testcase>\n");
}
