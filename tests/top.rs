//! `hookprof top` on the running kernel: a process's syscalls counted at its own count, the
//! probes' own cost calibrated and taken out of a getppid loop's time, the OpenMetrics endpoint
//! checked by promtool and scraped over HTTP, the terminal view under tmux, bad scopes refused,
//! and nothing left loaded after an interrupt.
use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use hookprof::machine::clock::clock_ns;
use hookprof_tests::{cleanup::BpfObjects, hookprof, hookprof_bin, one_at_a_time, require_root};

/// Iterations of a `MIXED` loop: each a getppid, an openat and a close (well under a second).
const LOOP: u64 = 100_000;
/// Calls per `GETPPID` or `NOTHING` loop (some tens of ms here).
const CALLS: u32 = 200_000;
/// A syscall number x86_64 leaves unassigned: the kernel answers ENOSYS at once (the number
/// top's calibration uses too).
const UNASSIGNED: libc::c_long = 400;
/// `LoopChild` commands.
const GETPPID: u8 = 1;
const NOTHING: u8 = 2;
const MIXED: u8 = 3;

/// What one loop took: wall-clock and the child's thread CPU time, in ns.
struct LoopTimes {
    wall_ns: f64,
    cpu_ns: f64,
}

/// A forked child that, per command byte on a pipe, runs one loop (`CALLS` getppid calls,
/// `CALLS` calls of the unassigned number, or `LOOP` iterations of getppid and open/close of
/// /dev/null) and answers with its `LoopTimes`. It exits when the commands pipe closes.
struct LoopChild {
    pid: i32,
    commands: i32,
    answers: i32,
}

impl LoopChild {
    fn fork() -> LoopChild {
        let (mut commands, mut answers) = ([0; 2], [0; 2]);
        // Close-on-exec: a top started later must not hold the commands pipe open, or the
        // child would never see its end.
        // SAFETY: pipe2 with valid arrays; the child only makes async-signal-safe calls and
        // leaves with _exit.
        unsafe {
            assert_eq!(libc::pipe2(commands.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(answers.as_mut_ptr(), libc::O_CLOEXEC), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                // The parent's ends: its closing the commands pipe must reach the child as EOF.
                libc::close(commands[1]);
                libc::close(answers[0]);
                let mut command = 0u8;
                while libc::read(commands[0], (&mut command as *mut u8).cast(), 1) == 1 {
                    let (wall, cpu) = (
                        hookprof::machine::clock::monotonic_ns(),
                        clock_ns(libc::CLOCK_THREAD_CPUTIME_ID),
                    );
                    match command {
                        GETPPID => {
                            for _ in 0..CALLS {
                                libc::getppid();
                            }
                        }
                        NOTHING => {
                            for _ in 0..CALLS {
                                libc::syscall(UNASSIGNED);
                            }
                        }
                        MIXED => {
                            for _ in 0..LOOP {
                                libc::getppid();
                                let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                                libc::close(fd);
                            }
                        }
                        // An unknown command is a bug in the test: the parent's read fails.
                        _ => libc::_exit(2),
                    }
                    let times = [
                        (hookprof::machine::clock::monotonic_ns() - wall) as f64,
                        (clock_ns(libc::CLOCK_THREAD_CPUTIME_ID) - cpu) as f64,
                    ];
                    libc::write(answers[1], times.as_ptr().cast(), 16);
                }
                libc::_exit(0);
            }
            libc::close(commands[0]);
            libc::close(answers[1]);
            LoopChild {
                pid,
                commands: commands[1],
                answers: answers[0],
            }
        }
    }

    /// Runs one loop of `command` and waits for it.
    fn run(&mut self, command: u8) -> LoopTimes {
        let mut times = [0f64; 2];
        // SAFETY: reads and writes on our own pipe ends.
        unsafe {
            assert_eq!(libc::write(self.commands, [command].as_ptr().cast(), 1), 1);
            assert_eq!(libc::read(self.answers, times.as_mut_ptr().cast(), 16), 16);
        }
        LoopTimes {
            wall_ns: times[0],
            cpu_ns: times[1],
        }
    }

    /// The median CPU ns per call of `n` loops of `command` (`GETPPID` or `NOTHING`).
    fn median_ns_per_call(&mut self, command: u8, n: usize) -> f64 {
        let mut times: Vec<f64> = (0..n)
            .map(|_| self.run(command).cpu_ns / f64::from(CALLS))
            .collect();
        times.sort_by(f64::total_cmp);
        times[n / 2]
    }
}

impl Drop for LoopChild {
    fn drop(&mut self) {
        // SAFETY: our own child and pipe ends; EOF on its commands ends it.
        unsafe {
            libc::close(self.commands);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::close(self.answers);
        }
    }
}

/// `hookprof top ARGS` with stdout piped (JSON lines), once it said what it counts: the child
/// and its stderr's first line.
fn start_top(args: &[&str]) -> (Child, String) {
    let mut child = Command::new(hookprof_bin())
        .arg("top")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start hookprof top");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            eprintln!("top: {line}");
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) if line.contains("top: counting") => return (child, line),
            Ok(_) => continue,
            Err(e) => {
                let _ = child.kill();
                panic!(
                    "top never said it was counting ({e}); it exited with {:?}",
                    child.wait()
                )
            }
        }
    }
}

/// Interrupts `top` and returns its JSON lines; it must end with 130, as `run` does.
fn stop_top(top: Child) -> Vec<serde_json::Value> {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(top.id() as i32, libc::SIGINT) };
    let (status, intervals) = finish_top(top);
    assert_eq!(status.code(), Some(130), "top after SIGINT: {status:?}");
    intervals
}

/// Waits for `top` to end: how it ended, and its JSON lines.
fn finish_top(mut top: Child) -> (std::process::ExitStatus, Vec<serde_json::Value>) {
    let mut out = String::new();
    top.stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read top's output");
    let status = top.wait().expect("wait for top");
    let intervals = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect();
    (status, intervals)
}

/// The calls of syscall `name` over every interval and group.
fn calls(intervals: &[serde_json::Value], name: &str) -> u64 {
    intervals
        .iter()
        .flat_map(|i| i["rows"].as_array().expect("rows"))
        .filter(|r| r["kind"] == "syscall" && r["path"] == name)
        .map(|r| r["calls"].as_u64().expect("calls"))
        .sum()
}

#[test]
fn top_pid_counts_a_getppid_openat_loop_at_its_own_count() {
    require_root();
    let _serial = one_at_a_time();
    let before = BpfObjects::now();
    let mut looper = LoopChild::fork();
    let pid = looper.pid.to_string();
    let (top, _) = start_top(&["--pid", &pid, "--interval", "0.2", "--hooks", "none"]);
    let top_pid = top.id() as i32;
    let loop_ns = looper.run(MIXED).wall_ns;
    // Gone, as a process that ran its loop and exited.
    drop(looper);
    // Two more intervals, so the last calls are read.
    std::thread::sleep(Duration::from_millis(600));
    let intervals = stop_top(top);
    assert!(intervals.len() >= 2, "{} intervals", intervals.len());
    let rate = LOOP as f64 / (loop_ns / 1e9);
    let counted = ["getppid", "openat", "close"].map(|name| (name, calls(&intervals, name)));
    eprintln!("top counted {counted:?} of the loop's {LOOP} iterations at {rate:.0}/s");
    for (name, n) in counted {
        let off = (n as f64 - LOOP as f64).abs() / LOOP as f64;
        assert!(
            off <= 0.02,
            "{name}: top counted {n} calls of the loop's {LOOP} ({:.1}% off); all: {counted:?}, \
             events {:?}",
            off * 100.0,
            intervals.iter().map(|i| &i["events"]).collect::<Vec<_>>()
        );
    }
    // Each interval's rate is its calls over its own length, and none outruns the loop by
    // more than the noise of one interval's edges.
    for i in &intervals {
        for r in i["rows"].as_array().unwrap() {
            let (calls, per_s) = (
                r["calls"].as_f64().unwrap(),
                r["calls_per_s"].as_f64().unwrap(),
            );
            let seconds = i["seconds"].as_f64().unwrap();
            assert!(
                (calls / seconds - per_s).abs() <= 1e-6 * per_s.max(1.0),
                "{r}"
            );
            if r["path"] == "getppid" {
                assert!(
                    per_s <= rate * 1.5,
                    "getppid at {per_s}/s, the loop ran {rate}/s"
                );
            }
        }
    }
    assert_eq!(intervals[0]["scope"], format!("pid {pid}"));
    // The kernel frees a dead process's objects shortly after it exits, not at once.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let leaked = BpfObjects::now().leaked_since(&before, top_pid);
        if leaked.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "top left BPF objects behind: {leaked:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn top_calibrates_its_probes_and_the_corrected_getppid_is_what_getppid_adds_to_a_bare_syscall() {
    require_root();
    let _serial = one_at_a_time();
    const LOOPS: usize = 7;
    let mut caller = LoopChild::fork();
    let pid = caller.pid.to_string();
    // Without probes: getppid, and a syscall that does nothing.
    let bare_before = caller.median_ns_per_call(GETPPID, LOOPS);
    let nothing_before = caller.median_ns_per_call(NOTHING, LOOPS);
    let (top, _) = start_top(&["--pid", &pid, "--interval", "0.2", "--hooks", "none"]);
    let probed = caller.median_ns_per_call(GETPPID, LOOPS);
    std::thread::sleep(Duration::from_millis(600));
    let intervals = stop_top(top);
    let bare_after = caller.median_ns_per_call(GETPPID, LOOPS);
    let nothing_after = caller.median_ns_per_call(NOTHING, LOOPS);
    let bare = (bare_before + bare_after) / 2.0;
    let nothing = (nothing_before + nothing_after) / 2.0;

    let cost = &intervals[0]["probe_cost"];
    let figure = |name: &str| {
        cost[name]
            .as_f64()
            .unwrap_or_else(|| panic!("no {name} in probe_cost: {cost}"))
    };
    let (pair, in_span) = (figure("syscall_pair_ns"), figure("syscall_in_span_ns"));
    assert!(
        intervals.iter().all(|i| i["probe_cost"] == *cost),
        "each interval carries the calibration made at the start"
    );
    // What top's getppid rows say about the loops it saw (no timed function inside them).
    let rows: Vec<&serde_json::Value> = intervals
        .iter()
        .flat_map(|i| i["rows"].as_array().unwrap())
        .filter(|r| r["kind"] == "syscall" && r["path"] == "getppid")
        .collect();
    let timed: f64 = rows.iter().map(|r| r["timed"].as_f64().unwrap()).sum();
    let raw = rows
        .iter()
        .map(|r| r["total_ns"].as_f64().unwrap())
        .sum::<f64>()
        / timed;
    let corrected = rows
        .iter()
        .map(|r| r["corrected_ns_per_call"].as_f64().unwrap() * r["timed"].as_f64().unwrap())
        .sum::<f64>()
        / timed;
    // What getppid does beyond a syscall that does nothing: the part of it a timed span sees.
    let truth = bare - nothing;
    eprintln!(
        "bare getppid {bare:.1} ns, bare nothing {nothing:.1} ns, getppid under top {probed:.1} \
         ns (+{:.1}); calibration: pair +{pair:.1} ns, {in_span:.1} ns inside the span; top's \
         getppid {raw:.1} ns raw, {corrected:.1} ns corrected, against {truth:.1} ns",
        probed - bare
    );
    assert!(
        timed >= (LOOPS * CALLS as usize) as f64 * 0.98,
        "timed {timed}"
    );
    // Measured: something, and less of it inside a span than the whole pair costs.
    assert!(in_span > 0.0 && pair > in_span, "{cost}");
    // Plausible against this test's own measure of the same loop with and without top.
    let added = probed - bare;
    assert!(
        pair > 0.5 * added && pair < 2.0 * added,
        "the calibration says the syscall probes add {pair:.1} ns a call; this loop saw {added:.1}"
    );
    // Each row's corrected figure is its raw one less the part inside the span, never below
    // zero.
    let expected = rows
        .iter()
        .map(|r| {
            let (total, timed) = (
                r["total_ns"].as_f64().unwrap(),
                r["timed"].as_f64().unwrap(),
            );
            (total - timed * in_span).max(0.0)
        })
        .sum::<f64>()
        / timed;
    assert!(
        (corrected - expected).abs() < 0.01,
        "raw {raw}, corrected {corrected}, in span {in_span}: expected {expected}"
    );
    assert!(
        (corrected - truth).abs() < (raw - truth).abs(),
        "corrected {corrected:.1} ns is no closer than raw {raw:.1} ns to the {truth:.1} ns \
         getppid adds to a bare syscall"
    );
}

#[test]
fn top_where_fentry_is_refused_says_so_in_one_line_and_counts_syscalls() {
    require_root();
    let _serial = one_at_a_time();
    let mut looper = LoopChild::fork();
    let pid = looper.pid.to_string();
    let mut top = Command::new(hookprof_bin())
        .args([
            "top",
            "--pid",
            &pid,
            "--interval",
            "0.2",
            "--hooks",
            "security_file_open",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start top");
    // Whether the kernel takes fentry decides what top must say; this host's kernel may not.
    std::thread::sleep(Duration::from_secs(3));
    looper.run(MIXED);
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(top.id() as i32, libc::SIGTERM) };
    let mut err = String::new();
    top.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let mut out = String::new();
    top.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(top.wait().unwrap().code(), Some(130), "{err}");
    let intervals: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(calls(&intervals, "getppid") >= LOOP * 98 / 100, "{err}");
    let hooked = intervals
        .iter()
        .flat_map(|i| i["rows"].as_array().unwrap())
        .any(|r| r["path"] == "security_file_open");
    let refused: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("refused fentry"))
        .collect();
    if hooked {
        assert!(
            refused.is_empty(),
            "timed a hook yet said fentry was refused: {err}"
        );
    } else {
        assert_eq!(
            refused.len(),
            1,
            "no hook timed, so the refusal must be said once: {err}"
        );
        assert!(
            refused[0].contains("syscalls and task events only"),
            "{err}"
        );
    }
}

/// The file hooks an open/close of /dev/null runs through on any kernel with an LSM.
const FILE_HOOKS: &[&str] = &[
    "security_file_alloc",
    "security_file_free",
    "security_file_open",
    "security_file_release",
    "security_inode_permission",
    "security_file_post_open",
];

#[test]
fn top_samples_the_hooks_and_lsm_functions_of_a_process_where_fentry_is_refused_too() {
    require_root();
    let _serial = one_at_a_time();
    let mut looper = LoopChild::fork();
    let pid = looper.pid.to_string();
    let (top, _) = start_top(&["--pid", &pid, "--interval", "0.2", "--hooks", "none"]);
    // ~0.14 s of CPU a loop, ~800 samples in six at the default rate; the file hooks hold
    // about 1% each, so three of six are seen in all but a few runs in a thousand (three
    // loops, ~400 samples, saw two once in CI).
    for _ in 0..6 {
        looper.run(MIXED);
    }
    std::thread::sleep(Duration::from_millis(500));
    let intervals = stop_top(top);
    let sampled: Vec<&serde_json::Value> = intervals
        .iter()
        .map(|i| i.get("sampled").expect("no sampled stacks in an interval"))
        .collect();
    let samples: u64 = sampled.iter().map(|s| s["samples"].as_u64().unwrap()).sum();
    let rows: Vec<&serde_json::Value> = sampled
        .iter()
        .flat_map(|s| s["rows"].as_array().unwrap())
        .collect();
    let hook_samples = |name: &str| -> u64 {
        rows.iter()
            .filter(|r| r["kind"] == "hook" && r["path"] == name)
            .map(|r| r["inclusive_samples"].as_u64().unwrap())
            .sum()
    };
    let seen: Vec<&&str> = FILE_HOOKS.iter().filter(|h| hook_samples(h) > 0).collect();
    assert!(
        samples >= 300 && seen.len() >= 3,
        "{samples} samples; file hooks seen: {seen:?}"
    );
    // An LSM function, under a hook, of an LSM this kernel runs.
    let active = std::fs::read_to_string("/sys/kernel/security/lsm").unwrap_or_default();
    let lsm_row = rows.iter().find(|r| r["kind"] == "lsm");
    let lsm_row = lsm_row.unwrap_or_else(|| panic!("no LSM function sampled in {rows:?}"));
    let lsm = lsm_row["lsm"].as_str().unwrap();
    assert!(active.split(',').any(|l| l == lsm), "{lsm} not in {active}");
    assert!(lsm_row["parent"].as_str().unwrap().starts_with("security_"));
    for s in &sampled {
        // Each interval's self shares are parts of one whole.
        let own: f64 = s["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] != "syscall")
            .map(|r| r["self_share"].as_f64().unwrap())
            .sum();
        assert!(own <= 1.0 + 1e-9, "{s}");
    }
}

#[test]
fn top_serves_openmetrics_that_promtool_accepts_and_a_scrape_reads() {
    require_root();
    let _serial = one_at_a_time();
    let mut looper = LoopChild::fork();
    let pid = looper.pid.to_string();
    let (top, ready) = start_top(&[
        "--pid",
        &pid,
        "--interval",
        "0.2",
        "--hooks",
        "none",
        "--listen",
        "127.0.0.1:0",
    ]);
    let url = ready
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in: {ready}"))
        .to_string();
    looper.run(MIXED);
    std::thread::sleep(Duration::from_millis(600));
    // As Prometheus asks (OpenMetrics), and as curl does (anything: the text format).
    let scrape = |accept: &str| {
        let out = Command::new("curl")
            .args(["-sS", "--fail", "-D", "-", "-H", accept, &url])
            .output()
            .expect("run curl (cargo xtask setup installs it)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let response = String::from_utf8(out.stdout).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").expect("headers and a body");
        (head.to_string(), body.to_string())
    };
    let (om_head, om_body) = scrape("Accept: application/openmetrics-text;version=1.0.0");
    let (head, body) = scrape("Accept: */*");
    let _ = stop_top(top);
    assert!(
        om_head.contains("application/openmetrics-text"),
        "{om_head}"
    );
    assert!(om_body.ends_with("# EOF\n"), "{om_body}");
    assert!(head.contains("text/plain; version=0.0.4"), "{head}");
    for body in [&om_body, &body] {
        let line = body
            .lines()
            .find(|l| {
                l.starts_with("hookprof_path_calls_total{") && l.contains(r#"path="getppid""#)
            })
            .unwrap_or_else(|| panic!("no getppid counter in:\n{body}"));
        let count: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(count >= LOOP as f64 * 0.98, "{line}");
        assert!(
            body.contains("hookprof_path_latency_seconds_bucket{"),
            "{body}"
        );
        // Sampling is on by default: the scope's CPU by mode, and the syscalls' own samples.
        assert!(
            body.contains(r#"hookprof_sampled_cpu_seconds_total{mode="kernel"}"#),
            "{body}"
        );
        assert!(
            body.lines().any(
                |l| l.starts_with("hookprof_sampled_path_cpu_seconds_total{")
                    && l.contains(r#"kind="syscall""#)
            ),
            "{body}"
        );
    }
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool (cargo xtask setup installs the prometheus package)");
    std::io::Write::write_all(&mut promtool.stdin.take().unwrap(), body.as_bytes()).unwrap();
    let checked = promtool.wait_with_output().unwrap();
    assert!(
        checked.status.success(),
        "promtool check metrics: {}{}",
        String::from_utf8_lossy(&checked.stdout),
        String::from_utf8_lossy(&checked.stderr)
    );
}

#[test]
fn top_records_intervals_with_o_and_stops_after_count() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("top.jsonl");
    let out = hookprof(&[
        "top",
        "--interval",
        "0.1",
        "-n",
        "3",
        "--hooks",
        "none",
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).unwrap();
    let recorded = std::fs::read_to_string(&file).unwrap();
    assert_eq!(printed, recorded, "the recording holds what was printed");
    let intervals: Vec<serde_json::Value> = recorded
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(intervals.len(), 3);
    assert_eq!(intervals[2]["interval"], 3);
    // The whole system makes syscalls every tenth of a second (this test's own wait, at least).
    assert!(intervals.iter().all(|i| i["scope"] == "system"));
    assert!(intervals
        .iter()
        .any(|i| !i["rows"].as_array().unwrap().is_empty()));
}

#[test]
fn top_refuses_bad_scopes_in_one_line_with_exit_2() {
    for (args, says) in [
        (vec!["--pid", "4000000000"], "no such process"),
        (vec!["--comm", "a-name-far-too-long"], "1 to 15 bytes"),
        (vec!["--cgroup", "/no/such/cgroup"], "no such cgroup"),
        (vec!["--interval", "0"], "--interval 0"),
        (vec!["--pid", "1", "--comm", "x"], "cannot be used with"),
        (vec!["--sample-hz", "5"], "--sample-hz 5"),
    ] {
        let mut all = vec!["top"];
        all.extend(&args);
        let out = hookprof(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        if !says.contains("cannot") {
            assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        }
    }
}

#[test]
fn top_terminal_view_draws_under_tmux_and_q_quits() {
    require_root();
    let _serial = one_at_a_time();
    let session = format!("hookprof-top-{}", std::process::id());
    let mut looper = LoopChild::fork();
    let pid = looper.pid.to_string();
    let command = format!(
        "{} top --pid {pid} --interval 0.2 --hooks none; echo exited $?; sleep 30",
        hookprof_bin().display()
    );
    let tmux = |args: &[&str]| {
        Command::new("tmux")
            .args(args)
            .output()
            .expect("run tmux (cargo xtask setup installs it)")
    };
    let started = tmux(&[
        "new-session",
        "-d",
        "-s",
        &session,
        "-x",
        "150",
        "-y",
        "30",
        &command,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let capture = || {
        String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", &session]).stdout).to_string()
    };
    let wait_for = |what: &str| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let screen = capture();
            if screen.contains(what) || Instant::now() > deadline {
                return screen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    };
    let first = wait_for("hookprof top:");
    looper.run(MIXED);
    let screen = wait_for("getppid");
    tmux(&["send-keys", "-t", &session, "q"]);
    let after = wait_for("exited");
    tmux(&["kill-session", "-t", &session]);
    assert!(first.contains("hookprof top:"), "{first}");
    assert!(
        screen.contains("GROUP") && screen.contains("CALLS/S"),
        "{screen}"
    );
    assert!(screen.contains(&format!("pid {pid}")), "{screen}");
    assert!(
        screen.contains("getppid") && screen.contains("openat"),
        "{screen}"
    );
    assert!(after.contains("exited 0"), "q must quit with 0:\n{after}");
}

/// The rank of `name` in an interval's rows (top ranks by time on a CPU), if it is there.
fn rank(interval: &serde_json::Value, name: &str) -> Option<usize> {
    interval["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .position(|r| r["kind"] == "syscall" && r["path"] == name)
}

#[test]
fn top_ranks_an_ls_loop_s_stat_and_xattr_calls_above_the_shell_s_blocked_wait4() {
    require_root();
    let _serial = one_at_a_time();
    let mut shell = Command::new("sh")
        .args(["-c", "while :; do ls -lR /usr/share/doc > /dev/null; done"])
        .spawn()
        .expect("start the ls loop");
    let pid = shell.id().to_string();
    let (top, _) = start_top(&["--pid", &pid, "--interval", "0.5", "--sample-hz", "0"]);
    std::thread::sleep(Duration::from_millis(1600));
    let intervals = stop_top(top);
    let _ = shell.kill();
    let _ = shell.wait();
    // The second interval: the first may hold a wait4 entered before top attached.
    let i = &intervals[1];
    let first = |names: &[&str]| names.iter().filter_map(|n| rank(i, n)).min();
    let stat = first(&["statx", "newfstatat", "lstat"]).expect("ls stats its files");
    let xattr = first(&["lgetxattr", "getxattr"]).expect("ls -l reads their ACLs");
    let wait4 = rank(i, "wait4").expect("the shell waits for each ls");
    assert!(stat < wait4 && xattr < wait4, "{i:#}");
    // The shell's wait is a wait, not CPU: shown apart, and far larger than its CPU.
    let row = &i["rows"][wait4];
    let (cpu, wait) = (
        row["on_cpu_ns_per_call"].as_f64().unwrap(),
        row["wait_ns_per_call"].as_f64().unwrap(),
    );
    assert!(wait > 10.0 * cpu, "{row}");
    assert!(row["on_cpu_share"].as_f64().unwrap() < 0.05, "{row}");
}

/// Load on both CPUs while it lives, as other jobs load a shared runner: a busy loop and a loop
/// of short processes bound to each CPU. Dropping it ends them.
struct Load(Vec<Child>);

impl Load {
    fn start() -> Load {
        let mut children = Vec::new();
        for cpu in ["0", "1"] {
            for work in [&["yes"][..], &["sh", "-c", "while :; do /bin/true; done"]] {
                let child = Command::new("taskset")
                    .args(["-c", cpu])
                    .args(work)
                    .stdout(Stdio::null())
                    .spawn()
                    .expect("start the load (taskset is util-linux's)");
                children.push(child);
            }
        }
        Load(children)
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn top_under_load_prints_its_count_of_intervals_on_the_clock_and_exits() {
    require_root();
    let _serial = one_at_a_time();
    let _load = Load::start();
    let (count, every) = (5, 0.5);
    let (top, _) = start_top(&["-n", "5", "--interval", "0.5", "--format", "json"]);
    let counting = Instant::now();
    let (status, intervals) = finish_top(top);
    let took = counting.elapsed().as_secs_f64();
    assert!(status.success(), "{status:?}");
    assert_eq!(intervals.len(), count, "{intervals:?}");
    // Each interval is measured by the clock and lasts its 0.5 s give or take 10%; they end
    // on a schedule from the start, so late wake-ups under load do not add up.
    let seconds: Vec<f64> = intervals
        .iter()
        .map(|i| i["seconds"].as_f64().unwrap())
        .collect();
    for s in &seconds {
        assert!((s - every).abs() <= every * 0.1, "{seconds:?}");
    }
    let whole = every * count as f64;
    let sum: f64 = seconds.iter().sum();
    assert!((sum - whole).abs() <= 0.05, "{sum} s in all: {seconds:?}");
    assert!((took - whole).abs() <= whole * 0.1, "top took {took:.2} s");
}
