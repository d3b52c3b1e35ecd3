//! `hookprof top` on the running kernel: a process's syscalls counted at its own count, the
//! OpenMetrics endpoint checked by promtool and scraped over HTTP, the terminal view under tmux,
//! bad scopes refused, and nothing left loaded after an interrupt.
use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use hookprof_tests::{cleanup::BpfObjects, hookprof, hookprof_bin, require_root};

/// Iterations of the loop: each a getppid, an openat and a close (well under a second here).
const LOOP: u64 = 100_000;

/// A forked child that waits for a byte on a pipe, then runs `LOOP` iterations of getppid and
/// open/close of /dev/null, reports the loop's ns on another pipe and exits.
struct Looper {
    pid: i32,
    start: i32,
    done: i32,
    ran: bool,
}

impl Looper {
    fn fork() -> Looper {
        let (mut start, mut done) = ([0; 2], [0; 2]);
        // SAFETY: pipe with valid arrays; the child only makes async-signal-safe calls and
        // leaves with _exit.
        unsafe {
            assert_eq!(libc::pipe(start.as_mut_ptr()), 0);
            assert_eq!(libc::pipe(done.as_mut_ptr()), 0);
            let pid = libc::fork();
            assert!(pid >= 0, "fork failed");
            if pid == 0 {
                let mut byte = 0u8;
                libc::read(start[0], (&mut byte as *mut u8).cast(), 1);
                let t0 = now_ns();
                for _ in 0..LOOP {
                    libc::getppid();
                    let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
                    libc::close(fd);
                }
                let elapsed = now_ns() - t0;
                libc::write(done[1], (&elapsed as *const u64).cast(), 8);
                libc::_exit(0);
            }
            libc::close(start[0]);
            libc::close(done[1]);
            Looper {
                pid,
                start: start[1],
                done: done[0],
                ran: false,
            }
        }
    }

    /// Starts the loop and waits for it: the loop's ns.
    fn run(&mut self) -> u64 {
        self.ran = true;
        let mut elapsed = 0u64;
        // SAFETY: reads and writes on our own pipe ends; waitpid on our own child.
        unsafe {
            assert_eq!(libc::write(self.start, [1u8].as_ptr().cast(), 1), 1);
            assert_eq!(
                libc::read(self.done, (&mut elapsed as *mut u64).cast(), 8),
                8
            );
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
            libc::close(self.start);
            libc::close(self.done);
        }
        elapsed
    }
}

impl Drop for Looper {
    /// A test that failed before the loop ran must not leave the child waiting forever.
    fn drop(&mut self) {
        if !self.ran {
            // SAFETY: our own child and pipe ends.
            unsafe {
                libc::kill(self.pid, libc::SIGKILL);
                libc::waitpid(self.pid, std::ptr::null_mut(), 0);
                libc::close(self.start);
                libc::close(self.done);
            }
        }
    }
}

fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
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
fn stop_top(mut top: Child) -> Vec<serde_json::Value> {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(top.id() as i32, libc::SIGINT) };
    let mut out = String::new();
    top.stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read top's output");
    let status = top.wait().expect("wait for top");
    assert_eq!(status.code(), Some(130), "top after SIGINT: {status:?}");
    out.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
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
    let before = BpfObjects::now();
    let mut looper = Looper::fork();
    let pid = looper.pid.to_string();
    let (top, _) = start_top(&["--pid", &pid, "--interval", "0.2", "--hooks", "none"]);
    let top_pid = top.id() as i32;
    let loop_ns = looper.run();
    // Two more intervals, so the last calls are read.
    std::thread::sleep(Duration::from_millis(600));
    let intervals = stop_top(top);
    assert!(intervals.len() >= 2, "{} intervals", intervals.len());
    let rate = LOOP as f64 / (loop_ns as f64 / 1e9);
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
fn top_where_fentry_is_refused_says_so_in_one_line_and_counts_syscalls() {
    require_root();
    let mut looper = Looper::fork();
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
    let _ = looper.run();
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

#[test]
fn top_serves_openmetrics_that_promtool_accepts_and_a_scrape_reads() {
    require_root();
    let mut looper = Looper::fork();
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
    looper.run();
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
    let session = format!("hookprof-top-{}", std::process::id());
    let mut looper = Looper::fork();
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
    looper.run();
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
