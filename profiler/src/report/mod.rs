//! `hookprof report FILE...`: results files as terminal text, an lmbench 2.0 summary, markdown,
//! JSON or a self-contained HTML page.
use std::{path::PathBuf, process::ExitCode};

use crate::results::Results;

pub mod figures;
pub mod html;
pub mod lmbench;
pub mod markdown;
pub mod text;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Results files. Several are shown one after another (text, markdown), as rows of the same
    /// tables (lmbench), on one page (html) or as a JSON array.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    /// The lmbench 2.0 summary tables: one row per sample (an imported lmbench run is one
    /// sample), then MEAN and STDEV rows per file.
    Lmbench,
    Markdown,
    /// The results file itself (an array when several files are given).
    Json,
    /// One self-contained page with inline SVG charts.
    Html,
}

pub fn execute(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    let results = args
        .files
        .iter()
        .map(|f| Results::load(f))
        .collect::<Result<Vec<_>, _>>()?;
    print!("{}", render(&results, args.format)?);
    Ok(ExitCode::SUCCESS)
}

pub fn render(results: &[Results], format: Format) -> anyhow::Result<String> {
    Ok(match format {
        Format::Text => results
            .iter()
            .map(text::render)
            .collect::<Vec<_>>()
            .join("\n"),
        Format::Lmbench => lmbench::render(results),
        Format::Markdown => markdown::render(results),
        Format::Json => match results {
            [one] => one.to_json() + "\n",
            many => serde_json::to_string_pretty(many)? + "\n",
        },
        Format::Html => html::render(results),
    })
}
