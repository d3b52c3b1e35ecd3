//! One side of a comparison pooled per workload: each file's clean samples (and extra
//! metrics) kept round by round, its attribution rows merged.
// A path's row by its key, hashed fast: a compare of 100k paths looks each up per file.
use foldhash::HashMap;

use crate::{
    results::{
        rows, AttributionRow, OtherProgramRuns, PathKind, Results, StackProfile, Unit,
        WorkloadResult,
    },
    stats::replication::FileRounds,
};

/// A path of a workload: its kind, name and the hook or task path it runs under, borrowed
/// from the files.
type PathKey<'a> = (PathKind, &'a str, Option<&'a str>);

/// One workload's samples from every file of a side, kept per file.
#[derive(Debug, Default)]
pub(super) struct Pooled<'a> {
    pub unit: Option<Unit>,
    /// The clean samples of each file that has any, round by round.
    pub clean: Vec<FileRounds>,
    /// Further metrics, their samples per file, round by round.
    pub extras: Vec<(String, Unit, Vec<FileRounds>)>,
    /// Rows merged by (kind, name, parent), their per-sample values concatenated.
    pub attribution: Vec<AttributionRow>,
    /// Each merged row's per-sample values per file, round by round (in `attribution`'s
    /// order): the spread its change's interval stands on.
    pub row_rounds: Vec<RowRounds>,
    /// Where each path's merged row is in `attribution`: a file of many rows is merged in
    /// linear time, not by a scan of the rows merged so far.
    row_at: HashMap<PathKey<'a>, usize>,
    /// Each file's sampled stacks, where it has them.
    pub profiles: Vec<StackProfile>,
    /// Other tools' BPF programs, their runs summed over the files (`other_programs`).
    pub other_programs: Vec<OtherProgramRuns>,
}

/// A row's values per file, round by round.
#[derive(Debug, Default)]
pub(super) struct RowRounds {
    /// Its ns per op in each probed sample.
    pub ns: Vec<FileRounds>,
    /// In each probed sample, its ns per op over the rest of that sample's op (the op less
    /// the path): a ratio inside one sample, which a machine that runs the whole op slower
    /// does not move. Files whose samples cannot give it (no per-sample values, an op that
    /// is not a time) are left out.
    pub against_rest: Vec<FileRounds>,
    /// The rest of the op (ns) in the same samples, which prices a change of that ratio.
    pub rest: Vec<FileRounds>,
}

/// Workloads in first-seen order with their pooled samples.
pub(super) fn pool(side: &[Results]) -> anyhow::Result<Vec<(String, Pooled<'_>)>> {
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
            p.profiles.extend(w.profile.clone());
            for run in &w.other_programs {
                super::other_programs::merge(&mut p.other_programs, run);
            }
            p.row_at.reserve(w.attribution.len());
            for row in &w.attribution {
                let one = [row.ns_per_op];
                let samples: &[f64] = if row.samples_ns_per_op.is_empty() {
                    &one
                } else {
                    &row.samples_ns_per_op
                };
                let key = (row.kind, row.name.as_str(), row.parent.as_deref());
                let at = match p.row_at.get(&key) {
                    Some(&at) => {
                        p.attribution[at]
                            .samples_ns_per_op
                            .extend_from_slice(samples);
                        at
                    }
                    None => {
                        p.row_at.insert(key, p.attribution.len());
                        let mut merged = row.clone();
                        if merged.samples_ns_per_op.is_empty() {
                            merged.samples_ns_per_op = samples.to_vec();
                        }
                        p.attribution.push(merged);
                        p.row_rounds.push(RowRounds::default());
                        p.attribution.len() - 1
                    }
                };
                let kept = &mut p.row_rounds[at];
                kept.ns.push(rounds_of(r, w, samples));
                if let Some(rest) = rest_of_op(w, row) {
                    let against: Vec<f64> = row
                        .samples_ns_per_op
                        .iter()
                        .zip(&rest)
                        .map(|(path, rest)| path / rest)
                        .collect();
                    kept.against_rest.push(rounds_of(r, w, &against));
                    kept.rest.push(rounds_of(r, w, &rest));
                }
            }
        }
    }
    Ok(pooled)
}

/// The rest of each probed sample's op, ns: the op less `row`'s ns per op in that sample;
/// None where a sample has no such figure or leaves no rest.
fn rest_of_op(w: &WorkloadResult, row: &AttributionRow) -> Option<Vec<f64>> {
    if row.samples_ns_per_op.len() != w.probed.len() || w.probed.is_empty() {
        return None;
    }
    w.probed
        .iter()
        .zip(&row.samples_ns_per_op)
        .map(|(&op, path)| {
            let rest = rows::op_ns(w.unit, op)? - path;
            (rest > 0.0).then_some(rest)
        })
        .collect()
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
