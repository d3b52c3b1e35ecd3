//! Safety guarantees on the running kernel: whatever way hookprof ends, it leaves no BPF
//! object, scratch file or process behind; an interrupt stops it within a second and keeps
//! what was measured; a workload that fails is recorded and the run goes on; `--user` drops
//! only the workload's privileges; results files are never truncated by a failed run. Each
//! test runs the real binary as root.
use std::{
    collections::BTreeMap,
    path::Path,
    time::{Duration, Instant},
};

use hookprof::results::Results;
use hookprof_tests::{
    assert_near, catches_sigint,
    cleanup::{BpfObjects, Hookprof},
    one_at_a_time, require_root, row, workload,
};

/// Every kind of workload: syscalls, files, a helper process, forks.
const WORKLOADS: &str = "null_call,open_close,lat_pipe,fork_proc";
/// A short run of them.
const QUICK: &[&str] = &["--workloads", WORKLOADS, "--samples", "3"];
/// A run of a few seconds, for SIGKILL at every phase of it.
const MEDIUM: &[&str] = &["--workloads", WORKLOADS, "--samples", "10"];
/// Long enough to be interrupted in the middle.
const LONG: &[&str] = &["--workloads", WORKLOADS, "--samples", "40"];

/// How a run is ended, and the exit it must end with.
enum Ending {
    Normal,
    Signal(libc::c_int, When),
    Panic,
}

/// When a signal is sent: conditions, not delays, so a slow machine cannot move it into
/// another phase.
#[derive(Clone, Copy)]
enum When {
    /// Once hookprof has taken over SIGINT: while it starts up (parses the kernel's BTF,
    /// loads its probes) on any machine where that takes a moment.
    StartingUp,
    /// Once a runner serves a workload: the probes are loaded and the measured work is under way.
    Measuring,
}

/// How long a run may take to end after it was told to. Only a stuck run takes this long: how
/// soon an interrupt ends a run is what the `sigint_stops_*` tests check.
const ENDS_WITHIN: Duration = Duration::from_secs(60);
/// The most a run may take to reach the point a test waits for (a stuck run's bound).
const REACHES_WITHIN: Duration = Duration::from_secs(180);

/// Waits until `run` is at `when`.
fn wait_for(run: &mut Hookprof, when: When) {
    match when {
        When::StartingUp => run.wait_until("its SIGINT handler", REACHES_WITHIN, |r| {
            catches_sigint(r.pid())
        }),
        When::Measuring => run.wait_until("a runner", REACHES_WITHIN, |r| {
            !runner_pids(r.pid()).is_empty()
        }),
    }
}

#[test]
fn every_exit_path_leaves_nothing_behind() {
    require_root();
    let _serial = one_at_a_time();
    let cases = [
        ("normal end", Ending::Normal),
        (
            "SIGINT while starting up",
            Ending::Signal(libc::SIGINT, When::StartingUp),
        ),
        ("SIGINT", Ending::Signal(libc::SIGINT, When::Measuring)),
        ("SIGTERM", Ending::Signal(libc::SIGTERM, When::Measuring)),
        ("panic", Ending::Panic),
    ];
    for (what, ending) in cases {
        let before = BpfObjects::now();
        let env: &[(&str, &str)] = match ending {
            Ending::Panic => &[("HOOKPROF_TEST_PANIC", "1")],
            _ => &[],
        };
        let args = match ending {
            Ending::Signal(..) => LONG,
            _ => QUICK,
        };
        let mut run = Hookprof::start(args, env);
        let status = match ending {
            Ending::Normal | Ending::Panic => run.wait(Duration::from_secs(120)),
            Ending::Signal(signal, when) => {
                wait_for(&mut run, when);
                run.signal(signal);
                run.wait(ENDS_WITHIN)
            }
        };
        let expected = match ending {
            Ending::Normal => 0,
            Ending::Signal(..) => 130,
            Ending::Panic => 101, // Rust's exit code for a panic
        };
        assert_eq!(status.code(), Some(expected), "{what}: {}", run.stderr());
        run.assert_left_nothing(&before, what);
        assert!(
            run.scratch_entries().is_empty(),
            "{what}: scratch left: {:?}",
            run.scratch_entries()
        );
    }
}

/// SIGKILL cannot be caught: the kernel frees the BPF objects (nothing is pinned), helpers die
/// with their parent (PR_SET_PDEATHSIG), and the next run removes the dead run's scratch dirs.
#[test]
fn sigkill_at_any_phase_leaves_nothing_behind_after_the_next_run() {
    require_root();
    let _serial = one_at_a_time();
    // Loading, attaching, set-up, sampling (clean and probed), and the end of the run, as far
    // as fixed delays reach them on this machine; and, whatever its speed, once a workload's
    // scratch dir is set up.
    let delays_ms = [5, 60, 250, 800, 1500, 3000, 4500];
    let kills = delays_ms.map(Some).into_iter().chain([None]);
    let mut saw_stale_scratch = false;
    for delay in kills {
        let before = BpfObjects::now();
        let mut run = Hookprof::start(MEDIUM, &[]);
        let what = match delay {
            Some(ms) => {
                std::thread::sleep(Duration::from_millis(ms));
                format!("SIGKILL after {ms} ms")
            }
            None => {
                run.wait_until("a scratch dir", REACHES_WITHIN, |r| {
                    !r.scratch_entries().is_empty()
                });
                "SIGKILL with a workload set up".to_string()
            }
        };
        run.signal(libc::SIGKILL);
        let status = run.wait(ENDS_WITHIN);
        assert!(
            status.code().is_none() || status.code() == Some(0),
            "{what}: {status}"
        );
        run.assert_left_nothing(&before, &what);
        saw_stale_scratch |= !run.scratch_entries().is_empty();
        // The next run in the same temp dir works and removes what the dead one left.
        let mut next = run.next(&["--workloads", "null_call", "--samples", "2"]);
        let status = next.wait(Duration::from_secs(120));
        assert!(status.success(), "{what}: next run: {}", next.stderr());
        assert!(
            next.scratch_entries().is_empty(),
            "{what}: stale scratch not removed: {:?}",
            next.scratch_entries()
        );
    }
    assert!(
        saw_stale_scratch,
        "no SIGKILL landed while a workload was set up: the phases were not all covered"
    );
}

/// A runner that dies (a test hook aborts it) or hangs past `--timeout-per-workload` in
/// lat_pipe's first run: the failure is recorded with its phase, the other workloads are
/// measured by a fresh runner, the file says complete: false, the exit code is 2, and nothing
/// is left behind (lat_pipe's helper process included).
#[test]
fn a_failed_workload_is_recorded_and_the_run_goes_on() {
    require_root();
    let _serial = one_at_a_time();
    // (what, the test hook, extra arguments, the error expected)
    type Case<'a> = (&'a str, (&'a str, &'a str), &'a [&'a str], &'a str);
    let cases: [Case; 2] = [
        (
            "crash",
            ("HOOKPROF_TEST_CRASH_WORKLOAD", "lat_pipe"),
            &[],
            "the runner process died (killed by signal 6",
        ),
        (
            "hang",
            ("HOOKPROF_TEST_HANG_WORKLOAD", "lat_pipe"),
            &["--timeout-per-workload", "10"],
            "still running after 10 s (--timeout-per-workload)",
        ),
    ];
    for (what, env, extra, error) in cases {
        let before = BpfObjects::now();
        let mut run = Hookprof::start(&[QUICK, extra].concat(), &[env]);
        let status = run.wait(Duration::from_secs(180));
        assert_eq!(status.code(), Some(2), "{what}: {}", run.stderr());
        let results = Results::load(&run.output()).expect("results of a run with a failure");
        assert!(!results.complete, "{what}: complete is true");
        let failure = workload(&results, "lat_pipe")
            .failure
            .clone()
            .unwrap_or_else(|| panic!("{what}: lat_pipe's failure is not recorded"));
        assert_eq!(failure.phase, "calibration", "{what}");
        assert!(failure.error.contains(error), "{what}: {failure:?}");
        for name in ["null_call", "open_close", "fork_proc"] {
            let w = workload(&results, name);
            assert!(
                w.failure.is_none(),
                "{what}: {name} failed: {:?}",
                w.failure
            );
            assert_eq!(w.clean.len(), 3, "{what}: {name}'s clean samples");
            assert_eq!(w.probed.len(), 3, "{what}: {name}'s probed samples");
            assert!(
                w.runner_peak_rss_kib.is_some_and(|kib| kib > 0),
                "{what}: {name}: no runner peak RSS"
            );
        }
        assert!(
            run.stderr()
                .contains("workload lat_pipe failed in calibration"),
            "{what}: {}",
            run.stderr()
        );
        run.assert_left_nothing(&before, what);
        assert!(run.scratch_entries().is_empty(), "{what}: scratch left");
    }
}

/// The runner is the lean process the design promises: one thread, no BPF fds, a few MB, and
/// a fresh one for each workload. The results keep each runner's peak apart from the
/// profiler's.
#[test]
fn each_workload_runs_in_a_fresh_lean_runner_without_bpf_fds() {
    require_root();
    let _serial = one_at_a_time();
    let before = BpfObjects::now();
    let mut run = Hookprof::start(MEDIUM, &[]);
    // Every runner seen, with the most threads and VmHWM it ever showed.
    let mut runners: BTreeMap<i32, (u64, u64)> = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(180);
    while run.running() {
        assert!(Instant::now() < deadline, "still running: {}", run.stderr());
        for pid in runner_pids(run.pid()) {
            // A runner that ended between the listing and the reads is simply gone.
            let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
                continue;
            };
            let (Some(threads), Some(hwm)) = (
                status_field(&status, "Threads:"),
                status_field(&status, "VmHWM:"),
            ) else {
                continue; // exiting: its memory is already gone
            };
            let bpf_fds: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .into_iter()
                .flatten()
                .flatten()
                .filter_map(|e| std::fs::read_link(e.path()).ok())
                .filter(|t| t.to_string_lossy().starts_with("anon_inode:bpf"))
                .collect();
            assert!(
                bpf_fds.is_empty(),
                "runner {pid} holds BPF fds: {bpf_fds:?}"
            );
            let seen = runners.entry(pid).or_default();
            *seen = (seen.0.max(threads), seen.1.max(hwm));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let status = run.wait(Duration::from_secs(10));
    assert!(status.success(), "{status}: {}", run.stderr());
    for (pid, (threads, hwm)) in &runners {
        assert_eq!(*threads, 1, "runner {pid} had {threads} threads");
        assert!(*hwm < 32 * 1024, "runner {pid} peaked at {hwm} KiB");
    }
    let measured = WORKLOADS.split(',').count();
    assert!(
        runners.len() >= measured,
        "{} runners seen for {measured} workloads: one runner served several",
        runners.len()
    );
    let results = Results::load(&run.output()).expect("results");
    for name in WORKLOADS.split(',') {
        let peak = workload(&results, name).runner_peak_rss_kib;
        assert!(
            peak.is_some_and(|kib| kib > 0 && kib < 32 * 1024),
            "{name}: runner peak {peak:?} KiB"
        );
    }
    let env = &results.environment;
    let profiler = env.profiler_peak_rss_kib.expect("the profiler's peak RSS");
    // Where the kernel refuses every trampoline (this kind of host), the probes carry no hook
    // slots and the peak is held to the target, 30 MiB, with a little room: it is the code and
    // aya's parse of the kernel's BTF, once, before anything else of the run is resident (28 MiB
    // here); that BTF is freed after the set-up, so the kallsyms table for the sampled stacks
    // and the results come after it, not on top. Elsewhere the peak grows with the kernel's BTF
    // and the slots, so the bound is generous: it catches the object or BTF held twice. Growth
    // over many rounds is tests/soak.rs's.
    let trampolines_refused = results
        .probes
        .refused
        .iter()
        .any(|r| r.kind.name() == "fentry" && r.errno == Some(libc::EPERM));
    let bound = if trampolines_refused { 32 } else { 128 } * 1024;
    assert!(
        profiler < bound,
        "profiler peaked at {profiler} KiB, over {bound} KiB (trampolines refused: \
         {trampolines_refused})"
    );
    let phases: Vec<&str> = env
        .profiler_peak_rss_by_phase
        .iter()
        .map(|p| p.phase.as_str())
        .collect();
    for phase in [
        "hook catalog",
        "probes loaded",
        "workload fork_proc",
        "stacks named",
    ] {
        assert!(phases.contains(&phase), "no {phase} in {phases:?}");
    }
    // The catalog's BTF parse (over 40 MB) runs in a child: until then the profiler holds its
    // code, aya's BTF (read first, its parse the set-up's peak) and the function list.
    let catalog = env.profiler_peak_rss_by_phase[0].peak_rss_kib;
    assert!(
        phases[0] == "hook catalog" && catalog < 32 * 1024,
        "the profiler peaked at {catalog} KiB by {}: the BTF parsed in it again?",
        phases[0]
    );
    let peaks: Vec<u64> = env
        .profiler_peak_rss_by_phase
        .iter()
        .map(|p| p.peak_rss_kib)
        .collect();
    assert!(
        peaks.windows(2).all(|w| w[0] <= w[1]) && peaks.iter().all(|&p| p <= profiler),
        "phase peaks {peaks:?} against the run's {profiler}"
    );
    run.assert_left_nothing(&before, "fresh runners");
}

/// The runner children of the profiler `pid`.
fn runner_pids(pid: i32) -> Vec<i32> {
    hookprof_tests::cleanup::children_of(pid)
        .into_iter()
        .filter(|&c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|cmd| cmd.split(|&b| b == 0).any(|a| a == b"__runner"))
        })
        .collect()
}

/// A numeric field of /proc/PID/status (`VmHWM:` in KiB).
fn status_field(status: &str, name: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(name))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Ctrl-C once a workload has taken all its samples and the next is under way: the run stops
/// within a second, and the file holds what was measured.
#[test]
fn sigint_stops_within_a_second_and_writes_the_samples_so_far() {
    require_root();
    let _serial = one_at_a_time();
    let before = BpfObjects::now();
    // A listed hook: no discovery pass, whose bursts set the workloads up too.
    let args = [
        "--workloads",
        "open_close,null_call",
        "--hooks",
        "security_file_open",
        "--samples",
        "200",
    ];
    let mut run = Hookprof::start(&args, &[]);
    // open_close's scratch dir lives as long as the workload: set up, measured, dropped.
    run.wait_until("open_close's scratch dir", REACHES_WITHIN, |r| {
        !r.scratch_of("open_close").is_empty()
    });
    run.wait_until("the end of open_close", REACHES_WITHIN, |r| {
        r.scratch_of("open_close").is_empty()
    });
    let took = interrupt(&mut run, "short samples");
    assert!(took < Duration::from_secs(1), "took {took:?} to stop");
    let results = Results::load(&run.output()).expect("results of an interrupted run");
    assert!(!results.complete, "complete is true");
    let open_close = workload(&results, "open_close");
    assert_eq!(
        (open_close.clean.len(), open_close.probed.len()),
        (200, 200),
        "the samples taken before the interrupt are missing"
    );
    // The workload under way keeps the samples it took, if any, and did not fail.
    if let Some(null_call) = results.workload("null_call") {
        assert!(null_call.failure.is_none(), "{:?}", null_call.failure);
        assert!(null_call.clean.len() < 200, "null_call was not interrupted");
    }
    run.assert_left_nothing(&before, "short samples");
    assert!(run.scratch_entries().is_empty(), "scratch left");
}

/// A 2 s sample of a workload with a helper process is cut short: the helper is killed and
/// reaped, and the run ends within a second all the same.
#[test]
fn sigint_stops_a_long_sample_within_a_second() {
    require_root();
    let _serial = one_at_a_time();
    let before = BpfObjects::now();
    let args = [
        "--workloads",
        "lat_pipe",
        "--samples",
        "3",
        "--min-sample-ms",
        "2000",
    ];
    let mut run = Hookprof::start(&args, &[]);
    run.wait_until("lat_pipe's scratch dir", REACHES_WITHIN, |r| {
        !r.scratch_of("lat_pipe").is_empty()
    });
    // Calibration reaches 2 s runs within a few seconds; warm-up and samples are 2 s each.
    // Wherever the interrupt lands from here on, a run is under way or about to start.
    std::thread::sleep(Duration::from_secs(5));
    let took = interrupt(&mut run, "2 s samples");
    assert!(took < Duration::from_secs(1), "took {took:?} to stop");
    let results = Results::load(&run.output()).expect("results of an interrupted run");
    assert!(!results.complete, "complete is true");
    run.assert_left_nothing(&before, "2 s samples");
    assert!(run.scratch_entries().is_empty(), "scratch left");
}

/// Sends SIGINT to a running hookprof; asserts it exits 130 and returns how long that took.
fn interrupt(run: &mut Hookprof, what: &str) -> Duration {
    assert!(run.running(), "{what}: ended before the interrupt");
    run.signal(libc::SIGINT);
    let t = Instant::now();
    let status = run.wait(ENDS_WITHIN);
    let took = t.elapsed();
    assert_eq!(status.code(), Some(130), "{what}: {}", run.stderr());
    took
}

#[test]
fn a_failed_run_leaves_an_existing_results_file_untouched() {
    require_root();
    let _serial = one_at_a_time();
    let mut run = Hookprof::start(&["--workloads", "null_call", "--samples", "2"], &[]);
    assert!(
        run.wait(Duration::from_secs(60)).success(),
        "{}",
        run.stderr()
    );
    let good = std::fs::read(run.output()).unwrap();
    for (what, env, kill) in [
        ("panic", &[("HOOKPROF_TEST_PANIC", "1")][..], false),
        ("SIGKILL", &[][..], true),
    ] {
        let mut failed = run.next_with_env(LONG, env);
        if kill {
            std::thread::sleep(Duration::from_millis(1500));
            failed.signal(libc::SIGKILL);
        }
        let status = failed.wait(Duration::from_secs(60));
        assert!(!status.success(), "{what}: the run did not fail");
        assert_eq!(
            std::fs::read(failed.output()).unwrap(),
            good,
            "{what}: the results file changed"
        );
        let stray: Vec<_> = std::fs::read_dir(failed.output().parent().unwrap())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(".hookprof-"))
            .map(|e| e.path())
            .collect();
        assert!(
            kill || stray.is_empty(),
            "{what}: temporary files: {stray:?}"
        );
    }
}

#[test]
fn output_into_a_missing_or_read_only_directory_fails_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let read_only = dir.path().join("ro");
    std::fs::create_dir(&read_only).unwrap();
    let missing = dir.path().join("missing/r.json");
    let ro_file = read_only.join("r.json");
    // Root writes through permission bits, so the read-only case runs as nobody (clean timings
    // need no privileges); the directory is someone else's and not writable by others.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&read_only, std::fs::Permissions::from_mode(0o555)).unwrap();
    for (what, path, as_nobody) in [("missing", &missing, false), ("read-only", &ro_file, true)] {
        let path = path.to_str().unwrap();
        let args = [&["run"], hookprof_tests::LONG_RUN, &["-o", path]].concat();
        let t = Instant::now();
        let out = if as_nobody {
            hookprof_tests::hookprof_as_nobody(&args)
        } else {
            hookprof_tests::hookprof(&args)
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
        assert!(stderr.contains(path), "{what}: {stderr}");
        assert!(out.stdout.is_empty(), "{what}: the run started");
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: failed only after {:?}",
            t.elapsed()
        );
        assert!(!Path::new(path).exists(), "{what}");
    }
}

#[test]
fn user_runs_the_workload_unprivileged_and_counts_stay_right() {
    require_root();
    let _serial = one_at_a_time();
    let mut run = Hookprof::start(
        &[
            "--workloads",
            "open_close,null_call",
            "--samples",
            "6",
            "--min-sample-ms",
            "50",
            "--user",
            "nobody",
        ],
        &[],
    );
    // While open_close runs, its work directory and the file it opens belong to nobody; the
    // scratch directory holding them stays root's, so nobody can never swap it.
    let deadline = Instant::now() + REACHES_WITHIN;
    let owners = loop {
        let owners = run.scratch_owners();
        if owners.len() >= 3 || Instant::now() > deadline || !run.running() {
            break owners;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(owners.len() >= 3, "saw no workload file: {owners:?}");
    for (path, uid) in &owners {
        let top = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("hookprof-"));
        let expected = if top { 0 } else { 65534 };
        assert_eq!(*uid, expected, "{} is owned by uid {uid}", path.display());
    }
    let status = run.wait(Duration::from_secs(120));
    assert!(status.success(), "{}", run.stderr());
    let results = Results::load(&run.output()).unwrap();
    let w = workload(&results, "null_call");
    assert_near(
        "getppid calls/op",
        row(w, "getppid").calls_per_op,
        1.0,
        0.05,
    );
    let w = workload(&results, "open_close");
    assert_near("openat calls/op", row(w, "openat").calls_per_op, 1.0, 0.05);
}
