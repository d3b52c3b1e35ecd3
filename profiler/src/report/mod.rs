//! Reports of a results file (placeholder until the statistics issue lands).
use std::{path::PathBuf, process::ExitCode};

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    pub file: PathBuf,
}

pub fn execute(_args: &ReportArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("report is not built yet")
}
