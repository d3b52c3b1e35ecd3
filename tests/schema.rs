//! The results document's JSON Schema (docs/src/results-schema.json): the manual's copy is
//! the binary's (`hookprof __schema`), and real documents validate against it: a quick run, a
//! run of the default suite, a `stat` run (all on this kernel, as root) and an imported
//! lmbench summary; a broken document does not. The validator is python's jsonschema (the
//! reference implementation, in the venv `cargo xtask setup` makes for the export tests), so
//! the schema is read by a tool other than the one that wrote it.
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use hookprof_tests::{hookprof, hookprof_bin, require_root};
use serde_json::Value;

fn manual_copy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/results-schema.json")
}

/// The schema the binary under test prints.
fn schema() -> Value {
    let out = hookprof(&["__schema"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("__schema prints JSON")
}

/// The venv's python, where setup installs jsonschema (with kcidb-io).
fn python() -> PathBuf {
    let target = hookprof_bin()
        .ancestors()
        .nth(2)
        .expect("target/PROFILE/hookprof")
        .to_path_buf();
    let python = target.join("checkers/kcidb-io/bin/python3");
    assert!(
        python.is_file(),
        "the checkers' venv is missing ({}): `cargo xtask setup` installs it",
        python.display()
    );
    python
}

/// jsonschema's verdict on the document in `file`: Ok, or the validator's message.
fn validate(file: &Path) -> Result<(), String> {
    let script = "import json, sys, jsonschema\n\
                  schema = json.load(sys.stdin)\n\
                  jsonschema.Draft202012Validator.check_schema(schema)\n\
                  jsonschema.Draft202012Validator(schema).validate(json.load(open(sys.argv[1])))";
    let mut child = Command::new(python())
        .args(["-c", script])
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start python");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(schema().to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(())
    } else {
        let message = String::from_utf8_lossy(&out.stderr);
        Err(message
            .lines()
            .rev()
            .take(12)
            .collect::<Vec<_>>()
            .join("\n"))
    }
}

/// Runs hookprof with `args` (which write `file`), then validates `file`.
fn run_and_validate(args: &[&str], file: &Path) {
    let out = hookprof(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    if let Err(e) = validate(file) {
        panic!("{args:?} wrote a document the schema rejects:\n{e}");
    }
}

#[test]
fn the_manuals_schema_is_the_one_the_binary_prints() {
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(manual_copy()).expect("docs/src/results-schema.json"),
    )
    .expect("the manual's schema is JSON");
    assert!(
        committed == schema(),
        "docs/src/results-schema.json is not what `hookprof __schema` prints: `cargo xtask docs` \
         writes it again"
    );
}

#[test]
fn a_quick_run_validates() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("quick.json");
    let f = file.to_str().unwrap();
    run_and_validate(
        &[&["run"], hookprof_tests::TINY_RUN, &["-o", f]].concat(),
        &file,
    );
}

#[test]
fn a_run_of_the_default_suite_validates() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("default.json");
    let f = file.to_str().unwrap();
    // Every workload of the suite, each briefly (the fewest samples run takes): the shape of a
    // default run, in about 35 s on a loaded 2-CPU machine.
    let args = [
        "run",
        "--suite",
        "default",
        "--rounds",
        "1",
        "--samples",
        "2",
    ];
    run_and_validate(
        &[&args[..], &["--min-sample-ms", "1", "-q", "-o", f]].concat(),
        &file,
    );
}

#[test]
fn a_stat_run_validates() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("stat.json");
    let f = file.to_str().unwrap();
    run_and_validate(
        &[
            "stat",
            "--runs",
            "2",
            "--rounds",
            "1",
            "-q",
            "-o",
            f,
            "--",
            "/bin/true",
        ],
        &file,
    );
}

#[test]
fn an_imported_lmbench_summary_validates() {
    let summary = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/lmbench2-summary-lsm-2.4.9.txt");
    let dir = tempfile::tempdir().unwrap();
    let out = hookprof(&[
        "import",
        "lmbench",
        summary.to_str().unwrap(),
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(
        files.len(),
        3,
        "the summary holds three configurations: {files:?}"
    );
    for file in files {
        if let Err(e) = validate(&file) {
            panic!("{} does not validate:\n{e}", file.display());
        }
    }
}

#[test]
fn a_broken_document_is_rejected() {
    let summary = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/lmbench2-summary-lsm-2.4.9.txt");
    let dir = tempfile::tempdir().unwrap();
    let out = hookprof(&[
        "import",
        "lmbench",
        summary.to_str().unwrap(),
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let good: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("00-base.json")).unwrap())
            .unwrap();
    let broken = dir.path().join("broken.json");
    // Each a mistake a reader would trip on: a sample that is text, a required field missing,
    // a version this hookprof does not read, a unit it does not know.
    type Breakage = (&'static str, fn(&mut Value));
    let breakages: [Breakage; 4] = [
        ("a sample as text", |d| {
            d["workloads"][0]["clean"][0] = "fast".into()
        }),
        ("no environment", |d| {
            d.as_object_mut().unwrap().remove("environment");
        }),
        ("schema_version 2", |d| d["schema_version"] = 2.into()),
        ("unit parsecs", |d| {
            d["workloads"][0]["unit"] = "parsecs".into()
        }),
    ];
    for (what, breaks) in breakages {
        let mut doc = good.clone();
        breaks(&mut doc);
        std::fs::write(&broken, doc.to_string()).unwrap();
        assert!(
            validate(&broken).is_err(),
            "the schema accepted a document with {what}"
        );
    }
}
