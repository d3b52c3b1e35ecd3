//! `hookprof report FILE...`: results files as terminal text, an lmbench 2.0 summary, markdown,
//! JSON, a self-contained HTML page (with a flame graph per profiled workload), the sampled
//! stacks folded for flame-graph tools or as a pprof profile, or the kernel CI ecosystem's
//! formats (KCIDB, Bencher's BMF, Prometheus text; written by `crate::export`).
use std::{path::PathBuf, process::ExitCode};

use crate::{
    output::{self, Document, Exporter, Format},
    results::Results,
};

pub mod figures;
pub mod flame;
pub mod folded;
pub mod html;
pub mod lmbench_summary;
pub mod markdown;
pub(crate) mod markup;
pub(crate) mod paths_table;
pub mod pprof;
mod sampled;
pub mod suite_summary;
pub mod text;

#[derive(clap::Args, Debug)]
pub struct ReportArgs {
    /// Results files. Several are shown one after another (text, markdown), as rows of the same
    /// tables (lmbench), on one page (html) or as a JSON array.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    #[arg(long, default_value = "text", value_parser = Format::parser(<[Results]>::FORMATS))]
    pub format: Format,
    /// Print the sweep the files are the values of (the files of one `run --sweep`, in any
    /// order), as the run printed it: text, markdown, json or html (`crate::sweep::report_files`).
    #[arg(long)]
    pub sweep: bool,
}

pub fn execute(args: &ReportArgs) -> anyhow::Result<ExitCode> {
    // Checked before any file is read, as every output is.
    if args.format.is_binary() && std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        anyhow::bail!(
            "--format {} writes a gzipped profile, not text: redirect stdout to a file \
             (> profile.pb.gz)",
            args.format.name()
        );
    }
    let results = args
        .files
        .iter()
        .map(|f| Results::load(f))
        .collect::<Result<Vec<_>, _>>()?;
    crate::stdio::print(output::render_bytes(results.as_slice(), args.format)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Results files: what `report` prints, and `run` and `stat` print of theirs.
impl Document for [Results] {
    const FORMATS: &'static [Format] = &[
        Format::Text,
        Format::Lmbench,
        Format::Markdown,
        Format::Json,
        Format::Html,
        Format::Kcidb,
        Format::Bmf,
        Format::Openmetrics,
        Format::Folded,
        Format::Pprof,
    ];

    fn exporter(format: Format) -> Option<&'static dyn Exporter<Self>> {
        match format {
            Format::Text => Some(&output::Text),
            Format::Lmbench => Some(&output::Lmbench),
            Format::Markdown => Some(&output::Markdown),
            Format::Json => Some(&output::Json),
            Format::Html => Some(&output::Html),
            Format::Kcidb => Some(&output::Kcidb),
            Format::Bmf => Some(&output::Bmf),
            Format::Openmetrics => Some(&output::Openmetrics),
            Format::Folded => Some(&output::Folded),
            Format::Pprof => Some(&output::Pprof),
            Format::Junit => None,
        }
    }
}

impl Exporter<[Results]> for output::Text {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        let texts: Vec<String> = results.iter().map(text::render).collect();
        Ok(texts.join("\n").into_bytes())
    }
}

impl Exporter<[Results]> for output::Lmbench {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        Ok(lmbench_summary::render(results).into_bytes())
    }
}

impl Exporter<[Results]> for output::Markdown {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        Ok(markdown::render(results).into_bytes())
    }
}

/// One file is the results file itself; several, an array of them.
impl Exporter<[Results]> for output::Json {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        match results {
            [one] => output::pretty_json(one),
            many => output::pretty_json(many),
        }
    }
}

impl Exporter<[Results]> for output::Html {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        Ok(html::render(results).into_bytes())
    }
}

impl Exporter<[Results]> for output::Kcidb {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        crate::export::check_unique_workloads(results)?;
        output::pretty_json(&crate::export::kcidb::document(results))
    }
}

impl Exporter<[Results]> for output::Bmf {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        crate::export::check_unique_workloads(results)?;
        output::pretty_json(&crate::export::bmf::document(results)?)
    }
}

impl Exporter<[Results]> for output::Openmetrics {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        crate::export::check_unique_workloads(results)?;
        Ok(crate::export::openmetrics::render(results)?.into_bytes())
    }
}

/// A file without sampled stacks is refused (exit 2) rather than printed as nothing.
impl Exporter<[Results]> for output::Folded {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        Ok(folded::render(results)?.into_bytes())
    }
}

/// A file without sampled stacks is refused (exit 2), as for the folded stacks.
impl Exporter<[Results]> for output::Pprof {
    fn serialize(&self, results: &[Results]) -> anyhow::Result<Vec<u8>> {
        pprof::render(results)
    }
}
