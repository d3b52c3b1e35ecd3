//! `compare` of two sweeps (the files of one `run --sweep` on each side, say two kernels): per
//! workload and per path both measured, the old and the new slope and their difference with
//! its interval (Welch's, from each slope's own interval and degrees of freedom). A workload's
//! op and paths are one family: Holm's step-down decides which changed, and each interval is
//! at the level Holm tested its difference at, so it leaves out 0 exactly when that says
//! "changed".
use std::fmt::Write;

use anyhow::{bail, Result};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use super::{fit::Line, report::Sweep};
use crate::{
    output::{self, Document, Format},
    report::{figures::num, markup::Markup},
    results::{PathKind, Results},
    stats,
};

#[derive(Debug, Clone, Serialize)]
pub struct SweepComparison {
    pub parameter: String,
    pub unit: String,
    pub old_values: Vec<u64>,
    pub new_values: Vec<u64>,
    pub workloads: Vec<WorkloadSlopes>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSlopes {
    pub name: String,
    pub unit: String,
    pub op: SlopeChange,
    /// The paths both sides saw, largest change first.
    pub paths: Vec<PathSlopes>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PathSlopes {
    pub kind: PathKind,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub change: SlopeChange,
}

#[derive(Debug, Clone, Copy, Serialize)]
pub struct SlopeChange {
    pub old: f64,
    pub new: f64,
    /// new - old, with its interval at `level` (None where a side's slope has none).
    pub difference: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
    /// The Holm-adjusted p-value that the slopes are equal, over the workload's op and paths.
    pub p_holm: Option<f64>,
    /// The interval's level: 95% alone, wider in a family (Holm's step for this difference).
    pub level: Option<f64>,
    /// The difference's standard error and Welch degrees of freedom.
    #[serde(skip)]
    error: Option<(f64, f64)>,
}

/// Below this Holm-adjusted p a slope changed.
const ALPHA: f64 = 0.05;

impl SlopeChange {
    fn of(old: &Line, new: &Line) -> SlopeChange {
        let se = |l: &Line| -> Option<(f64, f64)> {
            let t = StudentsT::new(0.0, 1.0, l.df).ok()?.inverse_cdf(0.975);
            Some(((l.slope_high? - l.slope_low?) / 2.0 / t, l.df))
        };
        let error = se(old).zip(se(new)).map(|((a, da), (b, db))| {
            let s2 = a * a + b * b;
            (s2.sqrt(), s2 * s2 / (a.powi(4) / da + b.powi(4) / db))
        });
        SlopeChange {
            old: old.slope,
            new: new.slope,
            difference: new.slope - old.slope,
            low: None,
            high: None,
            p_holm: None,
            level: None,
            error,
        }
    }

    /// The two-sided p-value that the slopes are equal.
    fn p(&self) -> Option<f64> {
        let (se, df) = self.error.filter(|(se, _)| *se > 0.0)?;
        let t = StudentsT::new(0.0, 1.0, df).ok()?;
        Some(2.0 * (1.0 - t.cdf((self.difference / se).abs())))
    }

    /// Whether Holm's step-down says the slope changed (its interval leaves out 0).
    pub fn changed(&self) -> bool {
        self.p_holm.is_some_and(|p| p < ALPHA)
    }
}

/// Holm over `family` (a workload's op and paths): each change's adjusted p and its interval
/// at the level it was tested at.
fn holm(family: &mut [&mut SlopeChange]) {
    let tested: Vec<usize> = (0..family.len())
        .filter(|&i| family[i].p().is_some())
        .collect();
    let ps: Vec<f64> = tested.iter().filter_map(|&i| family[i].p()).collect();
    let (adjusted, levels) = (stats::holm(&ps), stats::holm_levels(&ps, ALPHA));
    for ((i, p), level) in tested.into_iter().zip(adjusted).zip(levels) {
        let c = &mut *family[i];
        let Some((se, df)) = c.error else { continue };
        let Ok(t) = StudentsT::new(0.0, 1.0, df) else {
            continue;
        };
        let half = t.inverse_cdf(1.0 - level / 2.0) * se;
        (c.low, c.high) = (Some(c.difference - half), Some(c.difference + half));
        (c.p_holm, c.level) = (Some(p), Some(1.0 - level));
    }
}

/// Whether `side`'s files are values of a `run --sweep`, two or more (one value a side is
/// compared as any results are: paired round by round where both come from one run).
pub fn is_sweep(side: &[Results]) -> bool {
    side.len() >= 2
        && side.iter().all(|r| {
            r.pairing
                .as_ref()
                .is_some_and(|p| p.versus_options.starts_with("--sweep "))
        })
}

/// The slopes of `old`'s sweep against `new`'s: the same parameter, any values.
pub fn compare(old: Vec<Results>, new: Vec<Results>) -> Result<SweepComparison> {
    let (old, new) = (Sweep::of_files(old)?, Sweep::of_files(new)?);
    if old.parameter != new.parameter {
        bail!(
            "the sides sweep different parameters ({} and {}): their slopes are not comparable",
            old.parameter,
            new.parameter
        );
    }
    let mut workloads = Vec::new();
    for o in &old.workloads {
        let Some(n) = new.workloads.iter().find(|n| n.name == o.name) else {
            continue;
        };
        let (Some(ol), Some(nl)) = (&o.op.line, &n.op.line) else {
            continue;
        };
        let mut paths: Vec<PathSlopes> = o
            .paths
            .iter()
            .filter_map(|op| {
                let np = n.paths.iter().find(|np| {
                    (np.kind, &np.name, &np.parent) == (op.kind, &op.name, &op.parent)
                })?;
                Some(PathSlopes {
                    kind: op.kind,
                    name: op.name.clone(),
                    parent: op.parent.clone(),
                    change: SlopeChange::of(op.curve.line.as_ref()?, np.curve.line.as_ref()?),
                })
            })
            .collect();
        paths.sort_by(|a, b| {
            b.change
                .difference
                .abs()
                .total_cmp(&a.change.difference.abs())
        });
        let mut op = SlopeChange::of(ol, nl);
        let mut family: Vec<&mut SlopeChange> = std::iter::once(&mut op)
            .chain(paths.iter_mut().map(|p| &mut p.change))
            .collect();
        holm(&mut family);
        workloads.push(WorkloadSlopes {
            name: o.name.clone(),
            unit: o.unit.clone(),
            op,
            paths,
        });
    }
    Ok(SweepComparison {
        parameter: old.parameter,
        unit: old.unit,
        old_values: old.values,
        new_values: new.values,
        workloads,
    })
}

impl Document for SweepComparison {
    const FORMATS: &'static [Format] = &[Format::Text, Format::Markdown, Format::Json];

    fn export(&self, format: Format) -> Result<Vec<u8>> {
        match format {
            Format::Text => Ok(render(self, Markup::Terminal).into_bytes()),
            Format::Markdown => Ok(render(self, Markup::Markdown).into_bytes()),
            other => output::unlisted(other),
        }
    }
}

/// The paths a text comparison lists per workload.
const PATHS_SHOWN: usize = 8;

fn render(c: &SweepComparison, markup: Markup) -> String {
    let values = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    let mut out = format!(
        "Slopes of two sweeps of {} (old {}, new {}): per {}, the difference's interval from \
         each slope's own (Welch), at the level Holm's step-down tested it at over the \
         workload's op and paths (95% alone, wider in a family): it leaves out 0 exactly when \
         the slope changed\n",
        c.parameter,
        values(&c.old_values),
        values(&c.new_values),
        c.unit
    );
    if c.workloads.is_empty() {
        out.push_str("No workload has a line on both sides.\n");
    }
    for w in &c.workloads {
        let step = format!("per {}", c.unit);
        let mut table =
            markup.table(&["", &format!("old {step}"), "new", "change", "interval", ""]);
        let mut add = |name: String, s: &SlopeChange| {
            table.add_row(vec![
                name,
                num(s.old),
                num(s.new),
                num(s.difference),
                match (s.low, s.high) {
                    (Some(lo), Some(hi)) => format!("{} to {}", num(lo), num(hi)),
                    _ => String::new(),
                },
                if s.changed() { "changed" } else { "" }.into(),
            ]);
        };
        add(format!("op ({})", w.unit), &w.op);
        for p in w.paths.iter().take(PATHS_SHOWN) {
            add(format!("{} {} (ns/op)", p.kind.name(), p.name), &p.change);
        }
        let _ = write!(out, "\n{}\n{table}\n", w.name);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One value of a `landlock-rules` sweep of `run`: open_close `per_rule` ns slower per
    /// rule, in five rounds that drift together, hook_file_open likewise.
    fn value(run: &str, rules: u64, per_rule: f64) -> Results {
        const DRIFT: [f64; 5] = [0.0, 0.03, -0.02, 0.01, -0.015];
        const NOISE: [f64; 5] = [0.0004, -0.0003, 0.0002, -0.0001, 0.0];
        let clean: Vec<f64> = (0..5)
            .map(|r| {
                2.0 + per_rule * rules as f64 / 1e3 + DRIFT[r] + NOISE[(r + rules as usize) % 5]
            })
            .collect();
        let text = serde_json::json!({
            "schema_version": 1, "label": run, "complete": true, "source": "hookprof",
            "environment": {"kernel_release": "k", "hookprof_version": "0"},
            "pairing": {"run": run, "variant": format!("landlock-rules={rules}"),
                "base_options": "", "versus_options": "--sweep landlock-rules=0,10,100"},
            "workloads": [{"name": "open_close", "family": "processes", "unit": "us",
                "clean": clean, "round_sizes": [1, 1, 1, 1, 1],
                "attribution": [{"kind": "lsm", "name": "hook_file_open",
                    "parent": "security_file_open", "calls_per_op": 1.0,
                    "ns_per_call": 40.0 + per_rule * rules as f64, "ns_per_op": 40.0 + per_rule * rules as f64,
                    "corrected_ns_per_call": 40.0 + per_rule * rules as f64,
                    "corrected_ns_per_op": 40.0 + per_rule * rules as f64, "share": 0.0}]}],
        })
        .to_string();
        Results::parse(&text, run).unwrap()
    }

    fn side(run: &str, per_rule: f64) -> Vec<Results> {
        [0, 10, 100].map(|n| value(run, n, per_rule)).into()
    }

    #[test]
    fn a_slope_that_grew_is_changed_and_an_equal_one_is_not() {
        assert!(is_sweep(&side("a", 2.0)) && !is_sweep(&side("a", 2.0)[..1]));
        let c = compare(side("a", 2.0), side("b", 5.0)).unwrap();
        let w = &c.workloads[0];
        assert!(
            (w.op.old - 2.0).abs() < 0.05 && (w.op.new - 5.0).abs() < 0.05,
            "{w:?}"
        );
        assert!(
            (w.op.difference - 3.0).abs() < 0.1 && w.op.changed(),
            "{w:?}"
        );
        assert_eq!(w.paths[0].name, "hook_file_open");
        assert!((w.paths[0].change.difference - 3.0).abs() < 1e-9, "{w:?}");
        let same = compare(side("a", 2.0), side("b", 2.0)).unwrap();
        assert!(!same.workloads[0].op.changed(), "{:?}", same.workloads[0]);
        let text = render(&c, Markup::Terminal);
        assert!(
            text.contains("Slopes of two sweeps of landlock-rules"),
            "{text}"
        );
        assert!(text.contains("changed"), "{text}");
    }
}
