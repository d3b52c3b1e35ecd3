//! Results as Prometheus text, for a fleet's dashboards (node_exporter's textfile collector,
//! a Pushgateway, `promtool`): each path's call latency as a histogram (the probes' log2
//! buckets, cumulative, in seconds), its calls as a counter, its time per operation and each
//! workload's as gauges. Labels say which run (`run`, `host`, `kernel`), workload and path.
//!
//! The text is read alike by the classic text parser and the OpenMetrics one: `# TYPE`, `# UNIT`
//! and `# HELP` before each family's samples, no timestamps (the run's start is a gauge of its
//! own, as batch jobs report theirs), the counter's family named with its `_total` so both
//! parsers give it the same name, and `# EOF` last. Written here rather than through a client
//! library's registry: a registry is for a live process's metrics, these are a file's.
use std::{collections::HashSet, fmt::Write};

use anyhow::{bail, Result};

use super::{run_label, Figure};
use crate::results::{rows, AttributionRow, PathKind, Results, Unit, WorkloadResult};

struct Family {
    name: &'static str,
    kind: &'static str,
    unit: Option<&'static str>,
    help: &'static str,
    /// (sample name, labels as written, value)
    samples: Vec<(String, String, f64)>,
}

impl Family {
    fn new(
        name: &'static str,
        kind: &'static str,
        unit: Option<&'static str>,
        help: &'static str,
    ) -> Family {
        Family {
            name,
            kind,
            unit,
            help,
            samples: Vec::new(),
        }
    }

    fn push(&mut self, suffix: &str, labels: &Labels, value: f64) {
        self.samples
            .push((format!("{}{suffix}", self.name), labels.render(), value));
    }
}

/// A sample's labels, in the order given.
#[derive(Clone, Default)]
struct Labels(Vec<(&'static str, String)>);

impl Labels {
    fn with(&self, name: &'static str, value: impl Into<String>) -> Labels {
        let mut l = self.clone();
        l.0.push((name, value.into()));
        l
    }

    fn render(&self) -> String {
        let pairs: Vec<String> = self
            .0
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        pairs.join(",")
    }
}

/// A label value as the text formats quote it. The format takes any other character as it is,
/// so a control character from a name is first shown as `\xNN` (its backslash then quoted like
/// any other), as in every text hookprof prints: the exposition is often read on a terminal.
fn escape(v: &str) -> String {
    crate::text::escaped_lines(v)
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value: Go's spelling of the infinities, Rust's shortest round-trip digits otherwise.
fn value(v: f64) -> String {
    match v {
        f64::INFINITY => "+Inf".into(),
        f64::NEG_INFINITY => "-Inf".into(),
        v if v.is_nan() => "NaN".into(),
        v => format!("{v}"),
    }
}

pub fn render(results: &[Results]) -> Result<String> {
    let mut start = Family::new(
        "hookprof_run_start_time_seconds",
        "gauge",
        Some("seconds"),
        "When the run started, Unix time.",
    );
    let mut op = Family::new(
        "hookprof_op_seconds",
        "gauge",
        Some("seconds"),
        "Time per operation of the workload without probes: the mean over its rounds (or samples).",
    );
    let mut bandwidth = Family::new(
        "hookprof_bandwidth_bytes_per_second",
        "gauge",
        Some("bytes_per_second"),
        "Bandwidth of the workload without probes: the mean over its rounds (or samples).",
    );
    let mut per_op = Family::new(
        "hookprof_path_seconds_per_op",
        "gauge",
        Some("seconds_per_op"),
        "Time inside the path per operation of the workload, probes' own cost included.",
    );
    let mut calls = Family::new(
        "hookprof_path_calls_total",
        "counter",
        None,
        "Calls of the path during the probed samples (timed and untimed).",
    );
    let mut latency = Family::new(
        "hookprof_path_latency_seconds",
        "histogram",
        Some("seconds"),
        "Duration of each timed call of the path (log2 buckets), probes' own cost included.",
    );
    for r in results {
        let e = &r.environment;
        let run = Labels::default()
            .with("run", run_label(r))
            .with("host", e.hostname.clone())
            .with("kernel", e.kernel_release.clone());
        if e.started_at > 0 {
            start.push("", &run, e.started_at as f64);
        }
        for w in &r.workloads {
            let labels = run.with("workload", w.name.clone());
            if let Some(f) = Figure::of(r, w, &w.clean) {
                match (rows::op_ns(w.unit, f.value), w.unit) {
                    (Some(ns), _) => op.push("", &labels, ns / 1e9),
                    (None, Unit::MegabytesPerSecond) => bandwidth.push("", &labels, f.value * 1e6),
                    (None, _) => {}
                }
            }
            for row in &w.attribution {
                path_samples(r, w, row, &labels, [&mut per_op, &mut calls, &mut latency]);
            }
        }
    }
    let families = [start, op, bandwidth, per_op, calls, latency];
    let mut seen = HashSet::new();
    let mut out = String::new();
    for f in families.iter().filter(|f| !f.samples.is_empty()) {
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        if let Some(unit) = f.unit {
            let _ = writeln!(out, "# UNIT {} {unit}", f.name);
        }
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        for (name, labels, v) in &f.samples {
            if !seen.insert((name, labels)) {
                bail!(
                    "two results files give the series {name}{{{labels}}}: give the runs \
                     distinct labels"
                );
            }
            let _ = writeln!(out, "{name}{{{labels}}} {}", value(*v));
        }
    }
    out.push_str("# EOF\n");
    Ok(out)
}

/// A path's time per op, its calls and its latency histogram.
fn path_samples(
    r: &Results,
    w: &WorkloadResult,
    row: &AttributionRow,
    workload: &Labels,
    [per_op, calls, latency]: [&mut Family; 3],
) {
    let mut labels = workload
        .with("kind", row.kind.name())
        .with("path", row.name.clone());
    if row.kind == PathKind::Lsm {
        labels = labels
            .with("lsm", row.lsm.clone().unwrap_or_default())
            .with("hook", row.parent.clone().unwrap_or_default());
    }
    if let Some(f) = Figure::of_path(r, w, row) {
        per_op.push("", &labels, f.value / 1e9);
    }
    if row.histogram.is_empty() {
        return;
    }
    let timed: u64 = row.histogram.iter().sum();
    calls.push("", &labels, (timed + row.untimed_calls) as f64);
    let mut below = 0;
    for (b, count) in row.histogram.iter().enumerate() {
        below += count;
        // Bucket b holds 2^(b-1) <= ns < 2^b: whole nanoseconds up to 2^b - 1.
        let le = ((1u128 << b) - 1) as f64 / 1e9;
        latency.push("_bucket", &labels.with("le", value(le)), below as f64);
    }
    latency.push("_bucket", &labels.with("le", "+Inf"), timed as f64);
    latency.push("_count", &labels, timed as f64);
    latency.push("_sum", &labels, row.ns_per_call * timed as f64 / 1e9);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn a_paths_histogram_is_cumulative_in_seconds_and_counts_its_calls() {
        let mut r = sample_results();
        r.environment.hostname = "runner-1".into();
        r.workloads[0].attribution[1].untimed_calls = 2;
        let text = render(&[r]).unwrap();
        let hook = "run=\"base\",host=\"runner-1\",kernel=\"6.1.0-18-amd64\",\
                    workload=\"open_close\",kind=\"hook\",path=\"security_file_open\"";
        // The fixture's histogram: 3 calls in [128, 256) ns, 10 in [256, 512), 2 in [512, 1024).
        for line in [
            format!("hookprof_path_latency_seconds_bucket{{{hook},le=\"0.000000127\"}} 0"),
            format!("hookprof_path_latency_seconds_bucket{{{hook},le=\"0.000000255\"}} 3"),
            format!("hookprof_path_latency_seconds_bucket{{{hook},le=\"0.000000511\"}} 13"),
            format!("hookprof_path_latency_seconds_bucket{{{hook},le=\"0.000001023\"}} 15"),
            format!("hookprof_path_latency_seconds_bucket{{{hook},le=\"+Inf\"}} 15"),
            format!("hookprof_path_latency_seconds_count{{{hook}}} 15"),
            format!("hookprof_path_latency_seconds_sum{{{hook}}} 0.000006"),
            format!("hookprof_path_calls_total{{{hook}}} 17"),
            format!("hookprof_path_seconds_per_op{{{hook}}} 0.0000004"),
        ] {
            assert!(text.contains(&format!("\n{line}\n")), "{line} in:\n{text}");
        }
        assert!(text.contains(
            ",kind=\"lsm\",path=\"apparmor_file_open\",lsm=\"\",hook=\"security_file_open\"}"
        ));
        assert!(text.ends_with("\n# EOF\n"));
        // Every family once, its metadata before its samples.
        assert_eq!(
            text.matches("# TYPE hookprof_path_latency_seconds histogram")
                .count(),
            1
        );
        assert!(
            text.find("# TYPE hookprof_op_seconds").unwrap()
                < text.find("hookprof_op_seconds{").unwrap()
        );
    }

    #[test]
    fn the_same_series_twice_is_an_error_and_label_values_are_escaped() {
        let mut r = sample_results();
        let e = render(&[r.clone(), r.clone()]).unwrap_err().to_string();
        assert!(e.contains("distinct labels"), "{e}");
        r.label = "a \"b\"\\c".into();
        let text = render(&[r]).unwrap();
        assert!(text.contains("run=\"a \\\"b\\\"\\\\c\""), "{text}");
        assert_eq!(value(f64::INFINITY), "+Inf");
    }
}
