//! `hookprof runs`: what the results store holds (all of it, or what a selector picks), as a
//! table or JSON; `--add FILE...` records results files made elsewhere or before the store;
//! `--prune SELECTOR` removes old runs, keeping those in named baselines.
use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::Result;
use serde::Serialize;

use super::{
    block_on,
    db::{Pruned, RunRow},
    location::StoreArgs,
    open_for_reading,
    select::Selector,
    timing, RecordArgs, Recorded,
};
use crate::{
    output::{self, Document, Format},
    results::{files_named, Results},
};

#[derive(clap::Args, Debug)]
pub struct RunsArgs {
    /// Only the runs this selector picks: label:L, kernel:RELEASE, machine:ID, host:NAME,
    /// lsm:LIST, command:run|stat|ab|add, version:V, meta:KEY=VALUE, baseline:NAME, run:ID,
    /// older-than:AGE (30d, 12h, 2weeks), last:N (values take * and ?; terms joined by commas
    /// must all match).
    #[arg(value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// Remove the runs this selector picks (e.g. older-than:90d or label:try-*,older-than:7d),
    /// except runs in a named baseline. A dry run unless --yes: it lists what it would remove.
    /// SQLite reuses the freed space; its file does not shrink.
    #[arg(long, value_name = "SELECTOR", conflicts_with_all = ["selector", "add"])]
    pub prune: Option<String>,
    /// With --prune: remove the runs (without it, --prune only says what it would remove).
    #[arg(long, requires = "prune")]
    pub yes: bool,
    /// With --prune: remove runs in named baselines too, and their places in those baselines.
    #[arg(long, requires = "prune")]
    pub include_baselines: bool,
    /// Record these results files (or the *.json in these directories) in the store, each
    /// once however often it is added.
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with = "selector")]
    pub add: Vec<PathBuf>,
    #[command(flatten)]
    pub store: StoreArgs,
    /// With --add: the added runs join baseline NAME, as `run --append-baseline` would (its
    /// newest --baseline-keep runs stay in it).
    #[arg(long, value_name = "NAME", requires = "add")]
    pub append_baseline: Option<String>,
    #[arg(long, value_name = "N", default_value_t = crate::store::baseline::DEFAULT_KEEP,
          value_parser = clap::value_parser!(u32).range(2..))]
    pub baseline_keep: u32,
    /// KEY=VALUE recorded with each added file. Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = super::parse_meta, requires = "add")]
    pub meta: Vec<(String, String)>,
    #[arg(long, default_value = "text", value_parser = Format::parser(RunList::FORMATS))]
    pub format: Format,
}

pub fn execute(args: &RunsArgs) -> Result<ExitCode> {
    let url = args.store.required()?;
    if !args.add.is_empty() {
        return add(args, &url);
    }
    if let Some(text) = &args.prune {
        return prune(args, &url, &parse_selector(text)?);
    }
    let selector = match &args.selector {
        Some(text) => parse_selector(text)?,
        None => Selector::default(),
    };
    let runs = block_on(async {
        let mut db = open_for_reading(&url)
            .await
            .map_err(|e| e.context(format!("results store {}", url.shown())))?;
        db.list(&selector).await
    })?;
    crate::stdio::print(output::render(&RunList { runs }, args.format)?)?;
    Ok(ExitCode::SUCCESS)
}

fn parse_selector(text: &str) -> Result<Selector> {
    Selector::parse(text).unwrap_or_else(|| {
        Err(anyhow::anyhow!(
            "selector {text}: give KEY:VALUE terms: {}",
            super::select::SYNTAX
        ))
    })
}

/// `--prune`: what the selector picks goes (with `--yes`) or is listed as what would go.
fn prune(args: &RunsArgs, url: &super::location::Url, selector: &Selector) -> Result<ExitCode> {
    let pruned = block_on(async {
        let mut db = open_for_reading(url)
            .await
            .map_err(|e| e.context(format!("results store {}", url.shown())))?;
        db.prune(selector, args.include_baselines, !args.yes).await
    })?;
    print!("{}", output::render(&pruned, args.format)?);
    Ok(ExitCode::SUCCESS)
}

/// Stores files under an id made from their contents, so adding a file again stores nothing.
fn add(args: &RunsArgs, url: &super::location::Url) -> Result<ExitCode> {
    let record = RecordArgs {
        meta: args.meta.clone(),
        ..RecordArgs::default()
    };
    let save = crate::store::baseline::SaveArgs {
        append_baseline: args.append_baseline.clone(),
        baseline_keep: args.baseline_keep,
        ..Default::default()
    };
    let mut runs = Vec::new();
    for path in &args.add {
        for file in files_named(path)? {
            let text = crate::safety::input::read_text(&file)?;
            let results = Results::parse(&text, &file.display().to_string())?;
            let mut run = Recorded::new("add", &record, results).joining(&save);
            run.run_id = content_id(&text);
            runs.push(run);
        }
    }
    block_on(async {
        let started = Instant::now();
        let mut db = open_for_reading(url)
            .await
            .map_err(|e| e.context(format!("results store {}", url.shown())))?;
        for run in &runs {
            db.insert(run).await?;
        }
        timing("stored", started, runs.len());
        Ok(())
    })?;
    eprintln!(
        "hookprof: {} results file(s) in {}",
        runs.len(),
        url.shown()
    );
    Ok(ExitCode::SUCCESS)
}

/// A run id from a file's bytes (FNV-1a, 128 bits): the same file, the same id.
fn content_id(text: &str) -> String {
    const PRIME: u128 = 0x0000000001000000000000000000013B;
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for b in text.bytes() {
        hash = (hash ^ u128::from(b)).wrapping_mul(PRIME);
    }
    format!("{hash:032x}")
}

#[derive(Serialize)]
#[serde(transparent)]
pub struct RunList {
    runs: Vec<RunRow>,
}

impl Document for RunList {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => {
                let mut table = comfy_table::Table::new();
                table
                    .load_preset(comfy_table::presets::NOTHING)
                    .set_header([
                        "run",
                        "started (UTC)",
                        "command",
                        "label",
                        "kernel",
                        "host",
                        "workloads",
                        "complete",
                    ]);
                for r in &self.runs {
                    table.add_row([
                        super::select::short(&r.run_id).to_string(),
                        utc(r.started_at),
                        r.command.clone(),
                        r.label.clone(),
                        r.kernel_release.clone(),
                        r.hostname.clone(),
                        r.workloads.to_string(),
                        if r.complete { "yes" } else { "no" }.to_string(),
                    ]);
                }
                Ok(format!("{table}\n{} run(s)\n", self.runs.len()).into_bytes())
            }
            other => output::unlisted(other),
        }
    }
}

impl Document for Pruned {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Json];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => {
                let mut text = String::new();
                let span = |runs: &[&RunRow]| match (runs.first(), runs.last()) {
                    (Some(a), Some(b)) => {
                        format!(", started {} to {}", utc(a.started_at), utc(b.started_at))
                    }
                    _ => String::new(),
                };
                let runs: Vec<&RunRow> = self.runs.iter().collect();
                let verb = if self.removed {
                    "removed"
                } else {
                    "would remove"
                };
                text += &format!("{verb} {} run(s){}\n", runs.len(), span(&runs));
                if !self.kept_in_baselines.is_empty() {
                    let mut names: Vec<&str> = self
                        .kept_in_baselines
                        .iter()
                        .flat_map(|(_, n)| n.iter().map(String::as_str))
                        .collect();
                    names.sort_unstable();
                    names.dedup();
                    text += &format!(
                        "kept {} run(s) in baselines ({}); --include-baselines removes them too\n",
                        self.kept_in_baselines.len(),
                        names.join(", ")
                    );
                }
                if !self.removed && !self.runs.is_empty() {
                    text += "a dry run: give --yes to remove them\n";
                }
                Ok(text.into_bytes())
            }
            other => output::unlisted(other),
        }
    }
}

/// Unix seconds as an RFC 3339 time (imports without a start time show as 1970).
fn utc(seconds: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.max(0) as u64);
    humantime::format_rfc3339_seconds(time).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_keeps_its_id_and_another_gets_another() {
        assert_eq!(content_id("{}"), content_id("{}"));
        assert_ne!(content_id("{}"), content_id("{ }"));
        assert_eq!(content_id("").len(), 32);
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    }
}
