//! The terminal report `hookprof run` prints: environment, probes, then per workload the clean
//! and probed numbers and where each operation's time goes.
use std::fmt::Write;

pub(crate) use super::figures::num;
use super::figures::{
    incomplete_reason, origin, other_program_lines, probe_overhead, residual_sentence, Scale,
};
use super::{markup::Markup, paths_table::PathsTable};
use crate::{
    attribution::Breakdown,
    results::{Environment, PathKind, ProbeKind, Results, WorkloadResult},
    stats,
};

pub fn render(results: &Results) -> String {
    let mut out = String::new();
    out.push_str(&environment_line(results));
    out.push_str(&probe_lines(results));
    for w in &results.workloads {
        out.push('\n');
        out.push_str(&workload_block(w));
    }
    if let Some(summary) = super::suite_summary::SuiteSummary::of(results) {
        out.push('\n');
        out.push_str(&summary.render(Markup::Terminal));
    }
    out
}

fn or_unknown(s: &str) -> &str {
    if s.is_empty() {
        "unknown"
    } else {
        s
    }
}

/// ` x4` for a run that could use all 4 CPUs, ` x4 (1 allowed)` for one narrowed by `taskset` or
/// a cpuset, `, 2 CPUs allowed` for a file that does not say how many were online.
fn cpu_count(e: &Environment) -> String {
    match (e.cpus_online, e.cpus_allowed) {
        (0, 0) => String::new(),
        (0, allowed) => format!(", {allowed} CPUs allowed"),
        (online, allowed) if allowed == 0 || allowed == online => format!(" x{online}"),
        (online, allowed) => format!(" x{online} ({allowed} allowed)"),
    }
}

/// `Environment: kernel ..., LSMs ..., lockdown ...` and where the numbers came from.
pub(crate) fn environment_line(r: &Results) -> String {
    let e = &r.environment;
    let lsms = if e.active_lsms.is_empty() {
        "unknown".to_string()
    } else {
        e.active_lsms.join(",")
    };
    let mut line = format!("Environment: kernel {}", or_unknown(&e.kernel_release));
    if !e.machine.is_empty() {
        let _ = write!(line, " ({})", e.machine);
    }
    let _ = write!(line, ", LSMs {lsms}, lockdown {}", or_unknown(&e.lockdown));
    if !e.cpu_model.is_empty() {
        let _ = write!(line, ", CPU {}{}", e.cpu_model, cpu_count(e));
    }
    let policy = r.policy_summary();
    if !policy.is_empty() && policy != "none" {
        let _ = write!(line, ", policy {policy}");
    }
    if r.parallel() > 1 {
        let _ = write!(line, ", {} copies of each workload at once", r.parallel());
    }
    let _ = write!(line, " ({})", origin(r));
    if let Some(why) = incomplete_reason(r) {
        let _ = write!(line, ", INCOMPLETE: {why}");
    }
    line.push('\n');
    line
}

fn probe_lines(r: &Results) -> String {
    let p = &r.probes;
    if p.attached.is_empty() && p.refused.is_empty() {
        return "Probes: none (clean numbers only)\n".into();
    }
    // Count attached probes per kind, in the order kinds first appear.
    let mut kinds: Vec<(ProbeKind, usize)> = Vec::new();
    for a in &p.attached {
        match kinds.iter_mut().find(|(k, _)| *k == a.kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((a.kind, 1)),
        }
    }
    let per_kind: Vec<String> = kinds.iter().map(|(k, n)| format!("{k} {n}")).collect();
    let mut out = format!("Probes: {} attached", p.attached.len());
    if !per_kind.is_empty() {
        let _ = write!(out, " ({})", per_kind.join(", "));
    }
    // Probes other than the functions' pairs, each by name (the run said why on stderr).
    let others: Vec<String> = p
        .refused
        .iter()
        .filter(|r| !r.kind.is_trampoline_pair())
        .map(|r| format!("{} on {}", r.kind, r.target))
        .collect();
    if !others.is_empty() {
        let _ = write!(out, ", refused: {}", others.join(", "));
    }
    out.push('\n');
    let _ = writeln!(out, "{}", hooks_line(r));
    out
}

/// How many hooks and LSM functions each method measured: timed by an fentry/fexit pair (with
/// the functions refused one, counted as `hookprof hooks` counts them), and sampled in kernel
/// stacks (those with samples in any workload).
fn hooks_line(r: &Results) -> String {
    let p = &r.probes;
    let mut line = format!("Hooks: {} timed (fentry/fexit", p.timed_functions());
    let refused = p.refused_functions();
    if refused > 0 {
        let why = p
            .refused
            .iter()
            .find(|r| r.kind == ProbeKind::FEntry)
            .map_or("", |r| r.reason.split(':').next().unwrap_or_default());
        let _ = write!(
            line,
            "; refused on {refused} functions, {why}: `hookprof hooks` lists them"
        );
    }
    line.push(')');
    let mut sampled: Vec<&str> = r
        .workloads
        .iter()
        .filter_map(|w| w.profile.as_ref())
        .flat_map(|profile| &profile.paths)
        .filter(|path| matches!(path.kind, PathKind::Hook | PathKind::Lsm))
        .map(|path| path.name.as_str())
        .collect();
    sampled.sort_unstable();
    sampled.dedup();
    if r.workloads.iter().any(|w| w.profile.is_some()) {
        let _ = write!(line, ", {} sampled (kernel stacks)", sampled.len());
    }
    line
}

/// `5.000 us ± 0.1756 us`, or the mean alone when one sample gives no interval.
fn mean_ci(s: &stats::Summary, scale: Scale) -> String {
    match s.ci {
        Some(_) => format!("{} ± {}", scale.show(s.mean), scale.show(s.ci_half_width())),
        None => format!("{} (one sample: no interval)", scale.show(s.mean)),
    }
}

/// Each parallel copy's own mean, and how the figure above combines them.
fn copies_line(w: &WorkloadResult, scale: Scale) -> String {
    let means: Vec<String> = w
        .copies
        .iter()
        .filter_map(|c| stats::summarize(&c.clean))
        .map(|s| scale.show(s.mean))
        .collect();
    let combined = if w.unit.higher_is_better() {
        "the figures above are their sum"
    } else {
        "the figures above are their mean"
    };
    format!(
        "  Per copy (mean):       {} ({} copies at once; {combined})\n",
        means.join(", "),
        w.copies.len()
    )
}

fn workload_block(w: &WorkloadResult) -> String {
    let mut out = format!("{} ({})\n", w.name, w.family);
    if let Some(f) = &w.failure {
        let _ = writeln!(out, "  Workload {}", f.sentence());
    }
    let Some(clean) = stats::summarize(&w.clean) else {
        out.push_str("  no clean samples\n");
        return out;
    };
    let scale = Scale::of(w.unit, clean.mean);
    let label = format!("{} (mean ± 95% CI):", w.unit.metric_name());
    let _ = writeln!(
        out,
        "  {label:<22} {}    median {}, n = {}{}",
        mean_ci(&clean, scale),
        scale.show(clean.median),
        clean.n,
        in_rounds(&w.round_sizes)
    );
    let _ = writeln!(
        out,
        "  Range (min … max):     {} … {}    σ = {}",
        scale.show(clean.min),
        scale.show(clean.max),
        scale.show(clean.stdev)
    );
    let outliers = clean.outliers.mild() + clean.outliers.severe();
    if outliers > 0 {
        let _ = writeln!(
            out,
            "  Outliers: {} mild, {} severe (Tukey)",
            clean.outliers.mild(),
            clean.outliers.severe()
        );
    }
    if !w.copies.is_empty() {
        out.push_str(&copies_line(w, scale));
    }
    if let Some(probed) = stats::summarize(&w.probed) {
        let overhead = probe_overhead(w.unit, &clean, &probed).unwrap_or_else(|| "n/a".into());
        let _ = writeln!(
            out,
            "  Probed (mean):         {}    probe overhead {overhead} of the clean mean, n = {}{}",
            scale.show(probed.mean),
            probed.n,
            in_rounds(&w.round_sizes)
        );
    }
    for extra in &w.extra {
        if let Some(s) = stats::summarize(&extra.clean) {
            let _ = writeln!(
                out,
                "  {} (mean ± 95% CI): {}",
                extra.name,
                mean_ci(&s, Scale::of(extra.unit, s.mean))
            );
        }
    }
    if !w.events_per_op.is_empty() {
        let events: Vec<String> = w
            .events_per_op
            .iter()
            .map(|(event, n)| format!("{event} {}", num(*n)))
            .collect();
        let _ = writeln!(out, "  Task events per op: {}", events.join(", "));
    }
    for line in super::sampled::op_lines(w) {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(table) = PathsTable::of(w) {
        for line in table.render(Markup::Terminal).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(b) = Breakdown::of(w) {
        let _ = writeln!(out, "  {}", residual_sentence(&b));
    }
    for line in other_program_lines(w) {
        let _ = writeln!(out, "  {line}");
    }
    for note in &w.notes {
        let _ = writeln!(out, "  Note: {note}");
    }
    out
}

/// How the samples came: ` (4 rounds of 3)`, ` (4 rounds of 2-3)` (stat's `--runs 10` dealt
/// over 4 rounds), nothing for one round.
fn in_rounds(sizes: &[usize]) -> String {
    let (Some(least), Some(most)) = (sizes.iter().min(), sizes.iter().max()) else {
        return String::new();
    };
    match sizes.len() {
        1 => String::new(),
        n if least == most => format!(" ({n} rounds of {least})"),
        n => format!(" ({n} rounds of {least}-{most})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::{accounting, sample_results};

    #[test]
    fn rounds_of_unequal_size_print_their_range() {
        assert_eq!(in_rounds(&[3, 3, 2, 2]), " (4 rounds of 2-3)");
        assert_eq!(in_rounds(&[5, 5]), " (2 rounds of 5)");
        assert_eq!(in_rounds(&[7]), "");
        assert_eq!(in_rounds(&[]), "");
    }

    #[test]
    fn shows_environment_and_probes() {
        let text = render(&sample_results());
        assert!(
            text.starts_with(
                "Environment: kernel 6.1.0-18-amd64, LSMs lockdown,capability,apparmor, lockdown none"
            ),
            "{text}"
        );
        assert!(text.contains(
            "Probes: 2 attached (raw_tracepoint 1, fentry 1), refused: lsm on file_open\n\
             Hooks: 1 timed (fentry/fexit)\n"
        ));
        // Refused pairs are counted once a function, as `hookprof hooks` counts them.
        let mut r = sample_results();
        for kind in [ProbeKind::FEntry, ProbeKind::FExit] {
            for target in ["security_file_open", "security_task_kill"] {
                r.probes.refused.push(crate::results::Refusal {
                    kind,
                    target: target.into(),
                    errno: Some(1),
                    reason: crate::probes::refusal::reason(kind, Some(1)),
                });
            }
        }
        let text = render(&r);
        assert!(
            text.contains(
                "Hooks: 1 timed (fentry/fexit; refused on 2 functions, EPERM: `hookprof hooks` \
                 lists them)"
            ),
            "{text}"
        );
    }

    #[test]
    fn shows_the_cpus_online_and_those_the_run_could_use() {
        let line = |online, allowed| {
            let mut r = sample_results();
            r.environment.cpus_online = online;
            r.environment.cpus_allowed = allowed;
            environment_line(&r)
        };
        assert!(line(4, 4).contains(", CPU Test CPU x4 ("), "{}", line(4, 4));
        assert!(
            line(4, 1).contains(", CPU Test CPU x4 (1 allowed) ("),
            "{}",
            line(4, 1)
        );
        // A file from before cpus_online was recorded: its `cpus` counted the allowed CPUs.
        assert!(
            line(0, 2).contains(", CPU Test CPU, 2 CPUs allowed ("),
            "{}",
            line(0, 2)
        );
    }

    #[test]
    fn shows_clean_statistics_and_probe_overhead() {
        let text = render(&sample_results());
        // mean 5.0, sample sd 0.1414, t(0.975, 4) = 2.776: half-width 0.1756.
        assert!(
            text.contains("Time (mean ± 95% CI):  5.000 us ± 0.1756 us    median 5.000 us, n = 5"),
            "{text}"
        );
        assert!(text.contains("Range (min … max):     4.800 us … 5.200 us"));
        // 5.0 probed against 5.0 clean, each +-0.14: no cost told from noise.
        assert!(
            text.contains("Probed (mean):         5.000 us    probe overhead within noise (+-"),
            "{text}"
        );
        assert!(text.contains("(one sample: no interval)"), "{text}");
        assert!(
            text.contains("  Task events per op: exit 0, fork 0.5000\n"),
            "{text}"
        );
        assert!(
            text.contains("user (mean ± 95% CI): 815.8 s (one sample: no interval)"),
            "{text}"
        );
    }

    #[test]
    fn lsm_rows_sit_indented_under_their_hook() {
        let text = render(&sample_results());
        let lines: Vec<&str> = text.lines().collect();
        let hook = lines
            .iter()
            .position(|l| l.contains(" security_file_open "))
            .expect("hook row");
        let lsm = lines[hook + 1];
        assert!(lsm.trim_start().starts_with("lsm"), "{text}");
        assert_eq!(
            lsm.find("apparmor_file_open"),
            lines[hook].find("security_file_open").map(|c| c + 2),
            "{text}"
        );
        assert!(
            lines[hook].contains("0.4000") && lines[hook].contains("8.0%"),
            "{text}"
        );
    }

    #[test]
    fn residual_subtracts_the_outermost_paths_only() {
        let text = render(&sample_results());
        // 5000 ns probed op - 3000 ns in openat; the hooks and the LSM row run inside it.
        assert!(
            text.contains(
                "Residual: 2.000 us/op (40.0% of the probed op) outside the probed syscalls"
            ),
            "{text}"
        );
        let mut r = sample_results();
        r.workloads[0].attribution[0].ns_per_op = 9000.0;
        assert!(
            render(&r).contains(
                "Residual: none measurable outside the probed syscalls: the timed paths take \
                 4.000 us more than the op's probed time 5.000 us"
            ),
            "{}",
            render(&r)
        );
    }

    /// Where sched_switch measured the probed op's CPU time, that is the whole of the share
    /// column and of the residual, and a residual far below it names the two figures.
    #[test]
    fn with_the_op_s_cpu_time_measured_shares_and_residual_are_of_it() {
        let mut r = sample_results();
        r.workloads[0].accounting = Some(accounting(6000.0, 4000.0));
        let text = render(&r);
        assert!(
            text.contains("shares of the probed op's CPU time, 6.000 us"),
            "{text}"
        );
        // openat takes 3000 of the op's 6000 ns of CPU time, the hooks 400 + 100 inside it.
        assert!(text.contains("50.0%") && text.contains("6.7%"), "{text}");
        assert!(
            text.contains("Residual: 3.000 us/op (50.0% of the probed op's CPU time)"),
            "{text}"
        );
        // A path above the CPU time: the shares are of the probed op's time, which the
        // path overruns too, said in words.
        r.workloads[0].attribution[0].ns_per_op = 9000.0;
        let text = render(&r);
        assert!(
            text.contains(
                "Residual: none measurable outside the probed syscalls: the timed paths take \
                 4.000 us more than the op's probed time 5.000 us"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_run_without_probes_says_so() {
        let mut r = sample_results();
        r.probes = Default::default();
        r.workloads[0].clean.clear();
        let text = render(&r);
        assert!(text.contains("Probes: none"));
        assert!(text.contains("open_close (processes)\n  no clean samples"));
    }
}
