//! The exports checked by the ecosystem's own checkers: kcidb-io's schema validation for KCIDB
//! (from the venv `cargo xtask setup` makes in the target directory), `promtool check metrics`
//! for the Prometheus text, Bencher's documented BMF schema (through the same venv's
//! jsonschema) with the limits its docs state, and `go tool pprof` for the pprof profiles. A
//! checker that setup should have installed and did not is a failure, not a skip. Each checker
//! is first shown to reject a broken document; then fixtures (two runs and an lmbench import)
//! and real runs on this kernel (root) pass.
use std::{
    io::Write,
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
};

use hookprof_tests::{hookprof, hookprof_bin, one_at_a_time, require_root};
use serde_json::{json, Value};

/// `report FILES --format FORMAT`, which must succeed.
fn export(files: &[&str], format: &str) -> String {
    let mut args = vec!["report"];
    args.extend(files);
    args.extend(["--format", format]);
    let out = hookprof(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The target directory of the binary under test, where setup puts the checkers' venv.
fn target_dir() -> PathBuf {
    hookprof_bin()
        .ancestors()
        .nth(2)
        .expect("target/PROFILE/hookprof")
        .to_path_buf()
}

fn kcidb_python() -> PathBuf {
    let python = target_dir().join("checkers/kcidb-io/bin/python3");
    assert!(
        python.is_file(),
        "kcidb-io's venv is missing ({}): `cargo xtask setup` installs it",
        python.display()
    );
    python
}

fn promtool() -> &'static str {
    let found = Command::new("promtool").arg("--version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "promtool is missing: `cargo xtask setup` installs Debian's prometheus package"
    );
    "promtool"
}

/// Go's pprof, as `go tool pprof`.
fn go() -> &'static str {
    let found = Command::new("go").arg("version").output();
    assert!(
        found.is_ok_and(|o| o.status.success()),
        "go is missing: `cargo xtask setup` installs Debian's golang-go, whose `go tool pprof` \
         reads the pprof export"
    );
    "go"
}

/// `go tool pprof ARGS PROFILE`'s stdout, which must succeed.
fn go_pprof(args: &[&str], profile: &Path) -> String {
    let out = Command::new(go())
        .args(["tool", "pprof"])
        .args(args)
        .arg(profile)
        .output()
        .expect("run go tool pprof");
    assert!(
        out.status.success(),
        "go tool pprof {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `hookprof COMMAND -o DIR/NAME ARGS` on this kernel, which must succeed; its results file.
fn measured(dir: &Path, name: &str, command: &str, args: &[&str]) -> PathBuf {
    let file = dir.join(name);
    let all = [
        &[command, "--quiet", "-o", file.to_str().unwrap()][..],
        args,
    ]
    .concat();
    let out = hookprof(&all);
    assert!(
        out.status.success(),
        "{all:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    file
}

/// `report FILE --format pprof` written beside FILE (as `.pb.gz`), a gzip stream.
fn export_pprof(file: &Path) -> PathBuf {
    let out = hookprof(&["report", file.to_str().unwrap(), "--format", "pprof"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.get(..2), Some(&[0x1f, 0x8b][..]), "not gzip");
    let profile = file.with_extension("pb.gz");
    std::fs::write(&profile, &out.stdout).unwrap();
    profile
}

/// The samples a results file's workload folded, which the pprof profile must total.
fn folded_samples(file: &Path, workload: usize) -> u64 {
    let results: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    results["workloads"][workload]["profile"]["folded"]
        .as_array()
        .expect("a sampled profile")
        .iter()
        .map(|line| line[1].as_u64().unwrap())
        .sum()
}

/// `go tool pprof -top` of `profile` in samples totals the samples its results `file` folded.
fn assert_counts_folded(profile: &Path, file: &Path) {
    let top = go_pprof(
        &["-top", "-nodefraction=0", "-sample_index=samples"],
        profile,
    );
    let total = top
        .lines()
        .find_map(|l| l.split(" of ").nth(1)?.strip_suffix(" total"))
        .unwrap_or_else(|| panic!("no total: {top}"));
    assert_eq!(total, folded_samples(file, 0).to_string(), "{top}");
}

/// Runs `cmd` with `input` on stdin.
fn feed(cmd: &mut Command, input: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the checker");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// kcidb-io's verdict on `doc`: Ok, or the validator's message.
fn kcidb_validate(doc: &str) -> Result<(), String> {
    let script = "import json, sys, kcidb_io\n\
                  kcidb_io.schema.V5_3.validate_exactly(json.load(sys.stdin))";
    let out = feed(Command::new(kcidb_python()).args(["-c", script]), doc);
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Bencher's BMF as its docs state it, as a JSON Schema: an object of benchmarks (any
/// non-empty name), each an object of measures (any non-empty name), each an object with a
/// number `value` and optionally the numbers `lower_value` and `upper_value`.
fn bmf_schema() -> Value {
    let number = json!({"type": "number"});
    json!({
        "$schema": "http://json-schema.org/draft-07/schema",
        "type": "object",
        "patternProperties": {".+": {
            "type": "object",
            "patternProperties": {".+": {
                "type": "object",
                "properties": {"value": number, "lower_value": number, "upper_value": number},
                "required": ["value"],
            }},
        }},
    })
}

/// `doc` against the BMF schema with jsonschema, then the limits the docs state beside it:
/// benchmark names up to 1024 characters, measure names up to 64.
fn bmf_validate(doc: &str) -> Result<(), String> {
    let script = format!(
        "import json, sys, jsonschema\n\
         jsonschema.Draft7Validator({}).validate(json.load(sys.stdin))",
        bmf_schema()
    );
    let out = feed(Command::new(kcidb_python()).args(["-c", &script]), doc);
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let value: Value = serde_json::from_str(doc).map_err(|e| e.to_string())?;
    for (benchmark, measures) in value.as_object().ok_or("not an object")? {
        if benchmark.is_empty() || benchmark.chars().count() > 1024 {
            return Err(format!("benchmark name {benchmark:?}"));
        }
        for measure in measures.as_object().ok_or("not an object")?.keys() {
            if measure.is_empty() || measure.chars().count() > 64 {
                return Err(format!("measure name {measure:?}"));
            }
        }
    }
    Ok(())
}

/// A run of four workloads: open_close in two rounds with syscalls, a hook and an LSM function
/// under it; bw_pipe (a bandwidth); build with a further metric; fs_create_0k, which failed.
fn results(label: &str, host: &str) -> String {
    let row = |kind: &str, name: &str, parent: Option<&str>, ns: f64| {
        json!({
            "kind": kind, "name": name, "parent": parent,
            "lsm": parent.map(|_| "apparmor"), "calls_per_op": 1.0,
            "ns_per_call": ns, "ns_per_op": ns, "share": ns / 5000.0, "untimed_calls": 1,
            "samples_ns_per_op": [ns, ns * 1.01, ns * 0.99, ns * 1.02],
            "histogram": [0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 10, 2, 0, 1],
        })
    };
    json!({
        "schema_version": 1, "label": label, "complete": false, "source": "hookprof",
        "environment": {"kernel_release": "6.1.0-test", "kernel_version": "#1 SMP Debian",
                        "hookprof_version": "0", "started_at": 1_700_000_000,
                        "hostname": host, "cpu_model": "Test CPU", "active_lsms": ["apparmor"]},
        "options": {"samples": 4},
        "workloads": [
            {"name": "open_close", "family": "processes", "unit": "us", "iterations": 1000,
             "clean": [5.0, 5.01, 4.98, 5.0], "probed": [5.5, 5.5, 5.6, 5.4],
             "round_sizes": [2, 2],
             "attribution": [
                row("syscall", "openat", None, 3000.0),
                row("hook", "security_file_open", None, 400.0),
                row("lsm", "apparmor_file_open", Some("security_file_open"), 300.0),
             ]},
            {"name": "bw_pipe", "family": "bandwidth", "unit": "MB/s",
             "clean": [977.6, 980.0, 975.0]},
            {"name": "build", "family": "macro", "unit": "s", "clean": [124.0, 125.0],
             "extra": [{"name": "user", "unit": "s", "clean": [815.8, 816.0]}]},
            {"name": "fs_create_0k", "family": "file_vm", "unit": "us", "clean": [],
             "failure": {"phase": "sample 2", "error": "No space left on device (os error 28)"}},
        ]
    })
    .to_string()
}

/// Two runs on two hosts, and an imported lmbench summary (no host, no start time).
fn fixtures(dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for (label, host) in [("base", "runner-1"), ("patched", "runner-2")] {
        let path = dir.join(format!("{label}.json"));
        std::fs::write(&path, results(label, host)).unwrap();
        files.push(path.display().to_string());
    }
    let summary = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../profiler/tests/data/lmbench2-summary-lsm-2.4.9.txt");
    let imported = dir.join("imported");
    let out = hookprof(&[
        "import",
        "lmbench",
        summary.to_str().unwrap(),
        "-o",
        imported.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<PathBuf> = std::fs::read_dir(&imported)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    files.push(names[0].display().to_string());
    files
}

#[test]
fn the_kcidb_export_passes_kcidb_ios_validation() {
    assert!(
        kcidb_validate(r#"{"version": {"major": 5, "minor": 3}, "builds": [{"id": "x:1"}]}"#)
            .is_err(),
        "kcidb-io takes a build without checkout_id and origin"
    );
    let dir = tempfile::tempdir().unwrap();
    let files = fixtures(dir.path());
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    for set in [&files[..1], &files[..]] {
        let doc = export(set, "kcidb");
        if let Err(e) = kcidb_validate(&doc) {
            panic!("kcidb-io rejects the export of {set:?}: {e}\n{doc}");
        }
    }
    let doc: Value = serde_json::from_str(&export(&files[..2], "kcidb")).unwrap();
    // One kernel on both hosts: one checkout, one build; a test per workload, further metric
    // and path of each run.
    assert_eq!(doc["checkouts"].as_array().unwrap().len(), 1);
    assert_eq!(doc["builds"].as_array().unwrap().len(), 1);
    let tests = doc["tests"].as_array().unwrap();
    assert_eq!(tests.len(), 2 * 8, "{tests:#?}");
    let open = tests
        .iter()
        .find(|t| t["path"] == "hookprof.open_close.hook.security_file_open")
        .unwrap();
    assert_eq!(open["number"]["unit"], "s");
    // Two rounds: the mean of their medians (402 and 402 ns).
    assert!(
        (open["number"]["value"].as_f64().unwrap() - 402e-9).abs() < 1e-15,
        "{open}"
    );
    assert_eq!(open["environment"]["misc"]["hostname"], "runner-1");
    let failed = tests
        .iter()
        .find(|t| t["path"] == "hookprof.fs_create_0k")
        .unwrap();
    assert_eq!(failed["status"], "ERROR");
}

#[test]
fn the_prometheus_export_passes_promtool_check_metrics() {
    let promtool = promtool();
    let broken = "# TYPE x_total counter\nx_total{a=\"1\"} 1\n";
    assert!(
        !feed(Command::new(promtool).args(["check", "metrics"]), broken)
            .status
            .success(),
        "promtool takes a counter without help"
    );
    let dir = tempfile::tempdir().unwrap();
    let files = fixtures(dir.path());
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    let text = export(&files, "openmetrics");
    let out = feed(Command::new(promtool).args(["check", "metrics"]), &text);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool: {}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(
            "hookprof_path_latency_seconds_bucket{run=\"patched\",host=\"runner-2\",\
             kernel=\"6.1.0-test\",workload=\"open_close\",kind=\"hook\",\
             path=\"security_file_open\",le=\"+Inf\"} 16\n"
        ),
        "{text}"
    );
    // The imported summary has no histograms: its op times alone.
    assert!(text.contains("hookprof_op_seconds{run=\""), "{text}");
}

#[test]
fn the_bmf_export_follows_bencher_s_documented_schema() {
    assert!(
        bmf_validate(r#"{"open_close": {"latency": {"lower_value": 1.0}}}"#).is_err(),
        "a measure without a value passes"
    );
    assert!(bmf_validate(&format!(
        r#"{{"b": {{"{}": {{"value": 1}}}}}}"#,
        "m".repeat(65)
    ))
    .is_err());
    let dir = tempfile::tempdir().unwrap();
    let files = fixtures(dir.path());
    let files: Vec<&str> = files.iter().map(String::as_str).collect();
    for set in [&files[..1], &files[..]] {
        let doc = export(set, "bmf");
        if let Err(e) = bmf_validate(&doc) {
            panic!("BMF schema rejects the export of {set:?}: {e}\n{doc}");
        }
    }
    let doc: Value = serde_json::from_str(&export(&files[..1], "bmf")).unwrap();
    let latency = &doc["open_close"]["latency"];
    let (lo, value, hi) = (
        latency["lower_value"].as_f64().unwrap(),
        latency["value"].as_f64().unwrap(),
        latency["upper_value"].as_f64().unwrap(),
    );
    // Two rounds: the mean of their medians (5005 and 4990 ns), inside its interval.
    assert!(
        lo < value && value < hi && (value - 4997.5).abs() < 1e-6,
        "{latency}"
    );
    assert!(doc["open_close"]["hook security_file_open ns/op"]["value"].is_number());
    assert!(doc["bw_pipe"]["bandwidth (MB/s)"]["value"].is_number());
    assert!(doc["build"]["user (s)"]["value"].is_number());
    // A failed workload without samples has nothing to say.
    assert!(doc.get("fs_create_0k").is_none(), "{doc}");
    // Two runs with the same label cannot both be benchmarks.
    let out = hookprof(&["report", files[0], files[0], "--format", "bmf"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("distinct labels"));
}

#[test]
fn a_real_runs_exports_pass_every_checker() {
    require_root();
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.json");
    let file = file.to_str().unwrap();
    let out = hookprof(&[
        "run",
        "--quiet",
        "--workloads",
        "open_close,null_call",
        "--samples",
        "3",
        "--rounds",
        "2",
        "-o",
        file,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let rows = |w: usize| {
        results["workloads"][w]["attribution"]
            .as_array()
            .unwrap()
            .len()
    };
    assert!(rows(0) > 0, "open_close attributed nothing: {results}");

    let kcidb = export(&[file], "kcidb");
    if let Err(e) = kcidb_validate(&kcidb) {
        panic!("kcidb-io rejects a real run: {e}\n{kcidb}");
    }
    let doc: Value = serde_json::from_str(&kcidb).unwrap();
    assert_eq!(
        doc["tests"].as_array().unwrap().len(),
        2 + rows(0) + rows(1)
    );

    let text = export(&[file], "openmetrics");
    let checked = feed(Command::new(promtool()).args(["check", "metrics"]), &text);
    assert!(
        checked.status.success() && checked.stderr.is_empty(),
        "promtool: {}\n{text}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        text.contains("workload=\"open_close\",kind=\"syscall\",path=\"openat\",le=\"+Inf\"}"),
        "{text}"
    );

    let bmf = export(&[file], "bmf");
    if let Err(e) = bmf_validate(&bmf) {
        panic!("the BMF schema rejects a real run: {e}\n{bmf}");
    }
    let doc: Value = serde_json::from_str(&bmf).unwrap();
    // Two rounds: the latency has the bounds of its interval.
    assert!(
        doc["open_close"]["latency"]["lower_value"].is_number(),
        "{doc}"
    );
}

#[test]
fn go_tool_pprof_reads_open_close_s_profile_and_lists_security_file_open() {
    require_root();
    let _alone = one_at_a_time();
    go();
    let dir = tempfile::tempdir().unwrap();
    let args = ["--workloads", "open_close", "--samples", "3"];
    let file = measured(dir.path(), "run.json", "run", &args);
    let profile = export_pprof(&file);
    // Every function, however small its share (pprof drops those under 0.5% by default;
    // security_file_open is about 0.5% of open_close's CPU here).
    let top = go_pprof(&["-top", "-nodefraction=0"], &profile);
    assert!(top.contains("Type: cpu"), "{top}");
    assert!(
        top.lines().any(|l| l.ends_with(" security_file_open")),
        "{top}"
    );
    assert!(top.contains(" open_close: "), "the run's note: {top}");
    assert_counts_folded(&profile, &file);
    let tags = go_pprof(&["-tags"], &profile);
    for tag in [
        " workload: ",
        "open_close",
        " kind: ",
        ": syscall",
        " path: ",
        ": openat",
    ] {
        assert!(tags.contains(tag), "{tag}: {tags}");
    }
}

#[test]
fn go_tool_pprof_reads_stat_s_profile_of_a_command() {
    require_root();
    let _alone = one_at_a_time();
    go();
    let dir = tempfile::tempdir().unwrap();
    // A millisecond's command: its stacks from runs for the stacks alone, asked for.
    let args = [
        "--runs",
        "4",
        "--stack-samples",
        "500",
        "--",
        "cat",
        "/proc/self/status",
    ];
    let file = measured(dir.path(), "stat.json", "stat", &args);
    let profile = export_pprof(&file);
    assert_counts_folded(&profile, &file);
    let tags = go_pprof(&["-tags"], &profile);
    assert!(tags.contains(": cat /proc/self/status"), "{tags}");
}

#[test]
fn a_pprof_profile_is_not_written_to_a_terminal_nor_from_a_file_without_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let files = fixtures(dir.path());
    let out = hookprof(&["report", &files[0], "--format", "pprof"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("hold no sampled kernel stacks"), "{err}");
    assert!(out.stdout.is_empty());
    // A terminal on stdout (script's pseudo-terminal) gets a one-line refusal, not gzip.
    let line = format!(
        "{} report {} --format pprof",
        hookprof_bin().display(),
        files[0]
    );
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .expect("run script(1)");
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("redirect stdout to a file"), "{text}");
}
