//! Kernel-level tests on the running kernel: real programs, real syscalls, real processes.
//! Probe kinds this kernel refuses (fentry/fexit here) must be reported, never silently absent.
use hookprof::results::PathKind;
use hookprof_tests::{
    assert_family_syscalls, assert_near, assert_parallel_like_one, hookprof, hookprof_as_nobody,
    require_root, row, run_one_copy_then_two, run_to_results, workload, FAMILY_SYSCALLS,
};

#[test]
fn open_close_shows_openat_and_close_once_per_op() {
    require_root();
    let r = run_to_results(&["--workloads", "open_close", "--samples", "3"]);
    let w = workload(&r, "open_close");
    assert_eq!(w.clean.len(), 3);
    assert_eq!(w.probed.len(), 3);
    for name in ["openat", "close"] {
        let sys = row(w, name);
        assert_eq!(sys.kind, PathKind::Syscall);
        assert_near(&format!("{name} calls/op"), sys.calls_per_op, 1.0, 0.05);
        assert!(sys.ns_per_call > 0.0, "{name} ns/call {}", sys.ns_per_call);
        assert!(
            sys.histogram.iter().sum::<u64>() > 0,
            "{name} has an empty histogram"
        );
    }
}

#[test]
fn fork_proc_sees_one_fork_and_one_exit_per_op() {
    require_root();
    let r = run_to_results(&[
        "--workloads",
        "fork_proc",
        "--samples",
        "3",
        "--min-sample-ms",
        "20",
    ]);
    let w = workload(&r, "fork_proc");
    assert_near("fork events/op", w.events_per_op["fork"], 1.0, 0.05);
    assert_near("exit events/op", w.events_per_op["exit"], 1.0, 0.05);
    assert_near("wait4 calls/op", row(w, "wait4").calls_per_op, 1.0, 0.05);
}

/// `--build-units` sizes the build: each unit more is one more compile, which is three more
/// execs (cc, then its cc1 and as), counted by the task probes over make's whole process tree.
#[test]
fn build_units_adds_three_execs_a_unit() {
    require_root();
    let build = |units: &str| {
        run_to_results(&[
            "--workloads",
            "build",
            "--build-units",
            units,
            "--probes",
            "tasks",
            "--samples",
            "2",
        ])
    };
    let (two, five) = (build("2"), build("5"));
    assert_eq!(five.options.build_units, Some(5));
    let execs = |r: &hookprof::results::Results| workload(r, "build").events_per_op["exec"];
    assert_near(
        "exec events/op, 5 units - 2 units",
        execs(&five) - execs(&two),
        9.0,
        0.01,
    );
}

/// Two copies of a syscall workload and of a fork workload run at once, each in a runner of its
/// own; per op they make the calls one copy makes, and the probes time them.
#[test]
fn parallel_copies_run_at_once_with_the_calls_of_one() {
    require_root();
    let (one, two) = run_one_copy_then_two(&[
        "--workloads",
        "open_close,fork_proc",
        "--samples",
        "4",
        // Long against a busy machine's wake-up delays, so a copy that starts late still
        // overlaps the other.
        "--min-sample-ms",
        "50",
    ]);
    assert_parallel_like_one(&one, &two, "open_close", 2, &["openat", "close"]);
    assert_parallel_like_one(&one, &two, "fork_proc", 2, &["clone", "wait4"]);
    let fork = workload(&two, "fork_proc");
    assert_near("fork events/op", fork.events_per_op["fork"], 1.0, 0.05);
    assert_near("exit events/op", fork.events_per_op["exit"], 1.0, 0.05);
}

#[test]
fn null_call_counts_only_the_workload_not_a_busy_neighbour() {
    require_root();
    // A neighbour hammering getppid and openat must not leak into the workload's counts.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let neighbour = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: plain syscalls with valid arguments.
                unsafe { libc::getppid() };
                drop(std::fs::File::open("/dev/null"));
            }
        })
    };
    let r = run_to_results(&["--workloads", "null_call", "--samples", "3"]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    neighbour.join().expect("neighbour thread");
    let w = workload(&r, "null_call");
    assert_near(
        "getppid calls/op",
        row(w, "getppid").calls_per_op,
        1.0,
        0.05,
    );
    let others: f64 = w
        .attribution
        .iter()
        .filter(|a| a.kind == PathKind::Syscall && a.name != "getppid")
        .map(|a| a.calls_per_op)
        .sum();
    assert!(
        others < 0.01,
        "other syscalls leaked into null_call: {others} calls/op"
    );
}

/// The results say how busy the rest of the machine was: a spinning thread per CPU beside the
/// run is others' CPU time, at least a third of the machine's (each spinner shares no more
/// than one CPU with the runner).
#[test]
fn the_rest_of_the_machine_busy_beside_the_run_is_recorded() {
    require_root();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let spinners: Vec<_> = (0..cpus)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let out = hookprof(&[
        "run",
        "--workloads",
        "null_call",
        "--probes",
        "none",
        "--samples",
        "3",
        "--rounds",
        "2",
        // About a second of measuring: /proc/stat's counters tick every 10 ms.
        "--min-sample-ms",
        "100",
        "-q",
        "-o",
        path.to_str().unwrap(),
    ]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in spinners {
        s.join().expect("spinner");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("hookprof: note: the rest of the machine used"),
        "{stderr}"
    );
    let r = hookprof::results::Results::load(&path).unwrap();
    let load = r.environment.machine_load.expect("machine load recorded");
    assert!(
        load.others_busy_percent > 33.0 && load.others_busy_percent <= 100.0,
        "{load:?}"
    );
    assert!(!load.class().contains("idle"), "{}", load.class());
}

/// The number in a refusal line: `fentry/fexit refused on 667 functions (...)`.
fn refused_count(line: &str) -> usize {
    line.split("refused on ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count in {line:?}"))
}

#[test]
fn a_run_counts_the_refused_functions_as_hooks_does_and_says_why_once() {
    require_root();
    let hooks = hookprof(&["hooks"]);
    let listed = String::from_utf8_lossy(&hooks.stdout).to_string();
    let run = hookprof(&["run", "--workloads", "open_close", "--samples", "2"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    let Some(said) = listed
        .lines()
        .find(|l| l.starts_with("fentry/fexit refused on"))
    else {
        // A kernel that takes every pair: nothing said refused, and the header counts the
        // functions it timed.
        assert!(!stderr.contains(" refused on "), "{stderr}");
        assert!(!stdout.contains("Hooks: 0 timed"), "{stdout}");
        return;
    };
    let count = refused_count(said);
    // Once, on stderr, with the same count and the hooks a user looks for first.
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains(" refused on "))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert_eq!(refused_count(lines[0]), count, "{stderr}\n{listed}");
    assert!(
        lines[0].contains("(security_file_open, security_inode_permission"),
        "{}",
        lines[0]
    );
    assert!(!stdout.contains("fentry/fexit refused on"), "{stdout}");
    assert!(
        stdout.contains(&format!("refused on {count} functions")),
        "{stdout}"
    );
}

#[test]
fn every_default_hook_is_either_attached_or_refused_with_a_reason() {
    require_root();
    let r = run_to_results(&["--workloads", "open_close", "--samples", "2"]);
    // Discovery's candidates (or, where trampolines are refused, the refusals) name them all.
    let mut hooks: Vec<&str> = r
        .probes
        .attached
        .iter()
        .map(|p| &p.target)
        .chain(r.probes.refused.iter().map(|p| &p.target))
        .filter(|t| t.starts_with("security_"))
        .map(String::as_str)
        .collect();
    hooks.sort_unstable();
    hooks.dedup();
    assert!(hooks.contains(&"security_file_open"), "{hooks:?}");
    for hook in hooks {
        for kind in ["fentry", "fexit"] {
            let attached = r
                .probes
                .attached
                .iter()
                .any(|p| p.kind.name() == kind && p.target == hook);
            let refused = r
                .probes
                .refused
                .iter()
                .find(|p| p.kind.name() == kind && p.target == hook);
            assert!(
                attached != refused.is_some(),
                "{kind} {hook}: attached={attached} refused={refused:?}"
            );
            if let Some(refusal) = refused {
                assert!(
                    refusal.errno.is_some() && !refusal.reason.is_empty(),
                    "{refusal:?}"
                );
            }
        }
    }
    for tp in [
        "sys_enter",
        "sys_exit",
        "sched_process_fork",
        "sched_process_exit",
    ] {
        assert!(
            r.probes.attached.iter().any(|p| p.target == tp),
            "{tp} not attached: {:?}",
            r.probes
        );
    }
}

/// A reader that closes early (`hookprof run --list | head -1`) ends the output quietly.
/// `calibrate` prices the syscall pair's helper calls on raw tracepoints, which load on every
/// kernel (trampolines or not): the empty pair, each part and the clock-only pair ran in its
/// statistics pass.
#[test]
fn calibrate_prices_each_helper_call_of_the_syscall_pair() {
    use hookprof::probes::calibration::{
        EMPTY_SYSCALL_PAIR, SYSCALL_CLOCK_PAIR, SYSCALL_PAIR_PARTS,
    };
    require_root();
    let out = hookprof(&["calibrate", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let cal: hookprof::results::Calibration =
        serde_json::from_slice(&out.stdout).expect("calibrate --json prints a calibration");
    for program in [
        &EMPTY_SYSCALL_PAIR[..],
        &SYSCALL_PAIR_PARTS,
        &SYSCALL_CLOCK_PAIR,
    ]
    .concat()
    {
        assert!(
            cal.run_ns(program).is_some_and(|ns| ns > 0.0),
            "{program} never ran: {cal:?}"
        );
    }
}

#[test]
fn closed_stdout_ends_output_without_a_panic() {
    use std::process::{Command, Stdio};
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader); // closed before hookprof writes a line
    let out = Command::new(hookprof_tests::hookprof_bin())
        .args(["run", "--list"])
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run hookprof");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.code(), Some(141), "{stderr}");
}

/// The subcommands hookprof runs itself as stay out of `--help`; the one that parses the BTF
/// for the profiler answers with the kernel's functions and their parameter counts.
#[test]
fn helper_subcommands_stay_out_of_help_and_the_btf_one_answers() {
    let help = hookprof(&["--help"]);
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success() && text.contains("hooks"), "{text}");
    for helper in ["__runner", hookprof::probes::KERNEL_BTF_COMMAND] {
        assert!(!text.contains(helper), "{helper} in: {text}");
    }
    let out = hookprof(&[hookprof::probes::KERNEL_BTF_COMMAND]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The names are one newline-ended string; each function's entry, in the same order, holds
    // where its name starts and its parameter count.
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let names = answer["names"].as_str().expect("the function names");
    let functions = answer["functions"].as_array().expect("a function list");
    assert_eq!(names.lines().count(), functions.len());
    let at = names
        .lines()
        .position(|n| n == "security_file_open")
        .expect("security_file_open among the functions");
    let open = &functions[at];
    let start = open[0].as_u64().expect("an offset") as usize;
    assert!(names[start..].starts_with("security_file_open\n"), "{open}");
    assert_eq!(open[1], 1, "security_file_open(struct file *): {open}");
}

/// Each bad input: one line naming the problem, exit code 2, no panic.
#[test]
fn bad_input_is_one_line_and_exit_code_2() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let good = file("good.json", &minimal_results(1));
    let truncated = file("truncated.json", &minimal_results(1)[..40]);
    let other_schema = file("schema.json", &minimal_results(99));
    let not_json = file("not.json", "lat_syscall null: 0.17 us\n");
    let garbage = file("garbage.txt", "nothing to see here\n1 2 3\n");
    let missing_dir = dir.path().join("no-such-dir/r.json");
    let missing_dir = missing_dir.to_str().unwrap();
    let fresh_dir = dir.path().join("ab");
    let fresh_dir = fresh_dir.to_str().unwrap();
    let full_dir = dir.path().to_str().unwrap();
    let kernel = "linux-image-amd64";
    // (arguments, what the message must name)
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--workloads", "no_such_workload"], "null_call"),
        (
            &["run", "--workloads", "null_call", "-o", missing_dir],
            missing_dir,
        ),
        (&["run", "--probes", "bogus"], "possible values: auto, none"),
        (&["run", "--probes", "auto,hooks"], "auto stands alone"),
        (
            &["run", "--hooks", "security_no_such_hook"],
            "security_no_such_hook",
        ),
        (&["run", "--inject", "no_such_hook=100"], "no_such_hook"),
        (
            &["run", "--probes", "none", "--stack-noop"],
            "--probes none",
        ),
        (&["run", "--pin", "100000"], "--pin 100000"),
        (
            &["run", "--pin", "0,0,0"],
            "--pin 0,0,0: give one CPU, or two",
        ),
        (
            &["stat", "--pin", "0", "--pin", "0,0", "--", "true"],
            "--pin 0,0,0",
        ),
        (
            &["run", "--workloads", "build", "--parallel", "2"],
            "build runs",
        ),
        (
            &["run", "--user", "no_such_user_hookprof"],
            "no_such_user_hookprof",
        ),
        // `ab` checks what it can before it boots anything.
        (
            &[
                "ab",
                kernel,
                kernel,
                "--out-dir",
                fresh_dir,
                "--workloads",
                "no_such",
            ],
            "null_call",
        ),
        (
            &[
                "ab",
                kernel,
                kernel,
                "--out-dir",
                fresh_dir,
                "--b-args",
                "--samples 1",
            ],
            "--b-args",
        ),
        (
            &["ab", kernel, kernel, "--out-dir", fresh_dir, "--alpha", "2"],
            "--alpha",
        ),
        (
            &["ab", kernel, kernel, "--out-dir", full_dir],
            "already holds files",
        ),
        (
            &[
                "ab",
                "no-such-kernel-hookprof",
                kernel,
                "--out-dir",
                fresh_dir,
            ],
            "no-such-kernel-hookprof",
        ),
        (
            &["ab", kernel, kernel, "--lsm", "a b", "--out-dir", fresh_dir],
            "--lsm",
        ),
        // A file that is no kernel: refused before an initramfs is built or qemu booted.
        (
            &[
                "ab",
                "/etc/hostname",
                "/etc/hostname",
                "--out-dir",
                fresh_dir,
            ],
            "/etc/hostname is not a kernel image",
        ),
        (&["report", &truncated], &truncated),
        (&["report", &other_schema], "schema_version 99"),
        (&["report", &not_json], &not_json),
        (&["compare", &good, &truncated], &truncated),
        (&["compare", &other_schema, &good], "schema_version 99"),
        (&["compare", &good, &not_json], &not_json),
        (
            &["import", "lmbench", &garbage, "-o", "/nonexistent"],
            "no lmbench summary",
        ),
        (
            &["import", "time", &garbage, "-o", "/nonexistent"],
            "/usr/bin/time",
        ),
    ];
    for (args, names) in cases {
        let out = hookprof(args);
        assert_one_line_error(args, &out, names);
    }
    assert!(
        !std::path::Path::new(fresh_dir).exists(),
        "a refused `ab` left its --out-dir behind"
    );
    // Not root: the message names the missing capability (clean timings need none).
    let out = hookprof_as_nobody(&["run", "--workloads", "null_call"]);
    assert_one_line_error(&["run (as nobody)"], &out, "CAP_SYS_ADMIN");
    // No BTF: an empty tmpfs over /sys/kernel/btf, in a mount namespace of hookprof's own.
    let out = std::process::Command::new("unshare")
        .args([
            "--mount",
            "sh",
            "-c",
            "mount -t tmpfs none /sys/kernel/btf && exec \"$0\" \"$@\"",
        ])
        .arg(hookprof_tests::hookprof_bin())
        .args(["run", "--workloads", "null_call"])
        .output()
        .expect("run hookprof through unshare");
    assert_one_line_error(
        &["run (no BTF)"],
        &out,
        "/sys/kernel/btf/vmlinux is missing",
    );
}

/// Each family's operation really happens, and the syscall probes see it at the expected rate
/// (the table is lmbench's definition of each op). Two-process workloads also prove that their
/// helper processes do not keep the probes attached through the clean samples: a helper that
/// inherited the link fds would be counted outside the probed samples too, inflating its rate.
#[test]
fn each_family_makes_its_syscalls_at_the_expected_rate() {
    require_root();
    let expected = FAMILY_SYSCALLS;
    let mut names: Vec<&str> = expected.iter().map(|(w, _, _)| *w).collect();
    names.dedup();
    let list = names.join(",");
    let r = run_to_results(&["--workloads", &list, "--samples", "3"]);
    assert_family_syscalls(&r);
    let exec = workload(&r, "exec_proc");
    assert_near(
        "exec_proc exec events/op",
        exec.events_per_op["exec"],
        1.0,
        0.05,
    );
}

fn assert_one_line_error(args: &[&str], out: &std::process::Output, names: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
    assert!(stderr.starts_with("hookprof: error"), "{args:?}: {stderr}");
    assert!(
        stderr.contains(names),
        "{args:?}: does not name {names}: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

/// The smallest results document `report` and `compare` accept, with `schema_version`.
fn minimal_results(schema_version: u32) -> String {
    serde_json::json!({
        "schema_version": schema_version,
        "label": "minimal",
        "complete": true,
        "source": "hookprof",
        "environment": { "kernel_release": "6.1.0", "hookprof_version": "0.1.0" },
        "workloads": [],
    })
    .to_string()
}

/// Collects the probes' log records.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl log::Log for Captured {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        self.0.lock().unwrap().push(record.args().to_string());
    }
    fn flush(&self) {}
}

/// The syscall probes, loaded (not attached), with this test process as the gate's owner.
fn syscall_probes_gated_by_this_process() -> hookprof::probes::Probes {
    use hookprof::probes::{KernelBtf, ProbePlan, Probes};
    let kernel = KernelBtf::load().expect("kernel BTF");
    let mut probes =
        Probes::load(&ProbePlan::syscalls_only(), &kernel).expect("load hookprof's object");
    probes
        .set_gate_owners(&[std::process::id()])
        .expect("make this process the gate owner");
    probes
}

#[test]
fn gate_misuse_is_counted_and_logged() {
    use profiler_common::{event, GATE_FD};
    require_root();
    let mut probes = syscall_probes_gated_by_this_process();
    let program = probes
        .logging_program_id()
        .expect("the syscall entry program is loaded");
    let captured = Captured::default();
    let mut log = aya_log::EbpfLogger::init_from_id_with_logger(program, captured.clone())
        .expect("open the probes' log");
    probes.attach().expect("attach");
    let before = probes.snapshot().expect("snapshot");
    const BAD_COMMAND: libc::c_ulong = 0x686b_00ff;
    // SAFETY: ioctl on an fd that cannot exist: the kernel answers EBADF.
    let ret = unsafe { libc::ioctl(GATE_FD as libc::c_int, BAD_COMMAND) };
    assert_eq!(ret, -1);
    probes.detach();
    let misuse =
        probes.snapshot().expect("snapshot").since(&before).events[event::GATE_MISUSE as usize];
    assert_eq!(misuse, 1, "gate misuse events");
    log.flush();
    let lines = captured.0.lock().unwrap().clone();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("unknown command") && l.contains("686b00ff")),
        "no gate misuse message in the probes' log: {lines:?}"
    );
}

/// The results record the CPUs the machine has online and those the run could use (one, under
/// `taskset -c 0`), and the report's environment line shows both.
#[test]
fn results_record_the_cpus_online_and_those_the_run_may_use() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let o = std::process::Command::new("taskset")
        .args(["-c", "0"])
        .arg(hookprof_tests::hookprof_bin())
        .args(["run", "-q", "--probes", "none", "--workloads", "null_call"])
        .args(["--samples", "2", "-o", out.to_str().unwrap()])
        .env(hookprof_tests::STORE_ENV, "off")
        .output()
        .expect("run hookprof through taskset (util-linux)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // SAFETY: sysconf has no preconditions.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as u32;
    let r = hookprof::results::Results::load(&out).unwrap();
    let e = &r.environment;
    assert_eq!((e.cpus_online, e.cpus_allowed), (online, 1));
    let report = hookprof(&["report", out.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&report.stdout);
    let shown = match online {
        1 => " x1 (".to_string(),
        n => format!(" x{n} (1 allowed) ("),
    };
    assert!(text.lines().next().unwrap().contains(&shown), "{text}");
}

/// The state letter of thread `tid` of this process ("R", "S", ...).
fn thread_state(tid: libc::pid_t) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).expect("stat");
    let (_, rest) = stat.rsplit_once(')').expect("comm");
    rest.trim_start().chars().next().expect("state")
}

#[test]
fn a_call_blocked_across_a_detach_is_counted_not_timed() {
    use hookprof::workloads::tracking_window::gate;
    use profiler_common::event;
    use std::time::{Duration, Instant};
    require_root();
    const GAP: Duration = Duration::from_millis(300);
    let mut probes = syscall_probes_gated_by_this_process();
    let mut fds = [0; 2];
    // SAFETY: a valid out-array of two fds.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let [rx, tx] = fds;

    // Window 1: a tracked thread enters a read that blocks.
    probes.attach().expect("attach");
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        gate(true);
        // SAFETY: gettid has no preconditions.
        tid_tx.send(unsafe { libc::gettid() }).unwrap();
        let mut byte = 0u8;
        // SAFETY: reads one byte into `byte`.
        let n = unsafe { libc::read(rx, (&mut byte as *mut u8).cast(), 1) };
        gate(false);
        n
    });
    let tid = tid_rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while thread_state(tid) != 'S' {
        assert!(Instant::now() < deadline, "the reader never blocked");
        std::thread::sleep(Duration::from_millis(1));
    }
    probes.detach();

    // Nothing attached for GAP, then window 2, in which the read returns.
    std::thread::sleep(GAP);
    let before = probes.snapshot().expect("snapshot");
    probes.attach().expect("attach again");
    // SAFETY: writes one byte from a valid buffer.
    assert_eq!(unsafe { libc::write(tx, [1u8].as_ptr().cast(), 1) }, 1);
    assert_eq!(reader.join().unwrap(), 1, "the read returned its byte");
    probes.detach();
    let delta = probes.snapshot().expect("snapshot").since(&before);
    // SAFETY: both fds are ours and open.
    unsafe {
        libc::close(rx);
        libc::close(tx);
    }

    let read = &delta.syscalls[libc::SYS_read as usize];
    assert_eq!(
        read.timed, 0,
        "the read entered before the detach was timed ({} ns in all): {read:?}",
        read.total_ns
    );
    assert_eq!(delta.events[event::STALE_EXIT as usize], 1, "stale exits");
}

/// `--stack-noop` either stacks programs (the results list them) or, where the kernel refuses
/// BPF LSM programs (this host's), fails at once with the kernel's reason, as `--inject` does:
/// never a run whose results say stack_noop over no program.
#[test]
fn stack_noop_stacks_programs_or_fails_with_the_kernels_reason() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let args = [
        "run",
        "--quiet",
        "--workloads",
        "null_call",
        "--samples",
        "2",
        "--stack-noop",
        "-o",
        path.to_str().unwrap(),
    ];
    let out = hookprof(&args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            let r = hookprof::results::Results::load(&path).unwrap();
            assert!(
                !r.lsm_programs.is_empty(),
                "stack_noop with no program: {stderr}"
            );
        }
        Some(2) => {
            let last = stderr.trim().lines().last().unwrap_or_default();
            assert!(
                last.starts_with("hookprof: error: --stack-noop: "),
                "{stderr}"
            );
            assert!(last.contains("refused"), "no reason given: {stderr}");
            assert!(!path.exists(), "a results file was written");
        }
        other => panic!("exit {other:?}: {stderr}"),
    }
}

/// Command-line mistakes get clap's whole message in one line: which arguments are missing, the
/// possible values, where --help tells more; exit 2.
#[test]
fn command_line_errors_are_shown_in_full() {
    // (arguments, what the one line must hold besides clap's message)
    let cases: &[(&[&str], &[&str])] = &[
        (
            &["compare"],
            &["<OLD NEW>", "see 'hookprof compare --help'"],
        ),
        (&["report"], &["<FILES>", "see 'hookprof report --help'"]),
        (&["import", "lmbench"], &["<FILE>", "--output <OUT>"]),
        (&["ab"], &["<KERNEL_A>", "<KERNEL_B>"]),
        (
            &["report", "--format", "bogus", "r.json"],
            &["possible values: text", "html"],
        ),
        (
            &["run", "--no-such-option"],
            &["--no-such-option", "see 'hookprof run --help'"],
        ),
        (
            &["run", "--inject", "file_open=abc"],
            &["--inject", "whole number"],
        ),
        (
            &["run", "--inject", "syscall:no_such_call=100"],
            &["'no_such_call' is not a syscall of x86_64"],
        ),
        (&["run", "--samples", "1"], &["--samples", "2..="]),
        (&["run", "--parallel", "0"], &["--parallel", "1..=64"]),
        (&["run", "--parallel", "65"], &["--parallel", "1..=64"]),
    ];
    for (args, names) in cases {
        let out = hookprof(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("hookprof: error: "),
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        for name in *names {
            assert!(stderr.contains(name), "{args:?}: no {name} in: {stderr}");
        }
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

/// Each round measures every workload in a fresh runner and a fresh order; the results keep
/// each round's samples apart, and compare takes the round as its unit.
#[test]
fn rounds_keep_their_samples_apart_and_compare_counts_rounds() {
    require_root();
    let r = run_to_results(&[
        "--workloads",
        "null_call,open_close",
        "--rounds",
        "3",
        "--samples",
        "2",
    ]);
    assert_eq!(r.options.rounds, Some(3));
    assert!(r.options.round_seed.is_some(), "{:?}", r.options);
    for w in &r.workloads {
        assert_eq!(w.round_sizes, [2, 2, 2], "{}", w.name);
        assert_eq!((w.clean.len(), w.probed.len()), (6, 6), "{}", w.name);
        assert_eq!(w.by_round(&w.clean).len(), 3);
        // Every round's probed samples count in the attribution.
        assert!(!w.attribution.is_empty(), "{}", w.name);
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("r.json");
    std::fs::write(&file, serde_json::to_string(&r).unwrap()).unwrap();
    let f = file.to_str().unwrap();
    let out = hookprof(&["compare", f, f, "--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let c: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for w in c["workloads"].as_array().unwrap() {
        assert_eq!(w["replication"], "round", "{w}");
        assert_eq!(w["old"]["n"].as_u64(), Some(3), "{w}");
        // Against itself: never a change (no change, or inconclusive where rounds disagree).
        assert!(
            !["regressed", "improved"].contains(&w["verdict"].as_str().unwrap()),
            "{w}"
        );
        assert!(w["minimum_detectable_effect"].as_f64().is_some(), "{w}");
        assert!(w["components"]["between_rounds"].as_f64().is_some(), "{w}");
    }
}
