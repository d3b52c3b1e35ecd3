//! `hookprof history`: a series of results (nightly runs, a patch series, imported kernbench
//! logs) in order, and where each metric's level steps, with the size of the step, its
//! significance and, for hookprof results, the hooks whose cost moved at that point. Each point
//! is valued from its own replicates (its rounds, else its samples); the scatter between points
//! is the noise a step must beat, and a metric without a step says which step it could have
//! found.
use std::{
    collections::HashMap,
    fmt::Write,
    path::{Path, PathBuf},
    process::ExitCode,
};

use serde::Serialize;

use crate::{
    compare::{self, attribution_lines, sampled_lines, ChangeAttribution, SampledChange},
    output::{self, Document, Format},
    report::{figures::format_p, text::num},
    results::{Results, Unit},
    stats::replication::{self, PointValue, Replicate},
    stats::Criteria,
};

pub mod edivisive;
mod export;
mod html;
pub mod noise;
mod split;

use self::{edivisive::Detectable, noise::Noise};

/// Shuffles per permutation test: p-values down to 0.001.
const PERMUTATIONS: usize = 999;
/// The longest series `points_needed` looks at (far beyond what any alpha > 0.001 needs).
const MAX_POINTS_NEEDED: usize = 64;

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Results files, directories of them, or selectors of stored runs (label:L,
    /// kernel:RELEASE, machine:ID, last:N, ...; see `hookprof runs`); each run is one point of
    /// the series.
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
    #[arg(long, default_value = "text", value_parser = Format::parser(History::FORMATS))]
    pub format: Format,
    #[command(flatten)]
    pub store: crate::store::StoreArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Order {
    Time,
    Name,
    Given,
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
    /// Per point of the series: the mean of that file's round medians, or the median of its
    /// samples when it records one round (None when it lacks the metric).
    pub values: Vec<Option<f64>>,
    /// What every point's value came from (None when the points differ).
    pub replicate: Option<Replicate>,
    /// Within and between points, around the levels between the steps (None without a level
    /// of two points).
    pub noise: Option<Noise>,
    pub sensitivity: Sensitivity,
    pub steps: Vec<Step>,
}

/// Which step the series could find: the smallest step in its middle that the method finds
/// in [`edivisive::POWER`] of series of this length with this noise (normal), at the metric's
/// alpha.
#[derive(Debug, Serialize)]
pub struct Sensitivity {
    /// Points with the metric.
    pub points: usize,
    /// The mean of those points: what relative steps are relative to.
    pub level: f64,
    /// In the metric's unit; None when the series is too short for any step, or its noise
    /// unknown.
    pub detectable_step: Option<f64>,
    /// detectable_step over the mean of the points.
    pub detectable_relative: Option<f64>,
    /// When the series is too short: the fewest points in which a step can be found at this
    /// alpha (None: none up to 64 points, the permutation test's p never goes below alpha)...
    pub points_needed: Option<usize>,
    /// ... and the step those points could find with this series' noise.
    pub step_with_points_needed: Option<f64>,
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
    /// Where both levels sampled stacks: how each path's share of the CPU time moved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<SampledChange>,
}

pub fn execute(args: &HistoryArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.alpha > 0.0 && args.alpha < 1.0,
        "--alpha must be between 0 and 1, not {}",
        args.alpha
    );
    let files = ordered(load(&args.paths, &args.store)?, args.order);
    let history = analyse(&files, args.metric.as_deref(), args.alpha)?;
    crate::stdio::print(output::render(&history, args.format)?)?;
    Ok(ExitCode::SUCCESS)
}

/// Every results file named or inside a named directory, and every stored run a selector
/// picks, with its path (`run:ID` for a stored run).
fn load(
    paths: &[PathBuf],
    store: &crate::store::StoreArgs,
) -> anyhow::Result<Vec<(PathBuf, Results)>> {
    let mut files = Vec::new();
    for path in paths {
        files.extend(crate::store::load(path, store)?);
    }
    Ok(files)
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

/// One metric's point in one file, from its clean samples' rounds.
fn value(r: &Results, workload: &str, extra: Option<&str>) -> Option<(PointValue, Unit)> {
    let w = r.workload(workload)?;
    let (samples, unit) = match extra {
        None => (&w.clean, w.unit),
        Some(e) => {
            let m = w.extra.iter().find(|m| m.name == e)?;
            (&m.clean, m.unit)
        }
    };
    Some((replication::point_value(&w.by_round(samples))?, unit))
}

/// The step a series of `points` could find, with `noise`, around `level`; `detectable` gives
/// the step in units of the noise for a length (memoised by the caller: it is simulated).
fn sensitivity(
    points: usize,
    noise: Option<&Noise>,
    level: f64,
    alpha: f64,
    detectable: &mut impl FnMut(usize) -> Detectable,
) -> Sensitivity {
    let sd = noise.map(Noise::sd);
    let scaled = |d: Detectable| match (d, sd) {
        (Detectable::Step(k), Some(sd)) => Some(k * sd),
        _ => None,
    };
    let detectable_step = scaled(detectable(points));
    let points_needed = match detectable(points) {
        Detectable::Step(_) => None,
        Detectable::TooShort => edivisive::points_needed(alpha, PERMUTATIONS, MAX_POINTS_NEEDED),
    };
    Sensitivity {
        points,
        level,
        detectable_step,
        detectable_relative: detectable_step
            .filter(|_| level != 0.0)
            .map(|s| s / level.abs()),
        points_needed,
        step_with_points_needed: points_needed.and_then(|m| scaled(detectable(m))),
    }
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
    let mut simulated: HashMap<usize, Detectable> = HashMap::new();
    let mut detectable = |n: usize| {
        *simulated
            .entry(n)
            .or_insert_with(|| edivisive::detectable_step(n, alpha_per_metric, PERMUTATIONS))
    };
    let metrics = chosen
        .into_iter()
        .filter_map(|name| metric_history(files, name, alpha_per_metric, &mut detectable))
        .collect();
    Ok(History {
        method: "E-Divisive means (Matteson & James 2014) on each file's value (the mean of \
                 its rounds' medians, or its samples' median), permutation test",
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

/// One metric's series over the files, its change points and what it could have found; None
/// where no file has it.
fn metric_history(
    files: &[(PathBuf, Results)],
    name: String,
    alpha_per_metric: f64,
    detectable: &mut impl FnMut(usize) -> Detectable,
) -> Option<MetricHistory> {
    let (workload, extra) = match name.split_once('.') {
        Some((w, e)) => (w, Some(e)),
        None => (name.as_str(), None),
    };
    let values: Vec<Option<(PointValue, Unit)>> = files
        .iter()
        .map(|(_, r)| value(r, workload, extra))
        .collect();
    let unit = values.iter().flatten().map(|(_, u)| *u).next()?;
    // The series skips points without the metric; indices map back to the points.
    let present: Vec<usize> = (0..values.len()).filter(|&i| values[i].is_some()).collect();
    let points: Vec<PointValue> = present
        .iter()
        .map(|&i| values[i].expect("present").0)
        .collect();
    let series: Vec<f64> = points.iter().map(|p| p.value).collect();
    let found = edivisive::change_points(&series, alpha_per_metric, PERMUTATIONS);
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(found.iter().map(|c| c.index))
        .chain(std::iter::once(series.len()))
        .collect();
    let series_of = Series {
        files,
        present: &present,
        values: &series,
        workload,
        extra,
    };
    let steps = found
        .iter()
        .enumerate()
        .map(|(s, c)| series_of.step(&bounds[s..s + 3], c.p_value))
        .collect();
    let noise = noise::noise(&points, &bounds);
    let level = series.iter().sum::<f64>() / series.len() as f64;
    Some(MetricHistory {
        unit,
        values: values.iter().map(|v| v.map(|(p, _)| p.value)).collect(),
        replicate: Some(points[0].replicate).filter(|r| points.iter().all(|p| p.replicate == *r)),
        sensitivity: sensitivity(
            series.len(),
            noise.as_ref(),
            level,
            alpha_per_metric,
            detectable,
        ),
        noise,
        steps,
        metric: name,
    })
}

/// A metric's values over the files that have it.
struct Series<'a> {
    files: &'a [(PathBuf, Results)],
    /// The index of the file each value is from.
    present: &'a [usize],
    values: &'a [f64],
    workload: &'a str,
    extra: Option<&'a str>,
}

impl Series<'_> {
    /// The step at `bounds[1]` between the segments `bounds[0]..bounds[1]` and
    /// `bounds[1]..bounds[2]`, with the paths that moved where the metric is the workload's own.
    fn step(&self, bounds: &[usize], p_value: f64) -> Step {
        let (lo, at, hi) = (bounds[0], bounds[1], bounds[2]);
        // Each value divided first: a sum of values near f64::MAX overflows.
        let mean = |part: &[f64]| part.iter().map(|v| v / part.len() as f64).sum::<f64>();
        let (before, after) = (mean(&self.values[lo..at]), mean(&self.values[at..hi]));
        let side = |range: std::ops::Range<usize>| -> Vec<Results> {
            range
                .map(|i| only_workload(&self.files[self.present[i]].1, self.workload))
                .collect()
        };
        let (attribution, sampled) = match self.extra {
            None => moved_paths(&side(lo..at), &side(at..hi), self.workload),
            Some(_) => (None, None),
        };
        Step {
            at: self.present[at],
            before,
            after,
            relative: if before == 0.0 {
                0.0
            } else {
                after / before - 1.0
            },
            p_value,
            attribution,
            sampled,
        }
    }
}

/// `r` with `workload` its only workload: all that a step's attribution compares (a copy of
/// every workload of a thousand points doubled history's memory and spent its time comparing
/// the others).
fn only_workload(r: &Results, workload: &str) -> Results {
    // Every field named, so a new one is a compile error here, not a silent omission.
    Results {
        schema_version: r.schema_version,
        label: r.label.clone(),
        complete: r.complete,
        source: r.source.clone(),
        environment: r.environment.clone(),
        options: r.options.clone(),
        probes: r.probes.clone(),
        calibration: r.calibration.clone(),
        lsm_programs: r.lsm_programs.clone(),
        syscall_injections: r.syscall_injections.clone(),
        pairing: r.pairing.clone(),
        workloads: r.workload(workload).into_iter().cloned().collect(),
    }
}

/// Where the workload's time moved between the level before and the level after: the timed
/// paths' costs, and the sampled paths' shares.
fn moved_paths(
    before: &[Results],
    after: &[Results],
    workload: &str,
) -> (Option<ChangeAttribution>, Option<SampledChange>) {
    let Ok(c) = compare::compare(before, after, &Criteria::default()) else {
        return (None, None);
    };
    match c.workloads.into_iter().find(|w| w.name == workload) {
        Some(w) => (w.attribution, w.sampled),
        None => (None, None),
    }
}

/// A significance level to three significant digits: 0.05, 0.0125, 0.00278.
fn format_alpha(alpha: f64) -> String {
    let decimals = (2.0 - alpha.log10().floor()).max(0.0) as usize;
    let text = format!("{alpha:.decimals$}");
    let text = text.trim_end_matches('0');
    text.trim_end_matches('.').to_string()
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
        format_alpha(h.alpha_per_metric),
        edivisive::MIN_SEGMENT
    );
    let quiet: Vec<&MetricHistory> = h.metrics.iter().filter(|m| m.steps.is_empty()).collect();
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
            let _ = writeln!(
                out,
                "  no change point: {}",
                could_find(m, h.alpha_per_metric)
            );
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
            for line in s.sampled.iter().flat_map(sampled_lines) {
                let _ = writeln!(out, "    {line}");
            }
        }
        if let Some(line) = noise_line(m) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !quiet.is_empty() && h.metrics.len() > 1 {
        let _ = writeln!(
            out,
            "\nNo change point in {} metric{}; what each could have found:",
            quiet.len(),
            if quiet.len() == 1 { "" } else { "s" }
        );
        for m in quiet {
            let _ = writeln!(out, "  {}: {}", m.metric, could_find(m, h.alpha_per_metric));
        }
    }
    out
}

/// `±0.33 us (6.5%)`.
fn step_size(step: f64, level: f64, unit: Unit) -> String {
    let relative = if level == 0.0 {
        String::new()
    } else {
        // Two decimals below 1%, where noise of a few hundredths of a percent is common.
        let percent = step / level.abs() * 100.0;
        let decimals = if percent < 1.0 { 2 } else { 1 };
        format!(" ({percent:.decimals$}%)")
    };
    format!("±{} {}{relative}", num(step), unit.symbol())
}

/// The noise a step must beat: between the points, and within one from its own replicates.
fn noise_line(m: &MetricHistory) -> Option<String> {
    let n = m.noise.as_ref()?;
    let level = m.sensitivity.level;
    let mut line = format!(
        "noise: {} between points (sd, {} df)",
        step_size(n.between_points_sd, level, m.unit).trim_start_matches('±'),
        n.df
    );
    if let Some(se) = n.within_point_se {
        let from = match m.replicate {
            Some(Replicate::Round) => "its rounds",
            Some(Replicate::Sample) => "its samples",
            None => "its rounds or samples",
        };
        let _ = write!(
            line,
            ", {} within a point (standard error from {from})",
            step_size(se, level, m.unit).trim_start_matches('±')
        );
    }
    Some(line)
}

/// Which step the series could have found, for a metric without a change point.
fn could_find(m: &MetricHistory, alpha: f64) -> String {
    let s = &m.sensitivity;
    let power = edivisive::POWER * 100.0;
    let points = |n: usize| format!("{n} point{}", if n == 1 { "" } else { "s" });
    match (s.detectable_step, s.points_needed) {
        (Some(step), _) => format!(
            "a step of {} or more in the middle of these {} would be found in {power:.0}% of \
             such series",
            step_size(step, s.level, m.unit),
            points(s.points)
        ),
        (None, Some(needed)) => {
            let mut text = format!(
                "{} cannot show a step at p < {} (a level must hold {} points, and the \
                 permutation test needs {needed} points in all)",
                points(s.points),
                format_alpha(alpha),
                edivisive::MIN_SEGMENT
            );
            let _ = match s.step_with_points_needed {
                Some(step) => write!(
                    text,
                    "; {needed} points with this noise would find a step of {} in {power:.0}% \
                     of such series",
                    step_size(step, s.level, m.unit)
                ),
                None => write!(
                    text,
                    "; the noise between points is unknown (no level of 2 points)"
                ),
            };
            text
        }
        (None, None) if m.noise.is_none() => {
            "the noise between points is unknown (no level of 2 points)".into()
        }
        (None, None) => format!(
            "no series of up to {MAX_POINTS_NEEDED} points shows a step at p < {} with {} \
             shuffles (p never goes below {}): analyse fewer metrics (--metric) or raise --alpha",
            format_alpha(alpha),
            PERMUTATIONS,
            format_alpha(1.0 / (PERMUTATIONS + 1) as f64)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        compare::sampled::tests::profile,
        results::fixtures::{row, sample_results},
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
                // Sampled too: the hook's share of the CPU time triples at the step.
                w.profile = Some(profile(2000, if slow { 300 } else { 100 }, level * 1000.0));
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
        // The sampled share beside it, pooled over each level's nights.
        let sampled = s.sampled.as_ref().expect("both levels sampled stacks");
        assert_eq!((sampled.old_samples, sampled.new_samples), (12_000, 12_000));
        assert!(
            text.contains("*hook security_file_open 5.0% -> 15.0% (+10.00 pp"),
            "{text}"
        );
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

    /// Ten nightly runs of open_close, three rounds of five samples each: samples agree within
    /// a round (0.2%), rounds within a run differ by up to 3%, runs by up to 4%, as issue-sized
    /// run-to-run noise does on a busy machine. `step` multiplies the last five runs.
    fn rounds_series(points: usize, step: f64) -> Vec<(PathBuf, Results)> {
        const RUN: [f64; 10] = [0.01, -0.04, 0.03, 0.0, -0.02, 0.04, -0.01, 0.02, -0.03, 0.0];
        const ROUND: [f64; 3] = [0.03, -0.02, 0.0];
        const SAMPLE: [f64; 5] = [0.002, -0.001, 0.0, 0.001, -0.002];
        (0..points)
            .map(|run| {
                let mut r = sample_results();
                r.label = format!("run-{run}");
                r.environment.started_at = 1_000_000 + 86_400 * run as u64;
                let level =
                    5.0 * (1.0 + RUN[run % 10]) * if run >= points / 2 { step } else { 1.0 };
                let w = &mut r.workloads[0];
                w.clean = (0..3)
                    .flat_map(|round| {
                        let round_level = level * (1.0 + ROUND[(round + run) % 3]);
                        SAMPLE.iter().map(move |s| round_level * (1.0 + s))
                    })
                    .collect();
                w.round_sizes = vec![5, 5, 5];
                (PathBuf::from(format!("r{run:02}.json")), r)
            })
            .collect()
    }

    #[test]
    fn a_noisy_flat_series_of_rounds_has_no_step_and_says_what_it_could_find() {
        let h = analyse(&rounds_series(10, 1.0), Some("open_close"), 0.05).unwrap();
        let m = &h.metrics[0];
        let text = render_text(&h);
        assert!(m.steps.is_empty(), "{text}");
        assert_eq!(m.replicate, Some(Replicate::Round));
        // Each point is the mean of its three round medians.
        assert!((m.values[0].unwrap() - 5.05 * (1.0 + 0.01 / 3.0)).abs() < 1e-9);
        let noise = m.noise.unwrap();
        assert_eq!(noise.df, 9);
        // The rounds' own spread (1.4% standard error) is less than the runs' (2.6%).
        assert!(noise.within_point_se.unwrap() < noise.between_points_sd);
        let step = m.sensitivity.detectable_relative.unwrap();
        let Detectable::Step(k) = edivisive::detectable_step(10, 0.05, PERMUTATIONS) else {
            panic!("10 points can show a step");
        };
        let sd = noise.between_points_sd / m.sensitivity.level;
        assert!((step - k * sd).abs() < 1e-12, "{step} vs {k} x {sd}");
        assert!(
            text.contains("no change point: a step of ±")
                && text.contains("or more in the middle of these 10 points would be found in 80%"),
            "{text}"
        );
        assert!(
            text.contains("within a point (standard error from its rounds)"),
            "{text}"
        );
    }

    #[test]
    fn a_twenty_percent_step_in_the_middle_of_the_same_noise_is_found() {
        let h = analyse(&rounds_series(10, 1.2), Some("open_close"), 0.05).unwrap();
        let m = &h.metrics[0];
        assert_eq!(m.steps.len(), 1, "{}", render_text(&h));
        assert_eq!(m.steps[0].at, 5);
        assert!(
            (m.steps[0].relative - 0.2).abs() < 0.03,
            "{}",
            m.steps[0].relative
        );
        // The noise is measured around each level, not across the step.
        assert!(m.noise.unwrap().between_points_sd < 0.05 * 6.0);
    }

    #[test]
    fn three_points_say_how_many_points_a_step_needs_and_which_they_could_find() {
        let h = analyse(&rounds_series(3, 1.0), Some("open_close"), 0.05).unwrap();
        let m = &h.metrics[0];
        let s = &m.sensitivity;
        assert_eq!(
            (s.points, s.detectable_step, s.points_needed),
            (3, None, Some(8))
        );
        let Detectable::Step(k) = edivisive::detectable_step(8, 0.05, PERMUTATIONS) else {
            panic!("8 points can show a step");
        };
        let sd = m.noise.unwrap().sd();
        assert!((s.step_with_points_needed.unwrap() - k * sd).abs() < 1e-12);
        let text = render_text(&h);
        assert!(
            text.contains(
                "no change point: 3 points cannot show a step at p < 0.05 (a level must hold 2 \
                 points, and the permutation test needs 8 points in all); 8 points with this \
                 noise would find a step of ±"
            ),
            "{text}"
        );
    }

    #[test]
    fn significance_levels_print_to_three_significant_digits() {
        assert_eq!(format_alpha(0.05), "0.05");
        assert_eq!(format_alpha(0.05 / 4.0), "0.0125");
        assert_eq!(format_alpha(0.05 / 18.0), "0.00278");
        assert_eq!(format_alpha(0.0005), "0.0005");
    }
}
