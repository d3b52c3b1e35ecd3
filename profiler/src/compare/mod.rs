//! `hookprof compare OLD NEW`: per workload, did the clean metric change (Welch, Holm-adjusted
//! across workloads, a minimum effect size), and which hooks, LSMs, task paths and syscalls the
//! change went into.
use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use crate::{
    output::{self, Document, Format},
    results::Results,
    stats::Criteria,
    store::baseline,
    sweep::compare as sweep,
};

mod bmf;
mod comparison;
mod decide;
mod environment;
mod explain;
mod export;
pub mod facts;
pub(crate) mod html;
mod junit;
pub mod load;
mod options;
pub mod other_programs;
mod path_text;
pub mod paths;
mod pool;
mod render;
pub(crate) mod sampled;
mod speed;
pub mod stacks;
mod suite_security;
#[cfg(test)]
mod tests;

pub use comparison::*;
pub use decide::compare;
pub use html::render_html;
pub use junit::render_junit;
pub use render::{attribution_lines, render_markdown, render_text, sampled_lines};
pub use sampled::{SampledChange, SampledPathDelta, ShareInterval};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit codes:\n  0  no regression (inconclusive workloads print a warning)\n  \
1  at least one workload regressed (not with --fail-on never), or a path did with \
--fail-on path-regressed\n  2  bad input or error\n  \
3  a workload is inconclusive, with --fail-on inconclusive"
)]
pub struct CompareArgs {
    /// OLD and NEW (with --baseline, only NEW): each a results file, a directory whose
    /// *.json files are pooled per workload, or a selector of stored runs, pooled likewise
    /// (label:L, kernel:RELEASE, machine:ID, baseline:NAME, last:N, ...; see `hookprof runs`).
    #[arg(value_name = "OLD NEW", required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,
    /// Compare against baseline NAME (saved with `run --save-baseline NAME`) as OLD: its
    /// files, or the store's baseline:NAME when there is no such directory.
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where baselines live [default: $HOOKPROF_BASELINE_DIR, else
    /// $XDG_DATA_HOME/hookprof/baselines, else ~/.local/share/hookprof/baselines].
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<PathBuf>,
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
    #[command(flatten)]
    pub options: CompareOptions,
}

/// How to judge and show a comparison (shared with `hookprof ab`).
#[derive(clap::Args, Debug, Clone)]
pub struct CompareOptions {
    /// Significance level for the Holm-adjusted p-values.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Smallest change that counts, in percent of the old mean.
    #[arg(long, default_value_t = 1.0)]
    pub threshold: f64,
    /// False discovery rate of the path verdicts, over every path of a compare (stricter than
    /// --alpha: a compare judges hundreds of paths at once, and at 5% about one A/A compare in
    /// ten called a path on a loaded runner).
    #[arg(long, default_value_t = 0.01, value_name = "Q")]
    pub path_alpha: f64,
    /// Smallest change of a path's cost that counts, ns per op (timed, or a sampled share
    /// priced at the op's CPU time).
    #[arg(long, default_value_t = 10.0, value_name = "NS")]
    pub path_threshold_ns: f64,
    /// Smallest change of a path's share that counts where it is judged on its share alone,
    /// in percentage points of the op's CPU time.
    #[arg(long, default_value_t = 0.5, value_name = "PP")]
    pub path_threshold_pp: f64,
    /// What makes the exit code non-zero: a regression (1), also an inconclusive workload (3),
    /// or nothing.
    #[arg(long, value_enum, default_value_t = FailOn::Regression)]
    pub fail_on: FailOn,
    #[arg(long, default_value = "text", value_parser = Format::parser(Comparison::FORMATS))]
    pub format: Format,
}

impl CompareOptions {
    /// The criteria, or a one-line error naming the bad option.
    pub fn criteria(&self) -> anyhow::Result<Criteria> {
        anyhow::ensure!(
            self.alpha > 0.0 && self.alpha < 1.0,
            "--alpha must be between 0 and 1, not {}",
            self.alpha
        );
        anyhow::ensure!(
            self.path_alpha > 0.0 && self.path_alpha < 1.0,
            "--path-alpha must be between 0 and 1, not {}",
            self.path_alpha
        );
        anyhow::ensure!(
            self.threshold >= 0.0 && self.threshold.is_finite(),
            "--threshold must be a percentage >= 0, not {}",
            self.threshold
        );
        for (flag, value) in [
            ("--path-threshold-ns", self.path_threshold_ns),
            ("--path-threshold-pp", self.path_threshold_pp),
        ] {
            anyhow::ensure!(
                value >= 0.0 && value.is_finite(),
                "{flag} must be a number >= 0, not {value}"
            );
        }
        Ok(Criteria {
            alpha: self.alpha,
            path_alpha: self.path_alpha,
            threshold: self.threshold / 100.0,
            path_threshold_ns: self.path_threshold_ns,
            path_threshold_share: self.path_threshold_pp / 100.0,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 1 on a regression.
    Regression,
    /// Exit 1 on a regression, else 3 when a workload could not be decided.
    Inconclusive,
    /// Exit 1 on a workload's regression or a path's (its q-value below --alpha, its change
    /// above --path-threshold-ns, or --path-threshold-pp where it is judged on its share).
    PathRegressed,
    /// Exit 0 whatever the verdicts (bad input still exits 2).
    Never,
}

pub fn execute(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    let criteria = args.options.criteria()?;
    let (old_path, new_path) = match (&args.baseline, args.files.as_slice()) {
        (Some(name), [new]) => {
            let root = baseline::root(args.baseline_dir.as_deref())?;
            let old = match baseline::dir(&root, name)? {
                dir if dir.is_dir() => baseline::files(&root, name)?,
                _ => PathBuf::from(format!("baseline:{name}")),
            };
            (old, new.clone())
        }
        (Some(_), _) => anyhow::bail!("with --baseline, give only NEW"),
        (None, [old, new]) => (old.clone(), new.clone()),
        (None, _) => anyhow::bail!("give OLD and NEW, or --baseline NAME and NEW"),
    };
    let side = |path: &Path| -> anyhow::Result<Vec<Results>> {
        Ok(crate::store::load(path, &args.store)?
            .into_iter()
            .map(|(_, r)| r)
            .collect())
    };
    // The sides parse at once, on two CPUs where there are: at 100k paths a side, each parse
    // is most of a compare's time.
    let (old, new) = std::thread::scope(|s| {
        let new = s.spawn(|| side(&new_path));
        (side(&old_path), new.join())
    });
    let new = new.map_err(|_| anyhow::anyhow!("reading {} panicked", new_path.display()));
    let old = old.map_err(|e| match &args.baseline {
        // Neither a directory nor a stored baseline of that name: say how to make one.
        Some(name) => e.context(format!(
            "no baseline '{name}' in {} or the results store (save one with `hookprof run \
             --save-baseline {name}`)",
            baseline::root(args.baseline_dir.as_deref())
                .map(|r| r.display().to_string())
                .unwrap_or_default()
        )),
        None => e,
    })?;
    let new = new??;
    // Two sweeps compare by their slopes: their values pooled per workload would mean nothing.
    match (sweep::is_sweep(&old), sweep::is_sweep(&new)) {
        (true, true) => {
            let slopes = sweep::compare(old, new)?;
            crate::stdio::print(output::render(&slopes, args.options.format)?)?;
            return Ok(ExitCode::SUCCESS);
        }
        (false, false) => {}
        _ => anyhow::bail!(
            "one side is the files of a run --sweep and the other is not: compare a sweep with \
             a sweep (their slopes), or results with results"
        ),
    }
    print_comparison(&old, &new, &criteria, &args.options)
}

/// Compares two sides, prints the comparison in the chosen format and returns the exit code.
pub fn print_comparison(
    old: &[Results],
    new: &[Results],
    criteria: &Criteria,
    options: &CompareOptions,
) -> anyhow::Result<ExitCode> {
    let comparison = compare(old, new, criteria)?;
    crate::stdio::print(output::render(&comparison, options.format)?)?;
    let code = comparison.exit_code(options.fail_on);
    if let Some(warning) = comparison.inconclusive_warning(options.fail_on) {
        eprintln!("hookprof: warning: {warning}");
    }
    Ok(ExitCode::from(code))
}

/// The results files of one side: the file itself, or every *.json in the directory.
pub fn load_side(path: &Path) -> anyhow::Result<Vec<Results>> {
    crate::results::files_named(path)?
        .iter()
        .map(|f| Results::load(f).map_err(anyhow::Error::from))
        .collect()
}
