//! Where the blank cells of a collapsed row were. A mail archive that collapses lmbench's
//! fixed-width spacing loses the place of a blank cell: `0.41 0.65 3.97` could be the first
//! three columns or any three of four. The statistic rows a poster added under a
//! configuration's runs (`MEAN`, `STDEV`, ...) were computed from the cells in their true
//! columns, so they say where each value belongs: a placement of the short rows (and of the
//! statistic rows themselves, which are collapsed too) is taken only when it is the one that
//! reproduces every printed statistic within the digits it was printed with. Nothing is guessed:
//! no placement, or more than one, leaves the row to be refused as before.

/// A value as printed, with the unit of its last printed digit (`125.` is 1, `0.41` 0.01,
/// `1.5K` 100): how far the printed figure may be from the one it was rounded from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Printed {
    pub value: f64,
    pub unit: f64,
}

impl Printed {
    /// `text` as lmbench prints a value, or None if it does not read as one.
    pub fn read(text: &str) -> Option<Printed> {
        let value = crate::lmbench::read_value(text).ok()?;
        let (digits, scale) = match text.as_bytes().last() {
            Some(b'K' | b'k') => (&text[..text.len() - 1], 1e3),
            Some(b'M') => (&text[..text.len() - 1], 1e6),
            _ => (text, 1.0),
        };
        let decimals = digits.split_once('.').map_or(0, |(_, f)| f.len());
        Some(Printed {
            value,
            unit: scale / 10f64.powi(decimals as i32),
        })
    }
}

/// What a statistic row reports of its configuration's runs, column by column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Statistic {
    Mean,
    /// Population or sample standard deviation: posters used both.
    Stdev,
    Median,
    Min,
    Max,
}

impl Statistic {
    /// The statistic a row's label names (`MEAN`, `avg`, `StdDev`, ...), if it is one this
    /// module can recompute.
    pub fn of_label(label: &str) -> Option<Statistic> {
        let word = label.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let is = |names: &[&str]| names.iter().any(|n| n.eq_ignore_ascii_case(word));
        if is(&["mean", "avg", "average"]) {
            Some(Statistic::Mean)
        } else if is(&["stdev", "stddev", "std", "sd"]) {
            Some(Statistic::Stdev)
        } else if is(&["median"]) {
            Some(Statistic::Median)
        } else if is(&["min"]) {
            Some(Statistic::Min)
        } else if is(&["max"]) {
            Some(Statistic::Max)
        } else {
            None
        }
    }

    /// Whether `printed` is this statistic of `values` within the rounding of both.
    fn matches(self, values: &[Printed], printed: Printed) -> bool {
        let xs: Vec<f64> = values.iter().map(|p| p.value).collect();
        let value_unit = values.iter().map(|p| p.unit).fold(0.0, f64::max);
        // The printed figure was rounded to its last digit, and each run's value to its own;
        // the statistic of the rounded runs is off by at most about one run's rounding.
        let tolerance = 0.5 * printed.unit + value_unit + 1e-9 * printed.value.abs();
        let near = |x: f64| (x - printed.value).abs() <= tolerance;
        let n = xs.len() as f64;
        let mean = xs.iter().sum::<f64>() / n;
        match self {
            Statistic::Mean => near(mean),
            Statistic::Stdev => {
                let ss: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
                near((ss / n).sqrt()) || (xs.len() > 1 && near((ss / (n - 1.0)).sqrt()))
            }
            Statistic::Median => {
                let mut sorted = xs.clone();
                sorted.sort_by(f64::total_cmp);
                let mid = sorted.len() / 2;
                let median = if sorted.len() % 2 == 1 {
                    sorted[mid]
                } else {
                    (sorted[mid - 1] + sorted[mid]) / 2.0
                };
                near(median)
            }
            Statistic::Min => near(xs.iter().copied().fold(f64::INFINITY, f64::min)),
            Statistic::Max => near(xs.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        }
    }
}

/// A row's values in the order printed, and the column of each where it is known (an aligned
/// row, or a collapsed one that stops nowhere short); None where the blanks' places are not.
#[derive(Debug, Clone)]
pub struct Cells {
    pub values: Vec<Printed>,
    pub columns: Option<Vec<usize>>,
}

/// A statistic row of a block of runs.
#[derive(Debug, Clone)]
pub struct StatisticRow {
    pub statistic: Statistic,
    pub cells: Cells,
}

/// Why the short rows could not be placed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unplaced {
    /// No placement reproduces the statistic rows.
    NoPlacement,
    /// More than one does: the statistics cannot tell them apart.
    Ambiguous,
    /// Too many ways to try (many short rows in one block).
    TooMany,
}

/// The most joint placements tried for one block before giving up.
const MAX_TRIALS: usize = 200_000;

/// One block of runs and the statistic rows under it. `checked[c]` says whether value column
/// c holds a workload's values (a statistic row states them), `placeable[c]` whether a value
/// may go there at all (not lmbench's Guesses); both are as long as the table has value
/// columns.
pub struct Block<'a> {
    pub rows: &'a [Cells],
    pub statistics: &'a [StatisticRow],
    pub checked: &'a [bool],
    pub placeable: &'a [bool],
}

/// A row laid out in the value columns: each column's value, if the row has one there.
type Layout = Vec<Option<Printed>>;

impl Block<'_> {
    /// For each row of the block, the column of each of its values, if exactly one joint
    /// placement of the rows whose blanks' places are unknown (runs and statistic rows alike)
    /// reproduces every statistic row.
    pub fn place(&self) -> Result<Vec<Vec<usize>>, Unplaced> {
        if self.statistics.is_empty() {
            return Err(Unplaced::NoPlacement);
        }
        let slots: Vec<usize> = (0..self.checked.len())
            .filter(|&c| self.placeable[c])
            .collect();
        // Each row's candidate placements: the column of each value.
        let options = |cells: &Cells| -> Vec<Vec<usize>> {
            match &cells.columns {
                Some(known) => vec![known.clone()],
                None => combinations(slots.len(), cells.values.len())
                    .into_iter()
                    .map(|chosen| chosen.into_iter().map(|k| slots[k]).collect())
                    .collect(),
            }
        };
        let lay_out = |cells: &Cells, columns: &[usize]| -> Layout {
            let mut row = vec![None; self.checked.len()];
            for (value, &c) in cells.values.iter().zip(columns) {
                row[c] = Some(*value);
            }
            row
        };
        let all: Vec<&Cells> = self
            .rows
            .iter()
            .chain(self.statistics.iter().map(|s| &s.cells))
            .collect();
        let choices: Vec<Vec<Vec<usize>>> = all.iter().map(|c| options(c)).collect();
        let layouts: Vec<Vec<Layout>> = all
            .iter()
            .zip(&choices)
            .map(|(cells, options)| options.iter().map(|o| lay_out(cells, o)).collect())
            .collect();
        let trials = choices
            .iter()
            .try_fold(1usize, |n, o| n.checked_mul(o.len()))
            .filter(|&n| n <= MAX_TRIALS)
            .ok_or(Unplaced::TooMany)?;
        let mut found = None;
        let mut picked = vec![0; choices.len()];
        for trial in 0..trials {
            let mut index = trial;
            for (p, options) in picked.iter_mut().zip(&choices) {
                *p = index % options.len();
                index /= options.len();
            }
            let laid: Vec<&Layout> = picked.iter().zip(&layouts).map(|(&p, l)| &l[p]).collect();
            let (runs, printed) = laid.split_at(self.rows.len());
            if self.reproduces(runs, printed) {
                if found.is_some() {
                    return Err(Unplaced::Ambiguous);
                }
                found = Some(picked.clone());
            }
        }
        let picked = found.ok_or(Unplaced::NoPlacement)?;
        Ok(picked[..self.rows.len()]
            .iter()
            .zip(&choices)
            .map(|(&p, options)| options[p].clone())
            .collect())
    }

    /// Whether every statistic row states its statistic of the runs in every checked column
    /// (blank exactly where no run has a value).
    fn reproduces(&self, runs: &[&Layout], printed: &[&Layout]) -> bool {
        (0..self.checked.len())
            .filter(|&c| self.checked[c])
            .all(|c| {
                let values: Vec<Printed> = runs.iter().filter_map(|r| r[c]).collect();
                self.statistics
                    .iter()
                    .zip(printed)
                    .all(|(s, row)| match row[c] {
                        None => values.is_empty(),
                        Some(p) => !values.is_empty() && s.statistic.matches(&values, p),
                    })
            })
    }
}

/// Every way to choose `k` of `n` slots, in order.
fn combinations(n: usize, k: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut chosen = Vec::with_capacity(k);
    fn walk(start: usize, n: usize, k: usize, chosen: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        if chosen.len() == k {
            out.push(chosen.clone());
            return;
        }
        for i in start..n {
            if n - i < k - chosen.len() {
                break;
            }
            chosen.push(i);
            walk(i + 1, n, k, chosen, out);
            chosen.pop();
        }
    }
    walk(0, n, k, &mut chosen, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Printed {
        Printed::read(text).unwrap()
    }

    /// A row whose cells are in their columns ("" for a blank).
    fn placed(texts: &[&str]) -> Cells {
        let (columns, values) = texts
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(c, t)| (c, p(t)))
            .unzip();
        Cells {
            values,
            columns: Some(columns),
        }
    }

    fn unplaced(texts: &[&str]) -> Cells {
        Cells {
            values: texts.iter().map(|t| p(t)).collect(),
            columns: None,
        }
    }

    #[test]
    fn printed_values_know_their_last_digit() {
        assert_eq!(p("125.").unit, 1.0);
        assert_eq!(p("0.41").unit, 0.01);
        assert_eq!(p("1233").unit, 1.0);
        assert_eq!(
            p("1.5K"),
            Printed {
                value: 1500.0,
                unit: 100.0
            }
        );
        assert_eq!(p("2.00000").unit, 1e-5);
        assert!(Printed::read("abc").is_none());
    }

    #[test]
    fn labels_name_the_statistics_posters_print() {
        assert_eq!(Statistic::of_label("MEAN"), Some(Statistic::Mean));
        assert_eq!(Statistic::of_label("avg:"), Some(Statistic::Mean));
        assert_eq!(Statistic::of_label("StdDev"), Some(Statistic::Stdev));
        assert_eq!(Statistic::of_label("ci95"), None);
    }

    /// Places a block of four checked, placeable columns.
    fn place(rows: &[Cells], statistics: &[StatisticRow]) -> Result<Vec<Vec<usize>>, Unplaced> {
        const ALL: [bool; 4] = [true; 4];
        Block {
            rows,
            statistics,
            checked: &ALL,
            placeable: &ALL,
        }
        .place()
    }

    fn statistic(statistic: Statistic, cells: Cells) -> StatisticRow {
        StatisticRow { statistic, cells }
    }

    #[test]
    fn a_mean_row_places_a_blank_in_a_middle_column() {
        // Three runs of four columns; the third lost its second cell to the archive.
        let rows = [
            placed(&["1.00", "2.00", "3.00", "4.00"]),
            placed(&["1.20", "2.40", "3.20", "4.20"]),
            unplaced(&["1.10", "3.10", "4.10"]),
        ];
        let statistics = [statistic(
            Statistic::Mean,
            placed(&["1.10", "2.20", "3.10", "4.10"]),
        )];
        let runs = place(&rows, &statistics).unwrap();
        // The blank is where the mean of the other two runs stands.
        assert_eq!(runs[2], [0, 2, 3]);
        assert_eq!(runs[0], [0, 1, 2, 3]);
    }

    #[test]
    fn a_blank_in_the_last_column_is_told_from_a_cut_line() {
        let rows = [
            placed(&["1.00", "2.00", "3.00", "4.00"]),
            unplaced(&["1.20", "2.20", "3.20"]),
        ];
        let statistics = [
            statistic(Statistic::Mean, placed(&["1.10", "2.10", "3.10", "4.00"])),
            statistic(Statistic::Stdev, placed(&["0.10", "0.10", "0.10", "0.00"])),
        ];
        let runs = place(&rows, &statistics).unwrap();
        assert_eq!(runs[1], [0, 1, 2]);
    }

    #[test]
    fn a_collapsed_mean_row_is_placed_with_the_runs() {
        // The MEAN row is collapsed too, and blank in a column its runs have no values in.
        let rows = [
            placed(&["1.00", "", "3.00", "4.00"]),
            unplaced(&["1.20", "3.20", "4.20"]),
        ];
        let statistics = [statistic(
            Statistic::Mean,
            unplaced(&["1.10", "3.10", "4.10"]),
        )];
        let runs = place(&rows, &statistics).unwrap();
        assert_eq!(runs[1], [0, 2, 3]);
    }

    #[test]
    fn statistics_that_no_placement_reproduces_or_two_do_place_nothing() {
        let rows = [
            placed(&["1.00", "2.00", "3.00", "4.00"]),
            unplaced(&["1.20", "3.20", "4.20"]),
        ];
        let wrong = [statistic(
            Statistic::Mean,
            placed(&["1.50", "2.00", "3.10", "4.10"]),
        )];
        assert_eq!(place(&rows, &wrong).unwrap_err(), Unplaced::NoPlacement);
        // Equal neighbours: the value could stand in either column and the mean would agree.
        let rows = [
            placed(&["1.00", "1.00", "3.00", "4.00"]),
            unplaced(&["1.00", "3.00", "4.00"]),
        ];
        let mean = [statistic(
            Statistic::Mean,
            placed(&["1.00", "1.00", "3.00", "4.00"]),
        )];
        assert_eq!(place(&rows, &mean).unwrap_err(), Unplaced::Ambiguous);
        // And without a statistic row there is nothing to place by.
        assert_eq!(place(&rows, &[]).unwrap_err(), Unplaced::NoPlacement);
    }

    #[test]
    fn unchecked_columns_take_no_statistic_and_unplaceable_ones_no_value() {
        // Column 0 is the Mhz (the MEAN row leaves it blank), column 3 the Guesses.
        let rows = [
            placed(&["866", "1.00", "2.00", ""]),
            unplaced(&["866", "2.00"]),
        ];
        let statistics = [statistic(Statistic::Mean, unplaced(&["1.00", "2.00"]))];
        let block = Block {
            rows: &rows,
            statistics: &statistics,
            checked: &[false, true, true, false],
            placeable: &[true, true, true, false],
        };
        let runs = block.place().unwrap();
        assert_eq!(runs[1], [0, 2]);
    }

    #[test]
    fn too_many_short_rows_in_one_block_are_given_up_on() {
        let columns = 12;
        let checked = vec![true; columns];
        let rows: Vec<Cells> = (0..8)
            .map(|_| Cells {
                values: vec![p("1.0"); columns - 2],
                columns: None,
            })
            .collect();
        let statistics = [StatisticRow {
            statistic: Statistic::Mean,
            cells: Cells {
                values: vec![p("1.0"); columns],
                columns: Some((0..columns).collect()),
            },
        }];
        let block = Block {
            rows: &rows,
            statistics: &statistics,
            checked: &checked,
            placeable: &checked,
        };
        assert_eq!(block.place().unwrap_err(), Unplaced::TooMany);
    }
}
