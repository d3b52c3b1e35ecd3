//! A table of very many rows laid out as comfy-table lays out `Markup`'s two styles, written
//! straight into one string. comfy-table keeps several strings per cell (its lines, each
//! padded, each row's line), which at a forged file's 100,000 paths is most of a report's
//! time; tables of a real run's size stay with it, and the tests hold the two layouts equal.
use std::fmt::Write;

use unicode_width::UnicodeWidthStr;

use super::markup::Markup;

/// Rows from which a table is written here rather than by comfy-table: far more than a run's
/// paths of one workload (the guest's default suite found 146 hooks, LSM functions and task
/// paths in all).
pub(crate) const LONG: usize = 2000;

/// `header` over `rows` (each as many cells as the header) in `markup`, the columns from
/// `right_from` on right-aligned on a terminal (as `Markup::align_numbers`). None where a
/// cell holds a newline: comfy-table then draws it on lines of its own.
pub(crate) fn render(
    markup: Markup,
    header: &[&str],
    rows: &[Vec<&str>],
    right_from: usize,
) -> Option<String> {
    let all = || std::iter::once(header).chain(rows.iter().map(Vec::as_slice));
    if all().flatten().any(|c| c.contains('\n')) {
        return None;
    }
    // comfy-table gives an empty column one character.
    let mut widths = vec![1; header.len()];
    for row in all() {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.width());
        }
    }
    let mut out = String::with_capacity((rows.len() + 4) * (widths.iter().sum::<usize>() + 40));
    match markup {
        Markup::Terminal => {
            let rule = |out: &mut String, c: char| {
                let n = widths.iter().map(|w| w + 2).sum::<usize>() + widths.len() - 1;
                out.extend(std::iter::repeat_n(c, n));
                out.push('\n');
            };
            rule(&mut out, '─');
            line(&mut out, header, &widths, right_from, ("", " ", ""));
            rule(&mut out, '═');
            for row in rows {
                line(&mut out, row, &widths, right_from, ("", " ", ""));
            }
            rule(&mut out, '─');
        }
        Markup::Markdown => {
            line(&mut out, header, &widths, usize::MAX, ("|", "|", "|"));
            out.push('|');
            for w in &widths {
                out.extend(std::iter::repeat_n('-', w + 2));
                out.push('|');
            }
            out.push('\n');
            for row in rows {
                line(&mut out, row, &widths, usize::MAX, ("|", "|", "|"));
            }
        }
    }
    out.pop(); // comfy-table's Display ends without a newline
    Some(out)
}

/// One row: `left`, the cells each padded by a space (right-aligned from `right_from`)
/// with `between` between them, `right`, a newline.
fn line(
    out: &mut String,
    cells: &[&str],
    widths: &[usize],
    right_from: usize,
    (left, between, right): (&str, &str, &str),
) {
    out.push_str(left);
    for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
        if i > 0 {
            out.push_str(between);
        }
        let fill = w - cell.width();
        let (before, after) = if i >= right_from {
            (fill, 0)
        } else {
            (0, fill)
        };
        let _ = write!(out, " {:before$}{cell}{:after$} ", "", "");
    }
    out.push_str(right);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use comfy_table::Cell;

    use super::*;

    /// The same cells through comfy-table, styled as the paths table is.
    fn comfy(markup: Markup, header: &[&str], rows: &[Vec<&str>], right_from: usize) -> String {
        let mut table = markup.table(header);
        for r in rows {
            table.add_row(r.iter().map(Cell::new).collect::<Vec<_>>());
        }
        markup.align_numbers(&mut table, right_from);
        table.to_string()
    }

    #[test]
    fn lays_out_as_comfy_table_does_in_both_markups() {
        let header = ["kind", "path", "calls/op", "timed µs/op", "empty"];
        let rows: Vec<Vec<&str>> = vec![
            vec!["syscall", "openat", "1.000", "0.8066", ""],
            vec!["hook", "  security_file_open", "", "12", ""],
            vec!["lsm", "    apparmor_file_open (under x)", "2", "", ""],
            vec!["lsm", "`\u{a0}\u{a0}└ wide 名前`", "", "1234567", ""],
            vec!["task_path", "", "", "", ""],
        ];
        for markup in [Markup::Terminal, Markup::Markdown] {
            assert_eq!(
                render(markup, &header, &rows, 2).unwrap(),
                comfy(markup, &header, &rows, 2),
                "{markup:?}"
            );
        }
    }

    #[test]
    fn a_cell_on_two_lines_is_left_to_comfy_table() {
        let rows = vec![vec!["hook", "a\nb"]];
        assert!(render(Markup::Terminal, &["kind", "path"], &rows, 2).is_none());
    }
}
