//! Results as Bencher Metric Format JSON, what `bencher run --adapter json` reads: a benchmark
//! per workload, and in it a measure per metric, each a value with the bounds of its 95%
//! confidence interval. A time per operation is Bencher's own `latency` measure, in
//! nanoseconds; each probed path is a measure of its own (`hook security_file_open ns/op`).
use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::Serialize;

use super::{run_label, Figure};
use crate::results::{rows, Results, Unit, WorkloadResult};

/// Bencher's limit on a measure's name or slug.
pub const MEASURE_NAME_MAX: usize = 64;

/// Benchmark name -> measure name -> metric.
pub type Document = BTreeMap<String, BTreeMap<String, Metric>>;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Metric {
    pub value: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lower_value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_value: Option<f64>,
}

impl From<Figure> for Metric {
    fn from(f: Figure) -> Metric {
        Metric {
            value: f.value,
            lower_value: f.ci.map(|c| c.0),
            upper_value: f.ci.map(|c| c.1),
        }
    }
}

/// The benchmarks of `results`; with several files each benchmark is `LABEL/WORKLOAD`, so
/// their labels must differ.
pub fn document(results: &[Results]) -> Result<Document> {
    let mut doc = Document::new();
    for r in results {
        for w in &r.workloads {
            let name = match results.len() {
                1 => w.name.clone(),
                _ => format!("{}/{}", run_label(r), w.name),
            };
            let measures = measures(r, w);
            if measures.is_empty() {
                continue;
            }
            if doc.insert(name.clone(), measures).is_some() {
                bail!("two results files give benchmark {name}: give the runs distinct labels");
            }
        }
    }
    Ok(doc)
}

fn measures(r: &Results, w: &WorkloadResult) -> BTreeMap<String, Metric> {
    let mut out = BTreeMap::new();
    if let Some(f) = Figure::of(r, w, &w.clean) {
        let (name, f) = main_measure(w.unit, f);
        out.insert(name, f.into());
    }
    for m in &w.extra {
        if let Some(f) = Figure::of(r, w, &m.clean) {
            out.insert(
                measure_name(&format!("{} ({})", m.name, m.unit.symbol())),
                f.into(),
            );
        }
    }
    for row in &w.attribution {
        if let Some(f) = Figure::of_path(r, w, row) {
            let name = format!("{} {}", row.kind.name(), row.name);
            out.insert(measure_name(&format!("{name} ns/op")), f.into());
        }
    }
    out
}

/// A time per operation is `latency` in nanoseconds (the unit of Bencher's built-in measure);
/// another unit is a measure named with its unit (`bandwidth (MB/s)`).
fn main_measure(unit: Unit, f: Figure) -> (String, Figure) {
    match rows::op_ns(unit, 1.0) {
        Some(ns) => ("latency".into(), f.scaled(ns)),
        None => (
            format!("{} ({})", unit.metric_name().to_lowercase(), unit.symbol()),
            f,
        ),
    }
}

/// `name` cut to Bencher's limit (a kernel function's name rarely comes near it).
pub fn measure_name(name: &str) -> String {
    match name.char_indices().nth(MEASURE_NAME_MAX) {
        Some((end, _)) => name[..end].to_string(),
        None => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn a_workload_is_a_benchmark_with_latency_in_ns_and_a_measure_per_path() {
        let doc = document(&[sample_results()]).unwrap();
        let open = &doc["open_close"];
        let latency = open["latency"];
        assert!((latency.value - 5000.0).abs() < 1e-9, "{latency:?}");
        assert!(latency.lower_value.unwrap() < 5000.0 && latency.upper_value.unwrap() > 5000.0);
        assert_eq!(open["hook security_file_open ns/op"].value, 400.0);
        assert_eq!(open["lsm apparmor_file_open ns/op"].value, 380.0);
        // One sample: a value without bounds.
        let build = &doc["build"];
        assert!((build["latency"].value / 124.36e9 - 1.0).abs() < 1e-12);
        assert_eq!(build["latency"].lower_value, None);
        assert_eq!(build["user (s)"].value, 815.8);
    }

    #[test]
    fn several_files_need_distinct_labels() {
        let (a, mut b) = (sample_results(), sample_results());
        let e = document(&[a.clone(), b.clone()]).unwrap_err().to_string();
        assert!(e.contains("distinct labels"), "{e}");
        b.label = "new".into();
        let doc = document(&[a.clone(), b]).unwrap();
        assert!(doc.contains_key("base/open_close") && doc.contains_key("new/open_close"));
        // The two variants of a paired run share a label; their variant tells them apart.
        let variant = |name: &str| {
            let mut r = a.clone();
            r.pairing = Some(crate::results::Pairing {
                run: "r1".into(),
                variant: name.into(),
                base_options: String::new(),
                versus_options: "--policy landlock:ro=/usr".into(),
            });
            r
        };
        let doc = document(&[variant("base"), variant("versus")]).unwrap();
        assert!(doc.contains_key("base:versus/open_close"), "{doc:?}");
    }

    #[test]
    fn measure_names_fit_bencher() {
        assert_eq!(measure_name(&"x".repeat(70)).len(), MEASURE_NAME_MAX);
        assert_eq!(measure_name("latency"), "latency");
    }
}
