//! Results to test views and readers on: a run of two workloads, open_close probed with
//! hooks and an LSM, build clean only.
use super::{
    Accounting, AttributionRow, Environment, ExtraMetric, Family, PathKind, ProbeKind, ProbeRecord,
    ProbeReport, Refusal, Results, ShareWhole, Unit, WorkloadResult, SCHEMA_VERSION,
};

/// A profile of `own_ns` CPU time per op whose own samples fell in `places`, each with its
/// count (no probes' samples, no lost stacks).
pub(crate) fn places_profile(
    own_ns: f64,
    places: &[(super::Place, Option<&str>, u64)],
) -> super::StackProfile {
    let total: u64 = places.iter().map(|(_, _, n)| n).sum();
    super::StackProfile {
        period_ns: 1000,
        samples: total,
        user_samples: places
            .iter()
            .filter(|(p, _, _)| *p == super::Place::User)
            .map(|(_, _, n)| n)
            .sum(),
        ops: 1000,
        on_cpu_ns_per_op: own_ns,
        places: places
            .iter()
            .map(|&(place, syscall, samples)| {
                let share = samples as f64 / total as f64;
                let (low, high) = crate::stats::wilson_interval(samples, total);
                super::SampledPlace {
                    place,
                    syscall: syscall.map(String::from),
                    samples,
                    share,
                    share_low: low,
                    share_high: high,
                    ns_per_op: share * own_ns,
                    round_samples: Vec::new(),
                }
            })
            .collect(),
        ..Default::default()
    }
}

/// One task's accounting of an op: `on_cpu` ns on a CPU, `blocked` ns switched out asleep.
pub(crate) fn accounting(on_cpu: f64, blocked: f64) -> Accounting {
    Accounting {
        wall_ns_per_op: on_cpu + blocked,
        on_cpu_ns_per_op: on_cpu,
        off_cpu_runnable_ns_per_op: 0.0,
        off_cpu_blocked_ns_per_op: blocked,
        user_ns_per_op: None,
        kernel_ns_per_op: None,
        probe_ns_per_op: None,
        tasks: 1.0,
        probes_cost: None,
    }
}

pub(crate) fn row(
    kind: PathKind,
    name: &str,
    parent: Option<&str>,
    calls: f64,
    ns_call: f64,
) -> AttributionRow {
    AttributionRow {
        kind,
        name: name.into(),
        parent: parent.map(String::from),
        lsm: None,
        corrected_ns_per_call: 0.0,
        corrected_ns_per_op: 0.0,
        correction: None,
        dispatch_ns_per_op: None,
        calls_per_op: calls,
        ns_per_call: ns_call,
        ns_per_op: calls * ns_call,
        share: Some(calls * ns_call / 5000.0),
        share_of_clean_op: Some(calls * ns_call / 5000.0),
        untimed_calls: 0,
        histogram: vec![0, 0, 0, 0, 0, 0, 0, 0, 3, 10, 2],
        samples_ns_per_op: vec![],
        off_cpu_ns_per_op: None,
    }
}

/// A run of two workloads: open_close probed with hooks and an LSM, build clean only.
pub(crate) fn sample_results() -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        label: "base".into(),
        complete: true,
        source: crate::results::Source::Hookprof,
        environment: Environment {
            kernel_release: "6.1.0-18-amd64".into(),
            active_lsms: vec!["lockdown".into(), "capability".into(), "apparmor".into()],
            lockdown: "none".into(),
            cpu_model: "Test CPU".into(),
            cpus_online: 2,
            cpus_allowed: 2,
            hookprof_version: "0.1.0".into(),
            ..Default::default()
        },
        options: Default::default(),
        probes: ProbeReport {
            attached: vec![
                ProbeRecord {
                    kind: ProbeKind::RawTracepoint,
                    target: "sys_enter".into(),
                },
                ProbeRecord {
                    kind: ProbeKind::FEntry,
                    target: "security_file_open".into(),
                },
            ],
            refused: vec![Refusal {
                kind: ProbeKind::Lsm,
                target: "file_open".into(),
                errno: Some(1),
                reason: "dynamic ftrace is locked".into(),
            }],
            lsm_lookups: Vec::new(),
        },
        calibration: None,
        lsm_programs: Vec::new(),
        syscall_injections: Vec::new(),
        pairing: None,
        workloads: vec![
            WorkloadResult {
                name: "open_close".into(),
                family: Family::Processes,
                unit: Unit::Microseconds,
                iterations: 1000,
                clean: vec![5.0, 5.2, 4.8, 5.0, 5.0],
                probed: vec![5.0, 5.1, 4.9, 5.0, 5.0],
                extra: vec![],
                attribution: vec![
                    row(PathKind::Syscall, "openat", None, 1.0, 3000.0),
                    row(PathKind::Hook, "security_file_open", None, 1.0, 400.0),
                    row(
                        PathKind::Lsm,
                        "apparmor_file_open",
                        Some("security_file_open"),
                        1.0,
                        380.0,
                    ),
                    row(PathKind::Hook, "security_file_free", None, 1.0, 100.0),
                ],
                events_per_op: [("exit".to_string(), 0.0), ("fork".to_string(), 0.5)]
                    .into_iter()
                    .collect(),
                notes: vec!["3 calls could not be timed".into()],
                failure: None,
                runner_peak_rss_kib: None,
                copies: Vec::new(),
                round_sizes: Vec::new(),
                profile: None,
                accounting: None,
                share_of: Some(ShareWhole::CleanOp),
                other_programs: Vec::new(),
            },
            WorkloadResult {
                name: "build".into(),
                family: Family::Macro,
                unit: Unit::Seconds,
                iterations: 0,
                clean: vec![124.36],
                probed: vec![],
                extra: vec![ExtraMetric {
                    name: "user".into(),
                    unit: Unit::Seconds,
                    clean: vec![815.8],
                }],
                attribution: vec![],
                events_per_op: Default::default(),
                notes: vec![],
                failure: None,
                runner_peak_rss_kib: None,
                copies: Vec::new(),
                round_sizes: Vec::new(),
                profile: None,
                accounting: None,
                share_of: None,
                other_programs: Vec::new(),
            },
        ],
    }
}
