//! Reports of a results file.
use std::{path::PathBuf, process::ExitCode};

pub mod text;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    pub file: PathBuf,
}

pub fn execute(_args: &ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("report is not built yet")
}
