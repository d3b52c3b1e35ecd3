//! Hostile use of the real binary (root): a failed or closed stdout, a reader that goes away, a
//! hang-up, SIGKILL, FIFOs and devices named as input, duplicate names, control characters in
//! names and labels, options that cannot work. Each case shows the fault and what is kept:
//! every one ends with one line and a documented exit code, and no measured run is lost.
use std::{
    io::Read,
    os::unix::{fs::FileTypeExt, process::CommandExt},
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use hookprof::results::Results;
use hookprof_tests::{
    cleanup::{children_of, BpfObjects, Hookprof},
    hookprof_bin, one_at_a_time, require_root,
};

/// A run of a fraction of a second.
const TINY: &[&str] = hookprof_tests::TINY_RUN;
/// A run long enough to be signalled in the middle (one sample lasts a second).
const LONG: &[&str] = &[
    "--workloads",
    "null_call",
    "--rounds",
    "1",
    "--samples",
    "30",
    "--min-sample-ms",
    "1000",
];
/// The exit codes `hookprof --help` documents for these faults.
const WRITE_FAILED: i32 = 4;
const BROKEN_PIPE: i32 = 141;
const INTERRUPTED: i32 = 130;
/// The most a refused input may take: it must not block or stream.
const REFUSED_WITHIN: Duration = Duration::from_secs(10);

/// hookprof with no store (unless the test names one), in `dir`, stdin closed.
fn hookprof(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(hookprof_bin());
    cmd.args(args)
        .current_dir(dir)
        .env(hookprof_tests::STORE_ENV, "off")
        .env("TMPDIR", dir)
        .stdin(Stdio::null());
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Ended with `code` and a single line on stderr naming `names`. Notes are not the error: a
/// run beside another test's probes says so in a note of its own.
fn assert_one_line(what: &str, out: &Output, code: i32, names: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    let said = err
        .lines()
        .filter(|l| !l.starts_with("hookprof: note: "))
        .count();
    assert_eq!(said, 1, "{what}: not one line: {err}");
    assert!(err.contains(names), "{what}: no '{names}' in: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// A tiny clean run's results file in `dir` (no probes: the cases below are about the edges,
/// not the measuring).
fn results_file(dir: &Path) -> PathBuf {
    let path = dir.join("base.json");
    let out = hookprof(
        dir,
        &[&["run", "--probes", "none"], TINY, &["-o", "base.json"]].concat(),
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    path
}

/// The results file at `path` with `edit` applied to its JSON, written to `to`.
fn forged(path: &Path, to: &Path, edit: impl FnOnce(&mut serde_json::Value)) -> PathBuf {
    let mut doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut doc);
    std::fs::write(to, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    to.to_path_buf()
}

#[test]
fn a_failed_or_closed_stdout_is_one_line_and_exit_4_and_the_run_is_kept() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base = results_file(dir.path());
    let full = || {
        std::fs::File::options()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    // report, compare, history and run --list into a full disk: one line each, no panic.
    let base = base.to_str().unwrap();
    for args in [
        vec!["report", base],
        vec!["compare", base, base],
        vec!["history", base, base],
        vec!["run", "--list"],
        vec!["--help"],
    ] {
        let out = hookprof(dir.path(), &args).stdout(full()).output().unwrap();
        assert_one_line(
            &args[0..1].join(" "),
            &out,
            WRITE_FAILED,
            "No space left on device",
        );
    }
    // A closed stdout (`>&-`) is not a silent success.
    let mut closed = hookprof(dir.path(), &["report", base]);
    // SAFETY: close(2) between fork and exec.
    unsafe {
        closed.pre_exec(|| {
            libc::close(1);
            Ok(())
        });
    }
    let out = closed.output().unwrap();
    assert_one_line(">&-", &out, WRITE_FAILED, "stdout is closed");
    // A run whose only copy was stdout (no -o, no store) keeps its results in a file the
    // error names.
    let out = hookprof(
        dir.path(),
        &[&["run", "--probes", "none"], TINY, &["--format", "json"]].concat(),
    )
    .stdout(full())
    .output()
    .unwrap();
    assert_one_line("run > /dev/full", &out, WRITE_FAILED, "the results are in ");
    let err = stderr(&out);
    let kept = err.trim().rsplit_once("the results are in ").unwrap().1;
    let kept = Path::new(kept.strip_suffix(" instead").unwrap());
    let results = Results::load(kept).expect("the kept results");
    assert_eq!(results.workloads[0].name, "null_call");
    std::fs::remove_file(kept).unwrap();
}

#[test]
fn a_reader_that_stops_early_ends_the_run_quietly_after_it_is_stored() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}/T.db", dir.path().display());
    // `run ... --format json | head -c 10`
    let mut run = hookprof(
        dir.path(),
        &[&["run", "--store", &store, "--format", "json"], TINY].concat(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut first = [0u8; 10];
    run.stdout.take().unwrap().read_exact(&mut first).unwrap();
    // The pipe's read end is closed here: the rest of the output meets EPIPE.
    let out = run.wait_with_output().unwrap();
    assert_eq!(&first[..1], b"{");
    assert_eq!(out.status.code(), Some(BROKEN_PIPE), "{}", stderr(&out));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    // The run is in the store.
    let listed = hookprof(dir.path(), &["runs", "--store", &store, "--format", "json"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{}", stderr(&listed));
    let runs: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
}

#[test]
fn a_hang_up_keeps_the_samples_and_leaves_nothing_loaded_or_running() {
    require_root();
    let _serial = one_at_a_time();
    let before = BpfObjects::now();
    // Syscall probes loaded, so there is something to leave behind.
    let measuring = [
        "--samples",
        "100",
        "--min-sample-ms",
        "200",
        "--probes",
        "syscalls",
    ];
    let mut run = Hookprof::start(
        &[&LONG[..4], &measuring[..]].concat(),
        &[(hookprof_tests::STORE_ENV, "off")],
    );
    run.wait_until("a runner", Duration::from_secs(180), |r| {
        children_of(r.pid()).iter().any(|&c| is_runner(c))
    });
    // Measuring: a sample or more taken (a 200 ms sample, a clean and a probed in turn).
    std::thread::sleep(Duration::from_secs(3));
    // A terminal that hangs up signals its whole foreground process group.
    // SAFETY: the group of the child this test started.
    unsafe { libc::kill(-run.pid(), libc::SIGHUP) };
    let status = run.wait(Duration::from_secs(60));
    assert_eq!(status.code(), Some(INTERRUPTED), "{}", run.stderr());
    let results = Results::load(&run.output()).expect("results after SIGHUP");
    assert!(!results.complete);
    assert!(!results.workloads[0].clean.is_empty(), "no sample kept");
    run.assert_left_nothing(&before, "SIGHUP");
    assert!(
        run.scratch_entries().is_empty(),
        "{:?}",
        run.scratch_entries()
    );
    let out_dir = run.output().parent().unwrap().to_path_buf();
    let left: Vec<_> = std::fs::read_dir(out_dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, vec!["r.json"], "temp or lock files left");
}

#[test]
fn sigkill_leaves_no_destination_and_an_old_one_unchanged() {
    require_root();
    let _serial = one_at_a_time();
    for old in [None, Some("old results\n")] {
        let mut run = Hookprof::start(
            &[LONG, &["--probes", "none"]].concat(),
            &[(hookprof_tests::STORE_ENV, "off")],
        );
        if let Some(old) = old {
            std::fs::write(run.output(), old).unwrap();
        }
        run.wait_until("a runner", Duration::from_secs(60), |r| {
            children_of(r.pid()).iter().any(|&c| is_runner(c))
        });
        run.signal(libc::SIGKILL);
        run.wait(Duration::from_secs(10));
        match old {
            None => assert!(!run.output().exists(), "a file after SIGKILL"),
            Some(old) => assert_eq!(std::fs::read_to_string(run.output()).unwrap(), old),
        }
        // Nothing beside it either (no lock file), and the next run may write it at once.
        let out_dir = run.output().parent().unwrap().to_path_buf();
        let left: Vec<_> = std::fs::read_dir(&out_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| Some(n.as_os_str()) != run.output().file_name())
            .collect();
        assert_eq!(left, Vec::<std::ffi::OsString>::new(), "left beside -o");
        let out = hookprof(
            &out_dir,
            &[&["run", "--probes", "none"], TINY, &["-o"]].concat(),
        )
        .arg(run.output())
        .stdout(Stdio::null())
        .output()
        .unwrap();
        assert!(out.status.success(), "after SIGKILL: {}", stderr(&out));
    }
}

#[test]
fn fifos_sockets_and_devices_named_as_input_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let socket = dir.path().join("s");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    assert!(std::fs::metadata(&socket).unwrap().file_type().is_socket());
    for (what, path) in [
        ("a FIFO", "f"),
        ("a socket", "s"),
        ("a character device", "/dev/zero"),
    ] {
        for args in [
            vec!["report", path],
            vec!["compare", path, path],
            vec!["history", path],
            vec!["import", "lmbench", path, "-o", "d"],
            vec!["import", "time", path, "-o", "d"],
            vec!["runs", "--add", path, "--store", "sqlite://T.db"],
        ] {
            let t = Instant::now();
            let out = hookprof(dir.path(), &args).output().unwrap();
            let case = format!("{} {what}", args.join(" "));
            assert!(
                t.elapsed() < REFUSED_WITHIN,
                "{case}: took {:?}",
                t.elapsed()
            );
            assert_one_line(&case, &out, 2, &format!("is {what}, not a regular file"));
        }
    }
    assert!(
        !dir.path().join("d").exists(),
        "import made its directory for nothing"
    );
}

#[test]
fn a_workload_named_twice_is_refused_and_a_forged_duplicate_is_named() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = hookprof(
        dir.path(),
        &[
            "run",
            "--probes",
            "none",
            "--workloads",
            "null_call,null_call",
        ],
    )
    .output()
    .unwrap();
    assert_one_line(
        "--workloads twice",
        &out,
        2,
        "--workloads names null_call twice",
    );
    let base = results_file(dir.path());
    let twice = forged(&base, &dir.path().join("twice.json"), |doc| {
        let w = doc["workloads"][0].clone();
        doc["workloads"].as_array_mut().unwrap().push(w);
    });
    for format in ["bmf", "openmetrics", "kcidb"] {
        let out = hookprof(
            dir.path(),
            &["report", "--format", format, twice.to_str().unwrap()],
        )
        .output()
        .unwrap();
        assert_one_line(format, &out, 2, "hold workload null_call twice");
    }
}

#[test]
fn control_characters_are_shown_escaped_and_junit_stays_well_formed_xml() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base = results_file(dir.path());
    let hostile = forged(&base, &dir.path().join("hostile.json"), |doc| {
        doc["label"] = "\u{1b}]0;pwned\u{7}<script>".into();
        doc["workloads"][0]["name"] = "null\u{1b}[31m<b>".into();
    });
    let hostile = hostile.to_str().unwrap();
    for (args, text, _) in printed(
        dir.path(),
        &[
            vec!["report", hostile],
            vec!["report", "--format", "markdown", hostile],
            vec!["compare", hostile, hostile],
            vec!["compare", "--format", "markdown", hostile, hostile],
            vec!["history", hostile, hostile],
            vec!["report", "--format", "openmetrics", hostile],
        ],
    ) {
        let case = args.join(" ");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{case}: raw control"
        );
        assert!(text.contains("\\x1b"), "{case}: not shown escaped: {text}");
        if args.contains(&"markdown") {
            assert!(
                !text.contains("<script>") && !text.contains("<b>"),
                "{case}: raw HTML"
            );
        }
    }
    let junit = dir.path().join("junit.xml");
    let out = hookprof(
        dir.path(),
        &["compare", "--format", "junit", hostile, hostile],
    )
    .stdout(std::fs::File::create(&junit).unwrap())
    .output()
    .unwrap();
    assert!(out.status.code().is_some_and(|c| c < 4), "{}", stderr(&out));
    let parsed = Command::new("python3")
        .args([
            "-c",
            "import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])",
        ])
        .arg(&junit)
        .output()
        .expect("python3 (installed by cargo xtask setup)");
    assert!(
        parsed.status.success(),
        "JUnit is not well-formed XML: {}",
        stderr(&parsed)
    );
    // The command line refuses them outright.
    for args in [["--label", "a\u{1b}[2J"], ["--meta", "k=\u{1b}]0;t\u{7}"]] {
        let out = hookprof(
            dir.path(),
            &[&["run", "--probes", "none"], &args[..]].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("control character \\x1b"),
            "{}",
            stderr(&out)
        );
        assert!(!stderr(&out).contains('\u{1b}'), "{}", stderr(&out));
    }
}

/// Each command of `commands` run in `dir`, asserted to end as a report does (exit 0 to 3):
/// the command, its stdout and its stderr.
fn printed<'a>(dir: &Path, commands: &[Vec<&'a str>]) -> Vec<(Vec<&'a str>, String, String)> {
    commands
        .iter()
        .map(|args| {
            let out = hookprof(dir, args).output().unwrap();
            let case = args.join(" ");
            assert!(
                out.status.code().is_some_and(|c| c < 4),
                "{case}: {}",
                stderr(&out)
            );
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            (args.clone(), text, stderr(&out))
        })
        .collect()
}

/// Runs `cmd` to its end: its exit code, its stderr and its peak RSS in KiB.
#[expect(
    clippy::zombie_processes,
    reason = "reaped by wait4, which also gives its peak RSS"
)]
fn measured(cmd: &mut Command) -> (Option<i32>, String, i64) {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let mut status = 0;
    // SAFETY: zeroed rusage filled by wait4 on the child this function spawned.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = child.id() as libc::pid_t;
    assert_eq!(unsafe { libc::wait4(pid, &mut status, 0, &mut usage) }, pid);
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (code, err, usage.ru_maxrss)
}

#[test]
fn a_fifo_for_a_kernel_and_files_past_the_bound_are_refused_at_once_in_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("f");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: c is a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Sparse: 300 MiB that cost no disk.
    let big = std::fs::File::create(dir.path().join("big")).unwrap();
    big.set_len(300 << 20).unwrap();
    let policy = [
        &["run", "--probes", "none", "--policy", "landlock:big"],
        TINY,
    ]
    .concat();
    for (args, names) in [
        (&["ab", "f", "f"][..], "f is not a regular file"),
        (
            &["import", "lmbench", "big", "-o", "d"],
            "more than 256 MiB",
        ),
        (&["import", "time", "big", "-o", "d"], "more than 256 MiB"),
        (&["report", "big"], "more than 256 MiB"),
        (&["history", "big", "big"], "more than 256 MiB"),
        (
            &["runs", "--store", "sqlite://f"],
            "f is not a regular file",
        ),
        (
            &["runs", "--store", "sqlite:///dev/zero"],
            "is not a regular file",
        ),
        (&policy, "more than 256 MiB"),
    ] {
        let t = Instant::now();
        let (code, err, rss_kib) = measured(&mut hookprof(dir.path(), args));
        let case = args.join(" ");
        assert!(t.elapsed() < REFUSED_WITHIN, "{case}: {:?}", t.elapsed());
        assert_eq!(code, Some(2), "{case}: {err}");
        assert_eq!(err.lines().count(), 1, "{case}: {err}");
        assert!(err.contains(names), "{case}: {err}");
        assert!(rss_kib < 100 << 10, "{case}: {rss_kib} KiB");
    }
}

/// Options for `run`, the environment, and what the refusal must name.
type OptionCase<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);

#[test]
fn options_that_cannot_work_are_refused_before_anything_loads() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let t = Instant::now();
        let out = hookprof(
            dir.path(),
            &[&["run", "--rounds", "1", "-q"], extra].concat(),
        )
        .envs(env.iter().copied())
        .output()
        .unwrap();
        (out, t.elapsed())
    };
    let cases: [OptionCase; 6] = [
        (
            &["--workloads", "build", "--jobs", "0"],
            &[],
            "from 1 to 4096",
        ),
        (
            &["--min-sample-ms", "18446744073709551615"],
            &[],
            "1..=60000",
        ),
        (&["--timeout-per-workload", "99999999"], &[], "1..=604800"),
        (
            &[],
            &[("TMPDIR", "/nonexistent/tmp")],
            "set TMPDIR to a writable directory",
        ),
        (&["--store", "postgres://ci@db:99999/h"], &[], "port"),
        (&["--samples", "1000000"], &[], "2..=100000"),
    ];
    for (extra, env, names) in cases {
        let (out, took) = run(extra, env);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {err}");
        assert!(err.contains(names), "{extra:?}: no '{names}' in {err}");
        assert!(!err.contains("make"), "{extra:?}: make ran: {err}");
        assert!(took < REFUSED_WITHIN, "{extra:?}: took {took:?}");
    }
    let out = hookprof(dir.path(), &["stat", "--", "/nonexistent/cmd"])
        .output()
        .unwrap();
    assert_one_line("stat -- missing", &out, 2, "stat -- /nonexistent/cmd");
}

#[test]
fn every_usage_error_is_one_line_and_exit_2_and_help_still_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    for (args, names) in [
        (&["run", "--jobs", "0"][..], "'0' for '--jobs"),
        (&["run", "--samples", "0"], "2..=100000"),
        (&["run", "--sample-hz", "100001"], "10..=100000"),
        (&["stat", "--runs", "0", "--", "true"], "--runs"),
        (
            &["stat", "--samples", "3", "--", "true"],
            "tip: a `run` option",
        ),
        (&["compare"], "required arguments were not provided"),
        (&["history", "--metric"], "--metric"),
        (&["report", "--format", "xml", "f.json"], "possible values"),
        (&["runs", "--baseline-keep", "x"], "--baseline-keep"),
        (&["import", "lmbench"], "hookprof import lmbench --help"),
        (&["import", "time", "--bogus"], "'--bogus'"),
        (&["hooks", "--bogus"], "hookprof hooks --help"),
        (&["calibrate", "--bogus"], "hookprof calibrate --help"),
        (&["top", "--sample-hz", "100001"], "hookprof top --help"),
        (&["ab"], "hookprof ab --help"),
        (&["nonesuch"], "unrecognized subcommand"),
    ] {
        let out = hookprof(dir.path(), args).output().unwrap();
        assert_one_line(&args.join(" "), &out, 2, names);
        assert!(
            !stderr(&out).contains("Usage:"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    for args in [
        &["--help"][..],
        &["--version"],
        &["run", "--help"],
        &["top", "-h"],
    ] {
        let out = hookprof(dir.path(), args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn forged_results_with_more_samples_or_workloads_than_any_run_are_refused_where_they_pass() {
    let dir = tempfile::tempdir().unwrap();
    let base = results_file(dir.path());
    let samples = forged(&base, &dir.path().join("samples.json"), |doc| {
        doc["workloads"][0]["clean"] = vec![1.0; 1_000_001].into();
    });
    let workloads = forged(&base, &dir.path().join("workloads.json"), |doc| {
        let one = doc["workloads"][0].clone();
        doc["workloads"] = (0..1001)
            .map(|i| {
                let mut w = one.clone();
                w["name"] = format!("w{i}").into();
                w
            })
            .collect();
    });
    for (file, names) in [
        (&samples, "more than 1000000 samples in one list"),
        (&workloads, "more than 1000 workloads"),
    ] {
        let file = file.to_str().unwrap();
        for args in [
            vec!["report", file],
            vec!["compare", file, file],
            vec!["history", file, file],
            vec!["runs", "--add", file, "--store", "sqlite://T.db"],
        ] {
            let t = Instant::now();
            let out = hookprof(dir.path(), &args).output().unwrap();
            assert!(t.elapsed() < REFUSED_WITHIN, "{args:?}: {:?}", t.elapsed());
            assert_one_line(&args.join(" "), &out, 2, names);
        }
    }
}

#[test]
fn all_zero_forged_samples_print_no_infinity() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let base = results_file(dir.path());
    let zero = forged(&base, &dir.path().join("zero.json"), |doc| {
        let w = &mut doc["workloads"][0];
        for pass in ["clean", "probed"] {
            if let Some(samples) = w[pass].as_array_mut() {
                samples.iter_mut().for_each(|s| *s = 0.into());
            }
        }
    });
    let (zero, base) = (zero.to_str().unwrap(), base.to_str().unwrap());
    for args in [
        vec!["report", zero],
        vec!["compare", zero, base],
        vec!["compare", base, zero],
    ] {
        let out = hookprof(dir.path(), &args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("inf%"), "{args:?}: {text}");
        assert!(!text.contains("NaN"), "{args:?}: {text}");
    }
}

fn is_runner(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmd| cmd.split(|&b| b == 0).any(|a| a == b"__runner"))
}

/// A directory `name` in `parent` (made reachable by every user) with `mode`, owned by nobody
/// when `nobody`: what a CI workspace, a shared TMPDIR or a planted spool looks like to root.
fn shared_dir(parent: &Path, name: &str, mode: u32, nobody: bool) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = parent.join(name);
    std::fs::create_dir(&dir).unwrap();
    if nobody {
        std::os::unix::fs::chown(&dir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
    dir
}

const NOBODY: u32 = 65534;

/// Runs `script` with sh as nobody (uid and gid 65534, no groups, no capabilities): the
/// hostile local user's actions against root's run.
fn as_nobody(script: &str) {
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "sh",
            "-c",
            script,
        ])
        .output()
        .expect("setpriv (util-linux)");
    assert!(
        out.status.success(),
        "as nobody: {script}: {}",
        stderr(&out)
    );
}

/// Paths root writes in directories another user can write: a planted link or a swapped
/// directory never makes root create, replace or delete a file outside hookprof's own.
mod paths {
    use super::*;

    #[test]
    fn a_link_nobody_planted_at_the_output_is_never_followed() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let root_file = dir.path().join("rootfile");
        std::fs::write(&root_file, "root's own").unwrap();
        // A CI workspace nobody owns, and a shared /tmp (sticky, root's, links followed).
        for (name, mode, nobody) in [("ws", 0o755, true), ("tmp", 0o1777, false)] {
            let shared = shared_dir(dir.path(), name, mode, nobody);
            as_nobody(&format!(
                "ln -s {} {}/out.json",
                root_file.display(),
                shared.display()
            ));
            let out_json = format!("{name}/out.json");
            let out = hookprof(
                dir.path(),
                &[&["run", "--probes", "none", "-o", &out_json], TINY].concat(),
            )
            .output()
            .unwrap();
            assert_one_line(name, &out, 2, "is a link made by uid 65534");
            assert_eq!(std::fs::read(&root_file).unwrap(), b"root's own", "{name}");
            // Where nothing was planted, root writes into the workspace as before.
            let fresh = format!("{name}/fresh.json");
            let out = hookprof(
                dir.path(),
                &[&["run", "--probes", "none", "-o", &fresh], TINY].concat(),
            )
            .output()
            .unwrap();
            assert!(out.status.success(), "{name}: {}", stderr(&out));
            assert!(Results::load(&dir.path().join(&fresh)).is_ok(), "{name}");
        }
    }

    #[test]
    fn the_store_database_is_never_made_through_a_planted_link() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim.db");
        let empty_root_file = dir.path().join("empty");
        std::fs::write(&empty_root_file, "").unwrap();
        let tmp = shared_dir(dir.path(), "tmp", 0o1777, false);
        for (link, target) in [("a.db", &victim), ("b.db", &empty_root_file)] {
            as_nobody(&format!(
                "ln -s {} {}/{link}",
                target.display(),
                tmp.display()
            ));
            let store = format!("sqlite://{}/{link}", tmp.display());
            let out = hookprof(
                dir.path(),
                &[
                    &["run", "--probes", "none", "-o", "r.json", "--store", &store],
                    TINY,
                ]
                .concat(),
            )
            .env("HOOKPROF_SPOOL", dir.path().join("spool"))
            .output()
            .unwrap();
            // The -o file keeps the run; the store is refused and the run spooled.
            assert!(out.status.success(), "{link}: {}", stderr(&out));
            assert!(stderr(&out).contains("is a symlink"), "{}", stderr(&out));
        }
        assert!(!victim.exists(), "root made the link's target");
        assert_eq!(
            std::fs::read(&empty_root_file).unwrap(),
            b"",
            "became a database"
        );
        // A store directory nobody owns is refused outright.
        let theirs = shared_dir(dir.path(), "theirs", 0o755, true);
        let store = format!("sqlite://{}/s.db", theirs.display());
        let out = hookprof(
            dir.path(),
            &[&["run", "--probes", "none", "--store", &store], TINY].concat(),
        )
        .env("HOOKPROF_SPOOL", &theirs)
        .output()
        .unwrap();
        assert_one_line("nobody's store dir", &out, 2, "another user can write it");
        assert!(!theirs.join("s.db").exists());
    }

    #[test]
    fn a_spool_nobody_can_write_is_never_imported() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let own_spool = dir.path().join("spool");
        // A real spooled run: a server that is not there takes nothing.
        let gone = "postgres://ci@127.0.0.1:1/none";
        let out = hookprof(
            dir.path(),
            &[&["run", "--probes", "none", "--store", gone], TINY].concat(),
        )
        .env("HOOKPROF_SPOOL", &own_spool)
        .stdout(Stdio::null())
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let spooled = std::fs::read_dir(&own_spool)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        // Forged for the SQLite store below, in a directory nobody owns, and in root's own
        // spool as a file nobody owns.
        let store = format!("sqlite://{}/s.db", dir.path().display());
        let mut forged: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&spooled).unwrap()).unwrap();
        forged["store"] = format!("{store}?mode=rwc").into();
        let theirs = shared_dir(dir.path(), "theirs", 0o755, true);
        let text = serde_json::to_string(&forged).unwrap();
        std::fs::write(theirs.join("forged.json"), &text).unwrap();
        std::os::unix::fs::chown(theirs.join("forged.json"), Some(NOBODY), Some(NOBODY)).unwrap();
        std::fs::remove_file(&spooled).unwrap();
        std::fs::write(own_spool.join("forged.json"), &text).unwrap();
        std::os::unix::fs::chown(own_spool.join("forged.json"), Some(NOBODY), Some(NOBODY))
            .unwrap();
        for (spool, names) in [
            (&theirs, "another user can write it"),
            (&own_spool, "not a file of uid 0"),
        ] {
            let out = hookprof(dir.path(), &["runs", "--store", &store, "--format", "json"])
                .env("HOOKPROF_SPOOL", spool)
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
            assert!(stderr(&out).contains(names), "{names}: {}", stderr(&out));
            let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let runs = listed.get("runs").unwrap_or(&listed);
            assert_eq!(runs.as_array().map(Vec::len), Some(0), "imported: {listed}");
        }
    }

    #[test]
    fn saving_a_baseline_removes_only_results_files_hookprof_wrote() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = results_file(dir.path());
        let name_dir = dir.path().join("b/main");
        std::fs::create_dir_all(&name_dir).unwrap();
        std::fs::write(name_dir.join("important.json"), "{\"mine\": true}").unwrap();
        // A results document, but not by hookprof's name for the files it saves.
        std::fs::copy(&base, name_dir.join("kept-by-hand.json")).unwrap();
        let save = ["--save-baseline", "main", "--baseline-dir", "b"];
        for _ in 0..2 {
            let out = hookprof(
                dir.path(),
                &[&["run", "--probes", "none"], &save[..], TINY].concat(),
            )
            .stdout(Stdio::null())
            .output()
            .unwrap();
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let mut left: Vec<String> = std::fs::read_dir(&name_dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(
            left.contains(&"important.json".into()) && left.contains(&"kept-by-hand.json".into())
        );
        // A baseline directory nobody owns is neither written nor read.
        let theirs = shared_dir(dir.path(), "theirs", 0o755, true);
        let out = hookprof(
            dir.path(),
            &[
                &[
                    "run",
                    "--probes",
                    "none",
                    "--save-baseline",
                    "x",
                    "--baseline-dir",
                ],
                &[theirs.to_str().unwrap()][..],
                TINY,
            ]
            .concat(),
        )
        .output()
        .unwrap();
        assert_one_line(
            "nobody's baseline dir",
            &out,
            2,
            "another user can write it",
        );
    }

    #[test]
    fn scratch_is_never_made_where_another_user_can_swap_it() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let fs_create_in = |temp: &Path| {
            let args = [
                "run",
                "--probes",
                "none",
                "--workloads",
                "fs_create_0k",
                "-o",
                "r.json",
            ];
            hookprof(dir.path(), &[&args[..], &TINY[2..]].concat())
                .env("TMPDIR", temp)
                .output()
                .unwrap()
        };
        let theirs = shared_dir(dir.path(), "theirs", 0o777, true);
        let out = fs_create_in(&theirs);
        assert_one_line("TMPDIR nobody owns", &out, 2, "temp directory (TMPDIR)");
        assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 0, "made in it");
        // Sticky and root's (as /tmp): others add names, never take root's.
        let out = fs_create_in(&shared_dir(dir.path(), "tmp", 0o1777, false));
        assert!(out.status.success(), "{}", stderr(&out));
    }
}

/// Outputs checked before any work: a run that could not be kept is refused at once.
mod outputs {
    use super::*;

    #[test]
    fn a_run_that_no_store_spool_or_file_could_keep_is_refused_before_it_measures() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        std::fs::write(&home, "a file, not a directory").unwrap();
        let t = Instant::now();
        let out = hookprof(dir.path(), &[&["run"], hookprof_tests::LONG_RUN].concat())
            .env_remove(hookprof_tests::STORE_ENV)
            .env_remove("XDG_DATA_HOME")
            .env_remove("HOOKPROF_SPOOL")
            .env("HOME", &home)
            .output()
            .unwrap();
        assert_one_line("HOME a file", &out, 2, "no -o file would keep the run");
        assert!(t.elapsed() < REFUSED_WITHIN, "{:?}", t.elapsed());
    }

    #[test]
    fn a_file_size_limit_too_small_is_refused_at_once_and_leaves_nothing() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let out = Command::new("prlimit")
            .args(["--fsize=102400:102400", "--"])
            .arg(hookprof_bin())
            .args([&["run", "-o", "r.json"], hookprof_tests::LONG_RUN].concat())
            .current_dir(dir.path())
            .env(hookprof_tests::STORE_ENV, "off")
            .env("TMPDIR", dir.path())
            .output()
            .unwrap();
        assert_one_line("ulimit -f 100", &out, 2, "RLIMIT_FSIZE) is 100 KiB");
        assert!(t.elapsed() < REFUSED_WITHIN, "{:?}", t.elapsed());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_write_past_the_file_size_limit_is_exit_4_not_a_signal() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let base = results_file(dir.path());
        // A results file printed as JSON past a 16 MiB limit: the forged file is bigger.
        let big = forged(&base, &dir.path().join("big.json"), |doc| {
            doc["label"] = "x".repeat(17 << 20).into();
        });
        let printed = dir.path().join("printed.json");
        let out = Command::new("prlimit")
            .args(["--fsize=16777216:16777216", "--"])
            .arg(hookprof_bin())
            .args(["report", "--format", "json"])
            .arg(&big)
            .stdout(std::fs::File::create(&printed).unwrap())
            .env(hookprof_tests::STORE_ENV, "off")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(WRITE_FAILED), "{}", stderr(&out));
        assert!(stderr(&out).contains("File too large"), "{}", stderr(&out));
    }

    #[test]
    fn a_sweep_whose_runner_the_kernel_would_refuse_is_refused_at_once() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let t = Instant::now();
        let out = hookprof(
            dir.path(),
            &[
                &["run", "--sweep", "landlock-rules=0,10000"],
                hookprof_tests::LONG_RUN,
            ]
            .concat(),
        )
        .output()
        .unwrap();
        assert_one_line("landlock-rules=10000", &out, 2, "E2BIG");
        assert!(
            stderr(&out).contains("landlock-rules=10000"),
            "{}",
            stderr(&out)
        );
        // Refused before its 10,000 rule directories are made: the run would take 50 s.
        assert!(t.elapsed() < REFUSED_WITHIN, "{:?}", t.elapsed());
    }
}

/// Strings printed: bidi controls and zero-width characters reach no output raw, and names
/// that are ours refuse them at the door.
mod strings {
    use super::*;

    const HIDDEN: [char; 6] = [
        '\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}', '\u{200f}', '\u{61c}',
    ];

    #[test]
    fn bidi_and_zero_width_characters_are_shown_escaped_in_every_format() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = results_file(dir.path());
        let hostile = forged(&base, &dir.path().join("hostile.json"), |doc| {
            doc["label"] = "v6.1\u{202e}21\u{202c} \u{2066}x\u{2069}\u{200b}".into();
            doc["workloads"][0]["name"] = "null\u{feff}_call\u{200f}\u{61c}".into();
        });
        let hostile = hostile.to_str().unwrap();
        for (args, text, err) in printed(
            dir.path(),
            &[
                vec!["report", hostile],
                vec!["report", "--format", "markdown", hostile],
                vec!["report", "--format", "html", hostile],
                vec!["compare", hostile, hostile],
                vec!["compare", "--format", "junit", hostile, hostile],
                vec!["compare", "--format", "html", hostile, hostile],
                vec!["history", hostile, hostile],
            ],
        ) {
            let case = args.join(" ");
            assert!(
                !text.contains(HIDDEN),
                "{case}: a raw bidi or zero-width character"
            );
            assert!(
                text.contains("\\u{202e}") || text.contains("\\u{feff}"),
                "{case}: {text}"
            );
            assert!(!err.contains(HIDDEN), "{case}: stderr");
        }
    }

    #[test]
    fn labels_and_meta_with_bidi_or_zero_width_characters_are_refused_at_the_door() {
        let dir = tempfile::tempdir().unwrap();
        for c in HIDDEN {
            for args in [
                ["--label".to_string(), format!("v6.1{c}2")],
                ["--meta".to_string(), format!("commit=ab{c}c")],
            ] {
                let out = hookprof(dir.path(), &["run", "--probes", "none", &args[0], &args[1]])
                    .output()
                    .unwrap();
                assert_one_line(&format!("{args:?}"), &out, 2, "invisible character");
                assert!(!stderr(&out).contains(c), "{}", stderr(&out));
            }
        }
    }
}

/// Secrets: a command line recorded anywhere keeps no secret value, whatever its form.
mod secrets {
    use super::*;

    #[test]
    fn no_secret_of_a_stat_command_reaches_its_results_or_the_store() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let store = format!("sqlite://{}/s.db", dir.path().display());
        let out = hookprof(
            dir.path(),
            &[
                "stat",
                "--probes",
                "none",
                "--rounds",
                "1",
                "--runs",
                "2",
                "-q",
                "-o",
                "s.json",
                "--store",
                &store,
                "--prepare",
                "PGPASSWORD=hunter0 true --token 'hunter 1'",
                "--",
                "/bin/true",
                "password=hunter2",
                "--password=hunter3",
                "--api-key",
                "hunter4",
                "PGPASSWORD=hunter5",
                "postgres://u:hunter6@[::1]/d?sslpassword=hunter7",
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        for file in ["s.json", "s.db"] {
            let bytes = std::fs::read(dir.path().join(file)).unwrap();
            let text = String::from_utf8_lossy(&bytes);
            assert!(!text.contains("hunter"), "{file} keeps a secret");
            assert!(text.contains("password=***"), "{file}: nothing masked?");
        }
        assert!(!stderr(&out).contains("hunter"), "{}", stderr(&out));
    }

    #[test]
    fn a_password_given_by_a_short_option_of_a_command_that_takes_it_is_not_kept() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        // sh ignores the words after its script: they are the command line as a CI job
        // would write it, with passwords by short options.
        let out = hookprof(
            dir.path(),
            &[
                "stat",
                "--probes",
                "none",
                "--rounds",
                "1",
                "--runs",
                "2",
                "-q",
                "-o",
                "s.json",
                "--",
                "sh",
                "-c",
                "true",
                "mysql",
                "-uci",
                "-phunter1",
                "sshpass",
                "-p",
                "hunter2",
                "curl",
                "-u",
                "ci:hunter3",
                "redis-cli",
                "-a",
                "hunter4",
            ],
        )
        .output()
        .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let kept = std::fs::read_to_string(dir.path().join("s.json")).unwrap();
        assert!(!kept.contains("hunter"), "s.json keeps a secret");
        assert!(
            kept.contains("-p***") && kept.contains("-uci"),
            "nothing masked?"
        );
    }
}

/// URLs: read as a URL parser reads them; a SQLite store that keeps nothing on disk refused.
mod urls {
    use super::*;

    #[test]
    fn sqlite_parameters_that_keep_nothing_on_disk_are_refused_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        for store in [
            "sqlite://x.db?vfs=memdb",
            "sqlite://x.db?mode=memory",
            "sqlite://x.db?nolock=1",
        ] {
            let t = Instant::now();
            let out = hookprof(
                dir.path(),
                &[&["run", "--store", store], hookprof_tests::LONG_RUN].concat(),
            )
            .output()
            .unwrap();
            assert_one_line(store, &out, 2, "use mode=ro|rw|rwc");
            assert!(t.elapsed() < REFUSED_WITHIN, "{store}: {:?}", t.elapsed());
            assert!(!dir.path().join("x.db").exists(), "{store}");
        }
    }
}

/// Containers and namespaces (real ones, made by `unshare`): each is detected and recorded in
/// the results, a compare across network namespaces states it, and what a namespace takes
/// away (the user namespace's capabilities, the mount namespace's sysfs) is refused in one line
/// naming it; a cgroup path outside the hierarchy is no scope.
mod namespaces {
    use super::*;

    /// `unshare BEFORE hookprof run RUN_ARGS TINY...` in `dir`, with no store, stdin closed.
    fn unshare_run(dir: &Path, before: &[&str], run_args: &[&str]) -> Output {
        Command::new("unshare")
            .args(before)
            .arg(hookprof_bin())
            .args([&["run"], run_args, TINY].concat())
            .current_dir(dir)
            .env(hookprof_tests::STORE_ENV, "off")
            .env("TMPDIR", dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// A tiny clean run in `dir` through `unshare ARGS`, its results in `file`, and the
    /// namespaces it ran in, as /proc/self/ns named them there (`net:[4026532174]`) just before.
    fn unshared_run(dir: &Path, unshare: &[&str], file: &str) -> (Output, Results, String) {
        let script = "readlink /proc/self/ns/pid /proc/self/ns/user /proc/self/ns/mnt \
                      /proc/self/ns/cgroup /proc/self/ns/net > ns.txt && exec \"$0\" \"$@\"";
        let before = [unshare, &["sh", "-c", script]].concat();
        let out = unshare_run(dir, &before, &["--probes", "none", "-o", file]);
        assert!(
            out.status.success(),
            "unshare {unshare:?}: {}",
            stderr(&out)
        );
        let names = std::fs::read_to_string(dir.join("ns.txt")).unwrap();
        (out, Results::load(&dir.join(file)).unwrap(), names)
    }

    /// The recorded namespaces as /proc/self/ns names them, and which the run called the
    /// host's (Some(true)), another (Some(false)) or could not tell.
    fn recorded(r: &Results) -> (String, Vec<Option<bool>>) {
        let ns = r.environment.namespaces.expect("namespaces recorded");
        let all = [
            ("pid", ns.pid),
            ("user", ns.user),
            ("mnt", ns.mount),
            ("cgroup", ns.cgroup),
            ("net", ns.network),
        ];
        let names = all
            .iter()
            .map(|(kind, n)| format!("{kind}:[{}]\n", n.inode))
            .collect();
        (names, all.iter().map(|(_, n)| n.initial).collect())
    }

    #[test]
    fn each_namespace_is_recorded_and_a_compare_across_network_namespaces_says_so() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        // The host: each namespace the host's (none entered: unshare with no flag).
        let (_, host, names) = unshared_run(dir.path(), &[], "host.json");
        assert_eq!(recorded(&host), (names, vec![Some(true); 5]));
        // A container's: its own pid, mount, cgroup and network namespaces.
        let flags = ["--pid", "--fork", "--mount-proc", "--cgroup", "--net"];
        let (out, nested, names) = unshared_run(dir.path(), &flags, "nested.json");
        let (inodes, initial) = recorded(&nested);
        assert_eq!(inodes, names);
        assert_eq!(initial[..2], [Some(false), Some(true)], "pid, user");
        assert_eq!(initial[3], Some(false), "cgroup");
        // Before Linux 6.18 a container cannot tell the host's mount and network namespaces.
        assert!(
            initial[2] != Some(true) && initial[4] != Some(true),
            "{initial:?}"
        );
        // Other tools' programs are looked for through /proc: one note says what that misses.
        let notes: Vec<&str> = std::str::from_utf8(&out.stderr)
            .unwrap()
            .lines()
            .filter(|l| l.contains("this run is in a pid namespace (pid:["))
            .collect();
        assert_eq!(notes.len(), 1, "{}", stderr(&out));
        assert!(
            notes[0].contains("held outside it is listed"),
            "{}",
            notes[0]
        );
        // Only the network namespace: the host's pid namespace, so the rest are told apart.
        let (_, net, names) = unshared_run(dir.path(), &["--net"], "net.json");
        let (inodes, initial) = recorded(&net);
        assert_eq!(inodes, names);
        assert_eq!(initial, [true, true, true, true, false].map(Some));
        let out = hookprof(dir.path(), &["compare", "host.json", "net.json"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let shown = format!(
            "network namespace: the host's -> net:[{}]",
            net.environment.namespaces.unwrap().network.inode
        );
        assert!(text.contains(&shown), "{text}");
        assert!(!text.contains("pid namespace:"), "{text}");
        // Two runs on the host: no namespace differs.
        let out = hookprof(dir.path(), &["compare", "host.json", "host.json"])
            .output()
            .unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("namespace:"),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }

    #[test]
    fn a_user_namespace_is_refused_in_one_line_naming_it() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        let out = unshare_run(
            dir.path(),
            &["--user", "--map-root-user", "--"],
            &["-o", "r.json"],
        );
        assert_one_line(
            "a user namespace",
            &out,
            2,
            "runs in a user namespace (user:[",
        );
        let err = stderr(&out);
        assert!(
            err.contains("where uid 0 is uid 0 outside")
                && err.contains("run it in the host's user namespace"),
            "{err}"
        );
        assert!(!dir.path().join("r.json").exists());
    }

    #[test]
    fn sysfs_missing_from_a_mount_namespace_is_named_not_blamed_on_the_kernel() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        for (what, mount) in [
            ("no sysfs", "umount -l /sys"),
            (
                "a tmpfs over the BTF",
                "mount -t tmpfs none /sys/kernel/btf",
            ),
        ] {
            let script = format!("{mount} && exec \"$0\" \"$@\"");
            let out = unshare_run(
                dir.path(),
                &["--mount", "sh", "-c", &script],
                &["-o", "r.json"],
            );
            assert_one_line(what, &out, 2, "in this mount namespace (mnt:[");
            let err = stderr(&out);
            assert!(
                err.contains("/sys/kernel/btf/vmlinux is missing")
                    && err.contains("mount -t sysfs")
                    && !err.contains("this kernel"),
                "{what}: {err}"
            );
        }
    }

    #[test]
    fn a_cgroup_outside_the_hierarchy_is_refused() {
        require_root();
        let dir = tempfile::tempdir().unwrap();
        for cgroup in ["../../../../etc", "/../../.."] {
            let out = hookprof(dir.path(), &["top", "--cgroup", cgroup, "--count", "1"])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{cgroup}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("outside the cgroup2 hierarchy"),
                "{}",
                stderr(&out)
            );
        }
    }
}

/// Sizes: a forged file of many paths costs report and compare time linear in its paths, and
/// one past any run's size is refused in one line.
mod sizes {
    use super::*;

    /// `base` with `rows` attribution rows on its workload: hooks, two LSM functions under
    /// each, syscalls, and task paths each under the one before (nested an eighth of the rows
    /// deep); `scale` moves their times, so two of them differ.
    fn with_paths(base: &Path, to: &Path, rows: usize, scale: f64) -> PathBuf {
        forged(base, to, |doc| {
            let w = &mut doc["workloads"][0];
            w["probed"] = w["clean"].clone();
            w["share_of"] = "probed_op".into();
            w["attribution"] = (0..rows).map(|i| path_row(i, scale)).collect();
        })
    }

    fn path_row(i: usize, scale: f64) -> serde_json::Value {
        let hook = format!("security_h{}", i - i % 4);
        let (kind, name, parent) = match i % 8 {
            0 | 4 => ("hook", hook, None),
            1 | 2 | 5 | 6 => ("lsm", format!("lsm_h{i}"), Some(hook)),
            3 => ("syscall", format!("sys{i}"), None),
            _ => (
                "task_path",
                format!("task{i}"),
                i.checked_sub(8).map(|p| format!("task{p}")),
            ),
        };
        let ns = 1.0 + (i % 97) as f64 * scale;
        serde_json::json!({
            "kind": kind, "name": name, "parent": parent,
            "lsm": (kind == "lsm").then_some("bpf"),
            "calls_per_op": 1.0, "ns_per_call": ns, "ns_per_op": ns, "share": 1e-4,
            "corrected_ns_per_call": ns, "corrected_ns_per_op": ns,
            "samples_ns_per_op": [ns, ns * 1.01],
        })
    }

    /// The best of two runs of `args` in `dir` (a shared machine's noise is upward), after
    /// checking it succeeded and printed `names`.
    fn best_time(dir: &Path, args: &[&str], names: &str) -> Duration {
        let mut best = Duration::MAX;
        for _ in 0..2 {
            let t = Instant::now();
            let out = hookprof(dir, args).output().unwrap();
            best = best.min(t.elapsed());
            assert!(out.status.success(), "{args:?}: {}", stderr(&out));
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains(names), "{args:?}: no {names}");
        }
        best
    }

    /// Not a check: writes the forged files of the test below (`o`/`n` at 25k and 100k rows),
    /// and inputs of as many rows for `import` (the lmbench summary and the kernbench log of
    /// profiler/tests/data, each data row repeated), to `$HOOKPROF_SIZES_DIR`, to time or
    /// profile report, compare and import on them by hand (docs/src/benchmarks.md).
    #[test]
    #[ignore]
    fn write_forged_sizes() {
        require_root();
        let to = PathBuf::from(std::env::var("HOOKPROF_SIZES_DIR").expect("HOOKPROF_SIZES_DIR"));
        let base = results_file(&to);
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../profiler/tests/data");
        let read = |name: &str| std::fs::read_to_string(data.join(name)).unwrap();
        let (summary, log) = (
            read("lmbench2-summary-lsm-2.4.9.txt"),
            read("kernbench-series.log"),
        );
        let is_host_row = |l: &str| {
            ["00-base ", "01-lsm ", "02-cap "]
                .iter()
                .any(|h| l.starts_with(h))
        };
        let is_run = |l: &str| l.contains("elapsed");
        for rows in [25_000, 100_000] {
            with_paths(&base, &to.join(format!("o{rows}.json")), rows, 1.0);
            with_paths(&base, &to.join(format!("n{rows}.json")), rows, 1.3);
            let repeated = |text: &str, is_row: &dyn Fn(&str) -> bool| {
                let times = rows / text.lines().filter(|l| is_row(l)).count();
                let lines = text.lines().flat_map(|l| match is_row(l) {
                    true => vec![l; times],
                    false => vec![l],
                });
                lines.collect::<Vec<_>>().join("\n")
            };
            let write = |name: String, text: String| std::fs::write(to.join(name), text).unwrap();
            write(
                format!("lmbench{rows}.txt"),
                repeated(&summary, &is_host_row),
            );
            write(format!("time{rows}.log"), repeated(&log, &is_run));
        }
    }

    #[test]
    fn report_and_compare_take_time_linear_in_a_forged_file_s_paths() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = results_file(dir.path());
        let mut times: Vec<[Duration; 2]> = Vec::new();
        for rows in [25_000, 100_000] {
            let old = with_paths(&base, &dir.path().join(format!("o{rows}.json")), rows, 1.0);
            let new = with_paths(&base, &dir.path().join(format!("n{rows}.json")), rows, 1.3);
            let (old, new) = (old.to_str().unwrap(), new.to_str().unwrap());
            // The last hook and the deepest task path are printed: every row was tabled.
            let last_hook = format!("security_h{}", rows - 4);
            let deepest = format!("task{}", rows - 1);
            times.push([
                best_time(dir.path(), &["report", old], &deepest),
                best_time(dir.path(), &["compare", old, new], &last_hook),
            ]);
        }
        // 4x the rows: linear time is 4x, a quadratic 16x; 8x leaves room for a loaded machine.
        for (command, at) in [("report", 0), ("compare", 1)] {
            let ratio = times[1][at].as_secs_f64() / times[0][at].as_secs_f64();
            assert!(
                ratio < 8.0,
                "{command}: 100k rows took {ratio:.1}x 25k's ({times:?})"
            );
        }
    }

    #[test]
    fn a_100_mb_forged_file_is_refused_in_one_line_at_once() {
        require_root();
        let _serial = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let base = results_file(dir.path());
        let big = with_paths(&base, &dir.path().join("big.json"), 400_000, 1.0);
        assert!(std::fs::metadata(&big).unwrap().len() > 100 << 20);
        let big = big.to_str().unwrap();
        for args in [vec!["report", big], vec!["compare", big, big]] {
            let t = Instant::now();
            let out = hookprof(dir.path(), &args).output().unwrap();
            assert_one_line(
                args[0],
                &out,
                2,
                "400000 paths (attribution rows and sampled",
            );
            assert!(t.elapsed() < REFUSED_WITHIN, "{args:?}: {:?}", t.elapsed());
        }
    }
}
