//! The comparison as text (criterion-style change lines) and as markdown (a CI step summary).
use std::fmt::Write;

use super::{
    path_text, ChangeAttribution, Comparison, EnvironmentDifference, PathDelta, SampledChange,
    ShareInterval, WorkloadComparison,
};
use crate::{
    report::figures::{format_p, percent, signed_percent, Scale},
    results::{PathKind, Unit},
    stats::replication::{TestKind, Unit as Replication},
    stats::{Criteria, Summary, Verdict},
};

fn signed_ns(v: f64) -> String {
    // Rounding noise of pooled means must not print as "-0.0 ns".
    let v = if v.abs() < 0.05 { 0.0 } else { v };
    if v.abs() >= 10.0 {
        format!("{v:+.0} ns")
    } else {
        format!("{v:+.1} ns")
    }
}

/// Largest change first.
fn by_size(mut paths: Vec<&PathDelta>) -> Vec<&PathDelta> {
    paths.sort_by(|x, y| y.delta_ns_per_op.abs().total_cmp(&x.delta_ns_per_op.abs()));
    paths
}

/// Paths shown per line before "and N more".
const SHOWN_PATHS: usize = 5;

/// `open_close +512 ns: security_file_open +430 ns (apparmor_file_open +410 ns), syscalls'
/// own +20 ns, residual +62 ns` (what it names adds up to the change), and a second line for
/// the syscalls and task paths around those hooks.
pub fn attribution_lines(name: &str, a: &ChangeAttribution) -> Vec<String> {
    let top = by_size(a.paths.iter().filter(|p| p.top_level).collect());
    let mut parts: Vec<String> = top
        .iter()
        .take(SHOWN_PATHS)
        .map(|p| {
            let lsms: Vec<String> = by_size(
                a.paths
                    .iter()
                    .filter(|c| c.kind == PathKind::Lsm && c.parent.as_ref() == Some(&p.name))
                    .collect(),
            )
            .iter()
            .map(|c| format!("{} {}", c.name, signed_ns(c.delta_ns_per_op)))
            .collect();
            let mut part = format!("{} {}", p.name, signed_ns(p.delta_ns_per_op));
            if let (true, Some(interval)) = (p.sampled_disagrees, p.delta_interval) {
                let _ = write!(
                    part,
                    " {} (! the sampled stacks disagree)",
                    ns_interval(interval)
                );
            }
            if !lsms.is_empty() {
                let _ = write!(part, " ({})", lsms.join(", "));
            }
            part
        })
        .collect();
    if top.len() > SHOWN_PATHS {
        parts.push(format!("{} more", top.len() - SHOWN_PATHS));
    }
    for (name, _, ns) in a.parts_after_paths() {
        parts.push(format!("{name} {}", signed_ns(ns)));
    }
    let mut lines = vec![format!(
        "{name} {}: {}",
        signed_ns(a.total_ns),
        parts.join(", ")
    )];
    let around = by_size(
        a.paths
            .iter()
            .filter(|p| !p.top_level && p.kind != PathKind::Lsm)
            .collect(),
    );
    if !around.is_empty() {
        let shown: Vec<String> = around
            .iter()
            .take(SHOWN_PATHS)
            .map(|p| {
                format!(
                    "{} {} {}",
                    p.kind.name(),
                    p.name,
                    signed_ns(p.delta_ns_per_op)
                )
            })
            .collect();
        lines.push(format!("  enclosing paths: {}", shown.join(", ")));
    }
    lines
}

/// `[-120, -60]` ns.
fn ns_interval((low, high): (f64, f64)) -> String {
    let end = |v: f64| signed_ns(v).trim_end_matches(" ns").to_string();
    format!("[{}, {}]", end(low), end(high))
}

/// `sampled, share of CPU time (2130 -> 2210 samples): security_file_open 7.5% -> 9.8%
/// (+2.30 pp [+1.10, +3.50]) +85 ns [+40, +130], ...`: the paths whose share changed most,
/// those whose interval leaves out zero marked `*`. The header names the interval: the rounds'
/// spread, or samples taken as independent draws (too few rounds), which understates the
/// run-to-run spread (an A/A compare so marked 6 of 57 listed changes). A row whose exact
/// timing disagrees beyond both intervals says so (`!`), and one whose change passes the whole
/// op's says why it can.
pub fn sampled_lines(s: &SampledChange) -> Vec<String> {
    let shown: Vec<String> = s
        .paths
        .iter()
        .take(SHOWN_PATHS)
        .map(|p| {
            let pp = |v: f64| format!("{:+.2}", v * 100.0);
            let mut line = format!(
                "{}{} {} {:.1}% -> {:.1}% ({} pp [{}, {}]) {} {}",
                if p.judged.starred { "*" } else { "" },
                p.kind.name(),
                p.name,
                p.old_share * 100.0,
                p.new_share * 100.0,
                pp(p.share_change),
                pp(p.share_change_low),
                pp(p.share_change_high),
                signed_ns(p.delta_ns_per_op),
                ns_interval((p.delta_low_ns, p.delta_high_ns))
            );
            if let Some(t) = p.timed_disagrees {
                let _ = write!(
                    line,
                    " ! timed {} {}: the methods disagree beyond both intervals",
                    signed_ns(t.delta_ns_per_op),
                    ns_interval((t.low, t.high))
                );
            }
            if let Some(whole) = s.whole_ns.filter(|w| p.delta_ns_per_op.abs() > w.abs()) {
                let _ = write!(
                    line,
                    " (more than the whole op's {}: shares of the sampled passes' CPU time, which \
                     moved {})",
                    signed_ns(whole),
                    signed_ns(s.new_cpu_ns_per_op - s.old_cpu_ns_per_op)
                );
            }
            line
        })
        .collect();
    if shown.is_empty() {
        return Vec::new();
    }
    let interval = match s.interval {
        ShareInterval::Rounds {
            old_rounds,
            new_rounds,
        } => format!(
            " in {old_rounds} -> {new_rounds} rounds; 95% intervals from the rounds' spread; * \
             called by its path verdict"
        ),
        ShareInterval::Files {
            old_files,
            new_files,
        } => format!(
            " in {old_files} -> {new_files} runs; 95% intervals from the runs' spread; * called \
             by its path verdict"
        ),
        ShareInterval::Binomial {
            old_rounds,
            new_rounds,
        } => format!(
            "; 95% intervals, samples taken as independent: too few rounds with stack counts \
             ({old_rounds} -> {new_rounds}), so they understate the spread between rounds; * \
             called by its path verdict"
        ),
    };
    let mut lines = vec![format!(
        "sampled, share of CPU time ({} -> {} samples{interval}):",
        s.old_samples, s.new_samples
    )];
    lines.extend(shown.into_iter().map(|l| format!("  {l}")));
    let fewest = s.old_samples.min(s.new_samples);
    if fewest < crate::stats::shares::PRECISE_STACK_SAMPLES {
        lines.push(format!(
            "  ({fewest} samples on the smaller side: 2,000 on both sides (run --stack-samples; \
             more --rounds where its passes stop at 2 s a round) narrows these intervals, to \
             about +-1.4 pp for a 5% share)"
        ));
    }
    lines
}

/// How the p-values and intervals were adjusted and when a change counts, in one sentence.
pub(super) fn holm_sentence(c: &Comparison, tested: usize) -> String {
    format!(
        "p-values are Holm-adjusted over {tested} workload{}, and each interval is at the level \
         Holm's step tested its workload at ({:.0}% alone, wider in a family), so it leaves out 0 \
         exactly when p < {}; a change counts when it does and |change| > {}%.",
        if tested == 1 { "" } else { "s" },
        100.0 * (1.0 - c.criteria.alpha),
        c.criteria.alpha,
        c.criteria.threshold * 100.0
    )
}

/// A workload's notes: load that left it undecided, the run options a change may owe to, the
/// machine's state, a disturbed run.
pub(super) fn notes(w: &WorkloadComparison) -> Vec<String> {
    w.load_note
        .iter()
        .chain(&w.option_note)
        .chain(&w.machine_state)
        .cloned()
        .chain(w.disturbed_run.as_ref().map(disturbed_note))
        .collect()
}

/// What the data rule out on the worse side: `a slowdown above +12.0%` (a time) or `a drop
/// beyond -8.0%` (a rate).
pub(super) fn ruled_out(w: &WorkloadComparison) -> Option<String> {
    let better = w.unit.higher_is_better();
    let bound = w.change?.worse_bound(better)?;
    Some(if better {
        format!("a drop beyond {} ruled out", signed_percent(bound, 2))
    } else {
        format!("a slowdown above {} ruled out", signed_percent(bound, 2))
    })
}

fn verdict_sentence(w: &WorkloadComparison, criteria: &Criteria) -> String {
    let confidence = format!("{:.0}%", 100.0 * (1.0 - criteria.alpha));
    match w.verdict {
        Verdict::Regressed => "Performance has regressed.".into(),
        Verdict::Improved => "Performance has improved.".into(),
        Verdict::NoChange if leaves_out_zero(w) => "Change within noise threshold.".into(),
        Verdict::NoChange => match ruled_out(w) {
            Some(bound) => format!("No change detected; {bound} ({confidence})."),
            None => "No change in performance detected.".into(),
        },
        Verdict::Inconclusive if w.machine_speed_changed => {
            "Inconclusive: the machine itself changed the same way (its line among the \
             environment differences above), which the interval makes room for; measure both \
             sides on a machine that holds steady."
                .into()
        }
        Verdict::Inconclusive if w.test.is_none() => {
            "Inconclusive: one run of one round on each side, whose samples share that run's \
             conditions; measure with --rounds 2 or more, or against a baseline of 3 or more runs."
                .into()
        }
        Verdict::Inconclusive => {
            let band = percent(10.0 * criteria.threshold);
            let detects = match w.minimum_detectable_effect {
                Some(mde) if w.floor_over_rounds.is_some_and(|f| f >= 0.8 * mde) => format!(
                    " (it detects changes of {} or more), and the runs' own spread sets most of \
                     it: more rounds would not narrow it; more runs a side would, or variants of \
                     one run (run --versus)",
                    percent(mde)
                ),
                Some(mde) => format!(
                    " (it detects changes of {} or more); take {}",
                    percent(mde),
                    more_of(w.replication)
                ),
                None => format!("; take {}", more_of(w.replication)),
            };
            format!(
                "Inconclusive: the interval reaches past {band} both ways, so neither a slowdown \
                 nor a speedup of that size is ruled out{detects}."
            )
        }
    }
}

fn leaves_out_zero(w: &WorkloadComparison) -> bool {
    w.change
        .and_then(|c| c.ci)
        .is_some_and(|(lo, hi)| lo > 0.0 || hi < 0.0)
}

/// A single run whose rounds disagree far more than the other side's runs' do.
fn disturbed_note(d: &super::DisturbedRun) -> String {
    format!(
        "the {} run looks disturbed: its rounds spread {} against {} in the other side's runs \
         (F-test, p = {:.1e}); the interval holds that spread, and a run again would narrow it",
        d.side,
        percent(d.spread.run),
        percent(d.spread.others),
        d.spread.p_value
    )
}

/// What to take more of to narrow an interval: an imported summary can only have more runs.
fn more_of(replication: Replication) -> &'static str {
    match replication {
        Replication::Run => "more runs",
        _ => "more rounds or runs",
    }
}

fn mean_ci(s: &Summary, unit: Unit, replication: Replication) -> String {
    let scale = Scale::of(unit, s.mean);
    let noun = match replication {
        Replication::Sample => "samples of one round",
        Replication::Round if s.n == 1 => "round",
        Replication::Run if s.n == 1 => "run",
        Replication::File if s.n == 1 => "file",
        r => r.noun(),
    };
    format!(
        "{} ± {} (n = {} {noun})",
        scale.show(s.mean),
        scale.show(s.ci_half_width()),
        s.n,
    )
}

/// The spread at each level and what the test can detect, in one line.
pub(super) fn spread_line(w: &WorkloadComparison) -> String {
    let c = &w.components;
    let level = |v: Option<f64>| v.map_or_else(|| "n/a".into(), percent);
    let mut line = if w.replication == Replication::Run {
        format!(
            "spread (sd): runs (rows of the summary) {}",
            level(c.between_rounds)
        )
    } else {
        format!(
            "spread (sd): samples in a round {}, rounds {}, runs {}",
            level(c.within_round),
            level(c.between_rounds),
            level(c.between_files)
        )
    };
    if let Some(mde) = w.minimum_detectable_effect {
        let _ = write!(
            line,
            "; detects a change of {} or more (80% power)",
            percent(mde)
        );
    }
    if let Some(floor) = w.floor_over_rounds {
        let _ = write!(
            line,
            "; with any number of rounds, an estimated {} or more (the runs' own spread)",
            percent(floor)
        );
    }
    line
}

/// Which unit of replication the tests used, in one sentence.
pub(super) fn replication_sentence(c: &Comparison) -> String {
    let mut used: Vec<Replication> = c.workloads.iter().map(|w| w.replication).collect();
    used.sort();
    used.dedup();
    let parts: Vec<&str> = used.iter().rev().map(|r| r.describe()).collect();
    let uses = |kind| c.workloads.iter().any(|w| w.test == Some(kind));
    let note = if uses(TestKind::Prediction) {
        " One side has a single run: it is tested against the spread of the other side's runs \
         (a prediction interval)."
    } else if uses(TestKind::Paired) {
        " Both sides are variants of one run (run --versus): round i of one is paired with \
         round i of the other, and the test is on their differences."
    } else if used.contains(&Replication::Round) {
        // A/A on the project's test machine: one run against the next, 3 of 19 compares called
        // a change (a workload whose rounds all landed in one of its two speeds), against 0 of
        // 19 for the CI recipe's baseline of up to 10 runs (the manual's Benchmarks page).
        " One run a side: rounds show that run's own spread, not how far runs differ, so a \
         verdict here is less sure than its p-value; to gate, compare with a baseline of 3 or \
         more runs, or variants of one run (run --versus)."
    } else {
        ""
    };
    // `run` prints a mean over samples; here a side is its observations at the unit, said
    // once, since the two figures of one run differ.
    let measured_in_rounds = |u: &Replication| {
        matches!(
            u,
            Replication::Round | Replication::File | Replication::Pair
        )
    };
    let sides = if used.iter().any(measured_in_rounds) {
        " Each side reads the mean of its observations (rounds' medians, or runs' values) ± \
         their 95% interval, n counting them: wider than `run`'s ± over samples, which share \
         their round's conditions and so agree better than rounds do."
    } else {
        ""
    };
    format!(
        "Unit of replication: {}.{note}{sides}",
        parts.join("; for others, ")
    )
}

/// The run options that differ (first: a change may be theirs), then the environment's
/// differences, each under its heading; empty when none differ.
pub(super) fn differences(c: &Comparison) -> Vec<(&'static str, &[EnvironmentDifference])> {
    [
        (
            "Run options that differ (they change what ran):",
            c.options.as_slice(),
        ),
        ("Environment differences:", c.environment.as_slice()),
    ]
    .into_iter()
    .filter(|(_, d)| !d.is_empty())
    .collect()
}

/// The line saying that nothing compared differs, naming what was compared.
pub(super) fn no_differences() -> String {
    format!(
        "Run options and environment: no differences in {}",
        super::environment::compared().join(", ")
    )
}

fn environment_text(c: &Comparison) -> String {
    let sections = differences(c);
    if sections.is_empty() {
        return no_differences() + "\n";
    }
    let mut out = String::new();
    for (heading, section) in sections {
        let _ = writeln!(out, "{heading}");
        for d in section {
            let (old, new) = d.sides();
            let _ = writeln!(out, "  {}: {old} -> {new}", d.field);
        }
    }
    out
}

/// The largest slowdown the comparison could have missed, as the summary says it.
pub(super) fn missed_sentence(c: &Comparison) -> Option<String> {
    let m = c.largest_missed_slowdown.as_ref()?;
    let what = if m.unit.higher_is_better() {
        "drop"
    } else {
        "slowdown"
    };
    let left_out = match m.left_out.as_slice() {
        [] => String::new(),
        names => format!(
            "; {} left out, whose spread the machine's state explains",
            names.join(", ")
        ),
    };
    Some(format!(
        "the largest {what} it could have missed: {} {} ({:.0}%{left_out})",
        m.workload,
        signed_percent(m.bound, 2),
        100.0 * (1.0 - c.criteria.alpha)
    ))
}

pub(super) fn totals(c: &Comparison) -> String {
    format!(
        "{} regressed, {} improved, {} no change, {} inconclusive",
        c.count(Verdict::Regressed),
        c.count(Verdict::Improved),
        c.count(Verdict::NoChange),
        c.count(Verdict::Inconclusive)
    )
}

pub fn render_text(c: &Comparison) -> String {
    let mut out = format!(
        "Comparing {} (old) with {} (new)\n",
        c.old_labels.join(", "),
        c.new_labels.join(", ")
    );
    if let Some(load) = &c.load {
        let _ = writeln!(out, "{}", super::load::sentence(load));
    }
    out.push_str(&environment_text(c));
    for line in super::facts::lines(&c.call_counts) {
        let _ = writeln!(out, "{line}");
    }
    let tested = c
        .workloads
        .iter()
        .filter(|w| w.adjusted_p.is_some())
        .count();
    let _ = writeln!(out, "{}", holm_sentence(c, tested));
    let _ = writeln!(out, "{}", replication_sentence(c));
    let _ = writeln!(out, "{}", path_text::family_sentence(c));
    for w in &c.workloads {
        let _ = writeln!(out, "\n{}", w.name);
        let _ = writeln!(
            out,
            "  old: {}    new: {}",
            mean_ci(&w.old, w.unit, w.replication),
            mean_ci(&w.new, w.unit, w.replication)
        );
        if let Some(ch) = &w.change {
            match (ch.ci, w.adjusted_p) {
                (Some((lo, hi)), Some(p)) => {
                    let cmp = if p < c.criteria.alpha { "<" } else { ">" };
                    let _ = writeln!(
                        out,
                        "  change: [{} {} {}] (p = {} {cmp} {})",
                        signed_percent(lo, 2),
                        signed_percent(ch.relative, 2),
                        signed_percent(hi, 2),
                        format_p(p),
                        c.criteria.alpha
                    );
                }
                _ => {
                    let _ = writeln!(out, "  change: {}", signed_percent(ch.relative, 2));
                }
            }
        }
        let _ = writeln!(out, "  {}", verdict_sentence(w, &c.criteria));
        let _ = writeln!(out, "  {}", spread_line(w));
        for note in notes(w) {
            let _ = writeln!(out, "  note: {note}");
        }
        for line in path_text::workload_lines(w) {
            let _ = writeln!(out, "  {line}");
        }
        for e in &w.extras {
            let change = e
                .change
                .map(|ch| {
                    let p = ch.p_value.map(|p| format!(", p = {}", format_p(p)));
                    format!(
                        " ({}{})",
                        signed_percent(ch.relative, 2),
                        p.unwrap_or_default()
                    )
                })
                .unwrap_or_default();
            let (old, new) = means(e.unit, &e.old, &e.new);
            let _ = writeln!(out, "  {}: {old} -> {new}{change}", e.name);
        }
        if let Some(a) = &w.attribution {
            for line in attribution_lines(&w.name, a) {
                let _ = writeln!(out, "  {line}");
            }
        }
        if let Some(line) = super::other_programs::line(&w.other_programs) {
            let _ = writeln!(out, "  {line}");
        }
        if let Some(sampled) = &w.sampled {
            for line in sampled_lines(sampled) {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    for (side, names) in [("old", &c.only_in_old), ("new", &c.only_in_new)] {
        if !names.is_empty() {
            let _ = writeln!(out, "\nOnly in {side}: {}", names.join(", "));
        }
    }
    if let Some(table) = super::suite_security::table(c, crate::report::markup::Markup::Terminal) {
        let _ = write!(out, "\n{table}");
    }
    if let Some(largest) = path_text::largest_sentence(&c.path_family) {
        let _ = write!(out, "\n{largest}\n");
    }
    let _ = writeln!(out, "\nSummary: {}", summary(c));
    out
}

/// The summary's verdicts and what the compare could have missed, at both levels.
pub(super) fn summary(c: &Comparison) -> String {
    let missed = missed_sentence(c).map(|m| format!("; {m}"));
    let f = &c.path_family;
    let paths = format!(
        "; paths: {} regressed, {} improved of {}",
        f.regressed, f.improved, f.tested
    );
    let ruled_out = path_text::ruled_out(f).map(|r| format!("; {r}"));
    format!(
        "{}{}{paths}{}",
        totals(c),
        missed.unwrap_or_default(),
        ruled_out.unwrap_or_default()
    )
}

/// `+10.00% [+9.60%, +10.40%]`, or the change alone when there is no interval.
pub(super) fn change_cell(w: &WorkloadComparison) -> String {
    match &w.change {
        Some(ch) => match ch.ci {
            Some((lo, hi)) => format!(
                "{} [{}, {}]",
                signed_percent(ch.relative, 2),
                signed_percent(lo, 2),
                signed_percent(hi, 2)
            ),
            None => signed_percent(ch.relative, 2),
        },
        None => "n/a".into(),
    }
}

pub fn render_markdown(c: &Comparison) -> String {
    let mut out = format!(
        "### hookprof compare: {} → {}\n\n",
        c.old_labels.join(", "),
        c.new_labels.join(", ")
    );
    if let Some(load) = &c.load {
        let _ = writeln!(out, "**{}**\n", super::load::sentence(load));
    }
    out.push_str(&markdown_differences(c));
    out.push_str(&super::facts::markdown(&c.call_counts));
    out.push_str(&markdown_verdicts(c));
    for w in c.workloads.iter() {
        for note in notes(w) {
            let _ = writeln!(out, "\n_{}: {note}_", w.name);
        }
    }
    out.push_str(&markdown_floors(c));
    out.push_str(&markdown_where_the_time_went(c));
    let _ = write!(
        out,
        "\n{}\n\n{}",
        path_text::family_sentence(c),
        path_text::markdown_table(c)
    );
    if let Some(largest) = path_text::largest_sentence(&c.path_family) {
        let _ = writeln!(out, "\n{largest}");
    }
    if let Some(table) = super::suite_security::table(c, crate::report::markup::Markup::Markdown) {
        let _ = write!(out, "\n{table}");
    }
    out
}

/// The sides' differences in options and environment, a bold heading a section.
fn markdown_differences(c: &Comparison) -> String {
    let mut out = String::new();
    match differences(c).as_slice() {
        [] => {
            let _ = writeln!(out, "{}.\n", no_differences());
        }
        sections => {
            for (heading, section) in sections {
                let _ = writeln!(out, "**{}**\n", heading.trim_end_matches(':'));
                for d in section.iter() {
                    let (old, new) = d.sides();
                    let _ = writeln!(out, "- {}: `{old}` → `{new}`", d.field);
                }
                out.push('\n');
            }
        }
    }
    out
}

/// The summary, the family's sentences and the table of the workloads' verdicts.
fn markdown_verdicts(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "**{}** (Holm-adjusted p < {}, |change| > {}%)\n",
        summary(c),
        c.criteria.alpha,
        c.criteria.threshold * 100.0
    );
    let tested = c
        .workloads
        .iter()
        .filter(|w| w.adjusted_p.is_some())
        .count();
    let _ = writeln!(
        out,
        "{} {}\n",
        holm_sentence(c, tested),
        replication_sentence(c)
    );
    out.push_str(
        "| workload | old | new | change [interval] | p (Holm) | verdict | detects (80%) | unit |\n",
    );
    out.push_str("|---|---:|---:|---|---:|---|---:|---|\n");
    for w in &c.workloads {
        let change = change_cell(w);
        let verdict = match w.verdict {
            Verdict::Regressed | Verdict::Improved => format!("**{}**", w.verdict),
            v => v.to_string(),
        };
        let (old, new) = means(w.unit, &w.old, &w.new);
        let _ = writeln!(
            out,
            "| {} | {old} | {new} | {change} | {} | {verdict} | {} | {} × {}/{} |",
            w.name,
            w.adjusted_p.map(format_p).unwrap_or_else(|| "n/a".into()),
            w.minimum_detectable_effect
                .map(|m| format!("≥ {}", percent(m)))
                .unwrap_or_else(|| "n/a".into()),
            w.replication.noun(),
            w.old.n,
            w.new.n,
        );
    }
    out
}

/// The least each workload could detect with any number of rounds a run, where the runs' own
/// spread sets it.
fn markdown_floors(c: &Comparison) -> String {
    let floors: Vec<String> = c
        .workloads
        .iter()
        .filter_map(|w| Some(format!("{} {}", w.name, percent(w.floor_over_rounds?))))
        .collect();
    if floors.is_empty() {
        return String::new();
    }
    format!(
        "\n_With any number of rounds a run, the runs' own spread leaves these as the least \
         each could detect: {}. Below that, compare variants of one run (`run --versus`)._\n",
        floors.join(", ")
    )
}

/// Each workload's change split over its timed and sampled paths, an item a workload.
fn markdown_where_the_time_went(c: &Comparison) -> String {
    let attributed: Vec<String> = c
        .workloads
        .iter()
        .filter_map(|w| {
            let mut lines = w
                .attribution
                .as_ref()
                .map(|a| attribution_lines(&w.name, a))
                .unwrap_or_default();
            lines.extend(super::other_programs::line(&w.other_programs));
            if let Some(sampled) = &w.sampled {
                let mut sampled = sampled_lines(sampled);
                if let Some(first) = sampled.first_mut() {
                    *first = format!("{} {first}", w.name);
                }
                lines.extend(sampled);
            }
            (!lines.is_empty()).then_some(lines)
        })
        .map(|lines| format!("- {}", lines.join("\n ")))
        .collect();
    if attributed.is_empty() {
        return String::new();
    }
    let mut out = "\n**Where the time went**\n\n".to_string();
    for a in attributed {
        let _ = writeln!(out, "{a}");
    }
    out
}

/// The old and new means, both in the scale the old one reads best in.
fn means(unit: Unit, old: &Summary, new: &Summary) -> (String, String) {
    let scale = Scale::of(unit, old.mean);
    (scale.show(old.mean), scale.show(new.mean))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_s_mean_reads_in_the_unit_its_size_calls_for() {
        let s = crate::stats::summarize(&[0.0006, 0.0007, 0.0005]).unwrap();
        let shown = mean_ci(&s, Unit::Seconds, Replication::Round);
        assert_eq!(shown, "600.0 us ± 248.4 us (n = 3 rounds)");
    }
}
