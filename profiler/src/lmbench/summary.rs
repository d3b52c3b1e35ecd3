//! Results printed as an lmbench 2.0 summary, so they sit beside tables posted since 2001: one
//! row per sample (an imported lmbench run is one sample) labelled by the results' label, then
//! MEAN and STDEV (population, as lmbench posters computed it) rows per configuration. Under a
//! section, a `*` line names each column whose hookprof workload deliberately differs from
//! lmbench's benchmark, and how, and a `!` line each workload that failed, where and why.
use std::fmt::Write;

use crate::{
    lmbench::{format_value, Cell, Column, Section, SECTIONS},
    results::Results,
    stats,
};

pub fn render(results: &[Results]) -> String {
    let mut out = String::from(
        "                 L M B E N C H  2 . 0   S U M M A R Y\n                 \
         ------------------------------------\n",
    );
    for section in SECTIONS {
        let columns = section.columns_of(false);
        if !results
            .iter()
            .any(|r| runs_in(r, &columns) > 0 || !failures(r, &columns).is_empty())
        {
            continue;
        }
        out.push('\n');
        out.push_str(&section_text(section, &columns, results));
    }
    out
}

/// The workload a column shows, whether imported from it or repeated there.
fn workload_of(column: &Column) -> Option<&'static str> {
    match column.cell {
        Cell::Workload(name) | Cell::Repeat(name) => Some(name),
        _ => None,
    }
}

fn runs_in(r: &Results, columns: &[&Column]) -> usize {
    columns
        .iter()
        .filter_map(|c| workload_of(c).and_then(|n| r.workload(n)))
        .map(|w| w.clean.len())
        .max()
        .unwrap_or(0)
}

/// `! fork proc: base: fork_proc failed in sample 3: ...` for each column whose workload failed.
fn failures(r: &Results, columns: &[&Column]) -> Vec<String> {
    columns
        .iter()
        .filter_map(|c| {
            let w = workload_of(c).and_then(|n| r.workload(n))?;
            let f = w.failure.as_ref()?;
            Some(format!(
                "! {}: {}: {} {}",
                head_of(c),
                r.label,
                w.name,
                f.sentence()
            ))
        })
        .collect()
}

/// A column's heading on one line (`fork proc`).
fn head_of(c: &Column) -> String {
    c.heading()
}

fn section_text(section: &Section, columns: &[&Column], results: &[Results]) -> String {
    let mut out = format!("{}\n", section.title);
    if let Some(sub) = section.subtitle {
        let _ = writeln!(out, "{sub}");
    }
    let _ = writeln!(out, "{}", "-".repeat(section.title.len()));
    for k in 0..2 {
        if columns.iter().any(|c| !c.head[k].is_empty()) {
            let _ = writeln!(out, "{}", heading_line(columns, k));
        }
    }
    let rule: Vec<String> = columns.iter().map(|c| "-".repeat(c.width)).collect();
    let _ = writeln!(out, "{}", rule.join(" "));
    for r in results {
        let runs = runs_in(r, columns);
        for i in 0..runs {
            let cells = columns
                .iter()
                .map(|c| run_cell(r, c, i))
                .collect::<Vec<_>>();
            let _ = writeln!(out, "{}", row_line(columns, &cells));
        }
        if runs > 1 {
            for (name, pick) in [
                (
                    "MEAN",
                    (|s: &stats::Summary| s.mean) as fn(&stats::Summary) -> f64,
                ),
                ("STDEV", |s| s.pop_stdev),
            ] {
                let cells = columns
                    .iter()
                    .map(|c| statistic_cell(r, c, name, pick))
                    .collect::<Vec<_>>();
                let _ = writeln!(out, "{}", row_line(columns, &cells));
            }
        }
    }
    for c in columns {
        if let Some(how) = c.differs {
            let _ = writeln!(out, "* {}: {how}", head_of(c));
        }
    }
    for r in results {
        for line in failures(r, columns) {
            let _ = writeln!(out, "{line}");
        }
    }
    out
}

/// The OS column: what an imported summary said, else `Linux <release>` as lmbench prints it.
fn os_of(r: &Results) -> String {
    match &r.options.lmbench_os {
        Some(os) => os.clone(),
        None => format!("Linux {}", r.environment.kernel_release),
    }
}

fn run_cell(r: &Results, column: &Column, run: usize) -> String {
    match column.cell {
        Cell::Host => r.label.clone(),
        Cell::Os => os_of(r),
        Cell::Mhz => r
            .options
            .lmbench_mhz
            .map(|mhz| format!("{mhz:.0}"))
            .unwrap_or_default(),
        Cell::Workload(name) | Cell::Repeat(name) => r
            .workload(name)
            .and_then(|w| w.clean.get(run))
            .map(|v| format_value(*v, column))
            .unwrap_or_default(),
        Cell::Unused => String::new(),
    }
}

fn statistic_cell(
    r: &Results,
    column: &Column,
    name: &str,
    pick: fn(&stats::Summary) -> f64,
) -> String {
    match column.cell {
        Cell::Host => r.label.clone(),
        Cell::Os => name.to_string(),
        Cell::Workload(w) | Cell::Repeat(w) => r
            .workload(w)
            .and_then(|w| stats::summarize(&w.clean))
            .map(|s| format_value(pick(&s), column))
            .unwrap_or_default(),
        Cell::Mhz | Cell::Unused => String::new(),
    }
}

/// Host and OS left-aligned and cut to their width (as lmbench's `%-9.9s`), numbers
/// right-aligned; a number wider than its column pushes the rest right rather than being cut.
fn row_line(columns: &[&Column], cells: &[String]) -> String {
    let parts: Vec<String> = columns
        .iter()
        .zip(cells)
        .map(|(c, text)| match c.cell {
            Cell::Host | Cell::Os => {
                let cut: String = text.chars().take(c.width).collect();
                format!("{cut:<w$}", w = c.width)
            }
            _ => format!("{text:>w$}", w = c.width),
        })
        .collect();
    parts.join(" ").trim_end().to_string()
}

/// One heading line: each column's text right-aligned over its dashes (Host left-aligned),
/// spilling right when wider than the column (`0K File` over `Create`).
fn heading_line(columns: &[&Column], k: usize) -> String {
    let mut line = String::new();
    let mut start = 0;
    for c in columns {
        let text = c.head[k];
        if !text.is_empty() {
            let at = if c.cell == Cell::Host || text.len() > c.width {
                start
            } else {
                start + c.width - text.len()
            };
            let at = at.max(if line.is_empty() { 0 } else { line.len() + 1 });
            line.push_str(&" ".repeat(at - line.len()));
            line.push_str(text);
        }
        start += c.width + 1;
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::lmbench::parse;

    const FIXTURE: &str = include_str!("../../tests/data/lmbench2-summary-lsm-2.4.9.txt");

    fn collapse(line: &str) -> String {
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// The lines of `text` from `title` up to the next blank or title-like line.
    fn section_lines<'a>(text: &'a str, title: &str) -> Vec<&'a str> {
        text.lines()
            .skip_while(|l| !l.starts_with(title))
            .skip(1)
            .take_while(|l| {
                !l.trim().is_empty()
                    && !SECTIONS.iter().any(|s| s.is_title(l))
                    && !l.starts_with('_')
            })
            .collect()
    }

    #[test]
    fn headings_match_the_fixture() {
        let printed = render(&parse(FIXTURE, "fixture").unwrap());
        for s in SECTIONS {
            let ours: Vec<String> = section_lines(&printed, s.title)
                .iter()
                .take_while(|l| !l.starts_with("00-base"))
                .map(|l| collapse(l))
                .collect();
            let theirs: Vec<String> = section_lines(FIXTURE, s.title)
                .iter()
                .take_while(|l| !l.starts_with("00-base"))
                .map(|l| collapse(l))
                .collect();
            assert_eq!(ours, theirs, "{}", s.title);
        }
    }

    #[test]
    fn mean_and_stdev_rows_follow_each_configuration() {
        let printed = render(&parse(FIXTURE, "fixture").unwrap());
        let processes = section_lines(&printed, SECTIONS[0].title);
        let base: Vec<&str> = processes
            .iter()
            .copied()
            .filter(|l| l.starts_with("00-base"))
            .collect();
        assert_eq!(base.len(), 7);
        // stat: mean 3.942, population stdev 0.03655 (numpy std, ddof=0).
        assert_eq!(
            collapse(base[5]),
            "00-base MEAN 0.40 0.65 3.94 5.02 30.3 1.03 3.04 125. 1242 6610"
        );
        assert!(collapse(base[6]).starts_with("00-base STDEV 0.01 0.01 0.04 0.05"));
    }

    #[test]
    fn columns_that_differ_from_lmbench_are_named_under_their_section() {
        let printed = render(&parse(FIXTURE, "fixture").unwrap());
        let local = printed
            .split(SECTIONS[2].title)
            .nth(1)
            .and_then(|rest| rest.split("\n\n").next())
            .unwrap();
        let marks: Vec<&str> = local.lines().filter(|l| l.starts_with("* ")).collect();
        assert_eq!(marks.len(), 3, "{local}");
        assert!(marks[0].starts_with("* RPC/ UDP: ") && marks[2].starts_with("* TCP conn: "));
        let processes = printed.split(SECTIONS[0].title).nth(1).unwrap();
        let processes = processes.split("\n\n").next().unwrap();
        assert!(processes.contains("\n* fork proc: "), "{processes}");
        // A section with no such column has no mark.
        let ctxsw = printed.split(SECTIONS[1].title).nth(1).unwrap();
        assert!(!ctxsw.split("\n\n").next().unwrap().contains("\n* "));
    }

    #[test]
    fn a_failed_workload_is_named_under_its_section_with_phase_and_error() {
        let mut results = parse(FIXTURE, "fixture").unwrap();
        let fork = results[0]
            .workloads
            .iter_mut()
            .find(|w| w.name == "fork_proc")
            .unwrap();
        fork.clean.clear();
        fork.failure = Some(crate::results::WorkloadFailure {
            phase: "sample 3".into(),
            error: "fork: Resource temporarily unavailable".into(),
        });
        let label = results[0].label.clone();
        let printed = render(&results);
        let processes = printed.split(SECTIONS[0].title).nth(1).unwrap();
        let processes = processes.split("\n\n").next().unwrap();
        assert!(
            processes.contains(&format!(
                "\n! fork proc: {label}: fork_proc failed in sample 3: fork: Resource"
            )),
            "{processes}"
        );
    }

    #[test]
    fn rows_are_column_aligned_and_read_back() {
        let results = parse(FIXTURE, "fixture").unwrap();
        let printed = render(&results);
        assert!(printed.contains(
            "\n00-base   Linux 2.4.9    866 0.39 0.64 3.88 5.01  29.8 1.03 3.04 121. 1233 6560\n"
        ));
        // Our own aligned output imports to the same samples (MEAN/STDEV rows skipped).
        let again = parse(&printed, "printed").unwrap();
        assert_eq!(again.len(), 3);
        for (a, b) in results.iter().zip(&again) {
            assert_eq!(a.workloads, b.workloads, "{}", a.label);
        }
    }
}
