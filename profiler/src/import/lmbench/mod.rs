//! Reads lmbench 2.0/3.0 summaries as posted to mailing lists: several summaries per file, prose
//! around them, rows either column-aligned (as lmbench prints them) or with whitespace collapsed
//! (as mail archives show them), missing cells, and MEAN/STDEV rows added by the poster. Every
//! cell of a table is accounted for ([`table`]); what cannot be is a [`Fault`].
use std::collections::{BTreeMap, HashMap};

use super::{
    fault::{Fault, Imported},
    new_results, ImportError, MAX_CONFIGURATIONS,
};
use crate::{
    lmbench::{Cell, Column, Section, SECTIONS},
    results::{Results, WorkloadResult},
};

mod placement;
mod table;

use table::{column_rule, Row};

/// One configuration: the rows of one host label within one summary.
#[derive(Default)]
struct Config {
    summary: usize,
    host: String,
    os: String,
    mhz: Option<f64>,
    values: BTreeMap<&'static str, Vec<f64>>,
}

/// Parses `text` (named `shown` in errors) strictly: one results file per configuration, or the
/// first cell that could not be accounted for.
pub fn parse(text: &str, shown: &str) -> Result<Vec<Results>, ImportError> {
    Ok(read(text, shown)?.strict(shown)?)
}

/// Reads `text` into one results file per configuration, with a fault for every cell, row or
/// table that could not be accounted for (and is left out of the results).
pub fn read(text: &str, shown: &str) -> Result<Imported, ImportError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut configs = Configs::default();
    let mut faults = Vec::new();
    let mut systems = table::Systems::default();
    let mut tables = 0;
    let mut summary = 0;
    let mut rows_in_summary = 0;
    let mut i = 0;
    while i < lines.len() {
        if is_summary_banner(lines[i]) && rows_in_summary > 0 {
            summary += 1;
            rows_in_summary = 0;
        }
        let Some(section) = SECTIONS.iter().find(|s| s.is_title(lines[i])) else {
            i += 1;
            continue;
        };
        let Some((rule_at, spans)) = find_rule(&lines, i + 1) else {
            // A title without a rule under it is prose quoting one.
            i += 1;
            continue;
        };
        tables += 1;
        let Some(columns) = layout(section, spans.len()) else {
            faults.push(Fault::new(
                rule_at + 1,
                1,
                format!(
                    "the rule under '{}' marks {} columns, where lmbench 2.0 prints {} and 3.0 \
                     prints {}",
                    lines[i].trim(),
                    spans.len(),
                    section.columns_of(false).len(),
                    section.columns_of(true).len()
                ),
                "the table is skipped",
            ));
            i = rule_at + 1;
            continue;
        };
        let table = table::read(
            &lines,
            rule_at + 1,
            &spans,
            &columns,
            &mut systems,
            is_title,
            |row| {
                rows_in_summary += 1;
                configs.record(row, &columns, summary);
            },
        );
        faults.extend(table.faults);
        i = table.next;
    }
    if tables == 0 {
        return Err(ImportError::NoTable {
            path: shown.to_string(),
        });
    }
    if configs.list.len() > MAX_CONFIGURATIONS {
        return Err(ImportError::TooManyConfigurations {
            path: shown.to_string(),
            found: configs.list.len(),
        });
    }
    faults.sort_by_key(|f| (f.line, f.column));
    Ok(Imported {
        results: into_results(configs.list),
        faults,
    })
}

fn is_summary_banner(line: &str) -> bool {
    line.contains("L M B E N C H")
}

fn is_title(line: &str) -> bool {
    is_summary_banner(line) || SECTIONS.iter().any(|s| s.is_title(line))
}

/// The column rule under a title: within a few lines (title underline, warning, headings).
fn find_rule(lines: &[&str], start: usize) -> Option<(usize, Vec<(usize, usize)>)> {
    lines
        .iter()
        .enumerate()
        .skip(start)
        .take(6)
        .take_while(|(_, l)| !is_title(l))
        .find_map(|(i, l)| column_rule(l).map(|s| (i, s)))
}

/// The section's columns in the lmbench version whose layout has `count` of them.
fn layout(section: &Section, count: usize) -> Option<Vec<&'static Column>> {
    [false, true]
        .into_iter()
        .map(|v3| section.columns_of(v3))
        .find(|c| c.len() == count)
}

/// The configurations in the order first seen, indexed by summary and host (a forged file
/// with many hosts must not take quadratic time).
#[derive(Default)]
struct Configs {
    list: Vec<Config>,
    index: HashMap<(usize, String), usize>,
}

impl Configs {
    fn record(&mut self, row: Row, columns: &[&Column], summary: usize) {
        let list = &mut self.list;
        let at = *self
            .index
            .entry((summary, row.host.clone()))
            .or_insert_with(|| {
                list.push(Config {
                    summary,
                    host: row.host.clone(),
                    os: row.os.clone(),
                    ..Default::default()
                });
                list.len() - 1
            });
        let config = &mut list[at];
        for (column, value) in columns[2..].iter().zip(row.values) {
            match (column.cell, value) {
                (Cell::Workload(name), Some(v)) => config.values.entry(name).or_default().push(v),
                (Cell::Mhz, Some(v)) => config.mhz = config.mhz.or(Some(v)),
                _ => {}
            }
        }
    }
}

fn into_results(configs: Vec<Config>) -> Vec<Results> {
    // A host is in a summary once, so its configurations count the summaries it is in.
    let mut summaries: HashMap<&str, usize> = HashMap::new();
    for c in &configs {
        *summaries.entry(c.host.as_str()).or_default() += 1;
    }
    configs
        .iter()
        // A host whose every cell was dropped has nothing to import.
        .filter(|c| !c.values.is_empty())
        .map(|c| {
            // The same host in several summaries is several configurations.
            let label = if summaries[c.host.as_str()] > 1 {
                format!("{}-{}", c.host, c.summary + 1)
            } else {
                c.host.clone()
            };
            let mut r = new_results(&label, "lmbench");
            r.environment.hostname = c.host.clone();
            r.environment.kernel_release =
                c.os.split_once(' ')
                    .map_or(c.os.as_str(), |(_, release)| release)
                    .to_string();
            r.options.lmbench_os = Some(c.os.clone());
            r.options.lmbench_mhz = c.mhz;
            r.workloads = SECTIONS
                .iter()
                .flat_map(|s| s.columns.iter().map(move |col| (s, col)))
                .filter_map(|(s, col)| match col.cell {
                    Cell::Workload(name) => c
                        .values
                        .get(name)
                        .map(|v| WorkloadResult::new(name, s.family, s.unit, v.clone())),
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

    const FIXTURE: &str = include_str!("../../../tests/data/lmbench2-summary-lsm-2.4.9.txt");

    #[test]
    fn the_fixture_has_three_configurations_of_five_runs() {
        let results = parse(FIXTURE, "fixture").unwrap();
        let labels: Vec<&str> = results.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(labels, ["00-base", "01-lsm", "02-cap"]);
        for r in &results {
            assert_eq!(r.source.to_string(), "import:lmbench");
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
        assert_eq!(base.options.lmbench_mhz, Some(866.0));
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
        assert_eq!(r.options.lmbench_mhz, Some(2400.0));
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

    /// The fixture with its line `n` (1-based) replaced by `line`.
    fn forged(n: usize, line: &str) -> String {
        let mut lines: Vec<&str> = FIXTURE.lines().collect();
        lines[n - 1] = line;
        lines.join("\n") + "\n"
    }

    /// The second run of 00-base in the Processes table, line 66 of the fixture.
    const ROW: usize = 66;
    const ROW_TEXT: &str =
        "00-base Linux 2.4.9 866 0.41 0.65 3.97 5.01 29.7 1.03 3.04 126. 1247 6630";

    fn base_of(imported: &Imported) -> &Results {
        &imported.results[0]
    }

    #[test]
    fn the_fixture_accounts_for_every_cell_with_its_blank_last_columns() {
        assert_eq!(FIXTURE.lines().nth(ROW - 1), Some(ROW_TEXT));
        // TCP conn and Guesses are blank in every row: legal, not a cut.
        let imported = read(FIXTURE, "fixture").unwrap();
        assert_eq!(imported.faults, []);
        assert!(imported.results.iter().all(|r| r.workloads.len() == 42));
    }

    #[test]
    fn one_bad_cell_in_the_processes_table_is_refused_naming_it_or_dropped_alone() {
        let huge = "9".repeat(400);
        for (bad, why) in [
            ("abc", "is not a number"),
            ("NaN", "is not a number"),
            ("inf", "is not a number"),
            ("1e400", "is not a number"),
            ("-0.65", "is negative"),
            (huge.as_str(), "is too large for a finite number"),
        ] {
            let text = forged(ROW, &ROW_TEXT.replacen("0.65", bad, 1));
            let err = parse(&text, "s.txt").unwrap_err().to_string();
            // `00-base Linux 2.4.9 866 0.41 ` is 29 characters.
            let expected = format!("s.txt:66:30: '{bad}' in column null I/O {why}");
            assert!(err.starts_with(&expected), "{err}");
            assert_eq!(err.lines().count(), 1);
            let imported = read(&text, "s.txt").unwrap();
            assert_eq!(imported.faults.len(), 1, "{bad}");
            let base = base_of(&imported);
            // Only the bad cell is left out: the rest of its row and table are imported.
            assert_eq!(base.workloads.len(), 42, "{bad}");
            assert_eq!(
                base.workload("null_io").unwrap().clean,
                [0.64, 0.64, 0.65, 0.66]
            );
            assert_eq!(base.workload("stat").unwrap().clean.len(), 5);
        }
    }

    #[test]
    fn a_cut_row_is_refused_at_its_end_and_dropped_whole_when_collapsed() {
        let cut = ROW_TEXT.strip_suffix(" 6630").unwrap();
        let text = forged(ROW, cut);
        let err = parse(&text, "s.txt").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "s.txt:66:{}: the row ends at column exec proc where the table's rows go on \
                 to sh proc: a cut line",
                cut.len() + 1
            )),
            "{err}"
        );
        let imported = read(&text, "s.txt").unwrap();
        assert_eq!(
            imported.faults[0].lenient,
            "the row's 10 values are dropped"
        );
        let base = base_of(&imported);
        assert_eq!(base.workload("null_call").unwrap().clean.len(), 4);
        assert_eq!(base.workload("sh_proc").unwrap().clean.len(), 4);
    }

    #[test]
    fn a_row_with_an_extra_number_is_refused_rather_than_shifted() {
        let text = forged(ROW, &format!("{ROW_TEXT} 6631"));
        let err = parse(&text, "s.txt").unwrap_err().to_string();
        assert!(
            err.starts_with(&format!(
                "s.txt:66:{}: 12 values where the table has 11 columns for them",
                ROW_TEXT.len() + 2
            )),
            "{err}"
        );
        // An extra number inside the row is found the same way.
        let inside = forged(ROW, &ROW_TEXT.replacen(" 0.65 ", " 0.65 0.66 ", 1));
        assert!(parse(&inside, "s.txt").is_err());
        let base = base_of(&read(&text, "s.txt").unwrap()).clone();
        assert_eq!(base.workload("sh_proc").unwrap().clean.len(), 4);
        assert!(!base.workload("sh_proc").unwrap().clean.contains(&6631.0));
    }

    #[test]
    fn a_row_below_prose_that_ended_its_table_is_not_lost() {
        // A poster's remark between two runs ends the table; the run after it is a fault.
        let text = forged(ROW, &format!("I reran this one:\n{ROW_TEXT}"));
        let err = parse(&text, "s.txt").unwrap_err().to_string();
        assert!(
            err.starts_with("s.txt:67:1: a row of the table above, below line 66"),
            "{err}"
        );
    }

    #[test]
    fn a_rule_of_an_unknown_layout_is_refused_not_skipped() {
        let rule = FIXTURE.lines().nth(ROW - 3).unwrap();
        assert!(rule.starts_with("--------- -------------"), "{rule}");
        let text = forged(ROW - 2, &format!("{rule} ----"));
        let err = parse(&text, "s.txt").unwrap_err().to_string();
        assert!(
            err.contains("s.txt:64:1: the rule under 'Processor, Processes")
                && err.contains("marks 14 columns, where lmbench 2.0 prints 13 and 3.0 prints 13"),
            "{err}"
        );
    }

    /// The fixture as lmbench prints it: fixed-width, columns under the rule's dashes.
    fn fixed_width() -> String {
        crate::lmbench::summary::render(&parse(FIXTURE, "fixture").unwrap())
    }

    #[test]
    fn fixed_width_rows_are_held_to_the_rule_extents() {
        let text = fixed_width();
        let (n, row) = text
            .lines()
            .enumerate()
            .find(|(_, l)| l.starts_with("00-base") && l.contains(" 1247 "))
            .unwrap();
        assert_eq!(
            row,
            "00-base   Linux 2.4.9    866 0.41 0.65 3.97 5.01  29.7 1.03 3.04 126. 1247 6630"
        );
        let with = |new: &str| {
            let mut lines: Vec<&str> = text.lines().collect();
            lines[n] = new;
            lines.join("\n")
        };
        // A bad cell, by position: the rest of the row stays in place.
        let bad = with(&row.replacen("0.65", " NaN", 1));
        let err = parse(&bad, "f.txt").unwrap_err().to_string();
        assert!(err.starts_with(&format!("f.txt:{}:", n + 1)), "{err}");
        assert!(
            err.contains(":36: 'NaN' in column null I/O is not a number"),
            "{err}"
        );
        let base = base_of(&read(&bad, "f.txt").unwrap()).clone();
        assert_eq!(base.workload("null_io").unwrap().clean.len(), 4);
        assert_eq!(base.workload("stat").unwrap().clean.len(), 5);
        // A cell past the last column.
        let extra = with(&format!("{row} 6631"));
        let err = parse(&extra, "f.txt").unwrap_err().to_string();
        assert!(
            err.contains("'6631' lies past the last column (sh proc)"),
            "{err}"
        );
        // Two values in one column (a space lost inside a cell's width is not a new column).
        let two = with(&row.replacen(" 29.7", "2 9.7", 1));
        let err = parse(&two, "f.txt").unwrap_err().to_string();
        assert!(
            err.contains("is a second value in column selct TCP"),
            "{err}"
        );
        // Cut short: its cells are in place, so --lenient keeps them.
        let cut = with(row.strip_suffix(" 6630").unwrap());
        let imported = read(&cut, "f.txt").unwrap();
        assert_eq!(imported.faults.len(), 1);
        assert!(imported.faults[0].problem.ends_with("a cut line"));
        let base = base_of(&imported);
        assert_eq!(base.workload("exec_proc").unwrap().clean.len(), 5);
        assert_eq!(base.workload("sh_proc").unwrap().clean.len(), 4);
    }

    #[test]
    fn collapsed_and_fixed_width_spacing_read_to_the_same_results() {
        let collapsed = parse(FIXTURE, "fixture").unwrap();
        let aligned = parse(&fixed_width(), "printed").unwrap();
        for (a, b) in collapsed.iter().zip(&aligned) {
            assert_eq!(a.workloads, b.workloads, "{}", a.label);
        }
    }

    /// The fixture as a list archive shows a poster's summary with blank cells: the runs of
    /// `drop` (configuration, workload, runs kept) cut to their first runs, printed with a
    /// MEAN and a STDEV row under each configuration, and every run of spaces collapsed.
    fn posted_with_blanks(drop: &[(usize, &str, usize)]) -> String {
        let mut results = parse(FIXTURE, "fixture").unwrap();
        for &(config, name, kept) in drop {
            let w = results[config]
                .workloads
                .iter_mut()
                .find(|w| w.name == name)
                .unwrap();
            w.clean.truncate(kept);
        }
        crate::lmbench::summary::render(&results)
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn blank_cells_of_collapsed_rows_are_placed_by_the_posters_mean_and_stdev_rows() {
        // 01-lsm's last two runs lack Prot Fault (a middle column of the File & VM table),
        // 02-cap's last two lack Page Fault (its last column, which reads like a cut line).
        let text = posted_with_blanks(&[(1, "prot_fault", 3), (2, "page_fault", 3)]);
        let short = "01-lsm Linux 2.4.9-l 35.4 7.9030 135.7 18.8 545.0 2.00000";
        assert!(text.lines().any(|l| l == short), "{text}");
        let imported = read(&text, "posted.txt").unwrap();
        assert_eq!(imported.faults, []);
        let original = parse(FIXTURE, "fixture").unwrap();
        let (lsm, cap) = (&imported.results[1], &imported.results[2]);
        assert_eq!(
            lsm.workload("prot_fault").unwrap().clean,
            original[1].workload("prot_fault").unwrap().clean[..3]
        );
        // The values after the blank stayed in their own columns.
        assert_eq!(lsm.workload("page_fault").unwrap().clean, [2.0; 5]);
        assert_eq!(
            lsm.workload("mmap_latency").unwrap().clean,
            original[1].workload("mmap_latency").unwrap().clean
        );
        assert_eq!(cap.workload("page_fault").unwrap().clean, [2.0; 3]);
        assert_eq!(
            cap.workload("prot_fault").unwrap().clean,
            original[2].workload("prot_fault").unwrap().clean
        );
        // Every other configuration and table reads as the fixture does.
        assert_eq!(imported.results[0].workloads, original[0].workloads);
    }

    #[test]
    fn short_collapsed_rows_that_the_statistics_do_not_place_are_refused_as_before() {
        let text = posted_with_blanks(&[(1, "prot_fault", 3)]);
        // Without the statistic rows nothing says where the blank was.
        let bare: String = text
            .lines()
            .filter(|l| !l.contains(" MEAN ") && !l.contains(" STDEV "))
            .map(|l| format!("{l}\n"))
            .collect();
        let err = parse(&bare, "bare.txt").unwrap_err().to_string();
        assert!(
            err.contains("to Page Fault: a cut line (and 1 more)"),
            "{err}"
        );
        // A MEAN row that no placement reproduces says so.
        let mean = text
            .lines()
            .find(|l| l.starts_with("01-lsm MEAN 35.4"))
            .unwrap()
            .to_string();
        let forged = text.replace(&mean, &mean.replacen("35.4", "36.4", 1));
        let err = parse(&forged, "forged.txt").unwrap_err().to_string();
        assert!(
            err.contains(
                "a cut line (no placement of its blank cells reproduces its statistic rows)"
            ),
            "{err}"
        );
    }

    #[test]
    fn guesses_are_words_and_blank_trailing_columns_are_legal() {
        let text = "\
Memory latencies in nanoseconds - smaller is better
    (WARNING - may not be correct, check graphs)
---------------------------------------------------
Host                 OS   Mhz  L1 $   L2 $    Main mem    Guesses
--------- ------------- ---- ----- ------ -------- -------
box       Linux 2.6.0    866 3.473 8.1040    140.4    No L2 cache?
box       Linux 2.6.0    866 3.473 8.1040    140.3
box Linux 2.6.0 866 3.474 8.1030 140.3 No L2 cache?
box Linux 2.6.0 866 3.474 8.1030 140.3
";
        let imported = read(text, "m.txt").unwrap();
        assert_eq!(imported.faults, []);
        assert_eq!(
            imported.results[0]
                .workload("mem_main")
                .unwrap()
                .clean
                .len(),
            4
        );
        // A number where the guesses go is a cell too many.
        let forged = text.replace("140.3 No L2 cache?", "140.3 99");
        let err = parse(&forged, "m.txt").unwrap_err().to_string();
        assert!(err.starts_with("m.txt:8:"), "{err}");
    }

    #[test]
    fn more_configurations_than_import_writes_files_for_is_refused() {
        let mut text = String::from(
            "Context switching - times in microseconds - smaller is better\n\
             --------- ------------- ----- ------ ------ ------ ------ ------- -------\n",
        );
        for h in 0..=MAX_CONFIGURATIONS {
            text += &format!("h{h} Linux 6.1 1.1 4.4\n");
        }
        let err = parse(&text, "many.txt").unwrap_err().to_string();
        assert!(
            err.starts_with("many.txt: 1001 configurations, more than the 1000"),
            "{err}"
        );
    }
}
