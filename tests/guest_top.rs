//! `top` where fentry works: a Landlock-confined process's opens show Landlock's
//! `hook_file_open` under `security_file_open`, in the confined process's cgroup.
use std::{
    io::{BufRead, BufReader, Read},
    path::Path,
    process::{Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use hookprof_tests::{hookprof_bin, require_guest, require_root};

#[test]
fn top_shows_landlocks_file_open_under_security_file_open_for_the_confined_cgroup() {
    require_guest();
    require_root();
    let cgroup = Path::new("/sys/fs/cgroup/hookprof-confined");
    std::fs::create_dir_all(cgroup).expect("make a cgroup");
    let dir = tempfile::tempdir().unwrap();
    // A ruleset that allows everything still makes Landlock check every open against it.
    let ruleset = dir.path().join("ruleset.json");
    std::fs::write(
        &ruleset,
        r#"{"layers": [{"handled": "all", "allow": [{"path": "/", "access": "all"}]}]}"#,
    )
    .unwrap();
    let mut top = Command::new(hookprof_bin())
        .args([
            "top",
            "--cgroup",
            "/hookprof-confined",
            "--hooks",
            "security_file_open",
        ])
        .args(["--interval", "0.5", "--format", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start top");
    let (tx, rx) = mpsc::channel();
    let stderr = top.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("top: {line}");
            let _ = tx.send(line);
        }
    });
    // Loading the probes takes a while under emulation.
    let deadline = Instant::now() + Duration::from_secs(600);
    while !rx
        .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        .unwrap_or_else(|e| panic!("top never said it was counting: {e}"))
        .contains("top: counting")
    {}
    // The workload's runner, confined by the ruleset, in the cgroup (its parent moves itself
    // there before it starts hookprof).
    let results = dir.path().join("run.json");
    let script = format!(
        "echo $$ > {}/cgroup.procs && exec {} run --workloads open_close --samples 2 \
         --probes none --policy landlock:{} -o {}",
        cgroup.display(),
        hookprof_bin().display(),
        ruleset.display(),
        results.display()
    );
    let run = Command::new("sh")
        .args(["-c", &script])
        .output()
        .expect("run sh");
    std::thread::sleep(Duration::from_secs(2));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(top.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    top.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let status = top.wait().unwrap();
    let _ = std::fs::remove_dir(cgroup);
    assert!(
        run.status.success(),
        "the confined run failed: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(status.code(), Some(130), "top after SIGINT");
    let intervals: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .collect();
    // top priced its own fentry/fexit pair at its start, here where fentry loads: a pair costs
    // something, and what it reads inside a span lies within the probed syscall. The span
    // holds the near-empty function's own body too, which under TCG can outweigh the pair
    // (1,051 ns in the span against a 554 ns pair, one CI run), so it is bounded by the
    // whole probed call, not by the pair.
    let cost = &intervals.first().expect("an interval")["probe_cost"];
    let (pair, in_span, bare) = (
        cost["function_pair_ns"].as_f64(),
        cost["function_in_span_ns"].as_f64(),
        cost["bare_ns"].as_f64(),
    );
    assert!(
        pair.is_some_and(|p| p > 0.0)
            && in_span.is_some_and(|s| s >= 0.0 && s <= bare.unwrap_or(0.0) + pair.unwrap()),
        "top's calibration of its function pair: {cost}"
    );
    let rows: Vec<serde_json::Value> = intervals
        .iter()
        .flat_map(|i| i["rows"].as_array().unwrap().clone())
        .filter(|r| r["group"] == "/hookprof-confined")
        .collect();
    let calls = |path: &str| -> u64 {
        rows.iter()
            .filter(|r| r["path"] == path)
            .map(|r| r["calls"].as_u64().unwrap())
            .sum()
    };
    let landlock: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["path"] == "hook_file_open")
        .collect();
    assert!(
        !landlock.is_empty(),
        "no hook_file_open row for the cgroup: {rows:?}"
    );
    assert!(landlock.iter().all(|r| r["parent"] == "security_file_open"
        && r["lsm"] == "landlock"
        && r["kind"] == "lsm"));
    let (hook, function, openat) = (
        calls("security_file_open"),
        calls("hook_file_open"),
        calls("openat"),
    );
    assert!(
        function > 0 && function <= hook,
        "hook_file_open {function}, security_file_open {hook}"
    );
    // Every open the workload made went through the hook.
    assert!(
        hook >= openat / 2,
        "security_file_open {hook}, openat {openat}"
    );
    assert!(landlock
        .iter()
        .any(|r| r["ns_per_call"].as_f64().unwrap() > 0.0));
    // The corrected figures never exceed the raw ones.
    assert!(rows.iter().all(
        |r| r["corrected_ns_per_call"].as_f64().unwrap() <= r["ns_per_call"].as_f64().unwrap()
    ));
}
