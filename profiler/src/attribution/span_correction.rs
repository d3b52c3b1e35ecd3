//! Exact timing corrected by the same run's samples. The calibration prices a probe pair in
//! a hot loop on getppid's function; in place, among a workload's other code, a pair can cost
//! several times that (in the emulated test guest 6-10x: `tests/guest_sampled.rs`), and the
//! calibrated correction then leaves most of the probes' cost in the span. Where enough
//! samples fell inside a timed function's span, the probes' share of them prices the probes
//! where they ran: the timed span times the share of its samples that were the workload's.
use crate::results::{AttributionRow, CorrectionMethod, PathKind, StackProfile};

use super::timing::add_dispatch;

/// Samples a span needs before its probes' share is trusted over the calibration (the
/// share's standard error is then at most 7 percentage points).
pub const MIN_SPANNED_SAMPLES: u64 = 50;

/// Re-corrects every timed function whose span holds enough samples of `profile`, and the
/// hooks' dispatch cost after it. Syscall rows keep the calibration: their probes run at the
/// syscall's edges, outside the span their samples are counted in.
///
/// The samples see a function's whole pair (its trampoline runs under the function's frame),
/// the clock only the part between its two reads, so this takes out a little more than the
/// span held: under TCG the clock read 0.89-0.94 of the sampled span.
pub fn correct_by_samples(rows: &mut [AttributionRow], profile: &StackProfile) {
    let mut corrected = false;
    for row in rows.iter_mut().filter(|r| r.kind != PathKind::Syscall) {
        let Some(path) = profile
            .paths
            .iter()
            .find(|p| p.kind == row.kind && p.name == row.name && p.parent == row.parent)
        else {
            continue;
        };
        if path.spanned_samples < MIN_SPANNED_SAMPLES {
            continue;
        }
        let own = path.inclusive_samples as f64 / path.spanned_samples as f64;
        row.corrected_ns_per_call = row.ns_per_call * own;
        row.corrected_ns_per_op = row.calls_per_op * row.corrected_ns_per_call;
        row.correction = Some(CorrectionMethod::SampledSpan);
        corrected = true;
    }
    if corrected {
        add_dispatch(rows);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::results::SampledPath;

    fn row(kind: PathKind, name: &str, parent: Option<&str>, ns: f64) -> AttributionRow {
        AttributionRow {
            kind,
            name: name.into(),
            parent: parent.map(String::from),
            lsm: None,
            calls_per_op: 1.0,
            ns_per_call: ns,
            ns_per_op: ns,
            share: Some(0.0),
            share_of_clean_op: None,
            corrected_ns_per_call: ns - 100.0,
            corrected_ns_per_op: ns - 100.0,
            correction: Some(CorrectionMethod::Calibrated),
            dispatch_ns_per_op: None,
            untimed_calls: 0,
            histogram: Vec::new(),
            samples_ns_per_op: Vec::new(),
            off_cpu_ns_per_op: None,
        }
    }

    /// A sampled path with `own` samples inside it and `spanned` with the probes' own.
    pub(crate) fn path(
        kind: PathKind,
        name: &str,
        parent: Option<&str>,
        own: u64,
        spanned: u64,
    ) -> SampledPath {
        SampledPath {
            kind,
            name: name.into(),
            parent: parent.map(String::from),
            lsm: None,
            syscall: None,
            inclusive_samples: own,
            self_samples: 0,
            inclusive_share: 0.0,
            share_low: 0.0,
            share_high: 0.0,
            self_share: 0.0,
            ns_per_op: 0.0,
            ns_per_op_low: 0.0,
            ns_per_op_high: 0.0,
            spanned_samples: spanned,
            spanned_ns_per_op: 0.0,
            round_samples: Vec::new(),
        }
    }

    fn profile(paths: Vec<SampledPath>) -> StackProfile {
        StackProfile {
            period_ns: 1000,
            stack_passes: None,
            samples: 1000,
            user_samples: 0,
            probe_samples: 0,
            lost_stacks: 0,
            ops: 1,
            on_cpu_ns_per_op: 0.0,
            paths,
            folded: Vec::new(),
            groups: Vec::new(),
            places: Vec::new(),
            round_samples: Vec::new(),
        }
    }

    #[test]
    fn spans_with_enough_samples_lose_their_probes_share_and_the_rest_keep_the_calibration() {
        let hook = "security_file_open";
        let mut rows = vec![
            row(PathKind::Hook, hook, None, 10_000.0),
            row(PathKind::Lsm, "apparmor_file_open", Some(hook), 4000.0),
            row(PathKind::Lsm, "bpf_lsm_file_open", Some(hook), 2000.0),
            row(PathKind::Syscall, "openat", None, 20_000.0),
        ];
        let sampled = profile(vec![
            // A quarter of the hook's span was its own work, the rest the probes'.
            path(PathKind::Hook, hook, None, 50, 200),
            path(PathKind::Lsm, "apparmor_file_open", Some(hook), 20, 80),
            // Too few samples to trust: the calibration stays.
            path(PathKind::Lsm, "bpf_lsm_file_open", Some(hook), 10, 40),
            path(PathKind::Syscall, "openat", None, 500, 1000),
        ]);
        correct_by_samples(&mut rows, &sampled);
        let figures: Vec<(f64, Option<CorrectionMethod>)> = rows
            .iter()
            .map(|r| (r.corrected_ns_per_op, r.correction))
            .collect();
        use CorrectionMethod::*;
        assert_eq!(
            figures,
            [
                (2500.0, Some(SampledSpan)),
                (1000.0, Some(SampledSpan)),
                (1900.0, Some(Calibrated)),
                (19_900.0, Some(Calibrated)),
            ]
        );
        // One of the hook's LSM functions kept the calibration: no dispatch, which would be
        // the difference of two methods.
        assert_eq!(rows[0].dispatch_ns_per_op, None);
        // With both re-corrected by samples, the dispatch follows: 2500 - 1000 - 250.
        let mut sampled = sampled;
        sampled.paths[2].spanned_samples = 80;
        correct_by_samples(&mut rows, &sampled);
        assert_eq!(rows[2].corrected_ns_per_op, 250.0);
        assert_eq!(rows[0].dispatch_ns_per_op, Some(1250.0));
    }

    #[test]
    fn a_path_sampled_under_another_parent_is_not_the_row_s() {
        let mut rows = vec![row(PathKind::Lsm, "f", Some("security_a"), 1000.0)];
        correct_by_samples(
            &mut rows,
            &profile(vec![path(PathKind::Lsm, "f", Some("security_b"), 10, 100)]),
        );
        assert_eq!(rows[0].correction, Some(CorrectionMethod::Calibrated));
    }
}
