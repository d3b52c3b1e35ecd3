//! Every printed figure possible, on this kernel: a run of the default suite and a sweep,
//! rendered in every format a person reads (text, markdown, the lmbench summary, HTML) and as
//! the results document, pass the figure lint (`hookprof_tests::figure_lint`): no time, cost
//! or rate below zero, no share above its whole, no part above the op, no clamp as a figure.
use std::path::Path;

use hookprof_tests::{
    figure_lint::{impossible_in_text, lint_reports, ok, say_and_keep, visible_text},
    one_at_a_time, require_root,
};

#[test]
fn no_format_of_a_default_suite_run_prints_an_impossible_figure() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("default.json");
    // Every workload of the suite with its stack passes, briefly: two rounds (the unit of the
    // intervals) of two samples, the fewest stack samples that still make intervals.
    let printed = ok(&[
        "run",
        "--suite",
        "default",
        "--rounds",
        "2",
        "--samples",
        "2",
        "--min-sample-ms",
        "1",
        "--stack-samples",
        "400",
        "-q",
        "-o",
        file.to_str().unwrap(),
    ]);
    let mut found = impossible_in_text("run's text", &printed);
    found.extend(lint_reports(&[&file], &[]));
    say_and_keep(dir, found);
}

#[test]
fn a_sweep_and_its_reports_print_no_impossible_figure() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sweep.json");
    let printed = ok(&[
        "run",
        "--workloads",
        "open_close",
        "--sweep",
        "landlock-layers=1,2,4",
        "--rounds",
        "3",
        "--samples",
        "2",
        "--stack-samples",
        "300",
        "-q",
        "-o",
        file.to_str().unwrap(),
    ]);
    let mut found = impossible_in_text("sweep's text", &printed);
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 3, "one file per value: {files:?}");
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    found.extend(lint_reports(&refs, &[]));
    let names: Vec<&str> = refs.iter().map(|p| p.to_str().unwrap()).collect();
    for format in ["text", "markdown", "html"] {
        let out = ok(&[&["report", "--sweep", "--format", format][..], &names].concat());
        let shown = if format == "html" {
            visible_text(&out)
        } else {
            out
        };
        found.extend(impossible_in_text(&format!("sweep {format}"), &shown));
    }
    say_and_keep(dir, found);
}

/// The lint over a results file made elsewhere (a guest's run, another machine's), named by
/// `HOOKPROF_LINT_FILE`: `cargo test --release -p hookprof-tests --test figures -- --ignored`.
#[test]
#[ignore = "lints the file HOOKPROF_LINT_FILE names"]
fn a_named_results_file_prints_no_impossible_figure() {
    let file = std::path::PathBuf::from(
        std::env::var("HOOKPROF_LINT_FILE").expect("HOOKPROF_LINT_FILE names a results file"),
    );
    let found = lint_reports(&[&file], &[]);
    assert!(
        found.is_empty(),
        "{} impossible figures in {}:\n{}",
        found.len(),
        file.display(),
        found.join("\n")
    );
}
