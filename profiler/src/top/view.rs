//! How `top` shows each interval: a JSON line, a text table, or the terminal view; the tables
//! show the corrected figures, under a line that says by how much they were corrected.
use anyhow::Result;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
use tokio::sync::mpsc;

use super::{
    cells::{
        cells, correction, heading, sampled_cells, sampled_heading, sampled_rows, COLUMNS,
        SAMPLED_COLUMNS,
    },
    interval::Interval,
    tui::Tui,
};
use crate::output::Format;

pub enum View {
    Json,
    Text { rows: usize },
    Terminal(Box<Tui>),
}

impl View {
    /// `--format` if given; else the terminal view on a terminal, JSON lines otherwise.
    pub fn choose(format: Option<Format>, terminal: bool, rows: usize) -> View {
        match format {
            Some(Format::Json) => View::Json,
            Some(_) => View::Text { rows },
            None if terminal => View::Terminal(Box::new(Tui::new(rows))),
            None => View::Json,
        }
    }

    /// Takes over the terminal (for the terminal view); the receiver yields when the user
    /// asks to quit (never for the other views).
    pub fn start(&mut self) -> Result<mpsc::UnboundedReceiver<()>> {
        match self {
            View::Terminal(tui) => tui.start(),
            _ => {
                let (tx, rx) = mpsc::unbounded_channel();
                // Kept open, so the receiver waits forever.
                std::mem::forget(tx);
                Ok(rx)
            }
        }
    }

    pub fn show(&mut self, interval: &Interval) -> Result<()> {
        match self {
            View::Json => {
                crate::stdio::print(serde_json::to_string(interval)? + "\n")?;
            }
            View::Text { rows } => {
                // A command name is whatever the process chose: escaped, as in every text.
                let mut text = format!(
                    "{}\n{}\n{}\n\n",
                    heading(interval),
                    correction(interval.probe_cost.as_ref()),
                    table(interval, *rows)
                );
                if let Some(sampled) = &interval.sampled {
                    text += &format!(
                        "{}\n{}\n\n",
                        sampled_heading(sampled),
                        sampled_table(sampled, *rows)
                    );
                }
                crate::stdio::print(crate::text::escaped_lines(&text).as_bytes())?;
            }
            View::Terminal(tui) => tui.draw(interval)?,
        }
        Ok(())
    }
}

fn table(i: &Interval, rows: usize) -> Table {
    let mut table = Table::new();
    table.load_preset(NOTHING).set_header(COLUMNS);
    for r in i.rows.iter().take(rows) {
        table.add_row(cells(r).into_iter().enumerate().map(|(c, text)| {
            let cell = Cell::new(text);
            if (2..=5).contains(&c) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    table
}

fn sampled_table(s: &super::sampled::SampledInterval, rows: usize) -> Table {
    let mut table = Table::new();
    table.load_preset(NOTHING).set_header(SAMPLED_COLUMNS);
    for r in sampled_rows(s, rows) {
        table.add_row(sampled_cells(r).into_iter().enumerate().map(|(c, text)| {
            let cell = Cell::new(text);
            if (1..=3).contains(&c) {
                cell.set_alignment(CellAlignment::Right)
            } else {
                cell
            }
        }));
    }
    table
}
