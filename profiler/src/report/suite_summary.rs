//! What the security stack costs across a suite, in one table: per workload the clean op, the
//! security hooks' share of its CPU time with its interval and ns per op, that share split by
//! LSM (each LSM's own functions, and the framework's dispatch), the task paths' share, and
//! the layers beside the LSMs (seccomp, audit, netfilter, BPF programs not hookprof's own);
//! sorted by the hooks' share, with one closing line naming the LSM that costs most and where.
//! It reads the sampled profiles' groups (`StackProfile::groups`), which a run computes once:
//! sampling sees the hooks wherever the kernel runs them, timed or not.
use std::fmt::Write;

use super::{
    figures::{percent, Scale},
    flame::palette::kind_colour,
    markup::Markup,
};
use crate::{
    results::{GroupKind, PathKind, Results, SampledGroup, StackProfile, Unit, WorkloadResult},
    stats,
    text::esc,
};

/// One workload's row.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryRow {
    pub workload: String,
    /// The clean op as printed (`1.234 us`), or empty where there is none.
    pub clean: String,
    /// The op's own CPU ns, the whole every share here is of.
    pub own_cpu_ns: f64,
    pub hooks: Option<SampledGroup>,
    pub framework: Option<SampledGroup>,
    /// Each of the summary's `lsms`, in its order.
    pub lsms: Vec<Option<SampledGroup>>,
    pub task_paths: Option<SampledGroup>,
    /// Each of `LAYERS`, in its order; None where the file was written before they were kept.
    pub layers: Vec<Option<SampledGroup>>,
    /// Other tools' BPF programs by the kernel's BPF statistics, ns per op (None where the
    /// run priced none): what the other-BPF cell says where no sample fell in them (the
    /// stacks cannot see a tracepoint's program).
    pub other_bpf_by_statistics: Option<f64>,
}

/// The layers of the security stack beside the LSMs, each a column after the task paths.
pub const LAYERS: [GroupKind; 4] = [
    GroupKind::Seccomp,
    GroupKind::Audit,
    GroupKind::Netfilter,
    GroupKind::OtherBpf,
];

/// The suite's rows, most costly hooks first.
#[derive(Debug, Clone, PartialEq)]
pub struct SuiteSummary {
    /// The LSMs any workload's samples fell in, most costly (summed share) first.
    pub lsms: Vec<String>,
    pub rows: Vec<SummaryRow>,
    /// Workloads with a profile written before groups were kept.
    pub without_groups: usize,
}

impl SuiteSummary {
    /// The summary of `r`'s profiled workloads; None when none has a profile.
    pub fn of(r: &Results) -> Option<SuiteSummary> {
        let profiled: Vec<(&WorkloadResult, &StackProfile)> = r
            .workloads
            .iter()
            .filter_map(|w| Some((w, w.profile.as_ref()?)))
            .filter(|(_, p)| p.own_samples() > 0)
            .collect();
        if profiled.is_empty() {
            return None;
        }
        let group = |p: &StackProfile, kind: GroupKind, lsm: Option<&str>| {
            p.groups
                .iter()
                .find(|g| g.kind == kind && g.lsm.as_deref() == lsm)
                .cloned()
        };
        let mut totals: Vec<(String, f64)> = Vec::new();
        for g in profiled
            .iter()
            .flat_map(|(_, p)| &p.groups)
            .filter(|g| g.kind == GroupKind::Lsm)
        {
            let name = g.lsm.clone().unwrap_or_default();
            match totals.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += g.share,
                None => totals.push((name, g.share)),
            }
        }
        totals.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let lsms: Vec<String> = totals.into_iter().map(|(n, _)| n).collect();
        let without_groups = profiled.iter().filter(|(_, p)| p.groups.is_empty()).count();
        let mut rows: Vec<SummaryRow> = profiled
            .iter()
            .filter(|(_, p)| !p.groups.is_empty())
            .map(|(w, p)| SummaryRow {
                workload: w.name.clone(),
                clean: stats::summarize(&w.clean)
                    .map(|s| Scale::of(w.unit, s.mean).show(s.mean))
                    .unwrap_or_default(),
                own_cpu_ns: p.own_ns_per_op(),
                hooks: group(p, GroupKind::Hooks, None),
                framework: group(p, GroupKind::Framework, None),
                lsms: lsms
                    .iter()
                    .map(|l| group(p, GroupKind::Lsm, Some(l)))
                    .collect(),
                task_paths: group(p, GroupKind::TaskPaths, None),
                layers: LAYERS.iter().map(|&kind| group(p, kind, None)).collect(),
                other_bpf_by_statistics: (!w.other_programs.is_empty())
                    .then(|| w.other_programs.iter().map(|p| p.ns_per_op()).sum()),
            })
            .collect();
        rows.sort_by(|a, b| {
            share(&b.hooks)
                .total_cmp(&share(&a.hooks))
                .then_with(|| a.workload.cmp(&b.workload))
        });
        Some(SuiteSummary {
            lsms,
            rows,
            without_groups,
        })
    }

    /// The closing line: the LSM whose own functions take the largest share of any workload's
    /// CPU time, and the workload the security hooks cost most.
    pub fn verdict(&self) -> String {
        let costliest_lsm = self
            .rows
            .iter()
            .flat_map(|r| r.lsms.iter().flatten().map(move |g| (r, g)))
            .max_by(|a, b| a.1.share.total_cmp(&b.1.share));
        let costliest_hooks = self.rows.first().and_then(|r| Some((r, r.hooks.as_ref()?)));
        let mut line = String::new();
        if let Some((r, g)) = costliest_lsm {
            let _ = write!(
                line,
                "{} costs the most of any LSM: {} of {}'s CPU time ({} per op)",
                g.label(),
                with_interval(g),
                r.workload,
                per_op(g.ns_per_op)
            );
        }
        if let Some((r, g)) = costliest_hooks {
            if !line.is_empty() {
                line.push_str("; ");
            }
            let _ = write!(
                line,
                "the security hooks cost most in {}: {} of its CPU time ({} per op)",
                r.workload,
                with_interval(g),
                per_op(g.ns_per_op)
            );
        }
        if line.is_empty() {
            "No sample fell in a security hook.".into()
        } else {
            line.push('.');
            line
        }
    }

    /// The table with its heading and closing line, in `markup`.
    pub(crate) fn render(&self, markup: Markup) -> String {
        let mut out = String::from(
            "Security stack cost (sampled kernel stacks; each share is of the op's own CPU time, \
             the probes' left out; an LSM's share is inside the hooks')\n",
        );
        if markup == Markup::Markdown {
            out.push('\n');
        }
        let mut header = vec![
            "workload".to_string(),
            "clean op".into(),
            "hooks".into(),
            "95% interval".into(),
            "hooks per op".into(),
        ];
        header.extend(self.lsms.iter().cloned());
        header.push("framework".into());
        header.push("task paths".into());
        header.extend(LAYERS.iter().map(|kind| kind.label(None)));
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut table = markup.table(&header);
        // A group no sample fell in is absent from the profile: 0%.
        let pct = |g: &Option<SampledGroup>| percent(share(g));
        for r in &self.rows {
            let mut cells = vec![
                match markup {
                    Markup::Markdown => format!("`{}`", r.workload),
                    Markup::Terminal => r.workload.clone(),
                },
                r.clean.clone(),
                pct(&r.hooks),
                r.hooks.as_ref().map_or("-".into(), interval),
                per_op(r.hooks.as_ref().map_or(0.0, |g| g.ns_per_op)),
            ];
            cells.extend(r.lsms.iter().map(pct));
            cells.push(pct(&r.framework));
            cells.push(pct(&r.task_paths));
            cells.extend(r.layer_cells());
            table.add_row(cells);
        }
        markup.align_numbers(&mut table, 1);
        let _ = writeln!(out, "{table}");
        if self.without_groups > 0 {
            let _ = writeln!(
                out,
                "({} profiled workloads left out: their file was written before hookprof kept \
                 the groups this table reads; run them again)",
                self.without_groups
            );
        }
        if markup == Markup::Markdown {
            out.push('\n');
        }
        let _ = writeln!(out, "{}", self.verdict());
        out
    }
}

/// Colours of the LSM segments, in the summary's LSM order; the framework's is the hooks'.
const LSM_COLOURS: [&str; 6] = [
    "#e15759", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7",
];

impl SuiteSummary {
    /// The HTML report's first figure: a row per workload, its hooks' share of the op's CPU
    /// time drawn as a bar split by LSM and framework (scaled to the costliest workload), with
    /// the table's figures beside it.
    pub fn html_figure(&self) -> String {
        let colour = |i: usize| LSM_COLOURS[i % LSM_COLOURS.len()];
        let hook_colour = kind_colour(PathKind::Hook);
        let widest = self
            .rows
            .iter()
            .map(|r| share(&r.hooks))
            .fold(f64::MIN_POSITIVE, f64::max);
        let mut out = String::from("<figure id=\"suite-summary\"><table><tr><th>workload</th>");
        out.push_str(
            "<th>clean op</th><th style=\"text-align:left\">security hooks, by LSM</th>\
             <th>hooks</th><th>95% interval</th><th>per op</th><th>task paths</th>",
        );
        for kind in LAYERS {
            let _ = write!(out, "<th>{}</th>", esc(&kind.label(None)));
        }
        out.push_str("</tr>\n");
        for r in &self.rows {
            let mut bar = String::new();
            let parts = r
                .lsms
                .iter()
                .enumerate()
                .map(|(i, g)| {
                    (
                        g.as_ref().map_or(String::new(), SampledGroup::label),
                        colour(i),
                        g,
                    )
                })
                .chain(std::iter::once((
                    "framework (the hooks' own dispatch and work)".to_string(),
                    hook_colour,
                    &r.framework,
                )));
            for (name, colour, g) in parts {
                let Some(g) = g.as_ref().filter(|g| g.share > 0.0) else {
                    continue;
                };
                let _ = write!(
                    bar,
                    "<span style=\"display:inline-block;height:12px;width:{:.1}px;background:{colour}\" \
                     title=\"{}: {} of the op's CPU time, {} per op\"></span>",
                    g.share / widest * 320.0,
                    esc(&name),
                    with_interval(g),
                    per_op(g.ns_per_op)
                );
            }
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td style=\"text-align:left;white-space:nowrap\">{bar}\
                 </td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                esc(&r.workload),
                esc(&r.clean),
                percent(share(&r.hooks)),
                r.hooks.as_ref().map_or("-".into(), interval),
                per_op(r.hooks.as_ref().map_or(0.0, |g| g.ns_per_op)),
                percent(share(&r.task_paths)),
            );
            for cell in r.layer_cells() {
                let _ = write!(out, "<td>{}</td>", esc(&cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table><figcaption>");
        for (i, lsm) in self.lsms.iter().enumerate() {
            let _ = write!(
                out,
                "<span style=\"color:{}\">&#9632;</span> {} ",
                colour(i),
                esc(lsm)
            );
        }
        let _ = writeln!(
            out,
            "<span style=\"color:{hook_colour}\">&#9632;</span> framework. What the security \
             stack costs each workload, from its sampled kernel stacks: the share of the op's own \
             CPU time (the probes' left out) spent in any security hook, split into each LSM's \
             own functions and the framework's dispatch; bars are scaled to the costliest \
             workload. {}</figcaption></figure>",
            esc(&self.verdict())
        );
        out
    }
}

/// ns in the unit that suits them (`212.9 ns`, `1.797 ms`).
fn per_op(ns: f64) -> String {
    Scale::of(Unit::Nanoseconds, ns).show(ns)
}

fn share(g: &Option<SampledGroup>) -> f64 {
    g.as_ref().map_or(0.0, |g| g.share)
}

/// A layer's share: "-" where the file was written before the layers were kept (not
/// measured, which is not 0%).
fn measured_percent(g: &Option<SampledGroup>) -> String {
    g.as_ref().map_or("-".into(), |g| percent(g.share))
}

impl SummaryRow {
    /// The layers' cells in `LAYERS`' order: each share, but other BPF programs no sample fell
    /// in and the kernel's statistics priced read their ns per op by those statistics (a
    /// tracepoint's program runs where the sampler cannot: its 0% would not be true).
    fn layer_cells(&self) -> Vec<String> {
        LAYERS
            .iter()
            .zip(&self.layers)
            .map(|(&kind, g)| match self.other_bpf_by_statistics {
                Some(ns) if kind == GroupKind::OtherBpf && share(g) == 0.0 => {
                    format!("{} by BPF statistics", per_op(ns))
                }
                _ => measured_percent(g),
            })
            .collect()
    }
}

fn interval(g: &SampledGroup) -> String {
    format!("{}-{}", percent(g.share_low), percent(g.share_high))
}

fn with_interval(g: &SampledGroup) -> String {
    format!("{} ({})", percent(g.share), interval(g))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    fn group(kind: GroupKind, lsm: Option<&str>, samples: u64, own: u64) -> SampledGroup {
        let share = samples as f64 / own as f64;
        SampledGroup {
            kind,
            lsm: lsm.map(String::from),
            program: None,
            samples,
            share,
            share_low: share * 0.9,
            share_high: share * 1.1,
            ns_per_op: share * 1000.0,
            round_samples: Vec::new(),
        }
    }

    /// Two profiled workloads: open_close with landlock and the BPF LSM, null_call with none.
    fn two_workloads() -> Results {
        let mut r = sample_results();
        let template = r.workloads[0].clone();
        r.workloads = ["null_call", "open_close"]
            .iter()
            .map(|name| {
                let mut w = template.clone();
                w.name = name.to_string();
                let mut p = crate::report::folded::tests::profile(1);
                p.samples = 1000;
                p.probe_samples = 0;
                p.lost_stacks = 0;
                p.user_samples = 0;
                p.on_cpu_ns_per_op = 1000.0;
                p.groups = if *name == "open_close" {
                    vec![
                        group(GroupKind::Hooks, None, 120, 1000),
                        group(GroupKind::Lsm, Some("landlock"), 30, 1000),
                        group(GroupKind::Lsm, Some("bpf"), 4, 1000),
                        group(GroupKind::Framework, None, 86, 1000),
                    ]
                } else {
                    vec![group(GroupKind::Lsm, Some("capability"), 0, 1000)]
                };
                w.profile = Some(p);
                w
            })
            .collect();
        r
    }

    #[test]
    fn the_costliest_hooks_come_first_with_each_lsm_in_a_column_of_its_own() {
        let s = SuiteSummary::of(&two_workloads()).unwrap();
        assert_eq!(s.lsms, ["landlock", "bpf", "capability"]);
        let names: Vec<&str> = s.rows.iter().map(|r| r.workload.as_str()).collect();
        assert_eq!(names, ["open_close", "null_call"]);
        let text = s.render(Markup::Terminal);
        let open = text.lines().find(|l| l.contains("open_close")).unwrap();
        for cell in ["12.0%", "10.8%-13.2%", "120.0 ns", "3.0%", "0.4%", "8.6%"] {
            assert!(open.contains(cell), "{cell} in {open}");
        }
        assert!(
            text.contains(
                "landlock costs the most of any LSM: 3.0% (2.7%-3.3%) of open_close's CPU time"
            ),
            "{text}"
        );
        assert!(text.contains("the security hooks cost most in open_close: 12.0%"));
        assert!(text.contains("of the op's own CPU time"));
    }

    #[test]
    fn the_html_figure_draws_each_lsm_s_part_and_says_the_verdict() {
        let html = SuiteSummary::of(&two_workloads()).unwrap().html_figure();
        assert!(html.contains("<td>open_close</td>"), "{html}");
        // landlock's segment is a quarter of the costliest bar's 320 px.
        assert!(html.contains("width:80.0px;background:#e15759"), "{html}");
        assert!(
            html.contains("landlock costs the most of any LSM"),
            "{html}"
        );
    }

    #[test]
    fn profiles_without_groups_are_counted_not_shown_as_free() {
        let mut r = two_workloads();
        r.workloads[0].profile.as_mut().unwrap().groups.clear();
        let s = SuiteSummary::of(&r).unwrap();
        assert_eq!(s.rows.len(), 1);
        assert_eq!(s.without_groups, 1);
        assert!(s
            .render(Markup::Markdown)
            .contains("1 profiled workloads left out"));
        // No profile at all: no summary.
        for w in &mut r.workloads {
            w.profile = None;
        }
        assert!(SuiteSummary::of(&r).is_none());
    }

    #[test]
    fn each_layer_beside_the_lsms_has_a_column_and_a_file_without_them_says_not_measured() {
        let mut r = two_workloads();
        let open = r.workloads[1].profile.as_mut().unwrap();
        open.groups.extend([
            group(GroupKind::Seccomp, None, 0, 1000),
            group(GroupKind::Audit, None, 250, 1000),
            group(GroupKind::Netfilter, None, 0, 1000),
            group(GroupKind::OtherBpf, None, 70, 1000),
        ]);
        let s = SuiteSummary::of(&r).unwrap();
        let text = s.render(Markup::Terminal);
        let header = text.lines().find(|l| l.contains("workload")).unwrap();
        for column in ["seccomp", "audit", "netfilter", "other BPF"] {
            assert!(header.contains(column), "{column} in {header}");
        }
        let open = text.lines().find(|l| l.contains("open_close")).unwrap();
        let cells: Vec<&str> = open.split_whitespace().collect();
        assert_eq!(
            cells[cells.len() - 4..],
            ["0.0%", "25.0%", "0.0%", "7.0%"],
            "{open}"
        );
        // null_call's file kept no layers: "-", never 0%.
        let null = text.lines().find(|l| l.contains("null_call")).unwrap();
        assert!(null.trim_end().ends_with('-'), "{null}");
        let markdown = s.render(Markup::Markdown);
        assert!(markdown.contains("| other BPF"), "{markdown}");
        let html = s.html_figure();
        assert!(html.contains("<th>other BPF</th>"), "{html}");
        assert!(
            html.contains("<td>25.0%</td><td>0.0%</td><td>7.0%</td></tr>"),
            "{html}"
        );
    }

    #[test]
    fn other_programs_the_stacks_cannot_see_read_their_statistics_not_0() {
        let mut r = two_workloads();
        let w = &mut r.workloads[1];
        w.profile.as_mut().unwrap().groups.extend([
            group(GroupKind::Seccomp, None, 0, 1000),
            group(GroupKind::Audit, None, 0, 1000),
            group(GroupKind::Netfilter, None, 0, 1000),
        ]);
        w.other_programs.push(crate::results::OtherProgramRuns {
            program_id: 7,
            name: "sys_enter".into(),
            holder: "bpftrace (pid 10)".into(),
            attach: "tracepoint sys_enter".into(),
            runs: 2000,
            run_time_ns: 596_000,
            ops: 2000,
        });
        let s = SuiteSummary::of(&r).unwrap();
        let text = s.render(Markup::Terminal);
        let open = text.lines().find(|l| l.contains("open_close")).unwrap();
        assert!(
            open.trim_end().ends_with("298.0 ns by BPF statistics"),
            "{open}"
        );
        assert!(s
            .html_figure()
            .contains("<td>298.0 ns by BPF statistics</td>"));
    }
}
