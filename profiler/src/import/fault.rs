//! What an importer could not take from its input, cell by cell: refused (exit 2, the first
//! fault named by file:line:col) unless `--lenient` asks to drop it with a warning and import the
//! rest. A dropped cell stays missing in the results, never a zero.
use std::fmt;

use crate::results::Results;

/// One cell or line an importer could not account for.
#[derive(Debug, Clone, PartialEq)]
pub struct Fault {
    /// 1-based line and column (characters) of the offending text, or of where a missing
    /// cell would start.
    pub line: usize,
    pub column: usize,
    /// What is wrong, naming the cell's column (`'abc' in column null I/O is not a number`).
    pub problem: String,
    /// What `--lenient` does about it (`the cell is dropped`).
    pub lenient: String,
}

impl Fault {
    pub fn new(line: usize, column: usize, problem: String, lenient: impl Into<String>) -> Self {
        Fault {
            line,
            column,
            problem,
            lenient: lenient.into(),
        }
    }
}

/// An importer's reading of a file: the results it could account for and the faults it found.
#[derive(Debug)]
pub struct Imported {
    pub results: Vec<Results>,
    pub faults: Vec<Fault>,
}

/// The first fault of a file read strictly, and how many more there were.
#[derive(Debug, PartialEq)]
pub struct Refused {
    pub path: String,
    pub first: Fault,
    pub more: usize,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Fault {
            line,
            column,
            problem,
            ..
        } = &self.first;
        write!(f, "{}:{line}:{column}: {problem}", self.path)?;
        if self.more > 0 {
            write!(f, " (and {} more)", self.more)?;
        }
        write!(
            f,
            "; nothing imported (--lenient drops what cannot be read, with a warning each)"
        )
    }
}

impl std::error::Error for Refused {}

impl Imported {
    /// Strict: the results only if every cell was accounted for.
    pub fn strict(self, path: &str) -> Result<Vec<Results>, Refused> {
        let mut faults = self.faults.into_iter();
        match faults.next() {
            None => Ok(self.results),
            Some(first) => Err(Refused {
                path: path.to_string(),
                first,
                more: faults.len(),
            }),
        }
    }

    /// Lenient: the results, and one warning line per fault saying what was dropped.
    pub fn lenient(self, path: &str) -> (Vec<Results>, Vec<String>) {
        let warnings = self
            .faults
            .iter()
            .map(|f| {
                format!(
                    "{path}:{}:{}: {}; {}",
                    f.line, f.column, f.problem, f.lenient
                )
            })
            .collect();
        (self.results, warnings)
    }
}

/// The 1-based character column of byte offset `at` in `line`.
pub fn column_of(line: &str, at: usize) -> usize {
    line.get(..at).map_or(at, |s| s.chars().count()) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_faults() -> Imported {
        Imported {
            results: Vec::new(),
            faults: vec![
                Fault::new(3, 7, "'abc' is not a number".into(), "the cell is dropped"),
                Fault::new(9, 1, "a cut line".into(), "the row's 4 values are dropped"),
            ],
        }
    }

    #[test]
    fn strict_names_the_first_fault_and_counts_the_rest() {
        let err = two_faults().strict("s.txt").unwrap_err();
        assert_eq!(
            err.to_string(),
            "s.txt:3:7: 'abc' is not a number (and 1 more); nothing imported (--lenient drops \
             what cannot be read, with a warning each)"
        );
    }

    #[test]
    fn lenient_warns_once_per_fault_saying_what_it_drops() {
        let (_, warnings) = two_faults().lenient("s.txt");
        assert_eq!(
            warnings,
            [
                "s.txt:3:7: 'abc' is not a number; the cell is dropped",
                "s.txt:9:1: a cut line; the row's 4 values are dropped",
            ]
        );
    }

    #[test]
    fn columns_count_characters_from_one() {
        assert_eq!(column_of("ab cd", 3), 4);
        assert_eq!(column_of("é x", 3), 3);
    }
}
