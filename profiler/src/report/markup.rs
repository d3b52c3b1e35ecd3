//! What the terminal text and markdown share: their tables (one builder, a style each) and the
//! attribution table's cells, so both print a path's figures alike.
use comfy_table::{presets, CellAlignment, Table, TableComponent};

use super::figures::num;
use crate::results::{rows, AttributionRow, WorkloadResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Markup {
    /// A terminal: a rule under the header and around the table, numbers right-aligned.
    Terminal,
    /// GitHub-flavoured markdown.
    Markdown,
}

impl Markup {
    /// An empty table with `header` in this markup.
    pub fn table(self, header: &[&str]) -> Table {
        let mut table = Table::new();
        match self {
            Markup::Terminal => {
                table.load_preset(presets::UTF8_HORIZONTAL_ONLY);
                for between_rows in [
                    TableComponent::HorizontalLines,
                    TableComponent::MiddleIntersections,
                    TableComponent::LeftBorderIntersections,
                    TableComponent::RightBorderIntersections,
                ] {
                    table.remove_style(between_rows);
                }
            }
            Markup::Markdown => {
                table.load_preset(presets::ASCII_MARKDOWN);
            }
        }
        table.set_header(header.to_vec());
        table
    }

    /// A path's name as `rows::ordered_rows` gives it (LSM functions indented under their hook):
    /// markdown collapses leading spaces, so there an LSM row is marked and names are code.
    fn path(self, ordered_name: String) -> String {
        match self {
            Markup::Terminal => ordered_name,
            Markup::Markdown => match ordered_name.strip_prefix("  ") {
                Some(lsm) => format!("`└ {lsm}`"),
                None => format!("`{ordered_name}`"),
            },
        }
    }

    /// A workload's attribution table: kind, path, calls/op, ns/call, ns/op and share (`rows::
    /// share`), then the cells `more` adds to each row under the headers in `more_headers`.
    pub fn attribution_table(
        self,
        w: &WorkloadResult,
        more_headers: &[&str],
        more: impl Fn(&AttributionRow) -> Vec<String>,
    ) -> String {
        let accounting = w.accounting.as_ref();
        let share = rows::share_heading(accounting);
        let header: Vec<&str> = ["kind", "path", "calls/op", "ns/call", "ns/op", share]
            .into_iter()
            .chain(more_headers.iter().copied())
            .collect();
        let mut table = self.table(&header);
        for (name, r) in rows::ordered_rows(&w.attribution) {
            let mut cells = vec![
                r.kind.name().to_string(),
                self.path(name),
                num(r.calls_per_op),
                num(r.ns_per_call),
                num(rows::ns_per_op(r)),
                format!("{:.1}%", rows::share(r, accounting) * 100.0),
            ];
            cells.extend(more(r));
            table.add_row(cells);
        }
        self.align_numbers(&mut table, 2);
        table.to_string()
    }

    /// On a terminal, the columns from `first` on (numbers) right-aligned.
    pub fn align_numbers(self, table: &mut Table, first: usize) {
        if self == Markup::Terminal {
            let columns = table.column_count();
            for col in first..columns {
                if let Some(c) = table.column_mut(col) {
                    c.set_cell_alignment(CellAlignment::Right);
                }
            }
        }
    }
}
