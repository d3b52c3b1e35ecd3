//! `hookprof run`, `hooks` and `calibrate` (being built).
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct RunArgs {}
#[derive(clap::Args, Debug)]
pub struct HooksArgs {}
#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {}

pub fn run(_args: &RunArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
pub fn hooks(_args: &HooksArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
pub fn calibrate(_args: &CalibrateArgs) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not built yet")
}
