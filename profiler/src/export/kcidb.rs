//! Results as KCIDB v5 JSON, the schema KernelCI's common database takes (and kcidb-io
//! validates): the kernel that ran is a checkout and a build, each workload and each probed
//! path a test with its `number`, the machine in the test's `environment.misc`.
//!
//! The origin is `hookprof`, and ids are made from what the file records, so exporting the
//! same file twice gives the same ids. A results file knows the kernel's release and version
//! string, not its source commit, tree or architecture: those fields are left out.
use serde::Serialize;
use serde_json::{json, Value};

use super::{identifier, rfc3339, run_label, Figure};
use crate::results::{Results, Unit, WorkloadResult};

/// The origin of every object: the CI system that produced them.
pub const ORIGIN: &str = "hookprof";
/// The schema version written; kcidb-io validates against it exactly.
pub const VERSION: (u32, u32) = (5, 3);

#[derive(Debug, Serialize)]
pub struct Document {
    pub version: Version,
    pub checkouts: Vec<Checkout>,
    pub builds: Vec<Build>,
    pub tests: Vec<Test>,
}

#[derive(Debug, Serialize)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Checkout {
    pub id: String,
    pub origin: &'static str,
    pub comment: String,
    pub misc: Value,
}

#[derive(Debug, Serialize, PartialEq)]
pub struct Build {
    pub id: String,
    pub checkout_id: String,
    pub origin: &'static str,
    pub comment: String,
    pub misc: Value,
}

#[derive(Debug, Serialize)]
pub struct Test {
    pub id: String,
    pub build_id: String,
    pub origin: &'static str,
    /// `hookprof.WORKLOAD`, `hookprof.WORKLOAD.EXTRA` or `hookprof.WORKLOAD.KIND.PATH`.
    pub path: String,
    /// DONE: measured (a single run has no pass or fail); ERROR: the workload failed.
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub number: Option<Number>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    pub environment: Environment,
    pub misc: Value,
}

/// A test's numerical output, in a base unit with a metric prefix to add when shown.
#[derive(Debug, Serialize, PartialEq)]
pub struct Number {
    pub value: f64,
    pub unit: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prefix: Option<&'static str>,
}

#[derive(Debug, Serialize)]
pub struct Environment {
    pub comment: String,
    pub misc: Value,
}

pub fn document(results: &[Results]) -> Document {
    let mut doc = Document {
        version: Version {
            major: VERSION.0,
            minor: VERSION.1,
        },
        checkouts: Vec::new(),
        builds: Vec::new(),
        tests: Vec::new(),
    };
    for r in results {
        let (checkout, build) = kernel(r);
        if !doc.checkouts.contains(&checkout) {
            doc.checkouts.push(checkout);
        }
        if !doc.builds.contains(&build) {
            doc.builds.push(build);
        }
        let build_id = kernel(r).1.id;
        for w in &r.workloads {
            doc.tests.extend(workload_tests(r, w, &build_id));
        }
    }
    doc
}

/// The kernel that ran, as a checkout and its build: identified by its release and version
/// string, the most a results file knows of it.
fn kernel(r: &Results) -> (Checkout, Build) {
    let e = &r.environment;
    let release = if e.kernel_release.is_empty() {
        "unknown"
    } else {
        &e.kernel_release
    };
    let id = format!("{ORIGIN}:{release} {}", e.kernel_version)
        .trim_end()
        .to_string();
    let misc = json!({"kernel_release": e.kernel_release, "kernel_version": e.kernel_version});
    let checkout = Checkout {
        id: id.clone(),
        origin: ORIGIN,
        comment: format!("the kernel {release} as it ran; its source commit was not recorded"),
        misc: misc.clone(),
    };
    let build = Build {
        id,
        checkout_id: checkout.id.clone(),
        origin: ORIGIN,
        comment: format!("the running kernel {release}"),
        misc,
    };
    (checkout, build)
}

/// The main metric's test, each further metric's, and one per attributed path.
fn workload_tests(r: &Results, w: &WorkloadResult, build_id: &str) -> Vec<Test> {
    let run = format!(
        "{}/{}/{}",
        r.environment.hostname,
        r.environment.started_at,
        run_label(r)
    );
    let test = |path: String, number: Option<Number>, misc: Value| Test {
        id: format!("{ORIGIN}:{run}/{path}"),
        build_id: build_id.to_string(),
        origin: ORIGIN,
        status: if w.failure.is_some() { "ERROR" } else { "DONE" },
        comment: w.failure.as_ref().map(|f| f.sentence()),
        number,
        start_time: rfc3339(r.environment.started_at),
        environment: environment(r),
        misc,
        path,
    };
    let base = format!("hookprof.{}", identifier(&w.name));
    let mut tests = Vec::new();
    let main = Figure::of(r, w, &w.clean);
    tests.push(test(
        base.clone(),
        main.map(|f| number(f.value, w.unit)),
        json!({
            "label": r.label,
            "variant": r.pairing.as_ref().map(|p| &p.variant),
            "source": r.source,
            "family": w.family,
            "unit": w.unit,
            "figure": main.map(|f| figure_misc(&f, w.unit)),
            "probed": Figure::of(r, w, &w.probed).map(|f| figure_misc(&f, w.unit)),
            "options": r.options,
        }),
    ));
    for m in &w.extra {
        let f = Figure::of(r, w, &m.clean);
        tests.push(test(
            format!("{base}.{}", identifier(&m.name)),
            f.map(|f| number(f.value, m.unit)),
            json!({"label": r.label, "unit": m.unit, "figure": f.map(|f| figure_misc(&f, m.unit))}),
        ));
    }
    for row in &w.attribution {
        let f = Figure::of_path(r, w, row);
        let kind = serde_json::to_value(row.kind).unwrap_or_default();
        tests.push(test(
            format!(
                "{base}.{}.{}",
                kind.as_str().unwrap_or("path"),
                identifier(&row.name)
            ),
            f.map(|f| number(f.value, Unit::Nanoseconds)),
            json!({
                "label": r.label,
                "what": "time in this path per operation of the workload (probed samples)",
                "name": row.name,
                "parent": row.parent,
                "lsm": row.lsm,
                "calls_per_op": row.calls_per_op,
                "ns_per_call": row.ns_per_call,
                "corrected_ns_per_op": row.corrected_ns_per_op,
                "share": row.share,
                "share_of": w.share_of,
                "share_of_clean_op": row.share_of_clean_op,
                "untimed_calls": row.untimed_calls,
                "figure": f.map(|f| figure_misc(&f, Unit::Nanoseconds)),
            }),
        ));
    }
    tests
}

/// A figure in a base unit (s, B/s) with the metric prefix, as KCIDB shows scaled units.
fn number(value: f64, unit: Unit) -> Number {
    let (factor, unit, prefix) = match unit {
        Unit::Microseconds => (1e-6, "s", Some("metric")),
        Unit::Nanoseconds => (1e-9, "s", Some("metric")),
        Unit::Seconds => (1.0, "s", Some("metric")),
        Unit::MegabytesPerSecond => (1e6, "B/s", Some("metric")),
        Unit::Percent => (1.0, "%", None),
    };
    Number {
        value: value * factor,
        unit,
        prefix,
    }
}

/// The figure in the file's own unit, with its interval and what it was taken over.
fn figure_misc(f: &Figure, unit: Unit) -> Value {
    json!({
        "mean": f.value,
        "ci95": f.ci.map(|(lo, hi)| [lo, hi]),
        "n": f.n,
        "per": f.per,
        "unit": unit,
    })
}

/// The machine and kernel the test ran on: the results file's environment, whole.
fn environment(r: &Results) -> Environment {
    let e = &r.environment;
    let comment = [e.hostname.as_str(), e.cpu_model.as_str()]
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(", ");
    Environment {
        comment: if comment.is_empty() {
            "not recorded".into()
        } else {
            comment
        },
        misc: serde_json::to_value(e).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn each_workload_and_each_path_is_a_test_of_one_build() {
        let mut r = sample_results();
        r.environment.hostname = "runner-1".into();
        r.environment.started_at = 1_700_000_000;
        let doc = document(&[r.clone(), r]);
        // Two files of the same kernel: one checkout, one build.
        assert_eq!((doc.checkouts.len(), doc.builds.len()), (1, 1));
        assert_eq!(doc.builds[0].id, "hookprof:6.1.0-18-amd64");
        let paths: Vec<&str> = doc.tests.iter().map(|t| t.path.as_str()).collect();
        assert_eq!(
            &paths[..6],
            [
                "hookprof.open_close",
                "hookprof.open_close.syscall.openat",
                "hookprof.open_close.hook.security_file_open",
                "hookprof.open_close.lsm.apparmor_file_open",
                "hookprof.open_close.hook.security_file_free",
                "hookprof.build",
            ]
        );
        let open = &doc.tests[0];
        assert_eq!(
            open.id,
            "hookprof:runner-1/1700000000/base/hookprof.open_close"
        );
        assert_eq!(open.status, "DONE");
        let n = open.number.as_ref().unwrap();
        assert!((n.value - 5.0e-6).abs() < 1e-18 && n.unit == "s", "{n:?}");
        assert_eq!(open.start_time.as_deref(), Some("2023-11-14T22:13:20Z"));
        assert_eq!(open.environment.misc["cpu_model"], "Test CPU");
        let hook = &doc.tests[2];
        assert!((hook.number.as_ref().unwrap().value - 400e-9).abs() < 1e-18);
        assert_eq!(hook.misc["calls_per_op"], 1.0);
    }

    #[test]
    fn a_failed_workload_is_an_error_that_says_why() {
        let mut r = sample_results();
        r.workloads[1].clean.clear();
        r.workloads[1].failure = Some(crate::results::WorkloadFailure {
            phase: "warm-up".into(),
            error: "make failed".into(),
        });
        let doc = document(&[r]);
        let build = doc
            .tests
            .iter()
            .find(|t| t.path == "hookprof.build")
            .unwrap();
        assert_eq!(build.status, "ERROR");
        assert_eq!(build.number, None);
        assert_eq!(
            build.comment.as_deref(),
            Some("failed in warm-up: make failed")
        );
        // Nothing recorded is nothing claimed: no start time.
        assert_eq!(build.start_time, None);
    }
}
