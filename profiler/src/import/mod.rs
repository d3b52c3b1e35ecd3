//! Importers for lmbench summaries and /usr/bin/time logs (placeholder).
use std::{path::PathBuf, process::ExitCode};

#[derive(clap::Subcommand, Debug)]
pub enum ImportCommand {
    /// lmbench 2.0/3.0 summary text.
    Lmbench { file: PathBuf },
}

pub fn execute(_cmd: &ImportCommand) -> anyhow::Result<ExitCode> {
    anyhow::bail!("import is not built yet")
}
