//! The verdicts: each workload's observations at the highest level that was repeated
//! (round, file, or the pair of a paired run), the change and its test, Holm across the
//! workloads, the minimum detectable effect, and what the machine's state explains.
use super::{
    environment::{environment_differences, option_differences},
    explain::{attribute_change, Rows},
    facts, options, paths,
    pool::{pool, Pooled},
    sampled, speed, Comparison, DisturbedRun, ExtraComparison, MissedSlowdown, WorkloadComparison,
};
use crate::{
    results::{rows, Results, Unit},
    stats::replication::{self, Components, FileRounds, Floor, Unit as Replication},
    stats::{self, Change, Criteria, Summary, Verdict},
};

pub fn compare(
    old: &[Results],
    new: &[Results],
    criteria: &Criteria,
) -> anyhow::Result<Comparison> {
    let (old_pool, new_pool) = (pool(old)?, pool(new)?);
    let replicated = Replicated {
        paired: paired_variants(old, new),
        // Imported summaries: one file a side whose samples are each a run of the benchmark.
        samples_are_runs: old.iter().chain(new).all(Results::samples_are_runs),
    };
    let mut workloads = Vec::new();
    let mut tests = Vec::new();
    for (name, o) in &old_pool {
        let Some((_, n)) = new_pool.iter().find(|(m, _)| m == name) else {
            continue;
        };
        if let Some((workload, test)) = compare_workload(name, o, n, replicated)? {
            workloads.push(workload);
            tests.push(test);
        }
    }
    anyhow::ensure!(
        !workloads.is_empty(),
        "OLD and NEW have no workload with samples in common"
    );
    decide_family(&mut workloads, &tests, criteria);
    let options = option_differences(old, new);
    let mut environment = environment_differences(old, new);
    environment.extend(speed::check(&mut workloads));
    let load = super::load::load(old, new);
    for w in &mut workloads {
        w.verdict = verdict(w, criteria);
        w.option_note = options::note(&options, old, new, w);
        w.load_note = super::load::note(load.as_ref(), w);
    }
    let path_family = paths::decide(&mut workloads, criteria);
    Ok(Comparison {
        criteria: *criteria,
        old_labels: old.iter().map(|r| r.label.clone()).collect(),
        new_labels: new.iter().map(|r| r.label.clone()).collect(),
        largest_missed_slowdown: MissedSlowdown::of(&workloads),
        path_family,
        load,
        options,
        environment,
        call_counts: facts::call_counts(old, new),
        only_in_old: only_in(&old_pool, &new_pool),
        only_in_new: only_in(&new_pool, &old_pool),
        stacks: super::stacks::changes(old, new, &|name| {
            workloads
                .iter()
                .find(|w| w.name == name)
                .and_then(|w| w.sampled.as_ref())
                .map_or(1.0, |s| s.overdispersion)
        }),
        workloads,
    })
}

/// How the two sides were repeated, as far as every workload shares it.
#[derive(Clone, Copy)]
struct Replicated {
    /// The two sides are the variants of one paired run (`--versus`).
    paired: bool,
    samples_are_runs: bool,
}

/// One workload's comparison before the family's tests adjust it, and its own test; None
/// where a side has no observation at the level tested.
fn compare_workload(
    name: &str,
    o: &Pooled,
    n: &Pooled,
    replicated: Replicated,
) -> anyhow::Result<Option<(WorkloadComparison, Option<replication::Test>)>> {
    let replication = match replication::level(&o.clean).max(replication::level(&n.clean)) {
        _ if replicated.paired => Replication::Pair,
        Replication::Round if replicated.samples_are_runs => Replication::Run,
        level => level,
    };
    let (Some(old_o), Some(new_o)) = (
        observe(&o.clean, replication),
        observe(&n.clean, replication),
    ) else {
        return Ok(None);
    };
    let unit = o.unit.expect("set with the first sample");
    anyhow::ensure!(
        Some(unit) == n.unit,
        "workload {name} is in {} in OLD and {} in NEW",
        unit.symbol(),
        n.unit.map_or("?", Unit::symbol)
    );
    let disturbed_run = match replication {
        Replication::File => disturbed(&o.clean, &n.clean),
        _ => None,
    };
    let floors = floors(&o.clean, &n.clean, replication, disturbed_run);
    let test = tested(&old_o, &new_o, replication, floors);
    let (old_s, new_s) = (old_o.summary, new_o.summary);
    let components = replication::components(&[&o.clean, &n.clean]);
    let (attribution, sampled) = attributed(o, n, unit, (&old_s, &new_s), replication);
    let workload = WorkloadComparison {
        name: name.to_string(),
        unit,
        replication,
        test: test.map(|t| t.kind),
        change: change_at(&old_s, &new_s, test, 1.0 - stats::CONFIDENCE),
        attribution,
        sampled,
        machine_state: machine_state(name, &components),
        machine_speed_changed: false,
        disturbed_run,
        components,
        minimum_detectable_effect: None,
        floor_over_rounds: None,
        old: old_s,
        new: new_s,
        adjusted_p: None,
        verdict: Verdict::Inconclusive,
        extras: extras(o, n, replication),
        option_note: None,
        load_note: None,
        paths: Vec::new(),
        other_programs: super::other_programs::changes(&o.other_programs, &n.other_programs),
    };
    Ok(Some((workload, test)))
}

/// The extra metrics both sides recorded, each compared at the workload's level.
fn extras(o: &Pooled, n: &Pooled, replication: Replication) -> Vec<ExtraComparison> {
    o.extras
        .iter()
        .filter_map(|(e, eu, ov)| {
            let (_, _, nv) = n.extras.iter().find(|(m, _, _)| m == e)?;
            let (old, new) = (observe(ov, replication)?, observe(nv, replication)?);
            let floors = floors(ov, nv, replication, None);
            let test = tested(&old, &new, replication, floors);
            Some(ExtraComparison {
                name: e.clone(),
                unit: *eu,
                change: change_at(&old.summary, &new.summary, test, 1.0 - stats::CONFIDENCE),
                old: old.summary,
                new: new.summary,
            })
        })
        .collect()
}

/// The change split over the timed paths, and over the sampled ones (cross-checked against
/// the timed where both saw a path).
fn attributed(
    o: &Pooled,
    n: &Pooled,
    unit: Unit,
    (old_s, new_s): (&Summary, &Summary),
    replication: Replication,
) -> (
    Option<super::ChangeAttribution>,
    Option<super::SampledChange>,
) {
    let mut attribution = attribute_change(
        unit,
        (old_s, new_s),
        (
            Rows {
                merged: &o.attribution,
                rounds: &o.row_rounds,
            },
            Rows {
                merged: &n.attribution,
                rounds: &n.row_rounds,
            },
        ),
        replication,
    );
    let mut sampled = sampled::sampled_change(
        &o.profiles.iter().collect::<Vec<_>>(),
        &n.profiles.iter().collect::<Vec<_>>(),
        replication == Replication::File,
    );
    if let Some(s) = &mut sampled {
        s.whole_ns = rows::op_ns(unit, new_s.mean)
            .zip(rows::op_ns(unit, old_s.mean))
            .map(|(n, o)| n - o);
        if let Some(a) = &mut attribution {
            sampled::cross_check(s, &mut a.paths);
        }
    }
    (attribution, sampled)
}

/// Holm across the family of workloads that have a test; each interval at the level its step
/// tested it at, so interval and adjusted p agree; then what each could have found.
fn decide_family(
    workloads: &mut [WorkloadComparison],
    tests: &[Option<replication::Test>],
    criteria: &Criteria,
) {
    let tested_at: Vec<usize> = (0..workloads.len())
        .filter(|&i| tests[i].is_some())
        .collect();
    let p_values: Vec<f64> = tested_at
        .iter()
        .filter_map(|&i| tests[i].map(|t| t.ratio.p_value))
        .collect();
    let levels = stats::holm_levels(&p_values, criteria.alpha);
    for ((&i, adjusted), level) in tested_at.iter().zip(stats::holm(&p_values)).zip(levels) {
        let w = &mut workloads[i];
        w.adjusted_p = Some(adjusted);
        w.change = change_at(&w.old, &w.new, tests[i], level);
    }
    // A single regression among m workloads faces Holm's strictest step, alpha / m.
    let family = tested_at.len().max(1) as f64;
    for (w, test) in workloads.iter_mut().zip(tests) {
        w.minimum_detectable_effect = test
            .and_then(|t| {
                replication::minimum_detectable(
                    t.ratio.log_std_error,
                    t.ratio.df,
                    criteria.alpha / family,
                )
            })
            .map(|m| m.exp_m1().max(criteria.threshold));
        w.floor_over_rounds = floor_over_rounds(w).map(|f| f.max(criteria.threshold));
        w.verdict = verdict(w, criteria);
    }
}

/// The workloads of `pool` that `other` does not have.
fn only_in(pool: &[(String, Pooled)], other: &[(String, Pooled)]) -> Vec<String> {
    pool.iter()
        .filter(|(n, _)| !other.iter().any(|(m, _)| m == n))
        .map(|(n, _)| n.clone())
        .collect()
}

/// A workload's verdict from its interval; one whose interval had to make room for the
/// machine's own change (`speed`) and now holds 0 is inconclusive.
fn verdict(w: &WorkloadComparison, criteria: &Criteria) -> Verdict {
    let Some(change) = &w.change else {
        return Verdict::Inconclusive;
    };
    match stats::verdict(change, w.unit.higher_is_better(), criteria) {
        Verdict::NoChange if w.machine_speed_changed => Verdict::Inconclusive,
        v => v,
    }
}

/// The single run of a side judged by prediction, when its rounds disagree far more than the
/// other side's runs' do (`replication::disturbed_single_run`).
fn disturbed(old: &[FileRounds], new: &[FileRounds]) -> Option<DisturbedRun> {
    replication::disturbed_single_run(old, new).map(|(side, spread)| DisturbedRun { side, spread })
}

/// Each side's variance floor (`replication::variance_floor`): its own rounds' where both sides
/// repeat the unit. Where one side is a single run (a prediction), the other side's floor
/// pools the single run's rounds too (with no change they are alike, and more rounds make a
/// steadier floor), and the single run's own floor counts only when its rounds were disturbed:
/// then its value is no surer than they say.
fn floors(
    old: &[FileRounds],
    new: &[FileRounds],
    unit: Replication,
    disturbed: Option<DisturbedRun>,
) -> (Floor, Floor) {
    let own = |side: &[FileRounds]| replication::variance_floor(side, unit);
    let single = |side: &[FileRounds], name: &str| match disturbed {
        Some(d) if d.side == name => own(side),
        _ => Floor::default(),
    };
    let both = || own(&[old, new].concat());
    match (old.len(), new.len(), unit) {
        (k, 1, Replication::File) if k >= 2 => (both(), single(new, "new")),
        (1, k, Replication::File) if k >= 2 => (single(old, "old"), both()),
        _ => (own(old), own(new)),
    }
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

/// The test of new against old at `unit`, each observation's variance at least its side's
/// floor (None
/// without repetition on either side: samples of one round are not independent, so they
/// decide nothing).
fn tested(
    old: &Observed,
    new: &Observed,
    unit: Replication,
    floors: (Floor, Floor),
) -> Option<replication::Test> {
    match unit {
        Replication::Sample => None,
        Replication::Pair => replication::paired_test(&old.values, &new.values, floors),
        Replication::Round | Replication::Run | Replication::File => {
            replication::test(&old.summary, &new.summary, floors)
        }
    }
}

/// The change with its interval at level `alpha` where there is a test, the ratio of the means
/// alone where there is none (None when the old mean is 0).
fn change_at(
    old: &Summary,
    new: &Summary,
    test: Option<replication::Test>,
    alpha: f64,
) -> Option<Change> {
    match test {
        Some(t) => Some(Change::tested(&t.ratio, alpha)),
        None => (old.mean != 0.0).then(|| Change {
            relative: new.mean / old.mean - 1.0,
            ci: None,
            confidence: None,
            p_value: None,
        }),
    }
}

/// What `w`'s minimum detectable effect would be with unlimited rounds a run, at the file
/// level: scaled by the share of the files' spread (the side with more files) that is the
/// runs' own.
fn floor_over_rounds(w: &WorkloadComparison) -> Option<f64> {
    let (Replication::File, Some(mde), Some(between)) = (
        w.replication,
        w.minimum_detectable_effect,
        w.components.between_files,
    ) else {
        return None;
    };
    let files = if w.old.n >= w.new.n { &w.old } else { &w.new };
    replication::floor_over_rounds(mde, between, files.stdev / w.old.mean.abs())
}

/// What to say when rounds or files disagree far more than the samples of one round: the
/// spread is the machine's state (placement, caches, the filesystem), not the kernel's code.
fn machine_state(workload: &str, c: &Components) -> Option<String> {
    if !c.machine_state_dominates() {
        return None;
    }
    let cause = if workload.starts_with("fs_") {
        "the filesystem's state: on ext4 without a journal, inodes freed in the last minute are \
         skipped, so creates slow down after deletes (the manual's How it measures: a fresh \
         filesystem as TMPDIR)"
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
