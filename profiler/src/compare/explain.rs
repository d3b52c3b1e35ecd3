//! Where an end-to-end change went: each attributed path's change per op with its interval
//! (from the rows' spread at the comparison's unit), and the residual the top-level paths
//! leave unexplained.
use std::collections::HashMap;

use super::{pool::RowRounds, ChangeAttribution, PathDelta};
use crate::{
    attribution::breakdown,
    results::{rows, AttributionRow, PathKind, Unit},
    stats::replication::{self, FileRounds, Unit as Replication},
    stats::{self, Summary},
};

/// One side's attribution: its rows merged over files, and each row's values per file, round
/// by round.
pub(super) struct Rows<'a> {
    pub merged: &'a [AttributionRow],
    /// In `merged`'s order.
    pub rounds: &'a [RowRounds],
}

impl Rows<'_> {
    /// Each merged row's observations at `unit` (rounds' medians, files' values) summarized
    /// once, with their floor: its figure's and its test's.
    fn summaries(&self, unit: Replication) -> Vec<Option<Summary>> {
        self.rounds
            .iter()
            .map(|r| floored_summary(&r.ns, unit))
            .collect()
    }

    /// Each merged row's ns per op: the mean of its observations, as an op's figure is; its
    /// own figure where it has none.
    fn figures(&self, summaries: &[Option<Summary>]) -> Vec<f64> {
        self.merged
            .iter()
            .zip(summaries)
            .map(|(row, s)| s.as_ref().map_or(rows::ns_per_op(row), |s| s.mean))
            .collect()
    }
}

/// A path by kind, name and the hook or task path it runs under.
type Key<'a> = (PathKind, &'a str, Option<&'a str>);

/// The change of each attributed path, and what the top-level paths leave unexplained.
pub(super) fn attribute_change(
    unit: Unit,
    (old, new): (&Summary, &Summary),
    (old_side, new_side): (Rows, Rows),
    replication: Replication,
) -> Option<ChangeAttribution> {
    let (old_rows, new_rows) = (old_side.merged, new_side.merged);
    if old_rows.is_empty() || new_rows.is_empty() {
        return None;
    }
    let total_ns = rows::op_ns(unit, new.mean)? - rows::op_ns(unit, old.mean)?;
    // Each path's figure is taken as the op's is, from the same observations as its test:
    // one preempted sample moves neither, and the interval stands around the figure printed.
    let unit_of_test = unpaired(replication);
    let (old_summaries, new_summaries) = (
        old_side.summaries(unit_of_test),
        new_side.summaries(unit_of_test),
    );
    let (old_ns, new_ns) = (
        old_side.figures(&old_summaries),
        new_side.figures(&new_summaries),
    );
    let (level, parts) = breakdown::change(total_ns, (old_rows, &old_ns), (new_rows, &new_ns))?;
    // A change is told by hooks where any was probed (the LSM functions under them), else by
    // the outermost paths; the breakdown's other parts follow them.
    let by_hooks = old_rows
        .iter()
        .chain(new_rows)
        .any(|r| r.kind == PathKind::Hook);
    let told_by = |kind: PathKind, parent: Option<&str>| match by_hooks {
        true => kind == PathKind::Hook && parent.is_none(),
        false => match level {
            breakdown::Level::Syscalls => kind == PathKind::Syscall,
            breakdown::Level::Hooks => kind == PathKind::TaskPath && parent.is_none(),
        },
    };
    // Each path's row on each side, by index: looked up, so many paths take linear time.
    let mut at: HashMap<Key, [Option<usize>; 2]> =
        HashMap::with_capacity(old_rows.len().max(new_rows.len()));
    let mut order = Vec::new();
    for (side, rows) in [old_rows, new_rows].into_iter().enumerate() {
        for (i, r) in rows.iter().enumerate() {
            let key = (r.kind, r.name.as_str(), r.parent.as_deref());
            at.entry(key).or_insert_with(|| {
                order.push(key);
                [None, None]
            })[side] = Some(i);
        }
    }
    let paths: Vec<PathDelta> = order
        .into_iter()
        .map(|key @ (kind, name, parent)| {
            let [o, n] = at[&key];
            let ns = |figures: &[f64], i: Option<usize>| i.map_or(0.0, |i| figures[i]);
            let (o_rounds, n_rounds) = (
                o.map(|i| &old_side.rounds[i]),
                n.map(|i| &new_side.rounds[i]),
            );
            let test = delta_test(
                o.zip(o_rounds)
                    .and_then(|(i, r)| Some((old_summaries[i].as_ref()?, r))),
                n.zip(n_rounds)
                    .and_then(|(i, r)| Some((new_summaries[i].as_ref()?, r))),
                replication,
            );
            let (o, n) = (ns(&old_ns, o), ns(&new_ns, n));
            let against_rest = against_rest_test(o_rounds, n_rounds, replication);
            let old_rest_ns = against_rest.map(|(_, rest)| rest);
            PathDelta {
                kind,
                name: name.to_string(),
                parent: parent.map(String::from),
                old_ns_per_op: o,
                new_ns_per_op: n,
                delta_ns_per_op: n - o,
                delta_interval: test.map(|t| t.interval(1.0 - stats::CONFIDENCE)),
                test,
                against_rest: against_rest.map(|(t, _)| t),
                old_rest_ns,
                starred: false,
                sampled_disagrees: false,
                top_level: told_by(kind, parent),
            }
        })
        .collect();
    Some(ChangeAttribution {
        total_ns,
        level,
        residual_ns: parts
            .iter()
            .find(|(p, _)| *p == breakdown::Part::Residual)
            .map_or(0.0, |(_, ns)| *ns),
        parts: parts.to_vec(),
        by_hooks,
        paths,
    })
}

/// The test of a path's change per op, from its values at the comparison's unit (a paired
/// run's rounds taken unpaired); None where a side has no repeated values or they do not vary
/// (no spread was measured, which is not a path known exactly).
fn delta_test(
    old: Option<(&Summary, &RowRounds)>,
    new: Option<(&Summary, &RowRounds)>,
    replication: Replication,
) -> Option<stats::DifferenceTest> {
    let unit = unpaired(replication);
    let ((old_s, old), (new_s, new)) = (old?, new?);
    stats::difference_test(old_s, new_s)
        .map(|t| t.widened(disturbed_run_variance(&old.ns, &new.ns, unit)))
        .filter(|t| t.std_error > 0.0)
}

/// The test of a path's change against the rest of the op (`RowRounds::against_rest`), priced
/// at the old side's rest: ns per op that the whole op running slower does not move, and that
/// reads a path's own growth in full while the rest stays; with the old side's rest (ns per
/// op). Same unit and conditions as `delta_test`.
fn against_rest_test(
    old: Option<&RowRounds>,
    new: Option<&RowRounds>,
    replication: Replication,
) -> Option<(stats::DifferenceTest, f64)> {
    let unit = unpaired(replication);
    let (old_row, new_row) = (old?, new?);
    let rest = stats::summarize(&observations(&old_row.rest, unit))?.mean;
    let (old, new) = (&old_row.against_rest, &new_row.against_rest);
    stats::difference_test(&floored_summary(old, unit)?, &floored_summary(new, unit)?)
        .map(|t| t.widened(disturbed_run_variance(old, new, unit)))
        .filter(|t| t.std_error > 0.0)
        .map(|t| (t.scaled(rest), rest))
}

/// Where one side is a single run predicted from the other's runs, and that run's rounds of
/// this path disagree far more than the other runs' do (`replication::disturbed_single_run`,
/// as the op's own test finds a disturbed run): the variance its value has by its own
/// rounds, which the prediction from the other side's spread leaves out. An episode on the
/// machine that slows one round of a run slows every path in it (an A/A series here:
/// lat_pipe's read at 3,396 ns in one round of four, 2,453-2,527 in the others, its clean op
/// up by as much, called +208 ns at q = 3e-4); a path that grew does so in every round. 0
/// otherwise.
fn disturbed_run_variance(old: &[FileRounds], new: &[FileRounds], unit: Replication) -> f64 {
    if unit != Replication::File {
        return 0.0;
    }
    let Some((side, _)) = replication::disturbed_single_run(old, new) else {
        return 0.0;
    };
    let run = if side == "new" { new } else { old };
    let mean = stats::mean(&observations(run, unit)).unwrap_or(0.0);
    replication::variance_floor(run, unit).variance * mean.powi(2)
}

/// The side's observations at `unit`, their spread at least what the level below says one
/// observation moves by (`replication::variance_floor`, as the op's own test takes it): three
/// runs whose read times agreed within 0.2% by chance, against rounds that spread by 15%,
/// called the next run's -18% a change at p = 6e-5.
fn floored_summary(files: &[FileRounds], unit: Replication) -> Option<stats::Summary> {
    let mut s = stats::summarize(&observations(files, unit))?;
    let floor = replication::variance_floor(files, unit).variance.sqrt() * s.mean.abs();
    if floor.is_finite() && s.n >= 2 {
        s.stdev = s.stdev.max(floor);
    }
    Some(s)
}

/// A paired run's rounds are taken unpaired.
fn unpaired(replication: Replication) -> Replication {
    match replication {
        Replication::Pair => Replication::Round,
        u => u,
    }
}

fn observations(files: &[FileRounds], unit: Replication) -> Vec<f64> {
    replication::observations(files, unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_run_with_one_disturbed_round_is_no_change_where_a_shift_in_every_round_is() {
        // lat_pipe's read in an A/A series: ten steady runs, and a run with one round slowed
        // by an episode on the machine (its clean op slowed as much) against one slower in
        // every round by less.
        let round = |m: f64| vec![m - 20.0, m, m + 20.0];
        let run = |medians: [f64; 4]| RowRounds {
            ns: vec![medians.map(round).to_vec()],
            against_rest: vec![],
            rest: vec![],
        };
        let base: Vec<FileRounds> = (0..10)
            .map(|i| {
                let m = 2500.0 + f64::from(i % 5) * 8.0;
                [m, m + 10.0, m - 10.0, m + 5.0].map(round).to_vec()
            })
            .collect();
        let old = RowRounds {
            ns: base,
            against_rest: vec![],
            rest: vec![],
        };
        let episode = run([3396.0, 2527.0, 2501.0, 2453.0]);
        let shifted = run([2630.0, 2640.0, 2620.0, 2635.0]);
        let summary = |r: &RowRounds| floored_summary(&r.ns, Replication::File).unwrap();
        let old_summary = summary(&old);
        let test = |new: &RowRounds| {
            let side = Some((&summary(new), new));
            delta_test(Some((&old_summary, &old)), side, Replication::File).unwrap()
        };
        let (episode, shifted) = (test(&episode), test(&shifted));
        assert!(episode.difference > shifted.difference);
        assert!(episode.p_value > 0.05, "{episode:?}");
        assert!(shifted.p_value < 1e-4, "{shifted:?}");
    }

    #[test]
    fn runs_that_agree_by_chance_are_no_surer_than_their_rounds() {
        // Three runs whose four round medians spread by about 15% but whose means agree within
        // 0.2% (lat_tcp's read in an A/A series), and a fourth run 18% lower.
        let run = |medians: [f64; 4]| medians.map(|m| vec![m * 0.99, m, m * 1.01]).to_vec();
        let old = [
            run([4300.0, 5300.0, 5300.0, 4600.0]),
            run([4600.0, 5300.0, 4300.0, 5300.0]),
            run([5200.0, 4100.0, 6300.0, 3900.0]),
        ];
        let new = [run([3900.0, 4400.0, 3800.0, 3850.0])];
        let raw = |files: &[FileRounds]| stats::summarize(&observations(files, Replication::File));
        let loose = stats::difference_test(&raw(&old).unwrap(), &raw(&new).unwrap()).unwrap();
        assert!(loose.p_value < 0.001, "{loose:?}");
        let floored = stats::difference_test(
            &floored_summary(&old, Replication::File).unwrap(),
            &floored_summary(&new, Replication::File).unwrap(),
        )
        .unwrap();
        assert!(floored.p_value > 0.05, "{floored:?}");
        assert_eq!(floored.difference, loose.difference);
    }
}
