//! `hookprof import`: lmbench summaries and /usr/bin/time logs become results files, one per
//! configuration, so `compare` and `report` work on numbers from before hookprof existed.
use std::{path::PathBuf, process::ExitCode};

use anyhow::Context;

use crate::results::{Destination, Environment, Results, SCHEMA_VERSION};

pub mod fault;
pub mod lmbench;
pub mod time;

#[derive(clap::Subcommand, Debug)]
pub enum ImportCommand {
    /// lmbench 2.0/3.0 summary text (as posted to mailing lists): one file per configuration.
    Lmbench {
        file: PathBuf,
        /// Directory to write the results files into (created if missing).
        #[arg(short = 'o', long = "output")]
        out: PathBuf,
        /// Drop each cell, row or table that cannot be read, with a warning naming it
        /// (file:line:col), and import the rest; without it such input is refused whole.
        #[arg(long)]
        lenient: bool,
    },
    /// /usr/bin/time default lines, grouped under the heading line before each block.
    Time {
        file: PathBuf,
        /// Directory to write the results files into (created if missing).
        #[arg(short = 'o', long = "output")]
        out: PathBuf,
        /// Drop each time line that cannot be read, with a warning naming it (file:line:col),
        /// and import the rest; without it such input is refused whole.
        #[arg(long)]
        lenient: bool,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{path}: no lmbench summary table found")]
    NoTable { path: String },
    #[error(
        "{path}: no /usr/bin/time lines (like '815.80user 113.69system 2:04.36elapsed 747%CPU')"
    )]
    NoTimeLines { path: String },
    #[error(
        "{path}: {found} configurations, more than the {MAX_CONFIGURATIONS} one import writes \
         files for: name a file of summaries or logs as posted"
    )]
    TooManyConfigurations { path: String, found: usize },
    #[error(transparent)]
    Refused(#[from] fault::Refused),
    #[error("{path}: nothing is left to import once what cannot be read is dropped")]
    NothingLeft { path: String },
}

/// The most configurations (one results file each) one import writes: posted summaries and
/// logs hold a handful, and each costs memory until all are written.
pub const MAX_CONFIGURATIONS: usize = 1000;

/// A reader of one input format: text and the name to show in errors.
type Reader = fn(&str, &str) -> Result<fault::Imported, ImportError>;

pub fn execute(cmd: &ImportCommand) -> anyhow::Result<ExitCode> {
    let (file, out, lenient, read): (_, _, _, Reader) = match cmd {
        ImportCommand::Lmbench { file, out, lenient } => (file, out, *lenient, lmbench::read),
        ImportCommand::Time { file, out, lenient } => (file, out, *lenient, time::read),
    };
    let shown = file.display().to_string();
    let bytes = crate::safety::input::read_bounded(file, crate::safety::input::MAX_INPUT_BYTES)?;
    let text = String::from_utf8_lossy(&bytes);
    let results = accept(read(&text, &shown)?, &shown, lenient)?;
    anyhow::ensure!(
        out.as_os_str() != "-",
        "-o -: import writes one file per configuration: name a directory"
    );
    std::fs::create_dir_all(out).with_context(|| format!("{}: cannot create", out.display()))?;
    let paths: Vec<PathBuf> = results
        .iter()
        .map(|r| out.join(format!("{}.json", file_stem(&r.label))))
        .collect();
    // Every file is claimed before any is written, so a bad one fails the import whole.
    let destinations = paths
        .iter()
        .map(|p| Destination::prepare(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // Every file is written before anything is printed, so a failed print loses none.
    let mut written = String::new();
    for ((r, path), destination) in results.iter().zip(&paths).zip(destinations) {
        destination.write((r.to_json() + "\n").as_bytes())?;
        let runs = r.workloads.iter().map(|w| w.clean.len()).max().unwrap_or(0);
        written += &format!(
            "{}: {} ({} workloads, {runs} runs)\n",
            path.display(),
            crate::text::escaped(&r.label),
            r.workloads.len()
        );
    }
    crate::stdio::print(written)?;
    Ok(ExitCode::SUCCESS)
}

/// What an import writes: everything it read (strict), or what is left after dropping the
/// faults, each warned of (lenient). Nothing is written for a refused file.
fn accept(
    imported: fault::Imported,
    shown: &str,
    lenient: bool,
) -> Result<Vec<Results>, ImportError> {
    if !lenient {
        return Ok(imported.strict(shown)?);
    }
    let (results, warnings) = imported.lenient(shown);
    for warning in warnings {
        eprintln!("hookprof: warning: {warning}");
    }
    if results.is_empty() {
        return Err(ImportError::NothingLeft {
            path: shown.to_string(),
        });
    }
    Ok(results)
}

/// A file name for a label: letters, digits, `-`, `_` and `.` kept, runs of anything else `_`.
fn file_stem(label: &str) -> String {
    let mut stem = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
            stem.push(c);
        } else if !stem.ends_with('_') {
            stem.push('_');
        }
    }
    let stem = stem.trim_matches(|c| c == '_' || c == '.');
    if stem.is_empty() {
        "results".into()
    } else {
        stem.into()
    }
}

/// An empty, complete results document for an imported configuration.
pub(crate) fn new_results(label: &str, from: &str) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        label: label.to_string(),
        complete: true,
        source: crate::results::Source::Import(from.to_string()),
        environment: Environment {
            hookprof_version: env!("CARGO_PKG_VERSION").to_string(),
            ..Default::default()
        },
        options: Default::default(),
        probes: Default::default(),
        calibration: None,
        lsm_programs: Vec::new(),
        syscall_injections: Vec::new(),
        pairing: None,
        workloads: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_become_safe_file_names() {
        assert_eq!(file_stem("00-base"), "00-base");
        assert_eq!(
            file_stem("[PATCH 01/10] Task watchers v2"),
            "PATCH_01_10_Task_watchers_v2"
        );
        assert_eq!(file_stem("../.."), "results");
    }
}
