//! The terminal view (ratatui): the latest interval's rows as a table under a heading and the
//! line that says how the figures are corrected for the probes' own cost, redrawn each interval; q, Esc or Ctrl-C quits. The terminal is restored when the view is dropped, and
//! by ratatui's panic hook on a panic.
use anyhow::{Context, Result};
use ratatui::{
    crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers},
    layout::{Constraint, Layout},
    style::{Modifier, Style},
    text::Line,
    widgets::{Row, Table},
    DefaultTerminal,
};
use tokio::sync::mpsc;

use super::{
    cells::{
        cells, correction, heading, sampled_cells, sampled_heading, sampled_rows, COLUMNS,
        SAMPLED_COLUMNS,
    },
    interval::Interval,
};

pub struct Tui {
    rows: usize,
    terminal: Option<DefaultTerminal>,
}

impl Tui {
    pub fn new(rows: usize) -> Tui {
        Tui {
            rows,
            terminal: None,
        }
    }

    /// Takes over the terminal; a thread reads keys and says when to quit.
    pub fn start(&mut self) -> Result<mpsc::UnboundedReceiver<()>> {
        let mut terminal = ratatui::try_init().context("take over the terminal")?;
        terminal
            .draw(|f| {
                f.render_widget(
                    Line::from("hookprof top: waiting for the first interval (q quits)"),
                    f.area(),
                )
            })
            .context("draw")?;
        self.terminal = Some(terminal);
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            while let Ok(e) = event::read() {
                if let Event::Key(k) = e {
                    let ctrl_c =
                        k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL);
                    let quit = matches!(k.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c;
                    if k.kind == KeyEventKind::Press && quit {
                        let _ = tx.send(());
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    pub fn draw(&mut self, interval: &Interval) -> Result<()> {
        let Some(terminal) = &mut self.terminal else {
            return Ok(());
        };
        let rows: Vec<Row> = interval
            .rows
            .iter()
            .take(self.rows)
            .map(|r| Row::new(cells(r)))
            .collect();
        let widths = [
            Constraint::Max(24),
            Constraint::Max(28),
            Constraint::Length(8),
            Constraint::Length(10),
            Constraint::Length(6),
            Constraint::Length(10),
            Constraint::Fill(1),
        ];
        let table = Table::new(rows, widths)
            .header(Row::new(COLUMNS).style(Style::new().add_modifier(Modifier::BOLD)));
        let title = format!("hookprof top: {} (q quits)", heading(interval));
        let corrected = correction(interval.probe_cost.as_ref());
        let sampled = interval.sampled.as_ref().map(|s| {
            let rows: Vec<Row> = sampled_rows(s, self.rows)
                .map(|r| Row::new(sampled_cells(r)))
                .collect();
            let widths = [
                Constraint::Fill(2),
                Constraint::Length(7),
                Constraint::Length(18),
                Constraint::Length(7),
                Constraint::Fill(2),
            ];
            let table = Table::new(rows, widths)
                .header(Row::new(SAMPLED_COLUMNS).style(Style::new().add_modifier(Modifier::BOLD)));
            (sampled_heading(s), table)
        });
        terminal
            .draw(|f| {
                let [top, second, timed, sampled_line, sampled_rest] = Layout::vertical([
                    Constraint::Length(1),
                    Constraint::Length(1),
                    Constraint::Fill(1),
                    Constraint::Length(u16::from(sampled.is_some())),
                    Constraint::Fill(u16::from(sampled.is_some())),
                ])
                .areas(f.area());
                f.render_widget(Line::from(title), top);
                f.render_widget(Line::from(corrected), second);
                f.render_widget(table, timed);
                if let Some((heading, table)) = sampled {
                    f.render_widget(Line::from(heading), sampled_line);
                    f.render_widget(table, sampled_rest);
                }
            })
            .context("draw")?;
        Ok(())
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        if self.terminal.take().is_some() {
            ratatui::restore();
        }
    }
}
