//! The kernel CI ecosystem's formats, written from results files: KCIDB v5 JSON (KernelCI's
//! common database), Bencher's BMF JSON (pull-request gates), Prometheus text (fleet
//! dashboards); the sampled stacks' pprof sits with the folded stacks in `report`. Each says only what
//! the results hold: what a file does not record (the kernel's source commit, its
//! architecture) is left out, never guessed.
use crate::{
    results::{AttributionRow, Results, WorkloadResult},
    stats,
    stats::replication::{self, FileRounds},
};

pub mod bmf;
pub mod kcidb;
pub mod openmetrics;

/// Refuses a results file that holds one workload twice (a forged or hand-merged file; `run`
/// refuses such a list): each export names a workload's figures by its name, so the two would
/// collide, and the error says which file and workload.
pub fn check_unique_workloads(results: &[Results]) -> anyhow::Result<()> {
    for r in results {
        let mut seen = std::collections::HashSet::new();
        if let Some(twice) = r.workloads.iter().find(|w| !seen.insert(&w.name)) {
            anyhow::bail!(
                "results '{}' hold workload {} twice: one results file names each workload once",
                crate::text::escaped(&r.label),
                crate::text::escaped(&twice.name)
            );
        }
    }
    Ok(())
}

/// One metric of one results file as the exports give it: a value and its 95% confidence
/// interval, taken over the highest level the file repeats (its rounds' medians, an
/// imported file's runs, else its samples), as `compare` takes them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Figure {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
    /// Observations behind the value, and what each one is.
    pub n: usize,
    pub per: replication::Unit,
}

impl Figure {
    /// `samples` (a series of `w`'s, one value per sample) summarised.
    pub fn of(r: &Results, w: &WorkloadResult, samples: &[f64]) -> Option<Figure> {
        let rounds: FileRounds = if r.samples_are_runs() {
            samples.iter().map(|&s| vec![s]).collect()
        } else {
            w.by_round(samples).iter().map(|r| r.to_vec()).collect()
        };
        let side = std::slice::from_ref(&rounds);
        let per = replication::level(side);
        let s = stats::summarize(&replication::observations(side, per))?;
        Some(Figure {
            value: s.mean,
            ci: s.ci,
            n: s.n,
            per,
        })
    }

    /// A path's ns per op: over its per-sample values when the file has them, else the run's
    /// single figure (no interval).
    pub fn of_path(r: &Results, w: &WorkloadResult, row: &AttributionRow) -> Option<Figure> {
        if row.samples_ns_per_op.is_empty() {
            return row.ns_per_op.is_finite().then_some(Figure {
                value: row.ns_per_op,
                ci: None,
                n: 1,
                per: replication::Unit::Sample,
            });
        }
        Figure::of(r, w, &row.samples_ns_per_op)
    }

    /// The figure times `factor` (a change of unit).
    pub fn scaled(self, factor: f64) -> Figure {
        Figure {
            value: self.value * factor,
            ci: self.ci.map(|(lo, hi)| (lo * factor, hi * factor)),
            ..self
        }
    }
}

/// What tells a run's results apart from another's: its label, and for one variant of a paired
/// run (`run --versus`, both variants in files of one label) the variant too.
pub(crate) fn run_label(r: &Results) -> String {
    match &r.pairing {
        Some(p) => format!("{}:{}", r.label, p.variant),
        None => r.label.clone(),
    }
}

/// `name` with every character a dotted path or metric label cannot hold replaced by `_`.
pub(crate) fn identifier(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Unix seconds as RFC 3339 (`2026-12-01T10:38:54Z`); None for 0, which means "not recorded".
pub(crate) fn rfc3339(unix_seconds: u64) -> Option<String> {
    (unix_seconds > 0).then(|| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_seconds);
        humantime::format_rfc3339_seconds(t).to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn a_figure_is_taken_over_rounds_when_the_file_has_them() {
        let r = sample_results();
        let mut w = r.workloads[0].clone();
        // One round: the samples' mean and interval.
        let f = Figure::of(&r, &w, &w.clean).unwrap();
        assert_eq!((f.value, f.n, f.per), (5.0, 5, replication::Unit::Sample));
        let (lo, hi) = f.ci.unwrap();
        assert!(lo < 5.0 && hi > 5.0);
        // Two rounds: their medians (5.0 and 5.0 here) make the value, two observations.
        w.round_sizes = vec![3, 2];
        let f = Figure::of(&r, &w, &w.clean).unwrap();
        assert_eq!((f.n, f.per), (2, replication::Unit::Round));
        assert!((f.value - 5.0).abs() < 1e-12, "{f:?}");
        // A row without per-sample values keeps its single figure.
        let row = &w.attribution[1];
        let f = Figure::of_path(&r, &w, row).unwrap();
        assert_eq!((f.value, f.ci), (400.0, None));
        assert_eq!(f.scaled(2.0).value, 800.0);
    }

    #[test]
    fn identifiers_and_times_are_what_the_formats_take() {
        assert_eq!(identifier("security_file_open"), "security_file_open");
        assert_eq!(identifier("copy_process.part.0"), "copy_process_part_0");
        assert_eq!(rfc3339(0), None);
        assert_eq!(rfc3339(1_700_000_000).unwrap(), "2023-11-14T22:13:20Z");
    }
}
