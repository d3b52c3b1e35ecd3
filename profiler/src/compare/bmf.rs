//! The comparison as Bencher Metric Format JSON: a benchmark per workload, its measures the
//! clean op's change (%) and each tested path's change with the bounds of its interval at the
//! family's level, and how many paths regressed, so a Bencher threshold can gate on them.
use super::{paths::PathMethod, Comparison};
use crate::{
    export::bmf::{measure_name, Document, Metric},
    stats::Verdict,
};

pub fn document(c: &Comparison) -> Document {
    let mut doc = Document::new();
    for w in &c.workloads {
        let measures = doc.entry(w.name.clone()).or_default();
        if let Some(ch) = &w.change {
            measures.insert(
                "change (%)".into(),
                Metric {
                    value: 100.0 * ch.relative,
                    lower_value: ch.ci.map(|c| 100.0 * c.0),
                    upper_value: ch.ci.map(|c| 100.0 * c.1),
                },
            );
        }
        for v in &w.paths {
            let (unit, scale) = match v.method {
                PathMethod::Share => ("pp", 100.0),
                _ => ("ns/op", 1.0),
            };
            measures.insert(
                measure_name(&format!("change {} {unit}", v.label())),
                Metric {
                    value: scale * v.change,
                    lower_value: Some(scale * v.low),
                    upper_value: Some(scale * v.high).filter(|v| v.is_finite()),
                },
            );
        }
        let regressed = w
            .paths
            .iter()
            .filter(|v| v.verdict == Verdict::Regressed)
            .count();
        measures.insert(
            "paths regressed".into(),
            Metric {
                value: regressed as f64,
                lower_value: None,
                upper_value: None,
            },
        );
    }
    doc
}
