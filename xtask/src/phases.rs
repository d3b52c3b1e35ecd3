//! Where `cargo xtask test`'s time goes: each part's wall time, printed as a table at the end
//! (also when a part failed), so CI's log says which part to cut. Parts that run side by side
//! (the clean root and the guest kernels beside the build, the other architecture's build
//! beside the guest suite) show where each started.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use comfy_table::{presets::ASCII_MARKDOWN, Table};

/// The parts timed so far; cloned handles (for threads) add to one table.
#[derive(Clone)]
pub struct Phases {
    start: Instant,
    rows: Arc<Mutex<Vec<Row>>>,
}

struct Row {
    name: String,
    started: Duration,
    took: Duration,
    passed: bool,
}

impl Phases {
    pub fn new() -> Phases {
        Phases {
            start: Instant::now(),
            rows: Arc::default(),
        }
    }

    /// Runs `part` and records its wall time under `name`.
    pub fn time<T>(&self, name: &str, part: impl FnOnce() -> Result<T>) -> Result<T> {
        let started = Instant::now();
        let result = part();
        self.record(name, started, result.is_ok());
        result
    }

    /// Records a part that ran from `started` until now.
    pub fn record(&self, name: &str, started: Instant, passed: bool) {
        let row = Row {
            name: name.to_string(),
            started: started.saturating_duration_since(self.start),
            took: started.elapsed(),
            passed,
        };
        self.rows.lock().expect("a phase panicked").push(row);
    }

    /// The table, in the order the parts started, and the total.
    pub fn print(&self) {
        let mut rows = self.rows.lock().expect("a phase panicked");
        rows.sort_by_key(|r| r.started);
        let mut table = Table::new();
        table
            .load_preset(ASCII_MARKDOWN)
            .set_header(["part", "started at", "took", "result"]);
        for r in rows.iter() {
            table.add_row([
                r.name.clone(),
                minutes(r.started),
                minutes(r.took),
                if r.passed { "ok" } else { "FAILED" }.to_string(),
            ]);
        }
        table.add_row([
            "all".to_string(),
            minutes(Duration::ZERO),
            minutes(self.start.elapsed()),
            String::new(),
        ]);
        println!("xtask test: where the time went (wall time)\n{table}");
    }
}

/// `12:05` (minutes and seconds).
fn minutes(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}", s / 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_read_as_minutes_and_seconds() {
        assert_eq!(minutes(Duration::from_secs(0)), "0:00");
        assert_eq!(minutes(Duration::from_millis(3_725_900)), "62:05");
    }

    #[test]
    fn a_failed_part_is_recorded_with_its_error_passed_on() {
        let phases = Phases::new();
        let err = phases.time("fails", || -> Result<()> { anyhow::bail!("no") });
        assert!(err.is_err());
        phases.time("passes", || Ok(())).unwrap();
        let rows = phases.rows.lock().unwrap();
        assert_eq!(rows.len(), 2);
        assert!(!rows[0].passed && rows[1].passed);
        assert!(rows[1].started >= rows[0].started);
    }
}
