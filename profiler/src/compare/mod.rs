//! `hookprof compare OLD NEW`: per workload, did the clean metric change (Welch, Holm-adjusted
//! across workloads, a minimum effect size), and which hooks, LSMs, task paths and syscalls the
//! change went into.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::ExitCode,
};

use serde::Serialize;

use crate::{
    baseline,
    output::{self, Document, Format},
    replication::{self, Components, FileRounds, TestKind, Unit as Replication},
    results::{
        rows::{self, Level},
        AttributionRow, PathKind, Results, Unit, WorkloadResult,
    },
    stats::{self, Change, Criteria, Summary, Verdict},
};

mod export;
pub mod facts;
pub(crate) mod html;
mod junit;
mod render;
mod speed;
pub use html::render_html;
pub use junit::render_junit;
pub use render::{attribution_lines, render_markdown, render_text};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit codes:\n  0  no regression (inconclusive workloads print a warning)\n  \
1  at least one workload regressed (not with --fail-on never)\n  2  bad input or error\n  \
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
            self.threshold >= 0.0 && self.threshold.is_finite(),
            "--threshold must be a percentage >= 0, not {}",
            self.threshold
        );
        Ok(Criteria {
            alpha: self.alpha,
            threshold: self.threshold / 100.0,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    /// Exit 1 on a regression.
    Regression,
    /// Exit 1 on a regression, else 3 when a workload could not be decided.
    Inconclusive,
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
    let old = side(&old_path).map_err(|e| match &args.baseline {
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
    let new = side(&new_path)?;
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
    print!("{}", output::render(&comparison, options.format)?);
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

/// One workload's samples from every file of a side, kept per file.
#[derive(Debug, Default)]
struct Pooled {
    unit: Option<Unit>,
    /// The clean samples of each file that has any, round by round.
    clean: Vec<FileRounds>,
    /// Further metrics, their samples per file, round by round.
    extras: Vec<(String, Unit, Vec<FileRounds>)>,
    /// Rows merged by (kind, name, parent), their per-sample values concatenated.
    attribution: Vec<AttributionRow>,
}

/// Workloads in first-seen order with their pooled samples.
fn pool(side: &[Results]) -> anyhow::Result<Vec<(String, Pooled)>> {
    let mut pooled: Vec<(String, Pooled)> = Vec::new();
    for r in side {
        for w in &r.workloads {
            let at = match pooled.iter().position(|(n, _)| *n == w.name) {
                Some(at) => at,
                None => {
                    pooled.push((w.name.clone(), Pooled::default()));
                    pooled.len() - 1
                }
            };
            let p = &mut pooled[at].1;
            let unit = *p.unit.get_or_insert(w.unit);
            anyhow::ensure!(
                unit == w.unit,
                "{}: workload {} is in {} in one file and {} in another",
                r.label,
                w.name,
                unit.symbol(),
                w.unit.symbol()
            );
            if !w.clean.is_empty() {
                p.clean.push(rounds_of(r, w, &w.clean));
            }
            for e in w.extra.iter().filter(|e| !e.clean.is_empty()) {
                let rounds = rounds_of(r, w, &e.clean);
                match p.extras.iter_mut().find(|(n, _, _)| *n == e.name) {
                    Some((_, _, v)) => v.push(rounds),
                    None => p.extras.push((e.name.clone(), e.unit, vec![rounds])),
                }
            }
            for row in &w.attribution {
                let samples = if row.samples_ns_per_op.is_empty() {
                    vec![row.ns_per_op]
                } else {
                    row.samples_ns_per_op.clone()
                };
                let same = |a: &&mut AttributionRow| {
                    a.kind == row.kind && a.name == row.name && a.parent == row.parent
                };
                match p.attribution.iter_mut().find(same) {
                    Some(a) => a.samples_ns_per_op.extend(samples),
                    None => p.attribution.push(AttributionRow {
                        samples_ns_per_op: samples,
                        ..row.clone()
                    }),
                }
            }
        }
    }
    Ok(pooled)
}

/// A workload's samples in one file, round by round. Imported summaries (lmbench's and
/// kernbench's tables) list one value per run: each sample is then a round of its own.
fn rounds_of(r: &Results, w: &WorkloadResult, samples: &[f64]) -> FileRounds {
    if r.samples_are_runs() {
        return samples.iter().map(|&v| vec![v]).collect();
    }
    w.by_round(samples)
        .into_iter()
        .map(<[f64]>::to_vec)
        .collect()
}

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub criteria: Criteria,
    pub old_labels: Vec<String>,
    pub new_labels: Vec<String>,
    /// Environment facts that differ between the sides.
    pub environment: Vec<EnvironmentDifference>,
    /// Paths and task events that appear, disappear or run more or less often per op: facts
    /// that need no timing statistics, listed before any verdict.
    pub call_counts: facts::CallCounts,
    pub workloads: Vec<WorkloadComparison>,
    pub only_in_old: Vec<String>,
    pub only_in_new: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct EnvironmentDifference {
    pub field: &'static str,
    pub old: Vec<String>,
    pub new: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct WorkloadComparison {
    pub name: String,
    pub unit: Unit,
    /// What `old.n` and `new.n` count: samples, rounds or files.
    pub replication: Replication,
    /// Welch's test, or a prediction test when only one side repeated the unit (a run
    /// against a baseline of several); None when neither did.
    pub test: Option<TestKind>,
    pub old: Summary,
    pub new: Summary,
    /// None when the old mean is 0 (no relative change).
    pub change: Option<Change>,
    /// Holm-adjusted over every workload of the comparison with a p-value.
    pub adjusted_p: Option<f64>,
    pub verdict: Verdict,
    /// The spread at each level (samples in a round, rounds in a file, files in a side).
    pub components: Components,
    /// The smallest relative change this comparison detects with 80% power at Holm's
    /// strictest step (alpha over the workloads tested), never below the threshold; None
    /// when there is no test.
    pub minimum_detectable_effect: Option<f64>,
    /// Why this workload's spread is the machine's, not the kernel's, when it is.
    pub machine_state: Option<String>,
    /// The verdict is inconclusive because a loop that never enters the kernel moved the same
    /// way (`speed`): the machine's speed changed.
    pub machine_speed_changed: bool,
    pub extras: Vec<ExtraComparison>,
    pub attribution: Option<ChangeAttribution>,
}

#[derive(Debug, Serialize)]
pub struct ExtraComparison {
    pub name: String,
    pub unit: Unit,
    pub old: Summary,
    pub new: Summary,
    pub change: Option<Change>,
}

/// Where an end-to-end change went.
#[derive(Debug, Serialize)]
pub struct ChangeAttribution {
    /// Change of the clean op time, ns.
    pub total_ns: f64,
    /// "hooks" or "syscalls": the rows the residual is measured against.
    pub level: &'static str,
    pub paths: Vec<PathDelta>,
    /// total_ns minus the top-level rows' deltas.
    pub residual_ns: f64,
}

#[derive(Debug, Serialize)]
pub struct PathDelta {
    pub kind: PathKind,
    pub name: String,
    pub parent: Option<String>,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
    pub delta_ns_per_op: f64,
    /// Counted in the residual's sum.
    pub top_level: bool,
}

impl Comparison {
    pub fn count(&self, verdict: Verdict) -> usize {
        self.workloads
            .iter()
            .filter(|w| w.verdict == verdict)
            .count()
    }

    /// 1 on a regression (unless told never to fail); 3 when a workload is inconclusive and
    /// the caller asked to fail on that; else 0. (2 is for errors, which never get here.)
    pub fn exit_code(&self, fail_on: FailOn) -> u8 {
        let regressed = self.count(Verdict::Regressed) > 0;
        let undecided = self.count(Verdict::Inconclusive) > 0;
        match fail_on {
            FailOn::Never => 0,
            FailOn::Regression | FailOn::Inconclusive if regressed => 1,
            FailOn::Inconclusive if undecided => 3,
            FailOn::Regression | FailOn::Inconclusive => 0,
        }
    }

    /// What to say on stderr when inconclusive workloads do not change the exit code.
    pub fn inconclusive_warning(&self, fail_on: FailOn) -> Option<String> {
        let n = self.count(Verdict::Inconclusive);
        (n > 0 && fail_on == FailOn::Regression).then(|| {
            format!(
                "{n} of {} workloads inconclusive; they do not fail the comparison (with \
                 --fail-on inconclusive they exit 3)",
                self.workloads.len()
            )
        })
    }
}

pub fn compare(
    old: &[Results],
    new: &[Results],
    criteria: &Criteria,
) -> anyhow::Result<Comparison> {
    let (old_pool, new_pool) = (pool(old)?, pool(new)?);
    let paired = paired_variants(old, new);
    let mut workloads = Vec::new();
    let mut relative_errors = Vec::new();
    for (name, o) in &old_pool {
        let Some((_, n)) = new_pool.iter().find(|(m, _)| m == name) else {
            continue;
        };
        let replication = if paired {
            Replication::Pair
        } else {
            replication::level(&o.clean).max(replication::level(&n.clean))
        };
        let (Some(old_o), Some(new_o)) = (
            observe(&o.clean, replication),
            observe(&n.clean, replication),
        ) else {
            continue;
        };
        let unit = o.unit.expect("set with the first sample");
        anyhow::ensure!(
            Some(unit) == n.unit,
            "workload {name} is in {} in OLD and {} in NEW",
            unit.symbol(),
            n.unit.map_or("?", Unit::symbol)
        );
        let extras = o
            .extras
            .iter()
            .filter_map(|(e, eu, ov)| {
                let (_, _, nv) = n.extras.iter().find(|(m, _, _)| m == e)?;
                let (old, new) = (observe(ov, replication)?, observe(nv, replication)?);
                Some(ExtraComparison {
                    name: e.clone(),
                    unit: *eu,
                    change: tested_change(&old, &new, replication).0,
                    old: old.summary,
                    new: new.summary,
                })
            })
            .collect();
        let (change, test) = tested_change(&old_o, &new_o, replication);
        let (old_s, new_s) = (old_o.summary, new_o.summary);
        let components = replication::components(&[&o.clean, &n.clean]);
        // The standard error relative to the old mean, for the minimum detectable effect.
        relative_errors.push(test.map(|t| (t.std_error / old_s.mean.abs(), t.df)));
        workloads.push(WorkloadComparison {
            name: name.clone(),
            unit,
            replication,
            test: test.map(|t| t.kind),
            change,
            attribution: attribute_change(unit, &old_s, &new_s, &o.attribution, &n.attribution),
            machine_state: machine_state(name, &components),
            machine_speed_changed: false,
            components,
            minimum_detectable_effect: None,
            old: old_s,
            new: new_s,
            adjusted_p: None,
            verdict: Verdict::Inconclusive,
            extras,
        });
    }
    anyhow::ensure!(
        !workloads.is_empty(),
        "OLD and NEW have no workload with samples in common"
    );
    // Holm across the family of workloads that have a p-value.
    let tested: Vec<usize> = (0..workloads.len())
        .filter(|&i| workloads[i].change.is_some_and(|c| c.p_value.is_some()))
        .collect();
    let p_values: Vec<f64> = tested
        .iter()
        .filter_map(|&i| workloads[i].change.and_then(|c| c.p_value))
        .collect();
    for (&i, adjusted) in tested.iter().zip(stats::holm(&p_values)) {
        workloads[i].adjusted_p = Some(adjusted);
    }
    // A single regression among m workloads faces Holm's strictest step, alpha / m.
    let family = tested.len().max(1) as f64;
    for (w, error) in workloads.iter_mut().zip(relative_errors) {
        w.minimum_detectable_effect = error
            .and_then(|(se, df)| replication::minimum_detectable(se, df, criteria.alpha / family))
            .map(|m| m.max(criteria.threshold));
        w.verdict = match &w.change {
            Some(c) => stats::verdict(c, w.adjusted_p, w.unit.higher_is_better(), criteria),
            None => Verdict::Inconclusive,
        };
    }
    let names = |pool: &[(String, Pooled)], other: &[(String, Pooled)]| -> Vec<String> {
        pool.iter()
            .filter(|(n, _)| !other.iter().any(|(m, _)| m == n))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let mut environment = environment_differences(old, new);
    environment.extend(speed::check(&mut workloads));
    Ok(Comparison {
        criteria: *criteria,
        old_labels: old.iter().map(|r| r.label.clone()).collect(),
        new_labels: new.iter().map(|r| r.label.clone()).collect(),
        environment,
        call_counts: facts::call_counts(old, new),
        only_in_old: names(&old_pool, &new_pool),
        only_in_new: names(&new_pool, &old_pool),
        workloads,
    })
}

/// A side's observations at a unit, and the summary of those it has (a paired run's missing
/// round is kept as NaN for its place).
struct Observed {
    values: Vec<f64>,
    summary: Summary,
}

fn observe(side: &[FileRounds], unit: Replication) -> Option<Observed> {
    let values = replication::observations(side, unit);
    let present: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let summary = stats::summarize(&present)?;
    Some(Observed { values, summary })
}

/// OLD and NEW are the two variants of one paired run (`run --versus`): one file a side, from
/// the same run, different variants.
fn paired_variants(old: &[Results], new: &[Results]) -> bool {
    match (old, new) {
        ([o], [n]) => match (&o.pairing, &n.pairing) {
            (Some(a), Some(b)) => a.run == b.run && a.variant != b.variant,
            _ => false,
        },
        _ => false,
    }
}

/// The relative change of new against old with the test at `unit` (None without repetition
/// on either side: samples of one round are not independent, so they decide nothing).
fn tested_change(
    old: &Observed,
    new: &Observed,
    unit: Replication,
) -> (Option<Change>, Option<replication::Test>) {
    let (o, n) = (&old.summary, &new.summary);
    if o.mean == 0.0 {
        return (None, None);
    }
    let test = match unit {
        Replication::Sample => None,
        Replication::Pair => replication::paired_test(&old.values, &new.values),
        Replication::Round | Replication::File => replication::test(o, n),
    };
    let scale = o.mean.abs();
    let change = Change {
        relative: (n.mean - o.mean) / scale,
        ci: test.map(|t| (t.ci.0 / scale, t.ci.1 / scale)),
        p_value: test.map(|t| t.p_value),
    };
    (Some(change), test)
}

/// What to say when rounds or files disagree far more than the samples of one round: the
/// spread is the machine's state (placement, caches, the filesystem), not the kernel's code.
fn machine_state(workload: &str, c: &Components) -> Option<String> {
    if !c.machine_state_dominates() {
        return None;
    }
    let cause = if workload.starts_with("fs_") {
        "the filesystem's state: on ext4 without a journal, inodes freed in the last minute are \
         skipped, so creates slow down after deletes (README: a fresh filesystem as TMPDIR)"
    } else if workload.starts_with("lat_")
        || workload.starts_with("bw_")
        || workload.starts_with("ctx_")
    {
        "where the processes land: on one CPU or on two (pin both ends with --pin A,B)"
    } else {
        "the machine's state from run to run (placement, frequency, memory layout)"
    };
    let level = if c.between_files.unwrap_or(0.0) > c.between_rounds.unwrap_or(0.0) {
        "runs"
    } else {
        "rounds"
    };
    Some(format!(
        "spread between {level} ({:.1}%) far above that of samples in a round ({:.1}%): {cause}",
        100.0 * c.between().unwrap_or(0.0),
        100.0 * c.within_round.unwrap_or(0.0)
    ))
}

fn environment_differences(old: &[Results], new: &[Results]) -> Vec<EnvironmentDifference> {
    type Field = (&'static str, fn(&Results) -> String);
    let fields: [Field; 7] = [
        ("kernel", |r| r.environment.kernel_release.clone()),
        ("CPU", |r| r.environment.cpu_model.clone()),
        // Fewer CPUs to run on (taskset, a cpuset) changes two-process and parallel workloads.
        ("CPUs", |r| {
            match (r.environment.cpus_online, r.environment.cpus_allowed) {
                (0, 0) => String::new(),
                (0, allowed) => format!("{allowed} allowed"),
                (online, allowed) => format!("{online} online, {allowed} allowed"),
            }
        }),
        ("LSMs", |r| r.environment.active_lsms.join(",")),
        ("lockdown", |r| r.environment.lockdown.clone()),
        ("policy", Results::policy_summary),
        // Copies at once (`--parallel`): a hook's ns/call at N against 1 shows contention.
        ("parallel copies", |r| r.parallel().to_string()),
    ];
    let distinct = |side: &[Results], f: fn(&Results) -> String| {
        let mut values: Vec<String> = Vec::new();
        for v in side.iter().map(f).filter(|v| !v.is_empty()) {
            if !values.contains(&v) {
                values.push(v);
            }
        }
        values
    };
    fields
        .iter()
        .filter_map(|&(field, f)| {
            let (o, n) = (distinct(old, f), distinct(new, f));
            (o != n).then_some(EnvironmentDifference {
                field,
                old: o,
                new: n,
            })
        })
        .collect()
}

/// The change of each attributed path, and what the top-level paths leave unexplained.
fn attribute_change(
    unit: Unit,
    old: &Summary,
    new: &Summary,
    old_rows: &[AttributionRow],
    new_rows: &[AttributionRow],
) -> Option<ChangeAttribution> {
    if old_rows.is_empty() || new_rows.is_empty() {
        return None;
    }
    let total_ns = rows::op_ns(unit, new.mean)? - rows::op_ns(unit, old.mean)?;
    let level = Level::of(old_rows.iter().chain(new_rows).map(|r| r.kind))?;
    let mut keys: BTreeMap<(PathKind, &str, Option<&str>), (f64, f64)> = BTreeMap::new();
    let mut order = Vec::new();
    for (rows, is_new) in [(old_rows, false), (new_rows, true)] {
        for r in rows {
            let key = (r.kind, r.name.as_str(), r.parent.as_deref());
            if !keys.contains_key(&key) {
                order.push(key);
            }
            let entry = keys.entry(key).or_insert((0.0, 0.0));
            let ns = rows::ns_per_op(r);
            if is_new {
                entry.1 = ns;
            } else {
                entry.0 = ns;
            }
        }
    }
    let paths: Vec<PathDelta> = order
        .into_iter()
        .map(|key @ (kind, name, parent)| {
            let (o, n) = keys[&key];
            PathDelta {
                kind,
                name: name.to_string(),
                parent: parent.map(String::from),
                old_ns_per_op: o,
                new_ns_per_op: n,
                delta_ns_per_op: n - o,
                top_level: kind == level.kind(),
            }
        })
        .collect();
    let explained: f64 = paths
        .iter()
        .filter(|p| p.top_level)
        .map(|p| p.delta_ns_per_op)
        .sum();
    Some(ChangeAttribution {
        total_ns,
        level: match level {
            Level::Hooks => "hooks",
            Level::Syscalls => "syscalls",
        },
        paths,
        residual_ns: total_ns - explained,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::text::tests::{row, sample_results};

    /// A file whose samples are independent runs (a round each), as the tests' data were
    /// made to be.
    fn with_clean(mut r: Results, clean: &[f64], label: &str) -> Results {
        r.label = label.into();
        r.workloads[0].clean = clean.to_vec();
        r.workloads[0].round_sizes = vec![1; clean.len()];
        r
    }

    /// One file of `rounds` rounds, each `per_round` samples spread +-1% around its median.
    fn rounds_file(medians: &[f64], label: &str) -> Results {
        let samples: Vec<f64> = medians
            .iter()
            .flat_map(|m| [m * 0.99, *m, m * 1.01])
            .collect();
        let mut r = with_clean(sample_results(), &samples, label);
        r.workloads[0].round_sizes = vec![3; medians.len()];
        r
    }

    #[test]
    fn samples_of_one_round_decide_nothing() {
        // Tight samples 10% apart, but each side is one round of one run: nothing measures
        // how two runs differ, so no verdict rests on them.
        let mut old = with_clean(sample_results(), &[5.0, 5.01, 4.99, 5.0], "old");
        let mut new = with_clean(sample_results(), &[5.5, 5.51, 5.49, 5.5], "new");
        old.workloads[0].round_sizes.clear();
        new.workloads[0].round_sizes.clear();
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!((w.replication, w.test), (Replication::Sample, None));
        assert_eq!(w.verdict, Verdict::Inconclusive);
        assert!(render_text(&c).contains("--rounds 2 or more"));
    }

    #[test]
    fn rounds_are_the_unit_and_their_medians_the_observations() {
        // Round medians agree within 2% on each side; the sides differ by 10%.
        let old = rounds_file(&[5.0, 5.1, 4.95, 5.05], "old");
        let new = rounds_file(&[5.5, 5.6, 5.45, 5.55], "new");
        let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!(
            (w.replication, w.old.n, w.new.n),
            (Replication::Round, 4, 4)
        );
        assert_eq!(w.test, Some(TestKind::Welch));
        assert_eq!(w.verdict, Verdict::Regressed);
        // scipy: ttest_ind([5.5, 5.6, 5.45, 5.55], [5.0, 5.1, 4.95, 5.05], equal_var=False)
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 3.436402807612074e-05).abs() < 1e-9, "{p}");
        let mde = w.minimum_detectable_effect.unwrap();
        assert!(mde > 0.01 && mde < 0.10, "{mde}");
        assert!(w.components.between_rounds.is_some() && w.components.between_files.is_none());
        // The same run against itself: no change, and the spread says what it could detect.
        let same = compare(
            std::slice::from_ref(&old),
            std::slice::from_ref(&old),
            &Criteria::default(),
        )
        .unwrap();
        assert_eq!(same.workloads[0].verdict, Verdict::NoChange);
        assert!(render_text(&same).contains("detects a change of"));
    }

    fn paired(mut r: Results, variant: &str) -> Results {
        r.pairing = Some(crate::results::Pairing {
            run: "run-1".into(),
            variant: variant.into(),
            base_options: String::new(),
            versus_options: "--inject syscall:getppid=300".into(),
        });
        r
    }

    #[test]
    fn the_variants_of_a_paired_run_pair_round_with_round() {
        // The machine drifts by 20% from round to round; the versus variant is 0.3 slower in
        // every round. Unpaired, the drift hides it; paired, it cancels.
        let base = [5.0, 5.6, 4.7, 5.3, 5.9, 4.8];
        let versus = [5.3, 5.85, 5.0, 5.6, 6.2, 5.1];
        let (old, new) = (rounds_file(&base, "base"), rounds_file(&versus, "versus"));
        let unpaired = compare(
            std::slice::from_ref(&old),
            std::slice::from_ref(&new),
            &Criteria::default(),
        )
        .unwrap();
        let w = &unpaired.workloads[0];
        assert_eq!(w.replication, Replication::Round);
        // scipy: ttest_ind(versus, base, equal_var=False).pvalue
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 0.30471251379516934).abs() < 1e-9, "{p}");
        assert_ne!(w.verdict, Verdict::Regressed);

        let c = compare(
            &[paired(old.clone(), "base")],
            &[paired(new.clone(), "versus")],
            &Criteria::default(),
        )
        .unwrap();
        let w = &c.workloads[0];
        assert_eq!(
            (w.replication, w.test),
            (Replication::Pair, Some(TestKind::Paired))
        );
        // scipy: ttest_rel(versus, base).pvalue
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 3.582388085380236e-07).abs() < 1e-12, "{p}");
        assert_eq!(w.verdict, Verdict::Regressed);
        let (paired_mde, unpaired_mde) = (
            w.minimum_detectable_effect.unwrap(),
            unpaired.workloads[0].minimum_detectable_effect.unwrap(),
        );
        assert!(
            paired_mde * 3.0 < unpaired_mde,
            "{paired_mde} vs {unpaired_mde}"
        );
        assert!(render_text(&c).contains("paired"));

        // Files of two different runs, or two of the same variant, do not pair.
        let mut other_run = paired(new, "versus");
        other_run.pairing.as_mut().unwrap().run = "run-2".into();
        let c = compare(&[paired(old, "base")], &[other_run], &Criteria::default()).unwrap();
        assert_eq!(c.workloads[0].replication, Replication::Round);
    }

    #[test]
    fn a_round_missing_on_one_side_leaves_its_pair_out() {
        let test = replication::paired_test(&[1.0, f64::NAN, 1.2, 1.1], &[1.1, 2.0, 1.3, 1.2]);
        let t = test.unwrap();
        assert_eq!(t.df, 2.0);
        assert!((t.difference - 0.1).abs() < 1e-12);
        assert!(replication::paired_test(&[1.0, f64::NAN], &[1.1, 1.2]).is_none());
    }

    /// open_close's and a reference loop's round medians in one file.
    fn with_reference(open_close: &[f64], mem_l1: &[f64], label: &str) -> Results {
        let mut r = rounds_file(open_close, label);
        let reference = &mut r.workloads[1];
        reference.name = "mem_l1".into();
        reference.clean = mem_l1
            .iter()
            .flat_map(|m| [m * 0.99, *m, m * 1.01])
            .collect();
        reference.round_sizes = vec![3; mem_l1.len()];
        r
    }

    #[test]
    fn a_slower_machine_is_not_a_slower_kernel() {
        let old = with_reference(&[5.0, 5.1, 4.95, 5.05], &[1.26, 1.27, 1.25, 1.26], "old");
        // The loop that never enters the kernel is 40% slower: so is the machine.
        let slower = with_reference(&[7.0, 7.1, 6.95, 7.05], &[1.76, 1.77, 1.75, 1.78], "new");
        let c = compare(std::slice::from_ref(&old), &[slower], &Criteria::default()).unwrap();
        let verdict = |c: &Comparison, name: &str| {
            c.workloads.iter().find(|w| w.name == name).unwrap().verdict
        };
        assert_eq!(verdict(&c, "mem_l1"), Verdict::Inconclusive);
        assert_eq!(verdict(&c, "open_close"), Verdict::Inconclusive);
        assert_eq!(c.count(Verdict::Regressed), 0);
        let text = render_text(&c);
        assert!(text.contains("machine speed"), "{text}");
        assert!(text.contains("the machine ran slower"), "{text}");
        // Far more than the machine could make (+300% against its +40%) stays a regression.
        let far_slower =
            with_reference(&[20.0, 20.4, 19.8, 20.2], &[1.76, 1.77, 1.75, 1.78], "new");
        let c = compare(
            std::slice::from_ref(&old),
            &[far_slower],
            &Criteria::default(),
        )
        .unwrap();
        assert_eq!(verdict(&c, "open_close"), Verdict::Regressed);
        // The same kernel change on a machine whose speed held: a regression.
        let same_speed = with_reference(&[7.0, 7.1, 6.95, 7.05], &[1.26, 1.25, 1.27, 1.26], "new");
        let c = compare(&[old], &[same_speed], &Criteria::default()).unwrap();
        assert_eq!(verdict(&c, "open_close"), Verdict::Regressed);
        assert_eq!(verdict(&c, "mem_l1"), Verdict::NoChange);
        assert!(!render_text(&c).contains("machine speed"));
    }

    #[test]
    fn a_run_against_a_baseline_of_several_is_a_prediction() {
        let baseline: Vec<Results> = [5.0, 5.1, 4.9, 5.05, 4.95]
            .iter()
            .map(|m| rounds_file(&[*m, *m], "base"))
            .collect();
        let same = rounds_file(&[5.02, 5.0], "same");
        let c = compare(&baseline, &[same], &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!(
            (w.replication, w.test),
            (Replication::File, Some(TestKind::Prediction))
        );
        assert_eq!((w.old.n, w.new.n), (5, 1));
        assert_ne!(w.verdict, Verdict::Regressed);
        let slower = rounds_file(&[6.0, 6.1], "slower");
        let c = compare(&baseline, &[slower], &Criteria::default()).unwrap();
        assert_eq!(c.workloads[0].verdict, Verdict::Regressed);
        assert!(render_text(&c).contains("prediction interval"));
    }

    #[test]
    fn a_policy_on_one_side_is_an_environment_difference() {
        let old = sample_results();
        let mut new = sample_results();
        new.options.insert(
            "policy".into(),
            serde_json::json!([{ "kind": "landlock", "summary": "landlock (2 layers, 15 rules)" }]),
        );
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        let d = c.environment.iter().find(|d| d.field == "policy").unwrap();
        assert_eq!(
            (d.old.as_slice(), d.new.as_slice()),
            (
                &["none".to_string()][..],
                &["landlock (2 layers, 15 rules)".to_string()][..]
            )
        );
        assert!(render_text(&c).contains("policy: none -> landlock (2 layers, 15 rules)"));
    }

    #[test]
    fn fewer_cpus_to_run_on_is_an_environment_difference() {
        let old = sample_results();
        let mut new = sample_results();
        new.environment.cpus_allowed = 1;
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        let text = render_text(&c);
        assert!(
            text.contains("CPUs: 2 online, 2 allowed -> 2 online, 1 allowed"),
            "{text}"
        );
    }

    #[test]
    fn a_slower_open_is_attributed_to_its_hook_and_lsm() {
        let old = with_clean(sample_results(), &[5.0, 5.02, 4.98, 5.01, 4.99], "old");
        let mut new = with_clean(sample_results(), &[5.5, 5.52, 5.48, 5.51, 5.49], "new");
        new.environment.kernel_release = "6.1.0-19-amd64".into();
        let rows = &mut new.workloads[0].attribution;
        rows[1] = row(PathKind::Hook, "security_file_open", None, 1.0, 830.0);
        rows[2] = row(
            PathKind::Lsm,
            "apparmor_file_open",
            Some("security_file_open"),
            1.0,
            790.0,
        );
        rows[0] = row(PathKind::Syscall, "openat", None, 1.0, 3450.0);
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!(w.verdict, Verdict::Regressed);
        let a = w.attribution.as_ref().unwrap();
        assert!((a.total_ns - 500.0).abs() < 1e-6, "{}", a.total_ns);
        assert!((a.residual_ns - 70.0).abs() < 1e-6, "{}", a.residual_ns);
        let lines = attribution_lines(&w.name, a);
        assert_eq!(
            lines[0],
            "open_close +500 ns: security_file_open +430 ns (apparmor_file_open +410 ns), \
             security_file_free +0.0 ns, residual +70 ns"
        );
        assert_eq!(lines[1], "  enclosing paths: syscall openat +450 ns");
        let text = render_text(&c);
        assert!(
            text.contains("  kernel: 6.1.0-18-amd64 -> 6.1.0-19-amd64"),
            "{text}"
        );
        assert!(text.contains("Performance has regressed."), "{text}");
        assert_eq!(c.exit_code(FailOn::Regression), 1);
        // A regression outranks an inconclusive workload (build has no samples to compare).
        assert_eq!(c.exit_code(FailOn::Inconclusive), 1);
        assert_eq!(c.exit_code(FailOn::Never), 0);
        let md = render_markdown(&c);
        assert!(
            md.contains("| open_close | 5.000 us | 5.500 us | +10.00% ["),
            "{md}"
        );
        assert!(md.contains("| **regressed** |"), "{md}");
        let html = render_html(&c);
        assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("http"));
        assert!(
            html.contains("aria-label=\"change attribution of open_close\""),
            "{html}"
        );
        assert!(html.contains("<tr class=\"regressed\">"), "{html}");
        let xml = render_junit(&c);
        assert!(
            xml.contains("tests=\"2\" failures=\"1\" skipped=\"1\""),
            "{xml}"
        );
        assert!(
            xml.contains("<failure message=\"open_close +10.00%, Holm p = 0.000: regressed\""),
            "{xml}"
        );
        assert!(xml.contains("security_file_open +430 ns"), "{xml}");
    }

    #[test]
    fn single_samples_are_inconclusive_and_exit_3_only_when_asked() {
        let old = with_clean(sample_results(), &[5.0], "old");
        let new = with_clean(sample_results(), &[5.5], "new");
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        assert!(c
            .workloads
            .iter()
            .all(|w| w.verdict == Verdict::Inconclusive));
        assert_eq!(c.exit_code(FailOn::Regression), 0);
        assert!(c.inconclusive_warning(FailOn::Regression).is_some());
        assert_eq!(c.exit_code(FailOn::Inconclusive), 3);
        assert_eq!(c.exit_code(FailOn::Never), 0);
        assert!(render_text(&c).contains("Inconclusive: one run of one round on each side"));
    }

    #[test]
    fn files_of_a_side_are_pooled_per_workload() {
        let a = with_clean(sample_results(), &[5.0, 5.1], "a");
        let b = with_clean(sample_results(), &[5.2], "b");
        let pooled = pool(&[a, b]).unwrap();
        assert_eq!(
            pooled[0].1.clean,
            [vec![vec![5.0], vec![5.1]], vec![vec![5.2]]]
        );
        // Rows without per-sample values contribute their single figure once per file.
        assert_eq!(pooled[0].1.attribution[1].samples_ns_per_op, [400.0, 400.0]);
        let mut c = with_clean(sample_results(), &[1.0], "c");
        c.workloads[0].unit = Unit::MegabytesPerSecond;
        let err = pool(&[sample_results(), c]).unwrap_err();
        assert!(err.to_string().contains("open_close is in us"), "{err}");
    }

    /// Three boots a side, eleven tight samples each, the boots apart by more than the samples.
    fn boots(medians: &[f64], label: &str) -> Vec<Results> {
        medians
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let samples: Vec<f64> = (0..11).map(|k| m + (k as f64 - 5.0) * 0.01).collect();
                with_clean(sample_results(), &samples, &format!("{label}-{i}"))
            })
            .collect()
    }

    #[test]
    fn several_files_on_a_side_make_the_file_the_unit() {
        let (old, new) = (boots(&[5.0, 5.2, 4.9], "a"), boots(&[5.1, 5.3, 5.05], "b"));
        let c = compare(&old, &new, &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!(w.replication, Replication::File);
        assert_eq!((w.old.n, w.new.n), (3, 3));
        // scipy 1.10: ttest_ind([5.1, 5.3, 5.05], [5.0, 5.2, 4.9], equal_var=False).pvalue
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 0.37497320100311343).abs() < 1e-9, "{p}");
        // Pooling the 33 samples as independent would call the same data a regression.
        let pseudo = stats::welch(
            &stats::summarize(
                &old.iter()
                    .flat_map(|r| r.workloads[0].clean.clone())
                    .collect::<Vec<_>>(),
            )
            .unwrap(),
            &stats::summarize(
                &new.iter()
                    .flat_map(|r| r.workloads[0].clean.clone())
                    .collect::<Vec<_>>(),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(pseudo.p_value < 0.01, "{pseudo:?}");
        assert_ne!(w.verdict, Verdict::Regressed);
        let text = render_text(&c);
        assert!(text.contains("(n = 3 files)"), "{text}");
        assert!(text.contains("Unit of replication: the file"), "{text}");
    }

    #[test]
    fn one_file_a_side_keeps_the_sample_as_the_unit() {
        let old = with_clean(sample_results(), &[5.0, 5.02, 4.98], "old");
        let new = with_clean(sample_results(), &[5.5, 5.52, 5.48], "new");
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        assert_eq!(c.workloads[0].replication, Replication::Round);
        assert_eq!(c.workloads[0].old.n, 3);
        assert!(render_text(&c).contains("Unit of replication: the round"));
        // One file against three: the one is tested against the three's spread.
        let c = compare(
            &[with_clean(sample_results(), &[5.0, 5.02, 4.98], "old")],
            &boots(&[5.5, 5.6, 5.4], "b"),
            &Criteria::default(),
        )
        .unwrap();
        let w = &c.workloads[0];
        assert_eq!((w.replication, w.old.n, w.new.n), (Replication::File, 1, 3));
        assert_eq!(w.test, Some(TestKind::Prediction));
        // scipy: 2 * t.sf((5.5 - 5.0) / (0.1 * sqrt(1 + 1/3)), 2)
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 0.04941362421328279).abs() < 1e-9, "{p}");
    }

    #[test]
    fn imported_kernbench_groups_compare_run_by_run_as_scipy_does() {
        let log = "\
vanilla
815.80user 113.69system 2:04.36elapsed 747%CPU (0avgtext+0avgdata 0maxresident)k
816.10user 113.20system 2:04.12elapsed 748%CPU (0avgtext+0avgdata 0maxresident)k
815.20user 113.50system 2:04.80elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
816.40user 113.30system 2:04.50elapsed 746%CPU (0avgtext+0avgdata 0maxresident)k

[PATCH 01/10] Task watchers v2
817.00user 115.01system 2:05.00elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
818.30user 114.80system 2:05.40elapsed 744%CPU (0avgtext+0avgdata 0maxresident)k
817.10user 115.20system 2:04.90elapsed 746%CPU (0avgtext+0avgdata 0maxresident)k
817.90user 114.90system 2:05.62elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
";
        let groups = crate::import::time::parse(log, "kernbench.log").unwrap();
        let c = compare(&groups[..1], &groups[1..], &Criteria::default()).unwrap();
        let w = &c.workloads[0];
        assert_eq!((w.replication, w.old.n), (Replication::Round, 4));
        // scipy 1.10: ttest_ind(new, old, equal_var=False).pvalue of elapsed and user seconds.
        let p = w.change.unwrap().p_value.unwrap();
        assert!((p - 0.012585686641872386).abs() < 1e-9, "{p}");
        let user = w.extras.iter().find(|e| e.name == "user").unwrap();
        let p = user.change.unwrap().p_value.unwrap();
        assert!((p - 0.0062792195891754774).abs() < 1e-9, "{p}");
    }
}
