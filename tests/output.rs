//! Where `-o` writes, on the running kernel (root): nothing at the path is destroyed and no
//! run is lost. Devices are scratch nodes made in a temp dir, never the machine's own /dev.
use std::{
    os::unix::{
        ffi::OsStrExt,
        fs::{FileTypeExt, MetadataExt, PermissionsExt},
        process::CommandExt,
    },
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::{Duration, Instant},
};

use hookprof::results::Results;
use hookprof_tests::{catches_sigint, hookprof_bin, require_root};

/// A run of a fraction of a second: clean null_call only.
const SHORT: &[&str] = &[
    "--probes",
    "none",
    "--workloads",
    "null_call",
    "--samples",
    "2",
    "--min-sample-ms",
    "20",
];

/// `hookprof run --quiet --rounds=1 ARGS -o OUT` with TMPDIR=`temp` and umask 022.
fn run_to(out: &Path, args: &[&str], temp: &Path) -> Output {
    command(out, args, temp).output().expect("run hookprof")
}

fn command(out: &Path, args: &[&str], temp: &Path) -> Command {
    let mut cmd = Command::new(hookprof_bin());
    cmd.env(hookprof_tests::STORE_ENV, "off")
        .args(["run", "--quiet", "--rounds=1"])
        .args(args)
        .arg("-o")
        .arg(out)
        .env("TMPDIR", temp)
        .stdin(Stdio::null());
    // SAFETY: umask is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0o022);
            Ok(())
        });
    }
    cmd
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One line, exit 2, naming `names`.
fn assert_refused(what: &str, out: &Output, names: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(2), "{what}: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{what}: {err}");
    assert!(err.contains(names), "{what}: does not name {names}: {err}");
}

fn mknod(path: &Path, kind: libc::mode_t, major: u32, minor: u32) {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: c is a valid C string.
    let r = unsafe { libc::mknod(c.as_ptr(), kind | 0o666, libc::makedev(major, minor)) };
    assert_eq!(
        r,
        0,
        "mknod {}: {}",
        path.display(),
        std::io::Error::last_os_error()
    );
}

/// (file type, device number) of `path`, not following a symlink.
fn node(path: &Path) -> (std::fs::FileType, u64) {
    let m = std::fs::symlink_metadata(path).unwrap();
    (m.file_type(), m.rdev())
}

#[test]
fn devices_are_written_through_and_never_replaced() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let temp = dir.path();
    let null = temp.join("null");
    let full = temp.join("full");
    mknod(&null, libc::S_IFCHR, 1, 3);
    mknod(&full, libc::S_IFCHR, 1, 7);
    let link = temp.join("stdout-like");
    std::os::unix::fs::symlink(&null, &link).unwrap();
    for path in [&null, &link] {
        let before = node(path);
        let out = run_to(path, SHORT, temp);
        assert!(out.status.success(), "{}: {}", path.display(), stderr(&out));
        assert_eq!(node(path), before, "{} was replaced", path.display());
    }
    assert!(node(&null).0.is_char_device());
    // A write that fails after the run: the results are kept in a file the error names, and
    // the exit code is the manual's for output that could not be written.
    let out = run_to(&full, SHORT, temp);
    assert_eq!(out.status.code(), Some(4), "-o full: {}", stderr(&out));
    assert_eq!(stderr(&out).trim().lines().count(), 1, "{}", stderr(&out));
    assert!(stderr(&out).contains("the results are in "));
    assert!(stderr(&out).contains("No space left on device"));
    assert!(node(&full).0.is_char_device(), "the device was replaced");
    let err = stderr(&out);
    let kept = err.trim().rsplit_once("the results are in ").unwrap().1;
    let kept = PathBuf::from(kept.strip_suffix(" instead").unwrap());
    assert!(kept.starts_with(temp), "{}", kept.display());
    let results = Results::load(&kept).expect("the kept results load");
    assert_eq!(results.workloads[0].clean.len(), 2);
}

#[test]
fn bad_destinations_are_refused_before_the_run_and_left_as_they_were() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let temp = dir.path();
    let block = temp.join("disk");
    // A loop device's number; the node is never opened.
    mknod(&block, libc::S_IFBLK, 7, 200);
    let dangling = temp.join("dangling.json");
    std::os::unix::fs::symlink(temp.join("nowhere/r.json"), &dangling).unwrap();
    let fifo = temp.join("fifo");
    mknod(&fifo, libc::S_IFIFO, 0, 0);
    // A filesystem with no room left: a small tmpfs, filled.
    let small = temp.join("small");
    std::fs::create_dir(&small).unwrap();
    let mounted = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "hookprof-test"])
        .arg(&small)
        .status()
        .unwrap();
    assert!(mounted.success(), "mount a tmpfs on {}", small.display());
    let _ = std::fs::write(small.join("filler"), vec![0u8; 256 * 1024]);
    let cases: [(&str, &Path, &str); 5] = [
        ("directory", temp, "is a directory"),
        ("block device", &block, "is a block device"),
        ("dangling symlink", &dangling, "which does not exist"),
        ("FIFO without a reader", &fifo, "no reader"),
        ("full filesystem", &small.join("r.json"), "KiB free"),
    ];
    let entries = || {
        let mut names: Vec<_> = std::fs::read_dir(temp)
            .unwrap()
            .flatten()
            .map(|e| (e.file_name(), node(&e.path())))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        names
    };
    let before = entries();
    for (what, path, names) in cases {
        let t = Instant::now();
        let out = run_to(path, hookprof_tests::LONG_RUN, temp);
        assert_refused(what, &out, names);
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "{what}: refused only after {:?}",
            t.elapsed()
        );
        assert!(out.stdout.is_empty(), "{what}: the run started");
    }
    let after = entries();
    let unmounted = Command::new("umount").arg(&small).status().unwrap();
    assert!(unmounted.success());
    assert_eq!(after, before, "something was made or replaced");
}

#[test]
fn dash_writes_the_results_to_stdout_and_the_report_to_stderr() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let out = run_to(Path::new("-"), SHORT, dir.path());
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let results = Results::parse(&text, "stdout").expect("stdout is a results file");
    assert_eq!(results.workloads[0].name, "null_call");
    assert!(stderr(&out).contains("null_call"), "{}", stderr(&out));
}

#[test]
fn new_files_follow_the_umask_and_replaced_files_keep_their_mode() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let new = dir.path().join("new.json");
    assert!(run_to(&new, SHORT, dir.path()).status.success());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
    assert_eq!(mode(&new), 0o644, "under umask 022");
    let old = dir.path().join("old.json");
    std::fs::write(&old, "old").unwrap();
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o640)).unwrap();
    assert!(run_to(&old, SHORT, dir.path()).status.success());
    assert_eq!(mode(&old), 0o640);
    Results::load(&old).expect("replaced by the results");
}

#[test]
fn a_second_run_writing_the_same_file_is_refused() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.json");
    let mut first = command(&path, hookprof_tests::LONG_RUN, dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The first run claims the file (a lock beside it, the file itself untouched until the
    // results are complete) before it sets up its signal handling.
    let t = Instant::now();
    while !catches_sigint(first.id() as i32) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the first run never took SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!path.exists(), "a file was made before the results");
    let second = run_to(&path, SHORT, dir.path());
    // Interrupted, the first run writes what it has.
    // SAFETY: kill of the child this test started.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let status = first.wait().unwrap();
    assert_refused("second writer", &second, "another run is writing it");
    assert_eq!(status.code(), Some(130));
    Results::load(&path).expect("the first run's results");
}

#[test]
fn import_writes_through_symlinks_and_devices_and_refuses_a_directory_first() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("kernbench.log");
    std::fs::write(
        &log,
        "vanilla\n815.80user 113.69system 2:04.36elapsed 747%CPU\n\
         patched\n817.00user 115.01system 2:05.00elapsed 745%CPU\n",
    )
    .unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let elsewhere = dir.path().join("elsewhere.json");
    std::fs::write(&elsewhere, "old").unwrap();
    std::os::unix::fs::symlink(&elsewhere, out_dir.join("vanilla.json")).unwrap();
    mknod(&out_dir.join("patched.json"), libc::S_IFCHR, 1, 3);
    let import = |out: &Path| {
        hookprof_tests::hookprof(&[
            "import",
            "time",
            log.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ])
    };
    let out = import(&out_dir);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(node(&out_dir.join("vanilla.json")).0.is_symlink());
    assert!(node(&out_dir.join("patched.json")).0.is_char_device());
    assert_eq!(Results::load(&elsewhere).unwrap().label, "vanilla");
    // A directory where one file goes: refused before either is written.
    std::fs::remove_file(out_dir.join("vanilla.json")).unwrap();
    std::fs::create_dir(out_dir.join("patched.json.d")).unwrap();
    std::fs::remove_file(out_dir.join("patched.json")).unwrap();
    std::fs::rename(out_dir.join("patched.json.d"), out_dir.join("patched.json")).unwrap();
    assert_refused(
        "import into a directory",
        &import(&out_dir),
        "is a directory",
    );
    assert!(
        !out_dir.join("vanilla.json").exists(),
        "written before the refusal"
    );
    assert_refused("import -o -", &import(Path::new("-")), "name a directory");
}

/// A results file with workload null_call sampled as `samples`.
fn results_with(samples: &str) -> String {
    format!(
        "{{\"schema_version\": 1, \"label\": \"l\", \"complete\": true, \"source\": \"hookprof\",\n\
         \"environment\": {{\"kernel_release\": \"6.1\", \"hookprof_version\": \"0.1\"}},\n\
         \"workloads\": [{{\"name\": \"null_call\", \"family\": \"processes\", \"unit\": \"us\",\n\
         \"clean\": [{samples}]}}]}}\n"
    )
}

#[test]
fn hostile_results_files_are_refused_in_one_line_and_extreme_ones_compared() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero");
    let random = dir.path().join("urandom");
    mknod(&zero, libc::S_IFCHR, 1, 5);
    mknod(&random, libc::S_IFCHR, 1, 9);
    let file = |name: &str, samples: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, results_with(samples)).unwrap();
        path.to_str().unwrap().to_string()
    };
    let nan = file("nan.json", "0.4, \"NaN\"");
    let negative = file("negative.json", "0.4, -350.8");
    let huge = file("huge.json", "1e308, 1e308, 1e308");
    let mixed = file("mixed.json", "0.0, 1.7976931348623157e308, 1e-300");
    let (zero, random) = (zero.to_str().unwrap(), random.to_str().unwrap());
    // (arguments, what the one line must name)
    let refused: [(&[&str], String); 5] = [
        // Devices are refused before a byte is read: they would stream without end.
        (
            &["report", zero],
            format!("{zero}: cannot read: is a character device"),
        ),
        (
            &["report", random],
            format!("{random}: cannot read: is a character device"),
        ),
        (
            &["compare", zero, &huge],
            format!("{zero}: cannot read: is a character device"),
        ),
        (&["report", &nan], format!("{nan}:4:")),
        (&["compare", &huge, &negative], format!("{negative}:4:")),
    ];
    for (args, names) in &refused {
        let t = Instant::now();
        let out = hookprof_tests::hookprof(args);
        assert_refused(&format!("{args:?}"), &out, names);
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "{args:?}: {:?}",
            t.elapsed()
        );
    }
    assert!(stderr(&hookprof_tests::hookprof(&["report", &negative])).contains("negative"));
    // Finite samples of any size: no panic, and from compare and report numbers, never inf
    // or NaN. (history's noise and sensitivity lines still overflow to inf at 1e308: only its
    // change points are checked here, by the exit code.)
    let history = hookprof_tests::hookprof(&["history", &huge, &mixed, &huge, &mixed]);
    assert_eq!(
        history.status.code(),
        Some(0),
        "history: {}",
        stderr(&history)
    );
    for args in [
        &["compare", &huge, &huge][..],
        &["compare", &huge, &mixed],
        &["compare", &mixed, &huge, "--format", "json"],
        &["report", &huge],
        &["report", &mixed],
    ] {
        let out = hookprof_tests::hookprof(args);
        let (text, err) = (String::from_utf8_lossy(&out.stdout), stderr(&out));
        assert!(matches!(out.status.code(), Some(0 | 1)), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).collect();
        for bad in ["NaN", "inf"] {
            assert!(!words.contains(&bad), "{args:?}: {bad} in\n{text}");
        }
    }
}
