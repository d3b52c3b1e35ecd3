//! `hookprof stat -- CMD` on the running kernel: the command's whole process tree is
//! attributed, run by run, in results that `report` and `compare` read like a run's.
use hookprof::results::Results;
use hookprof_tests::{
    assert_near, assert_parallel_like_one, assert_task_events, hookprof, require_root, row,
    workload,
};

/// sh starts two background children and waits: per run, three processes are forked (sh
/// itself, by the launch, and its two children), three exec and three exit.
#[test]
fn stat_attributes_a_forking_commands_whole_process_tree_per_run() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stat.json");
    let marks = dir.path().join("marks");
    let prepare = format!("echo prepared >> {}", marks.display());
    let command = "/bin/true & /bin/true & wait";
    // `stat --runs 3 --prepare ... ARGS -- sh -c COMMAND`, its results.
    let stat = |args: &[&str]| {
        let prepared = [
            &["stat", "--runs", "6", "--prepare", &prepare, "-q", "-o"][..],
            &[out.to_str().unwrap()],
            args,
            &["--", "/bin/sh", "-c", command],
        ]
        .concat();
        let o = hookprof(&prepared);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Results::load(&out).unwrap()
    };
    // The runs for the stacks alone run --prepare too: counted apart, below.
    let r = stat(&["--stack-samples", "0"]);
    let name = format!("/bin/sh -c {command}");
    let w = workload(&r, &name);
    assert_eq!((w.clean.len(), w.probed.len(), w.iterations), (3, 3, 1));
    assert_task_events(w, 3.0);
    assert_near("execve calls/run", row(w, "execve").calls_per_op, 3.0, 0.01);
    assert!(
        row(w, "wait4").calls_per_op >= 2.0,
        "sh and the launcher wait"
    );
    // What posix_spawn's child does before its execve is the launcher's set-up, not the
    // command's: its sigaction per signal (some 120 a run) is not counted; sh's own few are.
    let sigactions = row(w, "rt_sigaction").calls_per_op;
    assert!(sigactions < 40.0, "{sigactions} rt_sigaction per run");
    // --prepare ran before every clean and probed run (six in all, no warm-up by default),
    // and none of its processes was counted.
    let prepared = std::fs::read_to_string(&marks).unwrap();
    assert_eq!(prepared.lines().count(), 3 + 3, "{prepared}");
    assert_eq!(r.options.command, ["/bin/sh", "-c", command]);

    // The file is an ordinary results file: report reads it, compare pairs it with itself.
    let o = hookprof(&["report", out.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains(&name));
    let o = hookprof(&["compare", out.to_str().unwrap(), out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(&format!("{name}\n  old: ")), "{text}");

    // Asked for more stacks than its timed runs hold, more runs of the command, untimed,
    // sample its stacks alone: each is a run like the others (--prepare before it), and none
    // adds a timed sample.
    std::fs::remove_file(&marks).unwrap();
    let r = stat(&["--stack-samples", "2000"]);
    let w = workload(&r, &name);
    assert_eq!((w.clean.len(), w.probed.len()), (3, 3));
    let p = w.profile.as_ref().expect("a sampled profile");
    let passes = p.stack_passes.as_ref().expect("runs for the stacks alone");
    assert!(
        passes.samples > 0 && passes.samples <= p.samples,
        "{passes:?}"
    );
    let prepared = std::fs::read_to_string(&marks).unwrap().lines().count();
    assert!(prepared > 3 + 3, "{prepared} runs prepared");
}

#[test]
fn stat_of_a_failing_or_missing_command_is_one_line_and_exit_2() {
    for command in [&["/bin/false"][..], &["/nonexistent/command"]] {
        let args = [
            &["stat", "--probes", "none", "--runs", "2", "--"][..],
            command,
        ]
        .concat();
        let o = hookprof(&args);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{command:?}: {e}");
        // A command that is not there is refused before anything runs; one that fails, when
        // it has run.
        let expected = match command[0] {
            "/nonexistent/command" => "name the program to measure".to_string(),
            first => format!("workload {first} failed"),
        };
        assert!(e.contains(&expected), "{command:?}: {e}");
        assert!(
            e.lines().all(|l| l.starts_with("hookprof: ")),
            "{command:?}: {e}"
        );
    }
    for run_only in RUN_ONLY {
        let o = hookprof(&["stat", run_only, "--", "/bin/true"]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{run_only}: {e}");
        assert!(
            e.contains("unexpected argument")
                && e.contains("--runs N")
                && e.contains("see 'hookprof stat --help'")
                && e.lines().count() == 1,
            "{run_only}: {e}"
        );
    }
}

/// `--runs N` is N runs of the command in all, as hyperfine counts them: dealt over the
/// rounds (the first taking one more), and over fewer rounds where N cannot give each two.
#[test]
fn runs_counts_every_run_of_the_command_over_the_rounds() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stat.json");
    for (runs, rounds, sizes) in [("5", "2", &[3, 2][..]), ("3", "4", &[3][..])] {
        let o = hookprof(&[
            "stat",
            "--probes",
            "none",
            "--runs",
            runs,
            "--rounds",
            rounds,
            "-o",
            out.to_str().unwrap(),
            "--",
            "/bin/true",
        ]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = Results::load(&out).unwrap();
        let w = workload(&r, "/bin/true");
        let n: usize = sizes.iter().sum();
        // `--probes none`: the clean runs alone.
        assert_eq!((w.clean.len(), w.probed.len()), (n, 0), "--runs {runs}");
        assert_eq!(w.round_sizes, sizes, "--runs {runs} --rounds {rounds}");
        assert_eq!(r.options.runs, Some(n as u64));
        assert!(text.contains(&format!("n = {n}")), "{text}");
        if sizes.len() > 1 {
            assert!(text.contains("(2 rounds of 2-3)"), "{text}");
        }
    }
}

/// `run`'s options that choose its workloads and their sampling; stat takes a command and
/// `--runs` instead.
const RUN_ONLY: &[&str] = &[
    "--workloads=null_call",
    "--suite=quick",
    "--samples=3",
    "--min-sample-ms=20",
    "--jobs=2",
    "--list",
];

/// stat's help lists what it takes, hyperfine's words among them, and none of run's own.
#[test]
fn stat_help_lists_only_the_options_stat_takes() {
    let o = hookprof(&["stat", "--help"]);
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for taken in [
        "--runs",
        "--warmup",
        "--prepare",
        "--hooks",
        "--probes",
        "--pin",
        "--parallel",
        "--inject",
        "--user",
        "--policy",
        "--output",
        "--save-baseline",
    ] {
        assert!(help.contains(&format!("{taken} ")), "no {taken} in: {help}");
    }
    for run_only in RUN_ONLY {
        let flag = run_only.split('=').next().unwrap();
        assert!(!help.contains(&format!("{flag} ")), "{flag} in: {help}");
    }
}

/// The command runs under `--policy`: reading a file outside the ruleset fails it, and only
/// with the policy (its stdio, /dev/null, is opened under the policy too).
#[test]
fn stat_runs_the_command_under_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.json");
    std::fs::write(
        &rules,
        r#"{"layers": [{"handled": ["read_file"], "allow": [
            {"path": "/usr", "access": "read_file"}, {"path": "/dev/null", "access": "read_file"}]}]}"#,
    )
    .unwrap();
    let policy = format!("--policy=landlock:{}", rules.display());
    let cat = ["--", "/bin/cat", "/etc/passwd"];
    let o = hookprof(&[&["stat", "--probes", "none", "--runs", "2", "-q"][..], &cat].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = hookprof(
        &[
            &["stat", "--probes", "none", "--runs", "2", &policy][..],
            &cat,
        ]
        .concat(),
    );
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("'/bin/cat /etc/passwd' failed"), "{e}");
}

/// `--parallel 2` runs two copies of the command at once, each in a runner of its own: per run
/// of one copy, the same process tree is forked, exec'd and counted as with one copy.
#[test]
fn stat_runs_copies_of_the_command_at_once() {
    require_root();
    let command = "/bin/true & /bin/sleep 0.05 & wait";
    let stat = |parallel: &str| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("stat.json");
        let o = hookprof(&[
            "stat",
            "--runs",
            "3",
            "--parallel",
            parallel,
            "-q",
            "-o",
            out.to_str().unwrap(),
            "--",
            "/bin/sh",
            "-c",
            command,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        Results::load(&out).unwrap()
    };
    let (one, two) = (stat("1"), stat("2"));
    let name = format!("/bin/sh -c {command}");
    // sh, true and sleep exec; sh forks its two children.
    assert_parallel_like_one(&one, &two, &name, 2, &["execve", "clone"]);
    let w = workload(&two, &name);
    assert_task_events(w, 3.0);
}
