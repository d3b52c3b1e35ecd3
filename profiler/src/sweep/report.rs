//! What a sweep found: per workload, the op's value at each sweep value with its interval over
//! the rounds and the line through them; the same for each path (timed where a probe timed
//! it, else its sampled share of the op's CPU time), largest slope first. Printed as text,
//! markdown, JSON (every point) or an HTML page with a plot per workload.
use std::collections::BTreeMap;

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{
    fit::{self, Line},
    split::{self, PathKey, SlopeSplit, ValueFigures},
    Parameter, SweepSpec,
};
use crate::{
    results::{PathKind, Results, Unit, WorkloadResult},
    stats,
};

/// Paths a text report lists per workload (JSON and HTML hold them all).
pub const PATHS_SHOWN: usize = 8;

#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    /// `--sweep`'s parameter (`seccomp-filters`) and what one step of it is (`filter`).
    pub parameter: String,
    pub unit: String,
    pub values: Vec<u64>,
    /// What each value ran under (its policies and injections), as its results record them.
    pub variants: Vec<String>,
    pub rounds: usize,
    /// What the machine makes of the sweep (copies on every CPU), if anything.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub workloads: Vec<WorkloadSweep>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSweep {
    pub name: String,
    /// The op's unit in the points and the line: ns for every time per op, else the
    /// workload's own (MB/s, %).
    pub unit: String,
    pub op: Curve,
    /// Each path seen at any value, largest slope (by magnitude) first.
    pub paths: Vec<PathCurve>,
    /// The op's slope as the outermost paths' slopes plus a remainder (None: no path is
    /// outermost, or a line could not be fitted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub split: Option<SlopeSplit>,
    /// `--sweep copies`: how well throughput scales with the copies (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<Scaling>,
}

/// Throughput at a copy count against the fewest copies swept, per copy: 1.0 is perfect
/// scaling (each copy as fast as alone), 0.5 is each copy at half speed.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Scaling {
    pub copies: u64,
    pub efficiency: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathCurve {
    pub kind: PathKind,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// "timed" (probes timed its calls) or "sampled" (its share of the sampled stacks times
    /// the op's CPU time).
    pub method: &'static str,
    pub curve: Curve,
}

/// One quantity at each sweep value, and the line through it.
#[derive(Debug, Clone, Serialize)]
pub struct Curve {
    pub points: Vec<Point>,
    /// None where no line can be drawn (fewer than two values measured).
    pub line: Option<Line>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Point {
    pub x: u64,
    /// Mean over the rounds (each round's median for the op).
    pub value: f64,
    /// 95% interval of the mean over the rounds (None with one round), truncated at 0: a
    /// time or a rate is never below it (`truncated` says where the interval was cut).
    pub low: Option<f64>,
    pub high: Option<f64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Each round's value, in round order (empty where only the whole run's is known).
    pub rounds: Vec<f64>,
}

impl Sweep {
    /// The sweep that `files` (any order) are values of: the files of one `run --sweep`,
    /// each naming its value in its pairing. Two values or more; the others may be missing.
    pub fn of_files(files: Vec<Results>) -> anyhow::Result<Sweep> {
        let not_one = "the files are not the values of one run --sweep (give the files one \
                       such run wrote)";
        let Some(first) = files.first().and_then(|r| r.pairing.clone()) else {
            anyhow::bail!("{not_one}");
        };
        let given = first
            .versus_options
            .strip_prefix("--sweep ")
            .ok_or_else(|| anyhow::anyhow!("{not_one}"))?;
        let mut spec = SweepSpec::parse(given).map_err(anyhow::Error::msg)?;
        let value_of = |r: &Results| -> Option<u64> {
            let p = r.pairing.as_ref().filter(|p| p.run == first.run)?;
            spec.values
                .iter()
                .copied()
                .find(|&v| p.variant == spec.variant_name(v))
        };
        let mut at: Vec<(u64, Results)> = Vec::new();
        for r in files {
            let value = value_of(&r).ok_or_else(|| anyhow::anyhow!("{not_one}: {}", r.label))?;
            if at.iter().any(|(v, _)| *v == value) {
                anyhow::bail!("two files of value {}", spec.variant_name(value));
            }
            at.push((value, r));
        }
        spec.values.retain(|v| at.iter().any(|(x, _)| x == v));
        if spec.values.len() < 2 {
            anyhow::bail!("a sweep needs the files of two values or more");
        }
        at.sort_by_key(|(v, _)| spec.values.iter().position(|x| x == v));
        let results: Vec<Results> = at.into_iter().map(|(_, r)| r).collect();
        Ok(Sweep::of(&spec, &results))
    }

    /// The sweep over `variants`' results, one per value of `spec`, in its order.
    pub fn of(spec: &SweepSpec, variants: &[Results]) -> Sweep {
        let mut names: Vec<&str> = Vec::new();
        for w in variants.iter().flat_map(|r| &r.workloads) {
            if !names.contains(&w.name.as_str()) {
                names.push(&w.name);
            }
        }
        Sweep {
            parameter: spec.name(),
            unit: spec.unit().into(),
            values: spec.values.clone(),
            variants: variants.iter().map(described).collect(),
            rounds: variants
                .iter()
                .flat_map(|r| &r.workloads)
                .map(|w| w.round_sizes.len().max(1))
                .max()
                .unwrap_or(0),
            note: copies_note(spec, variants),
            workloads: names
                .into_iter()
                .filter_map(|name| workload(spec, variants, name))
                .collect(),
        }
    }
}

/// What a value's runners ran under: its policies (the same one stacked N times said once,
/// `8 x seccomp (...)`) and injections.
/// Copies on every CPU the run had also share their CPUs with hookprof and the rest of the
/// machine: a scaling loss there is not only the kernel's.
fn copies_note(spec: &SweepSpec, variants: &[Results]) -> Option<String> {
    let most = *spec.values.iter().max()?;
    let cpus = u64::from(variants.first()?.environment.cpus_allowed);
    (spec.parameter == Parameter::Copies && cpus > 0 && most >= cpus).then(|| {
        format!(
            "{most} copies on {cpus} CPUs: every CPU runs a copy, so the copies also wait for \
             the CPU time hookprof and the rest of the machine take; a scaling loss up to that \
             share is not the kernel's"
        )
    })
}

fn described(r: &Results) -> String {
    let o = &r.options;
    let mut parts: Vec<(usize, String)> = Vec::new();
    for summary in o.policy.iter().map(|p| p.summary.clone()) {
        match parts.last_mut() {
            Some((n, last)) if *last == summary => *n += 1,
            _ => parts.push((1, summary)),
        }
    }
    parts.extend(o.inject.iter().map(|i| (1, format!("inject {i}"))));
    if let Some(depth) = o.scratch_depth {
        parts.push((1, format!("files {depth} directories deeper")));
    }
    if r.parallel() > 1 {
        parts.push((1, format!("{} copies at once", r.parallel())));
    }
    if parts.is_empty() {
        return "nothing added".into();
    }
    parts
        .into_iter()
        .map(|(n, what)| match n {
            1 => what,
            n => format!("{n} x {what}"),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The workload's curves, where it was measured at two values or more.
fn workload(spec: &SweepSpec, variants: &[Results], name: &str) -> Option<WorkloadSweep> {
    let at: Vec<(u64, &WorkloadResult)> = spec
        .values
        .iter()
        .zip(variants)
        .filter_map(|(&x, r)| Some((x, r.workload(name)?)))
        .filter(|(_, w)| w.failure.is_none() && !w.clean.is_empty())
        .collect();
    if at.len() < 2 {
        return None;
    }
    let unit = at[0].1.unit;
    let scale = ns_per(unit);
    let op: Vec<(u64, Vec<f64>)> = at
        .iter()
        .map(|(x, w)| {
            let rounds = crate::stats::replication::round_medians(&w.by_round(&w.clean));
            (*x, rounds.iter().map(|v| v * scale).collect())
        })
        .collect();
    // Each value's paths, read once.
    let values: Vec<PathValues> = at.iter().map(|(x, w)| (*x, w, path_values(w))).collect();
    let mut keys: Vec<&PathKey> = Vec::new();
    for (_, _, paths) in &values {
        for key in paths.keys() {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    let mut paths: Vec<PathCurve> = keys
        .into_iter()
        .map(|key| path_curve(&values, key))
        .collect();
    paths.sort_by(|a, b| magnitude(b).total_cmp(&magnitude(a)));
    let figures: Vec<ValueFigures> = op
        .iter()
        .zip(&values)
        .map(|((x, rounds), (_, _, paths))| ValueFigures {
            x: *x,
            op: rounds,
            paths: paths.iter().map(|(k, (_, r))| (k, r.as_slice())).collect(),
        })
        .collect();
    // Paths are ns per op: a split of a rate or a percentage would add unlike figures.
    let split = (scale != 1.0 || unit == Unit::Nanoseconds)
        .then(|| split::split(&figures))
        .flatten();
    let op = curve(&op);
    let scaling = match spec.parameter {
        Parameter::Copies => scaling(&op, unit.higher_is_better()),
        _ => Vec::new(),
    };
    Some(WorkloadSweep {
        name: name.into(),
        unit: if scale == 1.0 { unit.symbol() } else { "ns" }.into(),
        op,
        paths,
        split,
        scaling,
    })
}

/// Per copy count, throughput per copy against the fewest copies': a latency's copies each
/// see the mean latency, a bandwidth is summed over them.
fn scaling(op: &Curve, summed: bool) -> Vec<Scaling> {
    let Some(fewest) = op.points.iter().min_by_key(|p| p.x) else {
        return Vec::new();
    };
    let per_copy = |p: &Point| match summed {
        true => p.value / p.x as f64,
        false => 1.0 / p.value,
    };
    op.points
        .iter()
        .map(|p| Scaling {
            copies: p.x,
            efficiency: per_copy(p) / per_copy(fewest),
        })
        .collect()
}

fn magnitude(p: &PathCurve) -> f64 {
    p.curve.line.map_or(0.0, |l| l.slope.abs())
}

/// ns in one of `unit` where it is a time per op (1 otherwise: the curve keeps the unit).
fn ns_per(unit: Unit) -> f64 {
    match unit {
        Unit::Microseconds => 1e3,
        Unit::Seconds => 1e9,
        Unit::Nanoseconds | Unit::MegabytesPerSecond | Unit::Percent => 1.0,
    }
}

/// A sweep value, its workload's results and their paths' values (`path_values`).
type PathValues<'a> = (
    u64,
    &'a &'a WorkloadResult,
    BTreeMap<PathKey, (&'static str, Vec<f64>)>,
);

/// One path's value at each sweep value: 0 where the workload ran without it being seen.
fn path_curve(values: &[PathValues], key: &PathKey) -> PathCurve {
    let mut method = "sampled";
    let points: Vec<(u64, Vec<f64>)> = values
        .iter()
        .map(|(x, w, paths)| match paths.get(key) {
            Some((m, rounds)) => {
                if *m == "timed" {
                    method = "timed";
                }
                (*x, rounds.clone())
            }
            None => (*x, vec![0.0; w.round_sizes.len().max(1)]),
        })
        .collect();
    let (kind, name, parent) = key.clone();
    PathCurve {
        kind,
        name,
        parent,
        method,
        curve: curve(&points),
    }
}

/// Each path's ns per op, round by round where the file keeps rounds (else one value): timed
/// rows (attribution) first, then what only the sampled stacks saw.
fn path_values(w: &WorkloadResult) -> BTreeMap<PathKey, (&'static str, Vec<f64>)> {
    let mut out = BTreeMap::new();
    for row in &w.attribution {
        let correction = if row.ns_per_op > 0.0 {
            row.corrected_ns_per_op / row.ns_per_op
        } else {
            1.0
        };
        let per_sample = row.samples_ns_per_op.len();
        let rounds: Vec<f64> = if per_sample > 0 && per_sample == w.probed.len() {
            w.by_round(&row.samples_ns_per_op)
                .iter()
                .map(|r| stats::mean(r).unwrap_or(0.0) * correction)
                .collect()
        } else {
            vec![row.corrected_ns_per_op]
        };
        let key = (row.kind, row.name.clone(), row.parent.clone());
        out.insert(key, ("timed", rounds));
    }
    if let Some(profile) = &w.profile {
        for p in &profile.paths {
            let key = (p.kind, p.name.clone(), p.parent.clone());
            if out.contains_key(&key) {
                continue;
            }
            let own_ns = if p.inclusive_share > 0.0 {
                p.ns_per_op / p.inclusive_share
            } else {
                0.0
            };
            let rounds: Vec<f64> = if p.round_samples.len() == profile.round_samples.len()
                && !p.round_samples.is_empty()
            {
                p.round_samples
                    .iter()
                    .zip(&profile.round_samples)
                    .map(|(&k, &n)| {
                        if n == 0 {
                            0.0
                        } else {
                            k as f64 / n as f64 * own_ns
                        }
                    })
                    .collect()
            } else {
                vec![p.ns_per_op]
            };
            out.insert(key, ("sampled", rounds));
        }
    }
    out
}

/// The points and the line (`fit::through`).
fn curve(values: &[(u64, Vec<f64>)]) -> Curve {
    Curve {
        points: values.iter().map(|(x, r)| point(*x, r)).collect(),
        line: fit::through(values),
    }
}

fn point(x: u64, rounds: &[f64]) -> Point {
    let value = stats::mean(rounds).unwrap_or(0.0);
    let half = (rounds.len() > 1)
        .then(|| {
            let n = rounds.len() as f64;
            let sd = (rounds.iter().map(|v| (v - value).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
            let t = StudentsT::new(0.0, 1.0, n - 1.0).ok()?.inverse_cdf(0.975);
            Some(t * sd / n.sqrt())
        })
        .flatten();
    let low = half.map(|h| value - h);
    Point {
        x,
        value,
        low: low.map(|l| l.max(0.0)),
        high: half.map(|h| value + h),
        truncated: low.is_some_and(|l| l < 0.0),
        rounds: if rounds.len() > 1 {
            rounds.to_vec()
        } else {
            Vec::new()
        },
    }
}
