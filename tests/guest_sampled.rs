//! Sampled attribution against exact timing, on a kernel that allows both. The two measure
//! one span alike: the samples with a hook on the stack, the probes' own inside it included
//! (`spanned_ns_per_op`), against the fentry/fexit time of that hook (raw, which holds the same
//! probes). Then the criterion: the hook's sampled cost, the probes' samples left out,
//! within 25% of its fentry-corrected time.
//!
//! The corrected time takes the probes out by the samples inside the span (`SampledSpan`), not
//! by the pair cost calibrated on getppid's function: under TCG a pair in place costs 6-10x
//! what the calibration's hot loop prices it at (the probes hold ~90% of security_file_open's
//! sampled span, two thirds of it in its LSM functions' trampolines), and the calibrated
//! figure, printed beside, stays 5-9x the sampled one. With the sampled correction the
//! criterion holds exactly when the clock's span and the samples' span agree, so both are
//! asserted.
//!
//! Those two readings share their samples, so a second run with no trampoline at all samples
//! each hook as nothing perturbs it. Under TCG it reads 0.22-0.80 of the corrected figure: the
//! hook's own code, entered through trampolines, runs slower there, which no correction from
//! that run's clock or samples can take out (the op-time difference with and without the
//! pairs prices one at 10x the calibration's figure under TCG, and the calibration's in-span
//! part there exceeds its whole pair, so the clock alone cannot correct either). The bound
//! asserts what holds on any kernel: a trampoline never makes a hook cheaper (within 25%),
//! and its perturbation stays within 10x (seen up to 4.6x here, 5.4x in an earlier session).
use hookprof::results::{CorrectionMethod, PathKind, Results, SampledPath, WorkloadResult};
use hookprof_tests::{require_guest, require_root, row, run_to_results, workload};

const RUN: [&str; 10] = [
    "--samples",
    "3",
    "--min-sample-ms",
    "500",
    "--sample-hz",
    "4999",
    "--workloads",
    "open_close,fork_proc",
    "--hooks",
    "security_file_open,security_task_alloc",
];
/// Each workload's hook, and how far its sampled span may stand from its clock's span beyond
/// the samples' own interval. fork_proc's is wider: under TCG on a loaded host the guest's
/// cpu-clock timer, with no NMI, fires where interrupts come back on, and fork's stretches
/// with interrupts off there outlast the 200 us period (a loaded CI runner read its span at
/// 1.77x the clock's with 99 samples, where a quiet host reads 1.0-1.2x).
const HOOKS: [(&str, &str, f64); 2] = [
    ("open_close", "security_file_open", 1.25),
    ("fork_proc", "security_task_alloc", 2.0),
];

fn sampled<'a>(w: &'a WorkloadResult, hook: &str) -> &'a SampledPath {
    let p = w.profile.as_ref().expect("a sampled profile");
    p.paths
        .iter()
        .find(|s| s.name == hook)
        .unwrap_or_else(|| panic!("{}: {hook} not sampled: {:?}", w.name, p.paths))
}

/// What the getppid calibration would leave of `hook`'s time per op: its own pair's part
/// inside the span and a whole pair per LSM function timed under it taken out.
fn calibrated_ns_per_op(r: &Results, w: &WorkloadResult, hook: &str) -> Option<f64> {
    let cal = r.calibration.as_ref()?;
    let (self_ns, pair_ns) = (cal.self_ns?, cal.timed_pair_ns?);
    let exact = row(w, hook);
    let nested: f64 = w
        .attribution
        .iter()
        .filter(|c| c.parent.as_deref() == Some(hook))
        .map(|c| c.calls_per_op)
        .sum();
    Some(exact.ns_per_op - exact.calls_per_op * self_ns - nested * pair_ns)
}

#[test]
fn sampled_hook_cost_agrees_with_the_fentry_corrected_time() {
    require_guest();
    require_root();
    let r = run_to_results(&RUN);
    let untimed =
        run_to_results(&[&RUN[..], &["--probes", "syscalls,tasks,sched,stacks"]].concat());
    for (name, hook, slack) in HOOKS {
        let w = workload(&r, name);
        let (exact, s) = (row(w, hook), sampled(w, hook));
        let p = w.profile.as_ref().unwrap();
        let per_sample = s.spanned_ns_per_op / s.spanned_samples.max(1) as f64;
        let (low, high) = hookprof::stats::wilson_interval(s.spanned_samples, p.samples);
        let (low, high) = (
            low * p.samples as f64 * per_sample,
            high * p.samples as f64 * per_sample,
        );
        eprintln!(
            "{name}: {hook} spanned by samples {:.0} ns/op ({low:.0}-{high:.0}, {} samples), \
             fentry raw {:.0}: {:.3}x; own: sampled {:.0} ns/op ({:.0}-{:.0}, {} samples), \
             fentry corrected ({:?}) {:.0}: {:.3}x; getppid-calibrated {:.0}",
            s.spanned_ns_per_op,
            s.spanned_samples,
            exact.ns_per_op,
            s.spanned_ns_per_op / exact.ns_per_op,
            s.ns_per_op,
            s.ns_per_op_low,
            s.ns_per_op_high,
            s.inclusive_samples,
            exact.correction,
            exact.corrected_ns_per_op,
            s.ns_per_op / exact.corrected_ns_per_op,
            calibrated_ns_per_op(&r, w, hook).unwrap_or(f64::NAN),
        );
        assert!(
            (low / slack..=slack * high).contains(&exact.ns_per_op),
            "{name}: {hook} timed at {:.0} ns/op, sampled over the same span at {:.0} \
             ({low:.0}-{high:.0})",
            exact.ns_per_op,
            s.spanned_ns_per_op
        );
        assert_eq!(
            exact.correction,
            Some(CorrectionMethod::SampledSpan),
            "{name}: {hook}'s span held {} samples, fewer than the {} the sampled correction \
             needs",
            s.spanned_samples,
            hookprof::attribution::MIN_SPANNED_SAMPLES
        );
        assert!(
            (0.75 * s.ns_per_op_low..=1.25 * s.ns_per_op_high).contains(&exact.corrected_ns_per_op),
            "{name}: {hook} sampled at {:.0} ns/op of its own ({:.0}-{:.0}), fentry-corrected \
             at {:.0}",
            s.ns_per_op,
            s.ns_per_op_low,
            s.ns_per_op_high,
            exact.corrected_ns_per_op
        );
        let untimed_w = workload(&untimed, name);
        // No function was timed there: nothing but the syscalls has a row.
        assert!(
            untimed_w
                .attribution
                .iter()
                .all(|r| r.kind == PathKind::Syscall),
            "{name}: the run without hook probes timed {:?}",
            untimed_w
                .attribution
                .iter()
                .map(|r| &r.name)
                .collect::<Vec<_>>()
        );
        let bare = sampled(untimed_w, hook);
        eprintln!(
            "{name}: {hook} sampled in a run with no trampoline {:.0} ns/op ({:.0}-{:.0}, {} \
             samples): {:.3}x the fentry-corrected figure",
            bare.ns_per_op,
            bare.ns_per_op_low,
            bare.ns_per_op_high,
            bare.inclusive_samples,
            bare.ns_per_op / exact.corrected_ns_per_op
        );
        assert!(
            0.1 * exact.corrected_ns_per_op <= bare.ns_per_op_high
                && bare.ns_per_op_low <= 1.25 * exact.corrected_ns_per_op,
            "{name}: {hook} sampled with no trampoline at {:.0} ns/op ({:.0}-{:.0}), \
             fentry-corrected at {:.0}",
            bare.ns_per_op,
            bare.ns_per_op_low,
            bare.ns_per_op_high,
            exact.corrected_ns_per_op
        );
    }
}
