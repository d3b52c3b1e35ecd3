//! Reads lmbench 2.0/3.0 summaries as posted to mailing lists: several summaries per file, prose
//! around them, rows either column-aligned (as lmbench prints them) or with whitespace collapsed
//! (as mail archives show them), missing cells, and MEAN/STDEV rows added by the poster.
use std::collections::BTreeMap;

use super::{new_results, ImportError};
use crate::{
    lmbench::{parse_value, Cell, Column, Section, SECTIONS},
    results::{Results, WorkloadResult},
};

/// Rows posters add to summarise runs; they are not runs themselves.
const STATISTIC_LABELS: &[&str] = &[
    "mean", "avg", "average", "stdev", "stddev", "std", "sd", "ci", "ci95", "median", "min", "max",
    "var", "variance", "sum", "total", "diff", "delta",
];

/// The widest an lmbench OS cell gets (it prints `%13.13s`).
const OS_WIDTH: usize = 13;

/// One configuration: the rows of one host label within one summary.
#[derive(Default)]
struct Config {
    summary: usize,
    host: String,
    os: String,
    mhz: Option<f64>,
    values: BTreeMap<&'static str, Vec<f64>>,
}

/// A parsed data row: host, OS, and one optional value per column after those two.
struct Row {
    host: String,
    os: String,
    values: Vec<Option<f64>>,
}

enum Line {
    Run(Row),
    Statistic,
    NotARow,
}

/// Parses `text` (named `shown` in errors) into one results file per configuration.
pub fn parse(text: &str, shown: &str) -> Result<Vec<Results>, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut configs: Vec<Config> = Vec::new();
    let mut summary = 0;
    let mut rows_in_summary = 0;
    let mut i = 0;
    while i < lines.len() {
        if is_summary_banner(lines[i]) && rows_in_summary > 0 {
            summary += 1;
            rows_in_summary = 0;
        }
        match SECTIONS.iter().find(|s| s.is_title(lines[i])) {
            Some(section) => {
                let (next, rows) = read_section(section, &lines, i + 1, summary, &mut configs);
                rows_in_summary += rows;
                i = next;
            }
            None => i += 1,
        }
    }
    if configs.is_empty() {
        return Err(ImportError::NoTable {
            path: shown.to_string(),
        });
    }
    Ok(into_results(configs))
}

fn is_summary_banner(line: &str) -> bool {
    line.contains("L M B E N C H")
}

fn is_title(line: &str) -> bool {
    is_summary_banner(line) || SECTIONS.iter().any(|s| s.is_title(line))
}

/// Byte spans of the dash runs of a column rule (`--------- ------------- ----`), or None if
/// the line is not one with at least three columns.
fn column_rule(line: &str) -> Option<Vec<(usize, usize)>> {
    let spans = token_spans(line);
    let is_rule = spans.len() >= 3
        && spans
            .iter()
            .all(|&(s, e)| line[s..e].bytes().all(|b| b == b'-'));
    is_rule.then_some(spans)
}

/// (start, end) byte offsets of each whitespace-separated token.
fn token_spans(line: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        match (c.is_whitespace(), start) {
            (false, None) => start = Some(i),
            (true, Some(s)) => {
                spans.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        spans.push((s, line.len()));
    }
    spans
}

/// Reads one section's rows into `configs`; returns the next line to look at and the number of
/// runs read. A section whose column rule is missing or matches no known layout is skipped.
fn read_section(
    section: &Section,
    lines: &[&str],
    start: usize,
    summary: usize,
    configs: &mut Vec<Config>,
) -> (usize, usize) {
    // The column rule comes within a few lines (title underline, warning, headings).
    let Some((rule_at, spans)) = lines
        .iter()
        .enumerate()
        .skip(start)
        .take(6)
        .take_while(|(_, l)| !is_title(l))
        .find_map(|(i, l)| column_rule(l).map(|s| (i, s)))
    else {
        return (start, 0);
    };
    let columns = [false, true]
        .into_iter()
        .map(|v3| section.columns_of(v3))
        .find(|c| c.len() == spans.len());
    let Some(columns) = columns else {
        return (rule_at + 1, 0);
    };
    let mut runs = 0;
    let mut i = rule_at + 1;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() {
            i += 1;
            continue;
        }
        if is_title(line) {
            break;
        }
        match parse_row(line, &spans, &columns) {
            Line::Run(row) => {
                record(row, &columns, summary, configs);
                runs += 1;
            }
            Line::Statistic => {}
            Line::NotARow => break,
        }
        i += 1;
    }
    (i, runs)
}

fn is_statistic_label(cell: &str) -> bool {
    let first = cell.split_whitespace().next().unwrap_or("");
    let word = first.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    STATISTIC_LABELS
        .iter()
        .any(|l| l.eq_ignore_ascii_case(word))
}

fn parse_row(line: &str, spans: &[(usize, usize)], columns: &[&Column]) -> Line {
    let cells = if is_aligned(line, spans) {
        aligned_cells(line, spans)
    } else {
        match collapsed_cells(line, columns.len()) {
            Some(cells) => cells,
            None => return Line::NotARow,
        }
    };
    let (host, os) = (cells[0].clone(), cells[1].clone());
    if is_statistic_label(&host) || is_statistic_label(&os) {
        return Line::Statistic;
    }
    let mut values = Vec::with_capacity(cells.len() - 2);
    for cell in &cells[2..] {
        if cell.is_empty() {
            values.push(None);
        } else {
            match parse_value(cell) {
                Some(v) => values.push(Some(v)),
                None => return Line::NotARow,
            }
        }
    }
    if host.is_empty() || values.iter().all(Option::is_none) {
        return Line::NotARow;
    }
    Line::Run(Row { host, os, values })
}

/// A row printed by lmbench keeps its columns under the rule: every gap between dash runs is a
/// space (or past the end of the line). Mail archives collapse the spaces, which breaks this.
fn is_aligned(line: &str, spans: &[(usize, usize)]) -> bool {
    let bytes = line.as_bytes();
    !line.contains('\t')
        && spans[..spans.len() - 1]
            .iter()
            .all(|&(_, end)| bytes.get(end).is_none_or(|&b| b == b' '))
}

/// Cells of an aligned row: each token goes to the column it overlaps most (values wider than
/// their column, like lmbench's page faults, still land in the right one).
fn aligned_cells(line: &str, spans: &[(usize, usize)]) -> Vec<String> {
    let mut cells = vec![String::new(); spans.len()];
    for (s, e) in token_spans(line) {
        let overlap = |&(cs, ce): &(usize, usize)| ce.min(e) as isize - cs.max(s) as isize;
        let column = (0..spans.len())
            .max_by_key(|&c| (overlap(&spans[c]), std::cmp::Reverse(c)))
            .expect("at least three columns");
        if !cells[column].is_empty() {
            cells[column].push(' ');
        }
        cells[column].push_str(&line[s..e]);
    }
    cells
}

/// Cells of a row whose spacing was collapsed: host, then the OS (as few words as leave room
/// for the values, extended over words that are not numbers), then values left to right;
/// missing cells can only be told apart at the end of such a row.
fn collapsed_cells(line: &str, n_columns: usize) -> Option<Vec<String>> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let n_values = n_columns - 2;
    if tokens.len() < 3 {
        return None;
    }
    let rest = &tokens[1..];
    let mut os_words = rest.len().saturating_sub(n_values).max(1);
    while os_words < rest.len()
        && parse_value(rest[os_words]).is_none()
        && rest[..=os_words].join(" ").len() <= OS_WIDTH
    {
        os_words += 1;
    }
    let values = &rest[os_words..];
    if values.len() > n_values || os_words > rest.len() {
        return None;
    }
    let mut cells = vec![tokens[0].to_string(), rest[..os_words].join(" ")];
    cells.extend(values.iter().map(|v| v.to_string()));
    cells.resize(n_columns, String::new());
    Some(cells)
}

fn record(row: Row, columns: &[&Column], summary: usize, configs: &mut Vec<Config>) {
    let at = match configs
        .iter()
        .position(|c| c.summary == summary && c.host == row.host)
    {
        Some(at) => at,
        None => {
            configs.push(Config {
                summary,
                host: row.host.clone(),
                os: row.os.clone(),
                ..Default::default()
            });
            configs.len() - 1
        }
    };
    let config = &mut configs[at];
    for (column, value) in columns[2..].iter().zip(row.values) {
        match (column.cell, value) {
            (Cell::Workload(name), Some(v)) => config.values.entry(name).or_default().push(v),
            (Cell::Mhz, Some(v)) => config.mhz = config.mhz.or(Some(v)),
            _ => {}
        }
    }
}

fn into_results(configs: Vec<Config>) -> Vec<Results> {
    let summaries_of = |host: &str| {
        configs
            .iter()
            .filter(|c| c.host == host)
            .map(|c| c.summary)
            .collect::<std::collections::BTreeSet<_>>()
            .len()
    };
    configs
        .iter()
        .map(|c| {
            // The same host in several summaries is several configurations.
            let label = if summaries_of(&c.host) > 1 {
                format!("{}-{}", c.host, c.summary + 1)
            } else {
                c.host.clone()
            };
            let mut r = new_results(&label, "import:lmbench");
            r.environment.hostname = c.host.clone();
            r.environment.kernel_release =
                c.os.split_once(' ')
                    .map_or(c.os.as_str(), |(_, release)| release)
                    .to_string();
            r.options.insert("lmbench_os".into(), c.os.clone().into());
            if let Some(mhz) = c.mhz {
                r.options.insert("lmbench_mhz".into(), mhz.into());
            }
            r.workloads = SECTIONS
                .iter()
                .flat_map(|s| s.columns.iter().map(move |col| (s, col)))
                .filter_map(|(s, col)| match col.cell {
                    Cell::Workload(name) => c
                        .values
                        .get(name)
                        .map(|v| WorkloadResult::new(name, s.family.key(), s.unit, v.clone())),
                    _ => None,
                })
                .collect();
            r
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../tests/data/lmbench2-summary-lsm-2.4.9.txt");

    #[test]
    fn the_fixture_has_three_configurations_of_five_runs() {
        let results = parse(FIXTURE, "fixture").unwrap();
        let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["00-base", "01-lsm", "02-cap"]);
        for r in &results {
            assert_eq!(r.source, "import:lmbench");
            // 10 + 7 + 6 latency columns with data (no TCP conn) + 7 + 9 + 3.
            assert_eq!(r.workloads.len(), 42, "{}", r.label);
            assert!(
                r.workloads.iter().all(|w| w.clean.len() == 5),
                "{}",
                r.label
            );
            assert!(r.workload("lat_tcp_connect").is_none());
        }
        let lsm = &results[1];
        assert_eq!(lsm.environment.kernel_release, "2.4.9-l");
        assert_eq!(
            lsm.workload("stat").unwrap().clean,
            [4.13, 4.16, 4.13, 4.23, 4.22]
        );
        assert_eq!(lsm.workload("fork_proc").unwrap().clean[0], 125.0);
        assert_eq!(lsm.workload("page_fault").unwrap().clean[4], 2.0);
        let base = &results[0];
        assert_eq!(base.workload("mem_l2").unwrap().clean[4], 44.5);
        assert_eq!(base.workload("ctx_2p_0k").unwrap().clean[0], 1.16);
        assert_eq!(base.options["lmbench_mhz"], 866.0);
    }

    const ALIGNED: &str = "\
Some prose before the table, 2 lines
of it.
Processor, Processes - times in microseconds - smaller is better
----------------------------------------------------------------
Host                 OS  Mhz null null      open selct sig  sig  fork exec sh
                             call  I/O stat clos TCP   inst hndl proc proc proc
--------- ------------- ---- ---- ---- ---- ---- ----- ---- ---- ---- ---- ----
box       Linux 2.6.0    866 0.39      3.88 5.01 29.8  1.03 3.04 1.5K 1233 6560
box       Linux 2.6.0    866 .41  0.65 3.97 5.01 29.7  1.03 3.04 126. 1247 6630
box       MEAN               0.40 0.65 3.92 5.01 29.8  1.03 3.04 126. 1240 6595

Regards, and thanks 2 all
";

    #[test]
    fn aligned_rows_keep_missing_cells_in_place_and_skip_mean_rows() {
        let results = parse(ALIGNED, "posted").unwrap();
        assert_eq!(results.len(), 1);
        let r = &results[0];
        assert_eq!(r.environment.kernel_release, "2.6.0");
        // The first run has no null I/O cell: only the second run's value is there.
        assert_eq!(r.workload("null_io").unwrap().clean, [0.65]);
        assert_eq!(r.workload("null_call").unwrap().clean, [0.39, 0.41]);
        assert_eq!(r.workload("fork_proc").unwrap().clean, [1500.0, 126.0]);
    }

    #[test]
    fn the_same_host_in_two_summaries_is_two_configurations() {
        let one = "L M B E N C H 2 . 0 S U M M A R Y\n\
Context switching - times in microseconds - smaller is better\n\
--------------------\n\
Host OS 2p/0K 2p/16K 2p/64K 8p/16K 8p/64K 16p/16K 16p/64K\n\
--------- ------------- ----- ------ ------ ------ ------ ------- -------\n";
        let text = format!(
            "{one}h Linux 2.4.9 1.1 4.4\nh Linux 2.4.9 1.2 4.5\n{one}h Linux 2.4.9-l 1.3\n"
        );
        let results = parse(&text, "two").unwrap();
        let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["h-1", "h-2"]);
        assert_eq!(results[0].workload("ctx_2p_0k").unwrap().clean, [1.1, 1.2]);
        assert_eq!(results[1].workload("ctx_2p_0k").unwrap().clean, [1.3]);
        assert!(results[1].workload("ctx_2p_16k").is_none());
    }

    #[test]
    fn lmbench3_layouts_are_told_apart_by_their_column_count() {
        let text = "\
File & VM system latencies in microseconds - smaller is better
-------------------------------------------------------------------------------
Host                 OS   0K File      10K File     Mmap    Prot   Page   100fd
                        Create Delete Create Delete Latency Fault  Fault  selct
--------- ------------- ------ ------ ------ ------ ------- ----- ------- -----
host Linux 2.6.32 12.3 9.1234 40.1 20.1 1234.0 0.512 1.23450 2.345

Memory latencies in nanoseconds - smaller is better
    (WARNING - may not be correct, check graphs)
------------------------------------------------------------------------------
Host                 OS   Mhz   L1 $   L2 $    Main mem    Rand mem    Guesses
--------- -------------   ---   ----   ----    --------    --------    -------
host Linux 2.6.32 2400 1.25 5.0 60.1 90.2
";
        let results = parse(text, "v3").unwrap();
        let r = &results[0];
        assert_eq!(r.workload("page_fault").unwrap().clean, [1.2345]);
        assert_eq!(r.workload("fs_delete_0k").unwrap().clean, [9.1234]);
        assert_eq!(r.workload("select_file").unwrap().clean, [2.345]);
        // Rand mem (90.2) is not main memory latency.
        assert_eq!(r.workload("mem_main").unwrap().clean, [60.1]);
        assert_eq!(r.workload("mem_rand").unwrap().clean, [90.2]);
        assert_eq!(r.options["lmbench_mhz"], 2400.0);
    }

    #[test]
    fn text_without_a_table_is_an_error_naming_the_file() {
        let err = parse(
            "just prose\nProcessor, Processes\nno rule here\n",
            "mail.txt",
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "mail.txt: no lmbench summary table found");
    }
}
