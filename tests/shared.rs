//! Safe in containers, on shared machines and under limits (root, the real binary, ~3 min):
//! a run in a pid namespace attributes as on the host and leaves another run's scratch alone; a
//! /proc of another namespace (or none) is named; the store's lock file is never followed,
//! never another user's, and never waited for without end; `--user` takes real ids only and
//! leaves the runner nothing of root's; no password at rest; another tool's BPF programs on
//! the measured paths are said and recorded; hidden kernel addresses refuse the profile; an
//! open-file limit, a stopped runner and a run kept nowhere each end as the manual says; the
//! metrics endpoint stays one thread under idle and slow clients. Each test is one case of the
//! manual's safety page.
use std::{
    collections::BTreeSet,
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::{
        fs::{MetadataExt, PermissionsExt},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use hookprof::results::Results;
use hookprof_tests::{
    assert_near, cleanup::children_of, hookprof_bin, one_at_a_time, require_root, row, workload,
    STORE_ENV, TINY_RUN,
};

/// A refusal that must come before anything is measured comes within this.
const REFUSED_WITHIN: Duration = Duration::from_secs(20);

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Ended with `code` and one line on stderr holding `names`, never a panic.
fn assert_one_line(what: &str, out: &Output, code: i32, names: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert_eq!(err.lines().count(), 1, "{what}: not one line: {err}");
    assert!(err.contains(names), "{what}: no '{names}' in: {err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// hookprof ARGS in `dir` (TMPDIR too), no store unless the args name one, stdin closed.
fn hookprof(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(hookprof_bin());
    cmd.args(args)
        .current_dir(dir)
        .env(STORE_ENV, "off")
        .env("TMPDIR", dir)
        .env("HOOKPROF_SPOOL", dir.join("spool"))
        .stdin(Stdio::null());
    cmd
}

/// `unshare ARGS hookprof HOOKPROF_ARGS` in `dir`.
fn unshared(dir: &Path, unshare: &[&str], args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(unshare)
        .arg(hookprof_bin())
        .args(args)
        .current_dir(dir)
        .env(STORE_ENV, "off")
        .env("TMPDIR", dir)
        .stdin(Stdio::null());
    cmd
}

fn succeeded(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        stderr(out)
    );
}

/// `run WORKLOAD ARGS` of 10 samples of at least 0.3 s (some seconds), started, its stderr
/// piped.
fn start_run(dir: &Path, workload: &str, args: &[&str]) -> Child {
    start_run_with(dir, workload, args, &[])
}

fn start_run_with(dir: &Path, workload: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    let timing = [
        "--rounds",
        "1",
        "--samples",
        "10",
        "--min-sample-ms",
        "300",
        "-q",
    ];
    hookprof(
        dir,
        &[&["run", "--workloads", workload], &timing[..], args].concat(),
    )
    .envs(env.iter().copied())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

/// The workloads and probes the namespace tests run: a syscall per op and a fork per op.
const NS_RUN: &[&str] = &[
    "run",
    "--workloads",
    "null_call,fork_proc",
    "--probes",
    "syscalls,tasks",
    "--rounds",
    "1",
    "--samples",
    "2",
    "--min-sample-ms",
    "20",
    "-q",
    "-o",
    "r.json",
];

#[test]
fn a_run_in_a_pid_namespace_attributes_as_on_the_host() {
    require_root();
    let _serial = one_at_a_time();
    let host_dir = tempfile::tempdir().unwrap();
    let ns_dir = tempfile::tempdir().unwrap();
    let out = hookprof(host_dir.path(), NS_RUN)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    succeeded("on the host", &out);
    let out = unshared(ns_dir.path(), &["-p", "-f", "--mount-proc"], NS_RUN)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    succeeded("in a pid namespace", &out);
    let host = Results::load(&host_dir.path().join("r.json")).unwrap();
    let ns = Results::load(&ns_dir.path().join("r.json")).unwrap();
    for (side, r) in [("host", &host), ("namespace", &ns)] {
        assert!(r.complete, "{side}");
        let call = workload(r, "null_call");
        assert_near(
            &format!("{side}: getppid calls/op"),
            row(call, "getppid").calls_per_op,
            1.0,
            0.05,
        );
        let fork = workload(r, "fork_proc");
        for event in ["fork", "exit"] {
            assert_near(
                &format!("{side}: fork_proc {event} events/op"),
                fork.events_per_op[event],
                1.0,
                0.05,
            );
        }
        assert_near(
            &format!("{side}: wait4 calls/op"),
            row(fork, "wait4").calls_per_op,
            1.0,
            0.05,
        );
    }
    let names = |r: &Results, w: &str| {
        let mut n: Vec<String> = workload(r, w)
            .attribution
            .iter()
            .map(|row| row.name.clone())
            .collect();
        n.sort();
        n
    };
    assert_eq!(names(&host, "null_call"), names(&ns, "null_call"));
}

#[test]
fn stat_and_top_pid_in_a_pid_namespace_count_their_processes() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = unshared(
        dir.path(),
        &["-p", "-f", "--mount-proc"],
        &[
            "stat",
            "--rounds",
            "1",
            "--runs",
            "2",
            "--probes",
            "syscalls,tasks",
            "-q",
            "-o",
            "s.json",
            "--",
            "/bin/sh",
            "-c",
            "/bin/true; /bin/true",
        ],
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    succeeded("stat in a pid namespace", &out);
    let r = Results::load(&dir.path().join("s.json")).unwrap();
    let w = &r.workloads[0];
    assert!(
        w.events_per_op["exec"] >= 2.0,
        "execs per run: {:?}",
        w.events_per_op
    );
    assert!(row(w, "execve").calls_per_op >= 2.0);
    // top --pid names a process as the namespace numbers it: a loop started there is counted.
    let script = format!(
        "while :; do /bin/true; done & {} top --pid $! --interval 0.5 --count 4 --hooks none \
         --sample-hz 0 --format json; kill $!",
        hookprof_bin().display()
    );
    let out = Command::new("unshare")
        .args(["-p", "-f", "--mount-proc", "sh", "-c", &script])
        .output()
        .unwrap();
    succeeded("top --pid in a pid namespace", &out);
    let execs: u64 = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .flat_map(|i| i["rows"].as_array().cloned().unwrap_or_default())
        .filter(|r| r["path"] == "execve")
        .map(|r| r["calls"].as_u64().unwrap())
        .sum();
    assert!(execs > 10, "top --pid counted {execs} execve of the loop");
}

#[test]
fn a_run_in_a_pid_namespace_leaves_a_live_runs_scratch_alone() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // A host run whose fs_create_0k keeps its scratch directory for seconds.
    let mut host = start_run(
        dir.path(),
        "fs_create_0k",
        &["--probes", "none", "-o", "host.json"],
    );
    let scratch = || -> Vec<PathBuf> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("hookprof-fs_create_0k-"))
            })
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while scratch().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the host run made no scratch dir"
        );
        assert!(
            host.try_wait().unwrap().is_none(),
            "the host run ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let live = scratch();
    // Another run in a pid namespace, sharing the temp dir: it sweeps dead runs' scratch at
    // start, and the live run's pid means nothing there.
    let out = unshared(
        dir.path(),
        &["-p", "-f", "--mount-proc"],
        &[&["run", "--probes", "none", "-o", "ns.json"], TINY_RUN].concat(),
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    succeeded("the run in a namespace", &out);
    for d in &live {
        assert!(d.exists(), "{} was removed under the live run", d.display());
    }
    let status = host.wait().unwrap();
    let mut err = String::new();
    host.stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "the host run: {status}: {err}");
    assert!(scratch().is_empty(), "the host run left its scratch");
}

#[test]
fn a_proc_of_another_pid_namespace_or_none_is_named() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let args = [&["run", "-o", "r.json"], TINY_RUN].concat();
    let t = Instant::now();
    let out = unshared(dir.path(), &["-p", "-f"], &args).output().unwrap();
    assert_one_line(
        "a pid namespace without its /proc",
        &out,
        2,
        "/proc belongs to another pid namespace",
    );
    let script = format!(
        "umount -l /proc && exec {} run -o r.json {}",
        hookprof_bin().display(),
        TINY_RUN.join(" ")
    );
    let out = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .current_dir(dir.path())
        .env(STORE_ENV, "off")
        .output()
        .unwrap();
    assert_one_line("no /proc", &out, 2, "/proc is not mounted");
    assert!(!stderr(&out).contains("needs root"), "{}", stderr(&out));
    assert!(t.elapsed() < REFUSED_WITHIN, "{:?}", t.elapsed());
    assert!(!dir.path().join("r.json").exists());
}

/// `run --probes none TINY --store sqlite://DIR/st/s.db -o r.json` in `dir`.
fn stored_run(dir: &Path) -> Command {
    run_stored_in(dir, &format!("sqlite://{}", dir.join("st/s.db").display()))
}

/// `run --probes none TINY --store STORE -o r.json` in `dir`.
fn run_stored_in(dir: &Path, store: &str) -> Command {
    let mut cmd = hookprof(
        dir,
        &[
            &["run", "--probes", "none", "-o", "r.json", "--store", store],
            TINY_RUN,
        ]
        .concat(),
    );
    cmd.stdout(Stdio::null());
    cmd
}

/// `stat` of two clean runs, quiet, its results in s.json: then the options, `--` and the command.
const QUICK_STAT: &[&str] = &[
    "stat", "--probes", "none", "--rounds", "1", "--runs", "2", "-q", "-o", "s.json",
];

fn spooled(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("spool"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

#[test]
fn the_store_lock_is_never_followed_never_another_users_and_never_waited_for_without_end() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let st = dir.path().join("st");
    std::fs::create_dir(&st).unwrap();
    std::fs::set_permissions(&st, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let lock = st.join("s.db.lock");
    // A symlink planted where the lock goes: not followed, the run spooled.
    let victim = dir.path().join("victim");
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = stored_run(dir.path()).output().unwrap();
    succeeded("a planted symlink", &out);
    assert!(stderr(&out).contains("is a symlink"), "{}", stderr(&out));
    assert!(!victim.exists(), "the symlink was followed");
    assert_eq!(spooled(dir.path()).len(), 1, "{}", stderr(&out));
    // Another user's lock file: refused, never used.
    std::fs::remove_file(&lock).unwrap();
    std::fs::write(&lock, "").unwrap();
    std::os::unix::fs::chown(&lock, Some(65534), Some(65534)).unwrap();
    let out = stored_run(dir.path()).output().unwrap();
    succeeded("another user's lock file", &out);
    assert!(
        stderr(&out).contains("belongs to uid 65534"),
        "{}",
        stderr(&out)
    );
    assert_eq!(spooled(dir.path()).len(), 2);
    // Ours, and held by another process: waited for the connect timeout, the holder named.
    std::fs::remove_file(&lock).unwrap();
    // -o: the lock stays with flock itself, not with the sleep it runs.
    let mut holder = Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "60"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string("/proc/locks")
        .unwrap()
        .contains(&format!(" {} ", holder.id()))
    {
        assert!(Instant::now() < deadline, "flock never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    let store = format!("sqlite://{}", st.join("s.db").display());
    let t = Instant::now();
    let out = hookprof(dir.path(), &["runs", "--store", &store])
        .output()
        .unwrap();
    let waited = t.elapsed();
    assert_one_line(
        "a held lock",
        &out,
        2,
        &format!("held by pid {} (flock)", holder.id()),
    );
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(15),
        "waited {waited:?}"
    );
    // SIGTERM while a run waits for it: exit 130 at once, the run spooled.
    let mut run = stored_run(dir.path())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    let status = run.wait().unwrap();
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(status.code(), Some(130), "{status}");
    assert_eq!(spooled(dir.path()).len(), 3);
    let _ = holder.kill();
    let _ = holder.wait();
    // Free, the lock file is the store's owner's and only theirs to read.
    let out = stored_run(dir.path()).output().unwrap();
    succeeded("a free lock", &out);
    let meta = std::fs::symlink_metadata(&lock).unwrap();
    assert_eq!(meta.mode() & 0o777, 0o600, "{:o}", meta.mode());
    assert_eq!(meta.uid(), 0);
    assert!(
        spooled(dir.path()).is_empty(),
        "the spool was not pushed: {}",
        stderr(&out)
    );
}

#[test]
fn user_takes_real_ids_only_and_leaves_the_runner_nothing_of_roots() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // Reachable by nobody as /tmp is: sticky and root's (a temp directory anyone could take
    // names from is refused).
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
    for bad in ["4294967295", "-1"] {
        let t = Instant::now();
        let out = hookprof(
            dir.path(),
            &[&["run", &format!("--user={bad}"), "-o", "r.json"], TINY_RUN].concat(),
        )
        .output()
        .unwrap();
        assert_eq!(out.status.code(), Some(2), "--user {bad}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
        assert!(t.elapsed() < REFUSED_WITHIN);
    }
    // A runner as nobody: its ids, capabilities and environment, read while it serves.
    let mut run = start_run_with(
        dir.path(),
        "null_call",
        &["--user", "nobody", "--probes", "none", "-o", "r.json"],
        &[
            ("HOOKPROF_TEST_SECRET_TOKEN", "not-for-nobody"),
            ("SECRET_TOKEN", "hunter2"),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let runner = loop {
        let runner = children_of(run.id() as i32).into_iter().find(|&p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__runner"))
        });
        if let Some(r) = runner.filter(|r| {
            std::fs::read_to_string(format!("/proc/{r}/status"))
                .is_ok_and(|s| s.contains("Uid:\t65534"))
        }) {
            break r;
        }
        assert!(Instant::now() < deadline, "no runner as nobody");
        std::thread::sleep(Duration::from_millis(20));
    };
    let status = std::fs::read_to_string(format!("/proc/{runner}/status")).unwrap();
    let environ = std::fs::read(format!("/proc/{runner}/environ")).unwrap();
    let _ = run.kill();
    let _ = run.wait();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .unwrap()
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(field("Uid:"), ["65534"; 4]);
    assert_eq!(field("Gid:"), ["65534"; 4]);
    assert_eq!(field("Groups:"), Vec::<&str>::new());
    for caps in ["CapEff:", "CapPrm:", "CapAmb:", "CapInh:"] {
        assert_eq!(field(caps), ["0000000000000000"], "{caps}");
    }
    let names: Vec<String> = environ
        .split(|&b| b == 0)
        .filter(|v| !v.is_empty())
        .map(|v| {
            let v = String::from_utf8_lossy(v);
            v.split('=').next().unwrap().to_string()
        })
        .collect();
    for name in &names {
        assert!(
            ["PATH", "HOME", "LANG", "TMPDIR"].contains(&name.as_str())
                || name.starts_with("HOOKPROF_TEST_"),
            "the runner has {name}: {names:?}"
        );
    }
    assert!(names.iter().any(|n| n == "HOME"), "{names:?}");
    // sh_proc's shell (any command's) has what the runner has, and nothing of root's.
    let env_file = dir.path().join("env");
    let script = format!("env > {}", env_file.display());
    let out = hookprof(
        dir.path(),
        &[
            QUICK_STAT,
            &["--user", "nobody", "--", "/bin/sh", "-c", &script],
        ]
        .concat(),
    )
    .env("SECRET_TOKEN", "hunter2")
    .stdout(Stdio::null())
    .output()
    .unwrap();
    succeeded("stat --user nobody", &out);
    let env = std::fs::read_to_string(&env_file).unwrap();
    assert!(!env.contains("SECRET_TOKEN"), "{env}");
    assert!(
        env.contains("HOME=/nonexistent") || env.contains("HOME=/"),
        "{env}"
    );
}

#[test]
fn no_password_is_kept_at_rest() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    // A server nobody answers on: the run is spooled, with its command line.
    let out = run_stored_in(
        dir.path(),
        "postgres://ci:s3cretpw@127.0.0.1:1/hookprof?password=s3cretpw",
    )
    .output()
    .unwrap();
    succeeded("an unreachable store", &out);
    let spool = spooled(dir.path());
    assert_eq!(spool.len(), 1, "{}", stderr(&out));
    let text = std::fs::read_to_string(&spool[0]).unwrap();
    assert!(!text.contains("s3cretpw"), "{text}");
    assert!(text.contains("ci:***@127.0.0.1:1"), "{text}");
    let mode = std::fs::metadata(&spool[0]).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");
    assert!(!stderr(&out).contains("s3cretpw"));
    // stat's command, recorded in the results and the store's command_line column.
    let store = dir.path().join("s.db");
    let sqlite = format!("sqlite://{}", store.display());
    let out = hookprof(
        dir.path(),
        &[
            QUICK_STAT,
            &[
                "--store",
                &sqlite,
                "--",
                "/bin/true",
                "postgres://u:pw-in-argv@db/x",
            ],
        ]
        .concat(),
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    succeeded("stat with a URL in its command", &out);
    let results = std::fs::read_to_string(dir.path().join("s.json")).unwrap();
    assert!(!results.contains("pw-in-argv"), "in the results file");
    let column = Command::new("python3")
        .args([
            "-c",
            "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\
             'select command_line from runs').fetchall())",
            store.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let column = String::from_utf8_lossy(&column.stdout);
    assert!(column.contains("u:***@db"), "{column}");
    assert!(!column.contains("pw-in-argv"), "{column}");
}

/// `hookprof top ARGS`, once it says it is counting: the child and that line.
fn start_top(args: &[&str]) -> (Child, String) {
    let mut top = Command::new(hookprof_bin())
        .arg("top")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(top.stderr.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "top never started counting");
        match lines.next() {
            Some(Ok(line)) if line.contains("top: counting") => {
                // Drained so top never blocks on a full pipe.
                std::thread::spawn(move || lines.for_each(drop));
                return (top, line);
            }
            Some(_) => continue,
            None => panic!("top ended: {:?}", top.wait()),
        }
    }
}

fn stop(mut child: Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
}

#[test]
fn another_tools_probes_on_the_measured_paths_are_said_and_recorded() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (top, _) = start_top(&["--interval", "1", "--hooks", "none", "--sample-hz", "0"]);
    let top_pid = top.id();
    let out = hookprof(
        dir.path(),
        &[&["run", "--probes", "syscalls", "-o", "r.json"], TINY_RUN].concat(),
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    stop(top);
    succeeded("run beside top", &out);
    let err = stderr(&out);
    let holder = format!("hookprof (pid {top_pid})");
    let note = err
        .lines()
        .find(|l| l.contains("other BPF program"))
        .unwrap_or_else(|| panic!("no note: {err}"));
    assert!(
        note.contains(&format!("{holder}: ")) && note.contains("raw_tracepoint sys_enter"),
        "{note}"
    );
    let r = Results::load(&dir.path().join("r.json")).unwrap();
    let others = r.environment.other_bpf_programs.clone().unwrap();
    assert!(
        others
            .iter()
            .any(|p| p.holder == holder && p.attach == "raw_tracepoint sys_exit"),
        "{others:?}"
    );
    // compare tells a side measured beside them from one that was not.
    let mut alone = r.clone();
    alone.environment.other_bpf_programs = Some(Vec::new());
    let alone_path = dir.path().join("alone.json");
    std::fs::write(&alone_path, alone.to_json()).unwrap();
    let out = hookprof(
        dir.path(),
        &["compare", alone_path.to_str().unwrap(), "r.json"],
    )
    .output()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("other BPF programs: none -> ") && text.contains("of hookprof"),
        "{text}"
    );
}

/// In a pid namespace /proc lists its own processes only: `top` on the host is found by the
/// kernel's list of links, its programs listed as held outside the namespace, the same ones a
/// run on the host names by top's pid, and the run says once what it cannot see.
#[test]
fn another_tools_probes_held_outside_a_pid_namespace_are_listed_unnamed() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (top, _) = start_top(&["--interval", "1", "--hooks", "none", "--sample-hz", "0"]);
    let top_pid = top.id();
    let run = [
        &["run", "--probes", "syscalls", "-o", "host.json"],
        TINY_RUN,
    ]
    .concat();
    let host = hookprof(dir.path(), &run)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let run = [&["run", "--probes", "syscalls", "-o", "ns.json"], TINY_RUN].concat();
    let ns = unshared(dir.path(), &["-p", "-f", "--mount-proc"], &run)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    stop(top);
    succeeded("run on the host beside top", &host);
    succeeded("run in a pid namespace beside top", &ns);
    let programs = |file: &str, holder: &dyn Fn(&str) -> bool| -> BTreeSet<(String, u32)> {
        let r = Results::load(&dir.path().join(file)).unwrap();
        r.environment
            .other_bpf_programs
            .unwrap()
            .into_iter()
            .filter(|p| holder(&p.holder))
            .map(|p| (p.attach, p.program_id))
            .collect()
    };
    let tops = programs("host.json", &|h| h == format!("hookprof (pid {top_pid})"));
    assert!(
        tops.iter()
            .any(|(attach, _)| attach == "raw_tracepoint sys_enter"),
        "{tops:?}"
    );
    let outside = programs("ns.json", &|h| h.starts_with("a process outside pid:["));
    assert!(
        tops.is_subset(&outside),
        "top's {tops:?}, outside: {outside:?}"
    );
    let err = stderr(&ns);
    let notes = err
        .lines()
        .filter(|l| l.contains("this run is in a pid namespace (pid:["))
        .count();
    assert_eq!(notes, 1, "{err}");
}

/// A mount namespace where /proc/kallsyms lists every address as 0 (a file over the kernel's,
/// as kptr_restrict=2 would list it to root); the machine's own sysctl is left alone.
fn with_hidden_kallsyms(dir: &Path, args: &[&str]) -> Output {
    let hidden: String = std::fs::read_to_string("/proc/kallsyms")
        .unwrap()
        .lines()
        .map(|l| format!("0000000000000000{}\n", &l[16..]))
        .collect();
    let file = dir.join("kallsyms");
    std::fs::write(&file, hidden).unwrap();
    let script = format!(
        "mount --bind {} /proc/kallsyms && exec {} \"$@\"",
        file.display(),
        hookprof_bin().display()
    );
    Command::new("unshare")
        .args(["-m", "sh", "-c", &script, "sh"])
        .args(args)
        .current_dir(dir)
        .env(STORE_ENV, "off")
        .stdout(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn hidden_kernel_addresses_refuse_the_profile_not_misname_it() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let out = with_hidden_kallsyms(
        dir.path(),
        &[
            &["run", "--probes", "syscalls,stacks", "-o", "s.json"],
            TINY_RUN,
        ]
        .concat(),
    );
    assert_one_line("--probes stacks", &out, 2, "in this mount namespace (mnt:[");
    let out = with_hidden_kallsyms(dir.path(), &[&["run", "-o", "a.json"], TINY_RUN].concat());
    succeeded("--probes auto", &out);
    assert_eq!(
        stderr(&out)
            .lines()
            .filter(|l| l.contains("lists every address as 0"))
            .count(),
        1,
        "{}",
        stderr(&out)
    );
    let r = Results::load(&dir.path().join("a.json")).unwrap();
    assert!(workload(&r, "null_call").profile.is_none());
    assert!(
        r.probes
            .refused
            .iter()
            .any(|f| f.kind.name() == "perf_event" && f.reason.contains("mount namespace")),
        "{:?}",
        r.probes.refused
    );
    assert!(row(workload(&r, "null_call"), "getppid").calls_per_op > 0.9);
    // A file an older run wrote that way: every frame one name. No folded stacks from it.
    let out = hookprof(dir.path(), &[&["run", "-o", "p.json"], TINY_RUN].concat())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    succeeded("a profiled run", &out);
    let mut doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("p.json")).unwrap()).unwrap();
    for w in doc["workloads"].as_array_mut().unwrap() {
        for stack in w["profile"]["folded"].as_array_mut().unwrap() {
            let frames = stack[0].as_str().unwrap().split(';').count().max(2);
            stack[0] = vec!["srso_alias_untrain_ret"; frames].join(";").into();
        }
    }
    std::fs::write(dir.path().join("g.json"), doc.to_string()).unwrap();
    let out = hookprof(dir.path(), &["report", "--format", "folded", "g.json"])
        .output()
        .unwrap();
    assert_one_line("folded of hidden names", &out, 2, "kptr_restrict");
    assert!(out.stdout.is_empty());
}

/// Without CAP_SYSLOG (dropped from the bounding set, as a container's default set drops it)
/// kallsyms hides addresses unless kptr_restrict is 0 and perf_event_paranoid 1 or less: the
/// profile is refused in one line naming the missing capability, or runs.
#[test]
fn kallsyms_hidden_from_a_process_without_cap_syslog_names_it() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let sysctl = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .unwrap()
            .trim()
            .parse::<i32>()
            .unwrap()
    };
    let shown_to_all = sysctl("kptr_restrict") == 0 && sysctl("perf_event_paranoid") <= 1;
    let out = Command::new("setpriv")
        .args(["--bounding-set=-syslog", "--inh-caps=-syslog"])
        .arg(hookprof_bin())
        .args(
            [
                &["run", "--probes", "syscalls,stacks", "-o", "s.json"],
                TINY_RUN,
            ]
            .concat(),
        )
        .current_dir(dir.path())
        .env(STORE_ENV, "off")
        .env("TMPDIR", dir.path())
        .stdout(Stdio::null())
        .output()
        .unwrap();
    if shown_to_all {
        succeeded("without CAP_SYSLOG, addresses shown to all", &out);
    } else if sysctl("kptr_restrict") >= 2 {
        assert_one_line("kptr_restrict=2", &out, 2, "kernel.kptr_restrict is 2");
    } else {
        assert_one_line(
            "without CAP_SYSLOG",
            &out,
            2,
            "this process lacks CAP_SYSLOG",
        );
        assert!(
            stderr(&out).contains("--cap-add SYSLOG"),
            "{}",
            stderr(&out)
        );
    }
}

/// hookprof ARGS under an open-file limit of `soft` (hard `hard`).
fn limited(dir: &Path, soft: u64, hard: u64, args: &[&str]) -> Output {
    let mut cmd = hookprof(dir, args);
    // SAFETY: setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.stdout(Stdio::null()).output().unwrap()
}

#[test]
fn any_open_file_limit_ends_in_one_line_or_is_raised() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let run = [&["run", "-o", "r.json"], TINY_RUN].concat();
    for n in [4, 8, 10, 16, 32, 64, 128] {
        let out = limited(dir.path(), n, n, &run);
        assert_one_line(&format!("ulimit -n {n}"), &out, 2, "RLIMIT_NOFILE");
        assert!(
            stderr(&out).contains(&format!("is {n}")),
            "{}",
            stderr(&out)
        );
    }
    let out = limited(dir.path(), 5, 5, &["report", "r.json"]);
    assert_one_line("report under 5", &out, 2, "RLIMIT_NOFILE");
    // A low soft limit under a high hard one is raised, and the run measures.
    let out = limited(dir.path(), 10, 4096, &run);
    succeeded("soft 10, hard 4096", &out);
    assert!(Results::load(&dir.path().join("r.json")).unwrap().complete);
}

#[test]
fn a_stopped_runners_sample_is_taken_again_not_called_an_outlier() {
    require_root();
    let _serial = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut run = start_run(
        dir.path(),
        "null_call",
        &["--probes", "syscalls", "-o", "r.json"],
    );
    // The workload's runner is the one serving once its scratch dir exists (an earlier one
    // calibrated the probes and is gone).
    let deadline = Instant::now() + Duration::from_secs(60);
    let has_scratch = || {
        std::fs::read_dir(dir.path()).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("hookprof-null_call-")
        })
    };
    let run_pid = run.id() as i32;
    let serving = || {
        children_of(run_pid).into_iter().find(|&p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("__runner"))
        })
    };
    // The scratch dir is made just before its runner starts: wait for both.
    let runner = loop {
        if let Some(runner) = has_scratch().then(serving).flatten() {
            break runner;
        }
        assert!(Instant::now() < deadline, "no scratch dir and runner");
        assert!(run.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(10));
    };
    // Three stops of a second, two seconds apart: at least one lands in the samples (20
    // passes of 0.3 s), whatever calibration and warm-up take on a busy machine, and none in
    // a sample taken again right after one.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: signalling our own grandchild.
        unsafe { libc::kill(runner, libc::SIGSTOP) };
        std::thread::sleep(Duration::from_secs(1));
        // SAFETY: as above.
        unsafe { libc::kill(runner, libc::SIGCONT) };
    }
    let status = run.wait().unwrap();
    let mut err = String::new();
    run.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
    let r = Results::load(&dir.path().join("r.json")).unwrap();
    let w = workload(&r, "null_call");
    assert!(
        w.notes.iter().any(|n| n.contains("taken again")),
        "no note of the stop: {:?}; clean {:?}, probed {:?}",
        w.notes,
        w.clean,
        w.probed
    );
    // A 1 s stop in a 0.3 s sample would make it 4 times the others.
    for samples in [&w.clean, &w.probed] {
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        assert!(
            sorted.last().unwrap() < &(3.0 * median),
            "a sample holds the stop: {samples:?}"
        );
    }
}

#[test]
fn a_run_kept_nowhere_is_refused_before_it_measures() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let long = hookprof_tests::LONG_RUN;
    for store in ["sqlite::memory:", "sqlite://x.db?mode=memory"] {
        let t = Instant::now();
        let out = hookprof(dir.path(), &[&["run", "--store", store], long].concat())
            .output()
            .unwrap();
        assert_one_line(store, &out, 2, "keeps nothing");
        assert!(t.elapsed() < REFUSED_WITHIN, "{store}: {:?}", t.elapsed());
    }
    // With an -o file the run is kept there.
    let out = hookprof(
        dir.path(),
        &[
            &[
                "run",
                "--probes",
                "none",
                "--store",
                "sqlite::memory:",
                "-o",
                "r.json",
            ],
            TINY_RUN,
        ]
        .concat(),
    )
    .stdout(Stdio::null())
    .output()
    .unwrap();
    succeeded("in memory with -o", &out);
}

/// The threads and open fds of process `pid`.
fn threads_and_fds(pid: u32) -> (usize, usize) {
    let count = |d: String| std::fs::read_dir(d).map_or(0, |d| d.count());
    (
        count(format!("/proc/{pid}/task")),
        count(format!("/proc/{pid}/fd")),
    )
}

fn scrape(address: &str) -> String {
    let mut s = TcpStream::connect(address).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or_default().to_string()
}

#[test]
fn the_metrics_endpoint_stays_one_thread_under_idle_and_slow_clients() {
    require_root();
    let _serial = one_at_a_time();
    let (top, ready) = start_top(&[
        "--interval",
        "0.5",
        "--hooks",
        "none",
        "--sample-hz",
        "0",
        "--listen",
        "127.0.0.1:0",
    ]);
    let address = ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .and_then(|w| w.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no address in {ready}"))
        .to_string();
    let pid = top.id();
    let (threads_before, fds_before) = threads_and_fds(pid);
    assert!(scrape(&address).starts_with("HTTP/1.1 200"));
    // One client that sends a byte every half second (it takes a slot first), then 300 that
    // connect and say nothing.
    let mut slow = TcpStream::connect(&address).unwrap();
    let slow_started = Instant::now();
    slow.write_all(b"G").unwrap();
    let idle: Vec<TcpStream> = (0..300)
        .map(|_| TcpStream::connect(&address).unwrap())
        .collect();
    let idle_at = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let (threads, fds) = threads_and_fds(pid);
    assert!(
        threads <= threads_before + 1,
        "{threads} threads (before the clients: {threads_before})"
    );
    assert!(
        fds < fds_before + 40,
        "{fds} fds (before the clients: {fds_before})"
    );
    // The slow client is cut off at the idle timeout (a write fails once it is closed).
    let mut cut = None;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(500));
        if slow.write_all(b"E").is_err() {
            cut = Some(slow_started.elapsed());
            break;
        }
    }
    let cut = cut.expect("the slow client was never cut off");
    assert!(
        cut > Duration::from_secs(4) && cut < Duration::from_secs(12),
        "cut after {cut:?}"
    );
    std::thread::sleep(Duration::from_millis(6500).saturating_sub(idle_at.elapsed()));
    // The idle ones are closed by now: a scrape is answered.
    assert!(
        scrape(&address).starts_with("HTTP/1.1 200"),
        "no answer after the idle clients timed out"
    );
    drop(idle);
    stop(top);
}
