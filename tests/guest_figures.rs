//! The figure lint where fentry times the hooks: a short run (three workloads, two rounds, few
//! samples: TCG runs the guest ~50x slower than the host), its hooks timed and its stacks
//! sampled, rendered in every format a person reads and as its results document, with no
//! impossible figure in any. The host's lint (`figures.rs`) sees sampled hooks only.
use hookprof::results::{PathKind, Results};
use hookprof_tests::{
    assert_timed,
    figure_lint::{impossible_in_text, lint_reports, ok, say_and_keep},
    require_guest, require_root, workload,
};

#[test]
fn no_format_of_a_run_with_timed_hooks_prints_an_impossible_figure() {
    require_guest();
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("timed.json");
    let printed = ok(&[
        "run",
        "--workloads",
        "null_call,open_close,fork_proc",
        "--rounds",
        "2",
        "--samples",
        "2",
        "--min-sample-ms",
        "2",
        "--stack-samples",
        "200",
        "-q",
        "-o",
        file.to_str().unwrap(),
    ]);
    // The figures linted are the timed hooks' and LSM functions', not a fallback's.
    let r = Results::load(&file).expect("results file");
    let open = workload(&r, "open_close");
    assert_timed(open, "security_file_open", 1.0);
    assert!(
        open.attribution
            .iter()
            .any(|row| row.kind == PathKind::Lsm && row.ns_per_op > 0.0),
        "no LSM function timed under open_close's hooks: {:?}",
        open.attribution
    );
    let mut found = impossible_in_text("run's text", &printed);
    found.extend(lint_reports(&[&file], &[]));
    say_and_keep(dir, found);
}
