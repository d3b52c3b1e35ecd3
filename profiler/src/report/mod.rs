//! `hookprof report FILE...`: results files as terminal text, an lmbench 2.0 summary, markdown,
//! JSON, a self-contained HTML page (with a flame graph per profiled workload), the sampled
//! stacks folded for flame-graph tools or as a pprof profile, or the kernel CI ecosystem's
//! formats (KCIDB, Bencher's BMF, Prometheus text; written by `crate::export`).
use std::{path::PathBuf, process::ExitCode};

use crate::{
    output::{self, Document, Format},
    results::Results,
};

pub(crate) mod chart;
pub mod figures;
pub mod flame;
pub mod folded;
pub mod html;
mod long_table;
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

    fn export(&self, format: Format) -> anyhow::Result<Vec<u8>> {
        match format {
            Format::Text => {
                let texts: Vec<String> = self.iter().map(text::render).collect();
                Ok(texts.join("\n").into_bytes())
            }
            Format::Lmbench => Ok(crate::lmbench::summary::render(self).into_bytes()),
            Format::Markdown => Ok(markdown::render(self).into_bytes()),
            Format::Html => Ok(html::render(self).into_bytes()),
            Format::Kcidb => {
                crate::export::check_unique_workloads(self)?;
                output::pretty_json(&crate::export::kcidb::document(self))
            }
            Format::Bmf => {
                crate::export::check_unique_workloads(self)?;
                output::pretty_json(&crate::export::bmf::document(self)?)
            }
            Format::Openmetrics => {
                crate::export::check_unique_workloads(self)?;
                Ok(crate::export::openmetrics::render(self)?.into_bytes())
            }
            // A file without sampled stacks is refused (exit 2) rather than printed as nothing.
            Format::Folded => Ok(folded::render(self)?.into_bytes()),
            // A file without sampled stacks is refused (exit 2), as for the folded stacks.
            Format::Pprof => pprof::render(self),
            other => output::unlisted(other),
        }
    }

    /// One file is the results file itself; several, an array of them.
    fn json(&self) -> anyhow::Result<Vec<u8>> {
        match self {
            [one] => output::pretty_json(one),
            many => output::pretty_json(many),
        }
    }
}
