//! `hookprof compare OLD NEW`: per workload, did the clean metric change (Welch, Holm-adjusted
//! across workloads, a minimum effect size), and which hooks, LSMs, task paths and syscalls the
//! change went into.
use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    process::ExitCode,
};

use anyhow::Context;
use serde::Serialize;

use crate::{
    attribution::{self, Level},
    results::{AttributionRow, PathKind, Results, Unit},
    stats::{self, Change, Criteria, Summary, Verdict},
};

mod render;
pub use render::{attribution_lines, render_markdown, render_text};

#[derive(clap::Args, Debug)]
#[command(
    after_help = "Exit codes:\n  0  no significant regression\n  1  at least one \
workload regressed (never with --fail-on never)\n  2  bad input, or every comparison \
inconclusive"
)]
pub struct CompareArgs {
    /// The baseline: a results file, or a directory whose *.json files are pooled per workload.
    pub old: PathBuf,
    /// The candidate: a results file or a directory of them.
    pub new: PathBuf,
    /// Significance level for the Holm-adjusted p-values.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Smallest change that counts, in percent of the old mean.
    #[arg(long, default_value_t = 1.0)]
    pub threshold: f64,
    /// Whether a regression makes the exit code 1.
    #[arg(long, value_enum, default_value_t = FailOn::Regression)]
    pub fail_on: FailOn,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FailOn {
    Regression,
    Never,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    /// GitHub-flavoured markdown, e.g. for a CI step summary.
    Markdown,
    Json,
}

pub fn execute(args: &CompareArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.alpha > 0.0 && args.alpha < 1.0,
        "--alpha must be between 0 and 1, not {}",
        args.alpha
    );
    anyhow::ensure!(
        args.threshold >= 0.0 && args.threshold.is_finite(),
        "--threshold must be a percentage >= 0, not {}",
        args.threshold
    );
    let criteria = Criteria {
        alpha: args.alpha,
        threshold: args.threshold / 100.0,
    };
    let old = load_side(&args.old)?;
    let new = load_side(&args.new)?;
    let comparison = compare(&old, &new, &criteria)?;
    let out = match args.format {
        Format::Text => render_text(&comparison),
        Format::Markdown => render_markdown(&comparison),
        Format::Json => serde_json::to_string_pretty(&comparison)? + "\n",
    };
    print!("{out}");
    Ok(ExitCode::from(comparison.exit_code(args.fail_on)))
}

/// The results files of one side: the file itself, or every *.json in the directory.
pub fn load_side(path: &Path) -> anyhow::Result<Vec<Results>> {
    let shown = path.display();
    if !path.is_dir() {
        return Ok(vec![Results::load(path)?]);
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("{shown}: cannot read directory"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    anyhow::ensure!(!files.is_empty(), "{shown}: no results files (*.json)");
    files
        .iter()
        .map(|f| Results::load(f).map_err(anyhow::Error::from))
        .collect()
}

/// One workload's samples from every file of a side.
#[derive(Debug, Default)]
struct Pooled {
    unit: Option<Unit>,
    clean: Vec<f64>,
    extras: Vec<(String, Unit, Vec<f64>)>,
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
            p.clean.extend(&w.clean);
            for e in &w.extra {
                match p.extras.iter_mut().find(|(n, _, _)| *n == e.name) {
                    Some((_, _, v)) => v.extend(&e.clean),
                    None => p.extras.push((e.name.clone(), e.unit, e.clean.clone())),
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

#[derive(Debug, Serialize)]
pub struct Comparison {
    pub criteria: Criteria,
    pub old_labels: Vec<String>,
    pub new_labels: Vec<String>,
    /// Environment facts that differ between the sides.
    pub environment: Vec<EnvironmentDifference>,
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
    pub old: Summary,
    pub new: Summary,
    /// None when the old mean is 0 (no relative change).
    pub change: Option<Change>,
    /// Holm-adjusted over every workload of the comparison with a p-value.
    pub adjusted_p: Option<f64>,
    pub verdict: Verdict,
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

    /// 1 on a regression (unless told never to fail), 2 when nothing could be decided, else 0.
    pub fn exit_code(&self, fail_on: FailOn) -> u8 {
        if fail_on == FailOn::Regression && self.count(Verdict::Regressed) > 0 {
            1
        } else if self.count(Verdict::Inconclusive) == self.workloads.len() {
            2
        } else {
            0
        }
    }
}

pub fn compare(
    old: &[Results],
    new: &[Results],
    criteria: &Criteria,
) -> anyhow::Result<Comparison> {
    let (old_pool, new_pool) = (pool(old)?, pool(new)?);
    let mut workloads = Vec::new();
    for (name, o) in &old_pool {
        let Some((_, n)) = new_pool.iter().find(|(m, _)| m == name) else {
            continue;
        };
        let (Some(old_s), Some(new_s)) = (stats::summarize(&o.clean), stats::summarize(&n.clean))
        else {
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
                let (old, new) = (stats::summarize(ov)?, stats::summarize(nv)?);
                Some(ExtraComparison {
                    name: e.clone(),
                    unit: *eu,
                    change: stats::relative_change(&old, &new),
                    old,
                    new,
                })
            })
            .collect();
        workloads.push(WorkloadComparison {
            name: name.clone(),
            unit,
            change: stats::relative_change(&old_s, &new_s),
            attribution: attribute_change(unit, &old_s, &new_s, &o.attribution, &n.attribution),
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
    for w in &mut workloads {
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
    Ok(Comparison {
        criteria: *criteria,
        old_labels: old.iter().map(|r| r.label.clone()).collect(),
        new_labels: new.iter().map(|r| r.label.clone()).collect(),
        environment: environment_differences(old, new),
        only_in_old: names(&old_pool, &new_pool),
        only_in_new: names(&new_pool, &old_pool),
        workloads,
    })
}

fn environment_differences(old: &[Results], new: &[Results]) -> Vec<EnvironmentDifference> {
    type Field = (&'static str, fn(&Results) -> String);
    let fields: [Field; 4] = [
        ("kernel", |r| r.environment.kernel_release.clone()),
        ("CPU", |r| r.environment.cpu_model.clone()),
        ("LSMs", |r| r.environment.active_lsms.join(",")),
        ("lockdown", |r| r.environment.lockdown.clone()),
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
    let total_ns = attribution::op_ns(unit, new.mean)? - attribution::op_ns(unit, old.mean)?;
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
            let ns = attribution::ns_per_op(r);
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

    fn with_clean(mut r: Results, clean: &[f64], label: &str) -> Results {
        r.label = label.into();
        r.workloads[0].clean = clean.to_vec();
        r
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
        assert_eq!(c.exit_code(FailOn::Never), 0);
        let md = render_markdown(&c);
        assert!(
            md.contains("| open_close | 5.000 us | 5.500 us | +10.00% ["),
            "{md}"
        );
        assert!(md.contains("| **regressed** |"), "{md}");
    }

    #[test]
    fn single_samples_are_inconclusive_and_exit_2() {
        let old = with_clean(sample_results(), &[5.0], "old");
        let new = with_clean(sample_results(), &[5.5], "new");
        let c = compare(&[old], &[new], &Criteria::default()).unwrap();
        assert!(c
            .workloads
            .iter()
            .all(|w| w.verdict == Verdict::Inconclusive));
        assert_eq!(c.exit_code(FailOn::Regression), 2);
        assert!(render_text(&c).contains("Inconclusive: fewer than 2 samples on a side."));
    }

    #[test]
    fn files_of_a_side_are_pooled_per_workload() {
        let a = with_clean(sample_results(), &[5.0, 5.1], "a");
        let b = with_clean(sample_results(), &[5.2], "b");
        let pooled = pool(&[a, b]).unwrap();
        assert_eq!(pooled[0].1.clean, [5.0, 5.1, 5.2]);
        // Rows without per-sample values contribute their single figure once per file.
        assert_eq!(pooled[0].1.attribution[1].samples_ns_per_op, [400.0, 400.0]);
        let mut c = with_clean(sample_results(), &[1.0], "c");
        c.workloads[0].unit = Unit::MegabytesPerSecond;
        let err = pool(&[sample_results(), c]).unwrap_err();
        assert!(err.to_string().contains("open_close is in us"), "{err}");
    }
}
