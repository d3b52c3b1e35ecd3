//! A/B comparison and regression attribution (placeholder until the statistics issue lands).
use std::{path::PathBuf, process::ExitCode};

#[derive(clap::Args, Debug)]
pub struct CompareArgs {
    pub old: PathBuf,
    pub new: PathBuf,
}

pub fn execute(_args: &CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("compare is not built yet")
}
