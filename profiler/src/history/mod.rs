//! `hookprof history`: a series of results (nightly runs, a patch series, imported kernbench
//! logs) in order, and where each metric's level steps, with the size of the step, its
//! significance and, for hookprof results, the hooks whose cost moved at that point.
use std::{
    fmt::Write,
    path::{Path, PathBuf},
    process::ExitCode,
};

use serde::Serialize;

use crate::{
    compare::{self, attribution_lines, ChangeAttribution},
    report::text::num,
    results::{Results, Unit},
    stats::{self, Criteria},
};

pub mod edivisive;

/// Shuffles per permutation test: p-values down to 0.001.
const PERMUTATIONS: usize = 999;

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Results files, or directories of them; each file is one point of the series.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only this metric: a workload (`open_close`) or one of its further metrics (`build.user`).
    #[arg(long)]
    pub metric: Option<String>,
    /// Order of the points: the runs' start times (ties, such as imported files, by file name),
    /// file names, or as given on the command line.
    #[arg(long, value_enum, default_value_t = Order::Time)]
    pub order: Order,
    /// Family-wise significance level, shared (Bonferroni) by the metrics analysed.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    Time,
    Name,
    Given,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

#[derive(Debug, Serialize)]
pub struct History {
    pub method: &'static str,
    pub points: Vec<Point>,
    /// The level each metric's change points are tested at: alpha / metrics.
    pub alpha_per_metric: f64,
    pub permutations: usize,
    pub metrics: Vec<MetricHistory>,
}

#[derive(Debug, Serialize)]
pub struct Point {
    pub label: String,
    pub file: String,
    /// Unix time the run started (0 for imported results).
    pub started_at: u64,
}

#[derive(Debug, Serialize)]
pub struct MetricHistory {
    /// `workload` or `workload.extra`.
    pub metric: String,
    pub unit: Unit,
    /// Per point of the series: the median of that file's samples (None when it lacks the metric).
    pub values: Vec<Option<f64>>,
    pub steps: Vec<Step>,
}

#[derive(Debug, Serialize)]
pub struct Step {
    /// Index (in `History::points`) of the first point of the new level.
    pub at: usize,
    /// Mean of the per-point values over the level before and the level after.
    pub before: f64,
    pub after: f64,
    /// after / before - 1.
    pub relative: f64,
    pub p_value: f64,
    /// For a hookprof workload: which paths' costs moved between the two levels.
    pub attribution: Option<ChangeAttribution>,
}

pub fn execute(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.alpha > 0.0 && args.alpha < 1.0,
        "--alpha must be between 0 and 1, not {}",
        args.alpha
    );
    let files = ordered(load(&args.paths)?, args.order);
    let history = analyse(&files, args.metric.as_deref(), args.alpha)?;
    match args.format {
        Format::Text => print!("{}", render_text(&history)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&history)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// Every results file named or inside a named directory, with its path.
fn load(paths: &[PathBuf]) -> anyhow::Result<Vec<(PathBuf, Results)>> {
    let mut files = Vec::new();
    for path in paths {
        files.extend(crate::results::files_named(path)?);
    }
    files
        .into_iter()
        .map(|f| Ok((f.clone(), Results::load(&f)?)))
        .collect()
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn ordered(mut files: Vec<(PathBuf, Results)>, order: Order) -> Vec<(PathBuf, Results)> {
    match order {
        Order::Time => files.sort_by(|(pa, a), (pb, b)| {
            (a.environment.started_at, file_name(pa))
                .cmp(&(b.environment.started_at, file_name(pb)))
        }),
        Order::Name => files.sort_by_key(|(p, _)| file_name(p)),
        Order::Given => {}
    }
    files
}

/// One metric's value in one file: the median of its clean samples.
fn value(r: &Results, workload: &str, extra: Option<&str>) -> Option<(f64, Unit)> {
    let w = r.workload(workload)?;
    let (samples, unit) = match extra {
        None => (&w.clean, w.unit),
        Some(e) => {
            let m = w.extra.iter().find(|m| m.name == e)?;
            (&m.clean, m.unit)
        }
    };
    Some((stats::summarize(samples)?.median, unit))
}

/// Every metric of the series in first-seen order: workloads, then `workload.extra`.
fn metric_names(files: &[(PathBuf, Results)]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (_, r) in files {
        for w in &r.workloads {
            let own = std::iter::once(w.name.clone());
            let extras = w.extra.iter().map(|e| format!("{}.{}", w.name, e.name));
            for name in own.chain(extras) {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
    }
    names
}

pub fn analyse(
    files: &[(PathBuf, Results)],
    metric: Option<&str>,
    alpha: f64,
) -> anyhow::Result<History> {
    let all = metric_names(files);
    let chosen: Vec<String> = match metric {
        None => all,
        Some(m) if all.iter().any(|a| a == m) => vec![m.to_string()],
        Some(m) => anyhow::bail!(
            "--metric {m}: not in these results (they have: {})",
            all.join(", ")
        ),
    };
    let alpha_per_metric = alpha / chosen.len().max(1) as f64;
    let mut metrics = Vec::new();
    for name in chosen {
        let (workload, extra) = match name.split_once('.') {
            Some((w, e)) => (w, Some(e)),
            None => (name.as_str(), None),
        };
        let values: Vec<Option<(f64, Unit)>> = files
            .iter()
            .map(|(_, r)| value(r, workload, extra))
            .collect();
        let Some(unit) = values.iter().flatten().map(|(_, u)| *u).next() else {
            continue;
        };
        // The series skips points without the metric; indices map back to the points.
        let present: Vec<usize> = (0..values.len()).filter(|&i| values[i].is_some()).collect();
        let series: Vec<f64> = present
            .iter()
            .map(|&i| values[i].expect("present").0)
            .collect();
        let found = edivisive::change_points(&series, alpha_per_metric, PERMUTATIONS);
        let bounds: Vec<usize> = std::iter::once(0)
            .chain(found.iter().map(|c| c.index))
            .chain(std::iter::once(series.len()))
            .collect();
        let steps = found
            .iter()
            .enumerate()
            .map(|(s, c)| {
                let (lo, at, hi) = (bounds[s], bounds[s + 1], bounds[s + 2]);
                let mean = |part: &[f64]| part.iter().sum::<f64>() / part.len() as f64;
                let (before, after) = (mean(&series[lo..at]), mean(&series[at..hi]));
                let side = |range: std::ops::Range<usize>| -> Vec<Results> {
                    range.map(|i| files[present[i]].1.clone()).collect()
                };
                Step {
                    at: present[at],
                    before,
                    after,
                    relative: if before == 0.0 {
                        0.0
                    } else {
                        after / before - 1.0
                    },
                    p_value: c.p_value,
                    attribution: extra
                        .is_none()
                        .then(|| moved_paths(&side(lo..at), &side(at..hi), workload))
                        .flatten(),
                }
            })
            .collect();
        metrics.push(MetricHistory {
            metric: name,
            unit,
            values: values.iter().map(|v| v.map(|(x, _)| x)).collect(),
            steps,
        });
    }
    Ok(History {
        method: "E-Divisive means (Matteson & James 2014) on each file's median, \
                 permutation test",
        points: files
            .iter()
            .map(|(p, r)| Point {
                label: r.label.clone(),
                file: file_name(p),
                started_at: r.environment.started_at,
            })
            .collect(),
        alpha_per_metric,
        permutations: PERMUTATIONS,
        metrics,
    })
}

/// Where the workload's time moved between the level before and the level after.
fn moved_paths(before: &[Results], after: &[Results], workload: &str) -> Option<ChangeAttribution> {
    let c = compare::compare(before, after, &Criteria::default()).ok()?;
    c.workloads
        .into_iter()
        .find(|w| w.name == workload)?
        .attribution
}

fn format_p(p: f64) -> String {
    if p >= 0.01 {
        format!("{p:.2}")
    } else {
        format!("{p:.3}")
    }
}

pub fn render_text(h: &History) -> String {
    let mut out = format!("History of {} results, in this order:\n", h.points.len());
    for (i, p) in h.points.iter().enumerate() {
        let _ = writeln!(out, "  {:>3}  {}  ({})", i + 1, p.label, p.file);
    }
    let family = match h.metrics.len() {
        1 => String::new(),
        n => format!(" (Bonferroni over {n} metrics)"),
    };
    let _ = writeln!(
        out,
        "Change points: {}, {} shuffles, p < {}{family}; a level must hold for {} points.",
        h.method,
        h.permutations,
        format_p(h.alpha_per_metric),
        edivisive::MIN_SEGMENT
    );
    let quiet: Vec<&str> = h
        .metrics
        .iter()
        .filter(|m| m.steps.is_empty())
        .map(|m| m.metric.as_str())
        .collect();
    for m in h
        .metrics
        .iter()
        .filter(|m| !m.steps.is_empty() || h.metrics.len() == 1)
    {
        let u = m.unit.symbol();
        let values: Vec<String> = m
            .values
            .iter()
            .map(|v| v.map_or_else(|| "-".into(), num))
            .collect();
        let _ = writeln!(out, "\n{} ({u}): {}", m.metric, values.join(" "));
        if m.steps.is_empty() {
            let _ = writeln!(out, "  no change point");
        }
        for s in &m.steps {
            let p = &h.points[s.at];
            let _ = writeln!(
                out,
                "  step at {} ({}): {} {u} -> {} {u} ({:+.1}%), p = {}",
                s.at + 1,
                p.label,
                num(s.before),
                num(s.after),
                s.relative * 100.0,
                format_p(s.p_value)
            );
            if let Some(a) = &s.attribution {
                for line in attribution_lines(&m.metric, a) {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
    }
    if !quiet.is_empty() && h.metrics.len() > 1 {
        let _ = writeln!(out, "\nNo change point: {}", quiet.join(", "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        report::text::tests::{row, sample_results},
        results::PathKind,
    };

    /// Nightly runs: open_close near 5 us, then near 5.5 us from night 7 on, the extra 500 ns in
    /// security_file_open (apparmor_file_open under it).
    fn nights() -> Vec<(PathBuf, Results)> {
        const WOBBLE: [f64; 5] = [0.02, -0.03, 0.01, 0.04, -0.02];
        (0..12)
            .map(|night| {
                let mut r = sample_results();
                r.label = format!("night-{night}");
                // Out of order on purpose: --order time sorts them.
                r.environment.started_at = 1_000_000 + 86_400 * ((night * 5) % 12) as u64;
                let w = &mut r.workloads[0];
                let slow = (night * 5) % 12 >= 6;
                let level = if slow { 5.5 } else { 5.0 };
                w.clean = (0..5)
                    .map(|k| level + WOBBLE[(k + night) % 5] / 2.0)
                    .collect();
                if slow {
                    w.attribution[1] = row(PathKind::Hook, "security_file_open", None, 1.0, 900.0);
                    w.attribution[2] = row(
                        PathKind::Lsm,
                        "apparmor_file_open",
                        Some("security_file_open"),
                        1.0,
                        850.0,
                    );
                }
                (PathBuf::from(format!("n{night:02}.json")), r)
            })
            .collect()
    }

    #[test]
    fn a_step_in_a_nightly_series_is_found_and_attributed_to_its_hook() {
        let files = ordered(nights(), Order::Time);
        let h = analyse(&files, Some("open_close"), 0.05).unwrap();
        let m = &h.metrics[0];
        assert_eq!(m.steps.len(), 1, "{}", render_text(&h));
        let s = &m.steps[0];
        assert_eq!(s.at, 6);
        assert!((s.relative - 0.1).abs() < 0.01, "{}", s.relative);
        assert!(s.p_value < 0.01);
        let text = render_text(&h);
        assert!(
            text.contains(
                "open_close +500 ns: security_file_open +500 ns (apparmor_file_open +470 ns)"
            ),
            "{text}"
        );
        assert!(text.contains("step at 7 (night-"), "{text}");
    }

    #[test]
    fn an_unknown_metric_names_the_known_ones() {
        let err = analyse(&nights(), Some("nope"), 0.05)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--metric nope") && err.contains("build.user"),
            "{err}"
        );
        // Every metric at once: the flat ones report no step.
        let h = analyse(&nights(), None, 0.05).unwrap();
        assert!(h
            .metrics
            .iter()
            .any(|m| m.metric == "build" && m.steps.is_empty()));
    }
}
