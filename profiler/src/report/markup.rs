//! What the terminal text and markdown share: their tables (one builder, a style each) and the
//! attribution table's cells, so both print a path's figures alike.
use comfy_table::{presets, CellAlignment, Table, TableComponent};

use super::figures::num;
use crate::{
    attribution::{Breakdown, PathShare},
    results::AttributionRow,
};

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

    /// A path's name in the breakdown's order: an LSM function one level in under its hook
    /// (markdown collapses leading spaces, so there it is marked, and names are code), one
    /// whose hook has no row with that hook named.
    fn path(self, p: &PathShare) -> String {
        let name = match p.under {
            Some(hook) => format!("{} (under {hook})", p.row.name),
            None => p.row.name.clone(),
        };
        match (self, p.depth) {
            (Markup::Terminal, 0) => name,
            (Markup::Terminal, _) => format!("  {name}"),
            (Markup::Markdown, 0) => format!("`{name}`"),
            (Markup::Markdown, _) => format!("`└ {name}`"),
        }
    }

    /// A workload's attribution table: kind, path, calls/op, ns/call, ns/op and share (the
    /// breakdown's), then the cells `more` adds to each row under the headers in
    /// `more_headers`.
    pub fn attribution_table(
        self,
        b: &Breakdown,
        more_headers: &[&str],
        more: impl Fn(&AttributionRow) -> Vec<String>,
    ) -> String {
        let header: Vec<&str> = [
            "kind",
            "path",
            "calls/op",
            "ns/call",
            "ns/op",
            b.whole.heading(),
        ]
        .into_iter()
        .chain(more_headers.iter().copied())
        .collect();
        let mut table = self.table(&header);
        for p in &b.paths {
            let r = p.row;
            let mut cells = vec![
                r.kind.name().to_string(),
                self.path(p),
                num(r.calls_per_op),
                num(r.ns_per_call),
                num(p.ns_per_op),
                format!("{:.1}%", p.share * 100.0),
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
