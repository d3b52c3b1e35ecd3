//! Sampled attribution against exact timing, on a kernel that allows both: the sampled
//! inclusive ns/op of a hook (its share of the op's CPU samples, with the samples inside the
//! probes' own programs and trampolines counting for no path) against the fentry/fexit time
//! of the same hook in the same run, corrected for the probes nested inside it.
use hookprof::results::PathKind;
use hookprof_tests::{require_guest, require_root, row, run_to_results, workload};

#[test]
fn sampled_hook_costs_agree_with_the_fentry_timed_ones() {
    require_guest();
    require_root();
    let r = run_to_results(&[
        "--workloads",
        "open_close,fork_proc",
        "--hooks",
        "security_file_open,security_task_alloc",
        "--samples",
        "4",
        "--min-sample-ms",
        "150",
        "--sample-hz",
        "4999",
    ]);
    for (name, hook) in [
        ("open_close", "security_file_open"),
        ("fork_proc", "security_task_alloc"),
    ] {
        let w = workload(&r, name);
        let timed = row(w, hook);
        assert_eq!(timed.kind, PathKind::Hook);
        let p = w.profile.as_ref().expect("a sampled profile");
        let sampled = p
            .paths
            .iter()
            .find(|s| s.name == hook)
            .unwrap_or_else(|| panic!("{name}: {hook} not sampled: {:?}", p.paths));
        let ratio = sampled.ns_per_op / timed.corrected_ns_per_op;
        eprintln!(
            "{name}: {hook} sampled {:.0} ns/op ({:.0}-{:.0}, {} of {} samples, {} in the \
             probes), fentry {:.0} raw, {:.0} corrected: {ratio:.3}x",
            sampled.ns_per_op,
            sampled.ns_per_op_low,
            sampled.ns_per_op_high,
            sampled.inclusive_samples,
            p.samples,
            p.probe_samples,
            timed.ns_per_op,
            timed.corrected_ns_per_op
        );
        assert!(
            (0.75..=1.25).contains(&ratio),
            "{name}: {hook} sampled at {:.0} ns/op against {:.0} timed (corrected): {ratio:.2}x",
            sampled.ns_per_op,
            timed.corrected_ns_per_op
        );
    }
}
