//! The package test (part of `cargo xtask test`): `cargo xtask dist`'s .deb for this host's
//! architecture installs with `dpkg -i` into a clean Debian root with no Rust and no LLVM, and
//! there, chrooted as root on this machine's kernel, `hookprof run --suite quick`, `report`, `compare`, `man hookprof-run`
//! and the bash completion work. It also times the package's install to its first result.
//!
//! The root is Debian bookworm's minbase with man-db, made by debootstrap once (it downloads
//! ~46 MB of packages and installs them: ~5 min) and kept as a tar under target/; each test
//! unpacks a fresh copy of it (seconds). The arm64 package is installed into an arm64 root of
//! the same kind in the arm64 guest (`vm-test --arch arm64`), by that root's own dpkg.
use std::{
    path::{Path, PathBuf},
    process::{Command, Output, Stdio},
    time::Instant,
};

use anyhow::{bail, ensure, Context, Result};

use crate::{dist, target_dir};

const SUITE: &str = "bookworm";
const MIRROR: &str = "http://deb.debian.org/debian";
/// What the root holds beyond minbase: man-db, so `man hookprof-run` is tried as a user would.
const INCLUDE: &str = "man-db";

pub fn run() -> Result<()> {
    let host = dist::Target::ALL
        .into_iter()
        .find(|t| t.is_host())
        .context("the package test runs on x86_64 and aarch64 hosts")?;
    let (_, deb) = dist::dist(&[host])?.remove(0);
    let root = CleanRoot::unpack()?;
    ensure_no_toolchain(root.path())?;

    let deb_name = deb
        .file_name()
        .context("a package path without a file name")?;
    std::fs::copy(&deb, root.path().join("tmp").join(deb_name))
        .context("copy the package into the root")?;
    let deb_in_root = format!("/tmp/{}", deb_name.to_string_lossy());

    let start = Instant::now();
    root.run_ok(&["dpkg", "-i", &deb_in_root])?;
    let installed = start.elapsed();
    // What dpkg installed, not only what dist built, runs without a dynamic loader.
    dist::ensure_statically_linked(&root.path().join("usr/bin/hookprof"))?;
    let version = root.run_ok(&["hookprof", "--version"])?;
    ensure!(
        version.contains(env!("CARGO_PKG_VERSION")),
        "hookprof --version in the root: {version}"
    );

    root.run_ok(&[
        "hookprof",
        "run",
        "--suite",
        "quick",
        "--quiet",
        "-o",
        "/tmp/first.json",
    ])?;
    let first_result = start.elapsed();
    let workloads = workload_names(&root.path().join("tmp/first.json"))?;
    println!(
        "xtask dist-test: package to first result: {:.1} s (dpkg -i {:.1} s, then \
         `hookprof run --suite quick`: {} workloads)",
        first_result.as_secs_f64(),
        installed.as_secs_f64(),
        workloads.len(),
    );
    let report = root.run_ok(&["hookprof", "report", "/tmp/first.json"])?;
    ensure_names_all(&report, &workloads, "hookprof report")?;

    // The second run, for compare, takes two of the first's workloads: compare judges the
    // workloads both runs have, and a second quick run would double the test's time.
    let compared = &workloads[..workloads.len().min(2)];
    root.run_ok(&[
        "hookprof",
        "run",
        "--workloads",
        &compared.join(","),
        "--quiet",
        "-o",
        "/tmp/second.json",
    ])?;
    // 0 (no regression) or 1 (one regressed: two runs of one binary can differ by chance);
    // 2 would be an error.
    let compare = root.run(&["hookprof", "compare", "/tmp/first.json", "/tmp/second.json"])?;
    ensure!(
        matches!(compare.status.code(), Some(0 | 1)),
        "hookprof compare in the root exited {}: {}",
        compare.status,
        String::from_utf8_lossy(&compare.stderr)
    );
    ensure_names_all(
        &String::from_utf8_lossy(&compare.stdout),
        compared,
        "hookprof compare",
    )?;

    check_man_page(&root)?;
    check_completions(&root)?;
    println!("xtask dist-test: the package works in a clean Debian root");
    Ok(())
}

/// `man hookprof-run` finds the page the package installed and renders it.
fn check_man_page(root: &CleanRoot) -> Result<()> {
    let location = root.run_ok(&["man", "-w", "hookprof-run"])?;
    ensure!(
        location.trim() == "/usr/share/man/man1/hookprof-run.1.gz",
        "man -w hookprof-run: {location}"
    );
    let page = root.run_ok(&["man", "hookprof-run"])?;
    ensure!(
        page.contains("hookprof-run") && page.contains("--suite"),
        "man hookprof-run printed no page of `run`'s options:\n{page}"
    );
    Ok(())
}

/// bash completes a subcommand's name from the package's script; zsh's and fish's are where
/// those shells look.
fn check_completions(root: &CleanRoot) -> Result<()> {
    let script = "source /usr/share/bash-completion/completions/hookprof; \
                  COMP_WORDS=(hookprof compa); COMP_CWORD=1; COMP_LINE='hookprof compa'; \
                  COMP_POINT=${#COMP_LINE}; _hookprof hookprof compa hookprof; \
                  printf '%s\\n' \"${COMPREPLY[@]}\"";
    let completed = root.run_ok(&["bash", "-c", script])?;
    ensure!(
        completed.lines().any(|l| l.trim() == "compare"),
        "bash completes `hookprof compa` to {completed:?}, not compare"
    );
    for (path, first_line) in [
        (
            "usr/share/zsh/vendor-completions/_hookprof",
            "#compdef hookprof",
        ),
        ("usr/share/fish/vendor_completions.d/hookprof.fish", ""),
    ] {
        let text = std::fs::read_to_string(root.path().join(path))
            .with_context(|| format!("the package installed no {path}"))?;
        ensure!(
            text.starts_with(first_line) && text.contains("compare"),
            "{path} does not complete hookprof's commands"
        );
    }
    Ok(())
}

fn workload_names(results: &Path) -> Result<Vec<String>> {
    let text =
        std::fs::read_to_string(results).with_context(|| format!("read {}", results.display()))?;
    let doc: serde_json::Value = serde_json::from_str(&text)?;
    ensure!(
        doc["complete"] == serde_json::Value::Bool(true),
        "{}: the run is not complete",
        results.display()
    );
    let names: Vec<String> = doc["workloads"]
        .as_array()
        .context("results without workloads")?
        .iter()
        .filter_map(|w| w["name"].as_str().map(str::to_owned))
        .collect();
    ensure!(!names.is_empty(), "{}: no workloads", results.display());
    Ok(names)
}

fn ensure_names_all(output: &str, workloads: &[String], what: &str) -> Result<()> {
    let missing: Vec<&String> = workloads
        .iter()
        .filter(|w| !output.contains(w.as_str()))
        .collect();
    ensure!(
        missing.is_empty(),
        "{what} names none of {missing:?}:\n{output}"
    );
    Ok(())
}

/// A fresh copy of the cached Debian root, in a directory of its own under target/, removed
/// when dropped. Commands run in it chrooted, in a mount namespace of their own where /proc,
/// /sys (with the BTF, bpffs, tracefs and debugfs under it) and /dev are bound: those mounts
/// end with the command, so none outlives it, whatever happens.
struct CleanRoot {
    dir: UnmountedDir,
}

impl CleanRoot {
    fn unpack() -> Result<Self> {
        let cache = cached_root_tar()?;
        let dir = UnmountedDir::new_in(cache.parent().context("the cache's directory")?, "root-")?;
        unpack_root(&cache, dir.path())?;
        Ok(CleanRoot { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// `args` run in the root as root, with a plain environment (none of this shell's
    /// HOOKPROF_* settings).
    fn run(&self, args: &[&str]) -> Result<Output> {
        const ENTER: &str = r#"root=$1; shift
for d in proc sys dev; do mount --rbind "/$d" "$root/$d"; done
exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 TERM=dumb "$@""#;
        Command::new("unshare")
            .args([
                "--mount",
                "--propagation",
                "private",
                "--",
                "sh",
                "-ec",
                ENTER,
                "sh",
            ])
            .arg(self.path())
            .args(args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("run {args:?} in the root"))
    }

    /// Like `run`, failing unless it succeeds; returns its stdout.
    fn run_ok(&self, args: &[&str]) -> Result<String> {
        let output = self.run(args)?;
        if !output.status.success() {
            bail!(
                "{} in the clean root failed ({}):\n{}{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// Unpacks a cached root's tar into `dir`, owners as they were.
pub fn unpack_root(tar: &Path, dir: &Path) -> Result<()> {
    run_checked(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("-C")
            .arg(dir)
            .arg("-xf")
            .arg(tar),
    )
}

/// The point of the package tests: nothing of a Rust or LLVM toolchain in the root.
pub fn ensure_no_toolchain(root: &Path) -> Result<()> {
    for tool in [
        "usr/bin/rustc",
        "usr/bin/cargo",
        "usr/bin/clang",
        "root/.cargo",
    ] {
        ensure!(!root.join(tool).exists(), "the clean root has {tool}");
    }
    let lib = std::fs::read_dir(root.join("usr/lib")).context("read the root's usr/lib")?;
    for entry in lib {
        let name = entry?.file_name();
        ensure!(
            !name.to_string_lossy().starts_with("llvm"),
            "the clean root has usr/lib/{}",
            name.to_string_lossy()
        );
    }
    Ok(())
}

/// A directory under target/ that is removed when dropped, unless something is still mounted
/// under it: deleting through a bound /sys or /proc would reach the host's.
struct UnmountedDir {
    path: PathBuf,
}

impl UnmountedDir {
    fn new_in(parent: &Path, prefix: &str) -> Result<Self> {
        let path = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(parent)
            .with_context(|| format!("create a directory in {}", parent.display()))?
            .keep();
        Ok(UnmountedDir { path })
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for UnmountedDir {
    fn drop(&mut self) {
        let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let path = self.path.to_string_lossy();
        if mounts.lines().any(|l| l.contains(path.as_ref())) {
            eprintln!("xtask dist-test: {path} still has mounts under it: left in place");
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!("xtask dist-test: remove {path}: {e}");
        }
    }
}

/// target/dist-test/SUITE-minbase-INCLUDE.tar: the root as debootstrap left it, made on the
/// first call. `cargo xtask test` calls it beside the build, where its ~5 min (mostly
/// waiting on the mirror) cost little: debootstrap's output then goes to a log under
/// target/dist-test, named if it fails.
pub fn cached_root_tar() -> Result<PathBuf> {
    cached_root(
        &format!("{SUITE}-minbase-{INCLUDE}"),
        &["--variant=minbase", &format!("--include={INCLUDE}")],
        "~5 min",
    )
}

/// target/dist-test/SUITE-minbase-ARCH.tar: a root of another architecture than the host's,
/// debootstrap's first stage alone (`--foreign`: its packages unpacked, none configured, since
/// this host runs none of its code; ~20 s). Its dpkg, run in a guest of that architecture,
/// installs that architecture's package; a package without dependencies needs nothing
/// configured.
pub fn cached_foreign_root_tar(arch: hookprof_guest::Arch) -> Result<PathBuf> {
    cached_root(
        &format!("{SUITE}-minbase-{arch}"),
        &["--variant=minbase", "--foreign", &format!("--arch={arch}")],
        "~20 s",
    )
}

/// target/dist-test/NAME.tar, made once by debootstrap with `args`.
fn cached_root(name: &str, args: &[&str], takes: &str) -> Result<PathBuf> {
    let cache_dir = target_dir().join("dist-test");
    let tar = cache_dir.join(format!("{name}.tar"));
    if tar.is_file() {
        return Ok(tar);
    }
    std::fs::create_dir_all(&cache_dir)
        .with_context(|| format!("create {}", cache_dir.display()))?;
    let work = UnmountedDir::new_in(&cache_dir, "debootstrap-")?;
    let log_path = cache_dir.join(format!("debootstrap-{name}.log"));
    println!(
        "xtask dist-test: debootstrap {SUITE} ({}) once, {takes}; its output goes to {}",
        args.join(" "),
        log_path.display()
    );
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("create {}", log_path.display()))?;
    run_checked(
        Command::new("debootstrap")
            .args(args)
            .arg(SUITE)
            .arg(work.path())
            .arg(MIRROR)
            .stdout(log.try_clone()?)
            .stderr(log),
    )
    .with_context(|| format!("debootstrap's output is in {}", log_path.display()))?;
    let partial = tar.with_extension("tar.partial");
    run_checked(
        Command::new("tar")
            .arg("--numeric-owner")
            .arg("-C")
            .arg(work.path())
            .arg("-cf")
            .arg(&partial)
            .arg("."),
    )?;
    std::fs::rename(&partial, &tar)?;
    Ok(tar)
}

fn run_checked(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("run {cmd:?}"))?;
    ensure!(status.success(), "{cmd:?} failed ({status})");
    Ok(())
}
