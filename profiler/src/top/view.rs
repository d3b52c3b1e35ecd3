//! How `top` shows each interval: a JSON line, a text table, or the terminal view; the tables
//! show the corrected figures, under a line that says by how much they were corrected.
use anyhow::Result;
use comfy_table::{presets::NOTHING, Cell, CellAlignment, Table};
use tokio::sync::mpsc;

use super::{interval::Interval, tui::Tui};
use crate::{output::Format, probes::top_calibration::ProbeCost};

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
        use std::io::Write;
        match self {
            View::Json => {
                let mut out = std::io::stdout().lock();
                serde_json::to_writer(&mut out, interval)?;
                out.write_all(b"\n")?;
                out.flush()?;
            }
            View::Text { rows } => {
                let mut out = std::io::stdout().lock();
                writeln!(out, "{}", heading(interval))?;
                writeln!(out, "{}", correction(interval.probe_cost.as_ref()))?;
                writeln!(out, "{}\n", table(interval, *rows))?;
                out.flush()?;
            }
            View::Terminal(tui) => tui.draw(interval)?,
        }
        Ok(())
    }
}

/// The line above each interval's table.
pub fn heading(i: &Interval) -> String {
    let events: Vec<String> = i.events.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(
        "interval {} ({:.2} s), {}, by {}: {}",
        i.interval,
        i.seconds,
        i.scope,
        serde_json::to_value(i.by)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        events.join(", ")
    )
}

/// What the corrected columns take out, from the calibration top made at its start.
pub fn correction(cost: Option<&ProbeCost>) -> String {
    let Some(c) = cost else {
        return "the probes' own cost could not be measured: NS/CALL and CPU % are raw".into();
    };
    let mut line = format!(
        "NS/CALL, CPU %: less the probes' own cost (calibrated): {:.0} of the {:.0} ns a \
         syscall's probes add",
        c.syscall_in_span_ns.max(0.0),
        c.syscall_pair_ns
    );
    if let (Some(pair), Some(inside)) = (c.function_pair_ns, c.function_in_span_ns) {
        line += &format!(
            "; {:.0} of the {pair:.0} ns a function's pair adds, and {:.0} per function timed \
             inside",
            inside.max(0.0),
            pair.max(0.0)
        );
    }
    line + "; RAW: uncorrected"
}

/// The columns both the text tables and the terminal view show.
pub const COLUMNS: [&str; 7] = [
    "GROUP", "PATH", "CALLS/S", "NS/CALL", "RAW", "CPU %", "UNDER",
];

/// A row's cells, in `COLUMNS` order.
pub fn cells(r: &super::interval::Row) -> [String; 7] {
    let under = match (&r.parent, &r.lsm) {
        (Some(p), Some(l)) => format!("{p} ({l})"),
        (Some(p), None) => p.clone(),
        _ => String::new(),
    };
    [
        r.group.clone(),
        r.path.clone(),
        format!("{:.0}", r.calls_per_s),
        format!("{:.0}", r.corrected_ns_per_call),
        format!("{:.0}", r.ns_per_call),
        format!("{:.2}", r.corrected_cpu_share * 100.0),
        under,
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_correction_line_says_what_is_taken_out_and_when_nothing_is() {
        let mut cost = ProbeCost {
            bare_ns: 190.0,
            syscall_pair_ns: 117.2,
            syscall_in_span_ns: 44.6,
            function_pair_ns: None,
            function_in_span_ns: None,
        };
        let line = correction(Some(&cost));
        assert!(line.contains("45 of the 117 ns a syscall's"), "{line}");
        assert!(!line.contains("function"), "{line}");
        cost.function_pair_ns = Some(300.0);
        cost.function_in_span_ns = Some(-3.0);
        let line = correction(Some(&cost));
        assert!(line.contains("; 0 of the 300 ns a function's"), "{line}");
        assert!(correction(None).contains("are raw"));
    }
}
