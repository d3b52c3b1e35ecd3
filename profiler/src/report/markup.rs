//! What the terminal text and markdown share: their tables, one builder with a style each.
use comfy_table::{presets, CellAlignment, Table, TableComponent};

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
