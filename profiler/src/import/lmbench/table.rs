//! One table of an lmbench summary: the lines under its dashed rule, each cell placed in the
//! column its header names (by the rule's extents where lmbench's fixed-width spacing survives,
//! by count where a mail archive collapsed the spaces) and read, or named in a fault.
//! Every line of the block under the rule (up to a blank line or the next title) shaped like
//! the table's rows is a row, whatever its cells hold, so a row of bad cells is named, not
//! taken for prose.
use std::collections::{HashMap, HashSet};

use super::placement::{self, Cells, Printed, Statistic, StatisticRow, Unplaced};
use crate::{
    import::fault::{column_of, Fault},
    lmbench::{looks_numeric, read_value, Cell, Column},
};

/// Rows posters add to summarise runs; they are not runs themselves.
const STATISTIC_LABELS: &[&str] = &[
    "mean", "avg", "average", "stdev", "stddev", "std", "sd", "ci", "ci95", "median", "min", "max",
    "var", "variance", "sum", "total", "diff", "delta",
];

/// The widest an lmbench OS cell gets (it prints `%13.13s`).
const OS_WIDTH: usize = 13;

/// One run's row: host, OS, and for each column after those two its value (None where the
/// cell is blank, or was dropped for a fault).
#[derive(Debug)]
pub struct Row {
    pub host: String,
    pub os: String,
    pub values: Vec<Option<f64>>,
}

pub struct Table {
    pub faults: Vec<Fault>,
    /// The index of the first line after the table.
    pub next: usize,
}

/// Byte spans of the dash runs of a column rule (`--------- ------------- ----`), or None if
/// the line is not one with at least three columns.
pub fn column_rule(line: &str) -> Option<Vec<(usize, usize)>> {
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

/// Reads the table whose rule is `spans` from line index `start` on, up to the next title
/// (`is_title`), blank lines and prose, handing each run's row to `on_row`. Every line that is a
/// row is accounted for: each of its cells is read into its column or named in a fault.
pub fn read(
    lines: &[&str],
    start: usize,
    spans: &[(usize, usize)],
    columns: &[&Column],
    systems: &mut Systems,
    is_title: impl Fn(&str) -> bool,
    mut on_row: impl FnMut(Row),
) -> Table {
    let body = Body::find(lines, start, spans, &is_title);
    let mut faults = body.cut_off_by_prose(lines, &is_title);
    let blocks = blocks_of(lines, &body.rows);
    let rows: Vec<usize> = body
        .rows
        .into_iter()
        .filter(|&n| !is_statistic_row(lines[n]))
        .collect();
    let hint = learn_os(lines, &rows, spans, columns, systems);
    // A row that stops short of where the table's other rows go is a cut line; blank columns
    // at the end of every row (Guesses, TCP conn never measured) are not. Rows are placed
    // again for that reach alone, so a long table is never held placed in memory.
    let reach = rows
        .iter()
        .filter_map(|&n| place(lines[n], n + 1, spans, columns, &hint, &mut Vec::new()))
        .map(|p| p.reach())
        .max()
        .unwrap_or(0);
    let (by_statistics, unplaced) = place_short_rows(lines, &blocks, spans, columns, &hint, reach);
    for n in rows {
        let line = lines[n];
        let Some(mut p) = place(line, n + 1, spans, columns, &hint, &mut faults) else {
            continue;
        };
        if let Some(placement) = by_statistics.get(&n) {
            let cells: Vec<_> = p.values.iter().flatten().copied().collect();
            p.values = vec![None; columns.len() - 2];
            for (cell, &c) in cells.into_iter().zip(placement) {
                p.values[c] = Some(cell);
            }
        } else if p.reach() < reach {
            let short = ShortRow {
                line,
                number: n + 1,
                placed: &p,
                reach,
                why: unplaced.get(&n),
            };
            faults.push(short.fault(columns));
            if !p.aligned {
                continue;
            }
        }
        let values = read_cells(line, n + 1, &p, columns, &mut faults);
        on_row(Row {
            host: p.host,
            os: p.os,
            values,
        });
    }
    faults.sort_by_key(|f| (f.line, f.column));
    Table {
        faults,
        next: body.next,
    }
}

/// The lines of a table under its rule that are rows, and where the table ends.
struct Body {
    rows: Vec<usize>,
    /// The first line of prose that ended the table, if prose did.
    prose_at: Option<usize>,
    next: usize,
    seen: Seen,
}

impl Body {
    fn find(
        lines: &[&str],
        start: usize,
        spans: &[(usize, usize)],
        is_title: &impl Fn(&str) -> bool,
    ) -> Body {
        let mut body = Body {
            rows: Vec::new(),
            prose_at: None,
            next: start,
            seen: Seen::default(),
        };
        // Token counts of the rows so far, and whether a blank line has ended the rule's block.
        let mut shapes = HashSet::new();
        let mut in_block = true;
        while body.next < lines.len() && !is_title(lines[body.next]) {
            let (i, line) = (body.next, lines[body.next]);
            if line.trim().is_empty() {
                in_block = false;
            } else {
                // The line right under the rule is a row by its place, and so is a line of the
                // block shaped like a row (placed under the rule, or as many cells as a row
                // before it), whatever its cells hold; past the block, by what they hold.
                let under_rule = i == start && line.split_whitespace().nth(2).is_some();
                let shaped = in_block && has_row_shape(line, spans, &shapes);
                if !under_rule && !shaped && !body.seen.is_row(line) {
                    body.prose_at = Some(i);
                    break;
                }
                shapes.insert(line.split_whitespace().count());
                body.seen.add(line);
                body.rows.push(i);
            }
            body.next += 1;
        }
        body
    }

    /// Rows that prose cut off from their table would otherwise be lost without a word.
    fn cut_off_by_prose(&self, lines: &[&str], is_title: &impl Fn(&str) -> bool) -> Vec<Fault> {
        let Some(end) = self.prose_at else {
            return Vec::new();
        };
        let mut faults = Vec::new();
        for (j, line) in lines.iter().enumerate().skip(end + 1) {
            if is_title(line) || column_rule(line).is_some() || line.contains("is better") {
                break;
            }
            if self.seen.is_row(line) {
                faults.push(Fault::new(
                    j + 1,
                    1,
                    format!(
                        "a row of the table above, below line {} that ended it",
                        end + 1
                    ),
                    "the row is dropped",
                ));
            }
        }
        faults
    }
}

/// Where a collapsed row's OS ends is certain in some rows (a full row, a release that is no
/// number): those teach the host's OS and the table's reach to the rows where it is not.
fn learn_os<'a>(
    lines: &[&str],
    rows: &[usize],
    spans: &[(usize, usize)],
    columns: &[&Column],
    systems: &'a mut Systems,
) -> OsHint<'a> {
    let mut hint = OsHint {
        known: systems,
        reach: None,
    };
    for &n in rows {
        let tokens = token_spans(lines[n]);
        if tokens.len() >= 2 && !is_aligned(lines[n], &tokens, spans) {
            if let [only] = os_splits(lines[n], &tokens, columns).as_slice() {
                if only.fits {
                    let host = lines[n][tokens[0].0..tokens[0].1].to_string();
                    hint.known.0.insert((host, only.os.clone()));
                    hint.reach = hint.reach.max(Some(only.cells.len()));
                }
            }
        }
    }
    hint
}

/// A row that stops short of the table's reach, and why its statistic rows could not place it.
struct ShortRow<'a> {
    line: &'a str,
    number: usize,
    placed: &'a Placed<'a>,
    reach: usize,
    why: Option<&'a Unplaced>,
}

impl ShortRow<'_> {
    /// The cut line named; with collapsed spacing a blank cell before the end would shift the
    /// values left, so none of them can be placed for sure and the row is dropped.
    fn fault(&self, columns: &[&Column]) -> Fault {
        let kept = self.placed.values.iter().filter(|v| v.is_some()).count();
        let last = |r: usize| match r {
            0 => "OS".to_string(),
            r => columns[r + 1].heading(),
        };
        let why = match self.why {
            None => "",
            Some(Unplaced::NoPlacement) => {
                " (no placement of its blank cells reproduces its statistic rows)"
            }
            Some(Unplaced::Ambiguous) => {
                " (its statistic rows fit more than one placement of its blank cells)"
            }
            Some(Unplaced::TooMany) => {
                " (too many short rows in its block to place by its statistic rows)"
            }
        };
        let problem = format!(
            "the row ends at column {} where the table's rows go on to {}: a cut line{why}",
            last(self.placed.reach()),
            last(self.reach)
        );
        let at = column_of(self.line, self.line.trim_end().len());
        let lenient = if self.placed.aligned {
            format!("its {kept} values are kept and the cells after stay missing")
        } else {
            format!("the row's {kept} values are dropped")
        };
        Fault::new(self.number, at, problem, lenient)
    }
}

/// The values of a placed row, each read in its column or named in a fault.
fn read_cells(
    line: &str,
    number: usize,
    p: &Placed,
    columns: &[&Column],
    faults: &mut Vec<Fault>,
) -> Vec<Option<f64>> {
    p.values
        .iter()
        .zip(&columns[2..])
        .map(|(cell, column)| {
            let &(at, text) = cell.as_ref()?;
            if column.cell == Cell::Unused {
                faults.push(unused_number(line, number, at, text, column));
                return None;
            }
            read_value(text)
                .map_err(|why| {
                    faults.push(Fault::new(
                        number,
                        column_of(line, at),
                        format!("'{text}' in column {} {why}", column.heading()),
                        "the cell is dropped",
                    ))
                })
                .ok()
        })
        .collect()
}

/// A configuration's runs as they stand in the table, and the statistic rows a poster added
/// under them (line indices).
struct Block {
    runs: Vec<usize>,
    statistics: Vec<usize>,
}

/// The table's rows cut into blocks: a statistic row belongs to the runs above it, back to the
/// previous statistic row (`MEAN` and `STDEV` under one host's runs share them).
fn blocks_of(lines: &[&str], body: &[usize]) -> Vec<Block> {
    let mut blocks: Vec<Block> = Vec::new();
    for &n in body {
        let statistic = is_statistic_row(lines[n]);
        match blocks.last_mut() {
            Some(b) if statistic || b.statistics.is_empty() => {
                if statistic {
                    b.statistics.push(n)
                } else {
                    b.runs.push(n)
                }
            }
            _ if statistic => {} // statistic rows above any run summarise nothing here
            _ => blocks.push(Block {
                runs: vec![n],
                statistics: Vec::new(),
            }),
        }
    }
    blocks
}

/// Collapsed rows that stop short, placed by their block's statistic rows where exactly one
/// placement reproduces them (the column of each cell, by line index); for the others, why not.
fn place_short_rows(
    lines: &[&str],
    blocks: &[Block],
    spans: &[(usize, usize)],
    columns: &[&Column],
    hint: &OsHint,
    reach: usize,
) -> (HashMap<usize, Vec<usize>>, HashMap<usize, Unplaced>) {
    let mut placed = HashMap::new();
    let mut unplaced = HashMap::new();
    let value_columns = &columns[2..];
    let checked: Vec<bool> = value_columns
        .iter()
        .map(|c| matches!(c.cell, Cell::Workload(_) | Cell::Repeat(_)))
        .collect();
    let placeable: Vec<bool> = value_columns
        .iter()
        .map(|c| c.cell != Cell::Unused)
        .collect();
    for block in blocks.iter().filter(|b| !b.statistics.is_empty()) {
        let rows: Vec<(usize, Placed)> = block
            .runs
            .iter()
            .filter_map(|&n| {
                Some((
                    n,
                    place(lines[n], n + 1, spans, columns, hint, &mut Vec::new())?,
                ))
            })
            .collect();
        let is_short = |p: &Placed| !p.aligned && p.reach() < reach;
        if !rows.iter().any(|(_, p)| is_short(p)) {
            continue;
        }
        let cells: Option<Vec<Cells>> = rows
            .iter()
            .map(|(_, p)| run_cells(p, is_short(p)))
            .collect();
        let statistics: Option<Vec<StatisticRow>> = block
            .statistics
            .iter()
            .filter_map(|&n| statistic_row(lines[n], n + 1, spans, columns))
            .collect();
        // A cell that is no number in a short row, or a statistic row that cannot be read,
        // leaves the row to the faults it has.
        let (Some(cells), Some(statistics)) = (cells, statistics) else {
            continue;
        };
        let block = placement::Block {
            rows: &cells,
            statistics: &statistics,
            checked: &checked,
            placeable: &placeable,
        };
        let short = rows.iter().filter(|(_, p)| is_short(p)).map(|(n, _)| *n);
        match block.place() {
            Ok(placements) => {
                for ((n, p), columns) in rows.iter().zip(placements) {
                    if is_short(p) {
                        placed.insert(*n, columns);
                    }
                }
            }
            Err(why) => unplaced.extend(short.map(|n| (n, why))),
        }
    }
    (placed, unplaced)
}

/// A run's values for placement: in their columns, or (a short collapsed row) in order only.
/// None if a short row's cell is no number (its place cannot be told then).
fn run_cells(p: &Placed, short: bool) -> Option<Cells> {
    let mut values = Vec::new();
    let mut known = Vec::new();
    for (c, cell) in p.values.iter().enumerate() {
        let Some((_, text)) = cell else { continue };
        match Printed::read(text) {
            Some(v) => {
                values.push(v);
                known.push(c);
            }
            None if short => return None,
            None => {} // a bad cell in its place: dropped as a fault, no value here
        }
    }
    Some(Cells {
        values,
        columns: (!short).then_some(known),
    })
}

/// A statistic row's statistic and values: in their columns when the row kept lmbench's
/// spacing, else in order. None for a statistic this importer cannot recompute; Some(None)
/// for one it cannot read (which stops the block's placement).
fn statistic_row(
    line: &str,
    number: usize,
    spans: &[(usize, usize)],
    columns: &[&Column],
) -> Option<Option<StatisticRow>> {
    let tokens = token_spans(line);
    let label_at = tokens
        .iter()
        .take(2)
        .position(|&(s, e)| Statistic::of_label(&line[s..e]).is_some())?;
    let (s, e) = tokens[label_at];
    let statistic = Statistic::of_label(&line[s..e])?;
    let cells = if label_at == 1 && is_aligned(line, &tokens, spans) {
        let p = aligned(line, number, &tokens, spans, columns, &mut Vec::new());
        run_cells(&p, false)
    } else {
        let values: Option<Vec<Printed>> = tokens[label_at + 1..]
            .iter()
            .map(|&(s, e)| Printed::read(&line[s..e]))
            .collect();
        values.map(|values| Cells {
            values,
            columns: None,
        })
    };
    Some(cells.map(|cells| StatisticRow { statistic, cells }))
}

/// The hosts and OS names of the rows read so far: a line starting with one is a row even when
/// its cells are not numbers.
#[derive(Default)]
struct Seen {
    hosts: HashSet<String>,
    systems: HashSet<String>,
}

impl Seen {
    /// A row has a host, an OS and values; failing a known host or OS, most of what follows
    /// the host must read as numbers (prose has words, a forged cell is one among numbers).
    fn is_row(&self, line: &str) -> bool {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.len() < 3 {
            return false;
        }
        if self.hosts.contains(tokens[0]) || self.systems.contains(tokens[1]) {
            return true;
        }
        let numbers = tokens[1..].iter().filter(|t| looks_numeric(t)).count();
        numbers * 2 > tokens.len() - 2
    }

    fn add(&mut self, line: &str) {
        let mut tokens = line.split_whitespace();
        for known in [&mut self.hosts, &mut self.systems] {
            if let Some(t) = tokens.next().filter(|t| !known.contains(*t)) {
                known.insert(t.to_string());
            }
        }
    }
}

/// The (host, OS) pairs of a file's collapsed rows whose OS could be read one way only: they
/// tell where the OS ends in that host's rows where it could be read two ways.
#[derive(Default)]
pub struct Systems(HashSet<(String, String)>);

/// What decides where a collapsed row's OS ends when its cells could be counted two ways.
struct OsHint<'a> {
    known: &'a mut Systems,
    /// How many values the table's rows read one way only hold at most.
    reach: Option<usize>,
}

/// A line inside the rule's block that is a row by its shape: three cells or more, either
/// under the rule's columns as lmbench prints them, or as many cells as a row before it.
fn has_row_shape(line: &str, spans: &[(usize, usize)], shapes: &HashSet<usize>) -> bool {
    let tokens = token_spans(line);
    tokens.len() >= 3 && (shapes.contains(&tokens.len()) || is_aligned(line, &tokens, spans))
}

fn is_statistic_row(line: &str) -> bool {
    line.split_whitespace().take(2).any(|cell| {
        let word = cell.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        STATISTIC_LABELS
            .iter()
            .any(|l| l.eq_ignore_ascii_case(word))
    })
}

/// A row's cells in their columns, before their values are read.
struct Placed<'a> {
    host: String,
    os: String,
    /// Per column after host and OS: the cell's byte offset and text, None where blank.
    values: Vec<Option<(usize, &'a str)>>,
    /// Placed by position (the fixed-width spacing survived), not by count.
    aligned: bool,
}

impl Placed<'_> {
    /// How far the row goes: 1 + the index of its last value column with a cell, 0 for none.
    fn reach(&self) -> usize {
        self.values
            .iter()
            .rposition(Option::is_some)
            .map_or(0, |c| c + 1)
    }
}

/// Places a row's cells in their columns, or None (with a fault) when they cannot be placed.
fn place<'a>(
    line: &'a str,
    number: usize,
    spans: &[(usize, usize)],
    columns: &[&Column],
    hint: &OsHint,
    faults: &mut Vec<Fault>,
) -> Option<Placed<'a>> {
    let tokens = token_spans(line);
    if is_aligned(line, &tokens, spans) {
        Some(aligned(line, number, &tokens, spans, columns, faults))
    } else {
        collapsed(line, number, &tokens, columns, hint, faults)
    }
}

/// A row printed by lmbench keeps its columns under the rule: the host starts the line, the OS
/// lies in its column, and every gap between dash runs is a space (or past the end of the
/// line). Mail archives collapse the spaces, which breaks this.
fn is_aligned(line: &str, tokens: &[(usize, usize)], spans: &[(usize, usize)]) -> bool {
    let bytes = line.as_bytes();
    tokens.len() >= 2
        && !line.contains('\t')
        && tokens[0].0 == 0
        && tokens[0].1 <= spans[0].1
        && tokens[1].0 >= spans[1].0
        && line.len() > spans[1].1
        && spans[..spans.len() - 1]
            .iter()
            .all(|&(_, end)| bytes.get(end).is_none_or(|&b| b == b' '))
}

/// Cells of an aligned row: each token goes to the column it overlaps most (values wider than
/// their column, like lmbench 2.0's page faults, still land in the right one); a token past the
/// last column, or a second value in one column, is a fault.
fn aligned<'a>(
    line: &'a str,
    number: usize,
    tokens: &[(usize, usize)],
    spans: &[(usize, usize)],
    columns: &[&Column],
    faults: &mut Vec<Fault>,
) -> Placed<'a> {
    let (last_start, last_end) = spans[spans.len() - 1];
    let last = columns[columns.len() - 1];
    let mut words: [Vec<&str>; 2] = [Vec::new(), Vec::new()];
    let mut values = vec![None; spans.len() - 2];
    for &(s, e) in tokens {
        let text = &line[s..e];
        if last.cell == Cell::Unused && s >= last_start {
            // lmbench's guesses are words, as long as they need to be.
            if looks_numeric(text) {
                faults.push(unused_number(line, number, s, text, last));
            }
            continue;
        }
        if s >= last_end {
            faults.push(Fault::new(
                number,
                column_of(line, s),
                format!(
                    "'{text}' lies past the last column ({}): more cells than columns",
                    columns[columns.len() - 1].heading()
                ),
                "the cell is dropped",
            ));
            continue;
        }
        let overlap = |&(cs, ce): &(usize, usize)| ce.min(e) as isize - cs.max(s) as isize;
        let column = (0..spans.len())
            .max_by_key(|&c| (overlap(&spans[c]), std::cmp::Reverse(c)))
            .expect("a rule has at least three columns");
        if column < 2 {
            words[column].push(text);
            continue;
        }
        let slot: &mut Option<(usize, &str)> = &mut values[column - 2];
        match slot {
            None => *slot = Some((s, text)),
            Some((_, first)) => {
                faults.push(Fault::new(
                    number,
                    column_of(line, s),
                    format!(
                        "'{text}' is a second value in column {} after '{first}'",
                        columns[column].heading()
                    ),
                    "the column's cell is dropped",
                ));
                *slot = None;
            }
        }
    }
    let [host, os] = words.map(|w| w.join(" "));
    Placed {
        host,
        os,
        values,
        aligned: true,
    }
}

/// Cells of a row whose spacing was collapsed: host, then the OS, then values left to right;
/// by count, a blank cell can only be told apart at the end of such a row. The OS's release
/// may read as a number (`SunOS 5.8`): where the row's cells can then be counted two ways
/// (a row with blank last columns), the host's OS as its other rows show it decides, then the
/// table's reach, then lmbench's own shape (a name and a release).
fn collapsed<'a>(
    line: &'a str,
    number: usize,
    tokens: &[(usize, usize)],
    columns: &[&Column],
    hint: &OsHint,
    faults: &mut Vec<Fault>,
) -> Option<Placed<'a>> {
    let text = |&(s, e): &(usize, usize)| &line[s..e];
    let splits = os_splits(line, tokens, columns);
    let host = text(&tokens[0]);
    let fitting: Vec<&Split> = splits.iter().filter(|s| s.fits).collect();
    let chosen = match fitting.as_slice() {
        [] => None,
        [only] => Some(*only),
        many => many
            .iter()
            .find(|s| hint.known.0.contains(&(host.to_string(), s.os.clone())))
            .or_else(|| many.iter().find(|s| Some(s.cells.len()) == hint.reach))
            .or_else(|| many.iter().find(|s| s.words >= 2))
            .or(many.first())
            .copied(),
    };
    let Some(split) = chosen else {
        // The most words the OS can take still leave more values than columns.
        let most = splits.last().expect("one OS word at least");
        let n_numbers = most.cells.len() - most.excess;
        faults.push(Fault::new(
            number,
            column_of(line, most.cells[n_numbers].0),
            format!(
                "{} values where the table has {n_numbers} columns for them: more cells than \
                 columns, so none can be placed",
                most.cells.len()
            ),
            format!("the row's {} values are dropped", most.cells.len()),
        ));
        return None;
    };
    let mut values: Vec<Option<(usize, &str)>> = split
        .cells
        .iter()
        .map(|span| Some((span.0, text(span))))
        .collect();
    values.resize(columns.len() - 2, None);
    Some(Placed {
        host: host.to_string(),
        os: split.os.clone(),
        values,
        aligned: false,
    })
}

/// One way to read a collapsed row: its first `words` cells after the host as the OS, the
/// rest (less a trailing Guesses of words) as values.
struct Split<'t> {
    words: usize,
    os: String,
    cells: &'t [(usize, usize)],
    /// Values beyond the table's columns for them (0 when it fits).
    excess: usize,
    fits: bool,
}

/// Every reading of a collapsed row's OS: its leading words (cells that are no number, within
/// lmbench's 13 characters), and where that is the name alone, the name and a release that
/// reads as a number (`SunOS 5.8`).
fn os_splits<'t>(line: &str, tokens: &'t [(usize, usize)], columns: &[&Column]) -> Vec<Split<'t>> {
    let text = |&(s, e): &(usize, usize)| &line[s..e];
    let rest = &tokens[1..];
    let n_values = columns.len() - 2;
    // A last column of words (Guesses) takes what follows the numbers, if it is words.
    let guesses = columns[columns.len() - 1].cell == Cell::Unused;
    let n_numbers = n_values - usize::from(guesses);
    let width = |words: usize| rest[..words].iter().map(|t| t.1 - t.0 + 1).sum::<usize>() - 1;
    let mut least = 1;
    while least < rest.len() && !looks_numeric(text(&rest[least])) && width(least + 1) <= OS_WIDTH {
        least += 1;
    }
    // lmbench's OS is a name and a release, and only a release reads as a number.
    let release_is_number =
        least == 1 && rest.len() > 1 && looks_numeric(text(&rest[1])) && width(2) <= OS_WIDTH;
    let most = if release_is_number { 2 } else { least };
    (least..=most)
        .map(|words| {
            let mut cells = &rest[words..];
            if guesses && cells.len() > n_numbers && !looks_numeric(text(&cells[n_numbers])) {
                cells = &cells[..n_numbers];
            }
            let os: Vec<&str> = rest[..words].iter().map(text).collect();
            Split {
                words,
                os: os.join(" "),
                cells,
                excess: cells.len().saturating_sub(n_numbers),
                fits: cells.len() <= n_numbers,
            }
        })
        .collect()
}

/// A number where lmbench writes words (Guesses): a cell more than the table's numbers.
fn unused_number(line: &str, number: usize, at: usize, text: &str, column: &Column) -> Fault {
    Fault::new(
        number,
        column_of(line, at),
        format!(
            "'{text}' is a number in column {}, where lmbench writes words: more cells than \
             columns",
            column.heading()
        ),
        "the cell is dropped",
    )
}
