//! `cargo xtask vm-test --smoke`, and all of `vm-test --arch ARCH` for the architecture that is
//! not the host's: the guest architecture's Debian package (`cargo xtask dist`'s, statically
//! linked) installed by dpkg into a clean Debian root of that architecture (debootstrap's
//! first stage, shared with the guest), `hookprof --version` run there, then the `guest_smoke`
//! tests of hookprof-tests, built statically for that architecture, against the installed
//! binary.
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use hookprof_guest::{Arch, Payload};

use super::BootArgs;
use crate::dist::{self, Target};
use crate::dist_test;

/// The smoke's boot is killed after this long: it takes a few minutes emulated (arm64 on an
/// x86 host), so the bound is for a stuck guest.
const SMOKE_TIMEOUT_S: u64 = 1200;
/// Where the clean root is in the share, and so in the guest.
const ROOT: &str = "root";

/// What the smoke boots with.
struct Built {
    deb: PathBuf,
    tests: PathBuf,
    /// The clean root's tar.
    root: PathBuf,
}

fn build(arch: Arch) -> Result<Built> {
    let target = Target(arch);
    dist::build_static(target)?;
    crate::setup::ensure_cargo_deb()?;
    let deb = dist::package(target, &crate::target_dir().join("dist"))?;
    let tests = super::test_binary::test_binary(
        target.static_cargo(),
        "guest_smoke",
        &["--target", target.triple()],
    )?;
    let root = dist_test::cached_foreign_root_tar(arch)?;
    Ok(Built { deb, tests, root })
}

/// Builds what the smoke needs and, unless `build_only`, boots the guest with it.
pub fn run(boot: &BootArgs, arch: Arch, test_args: &[String], build_only: bool) -> Result<i32> {
    let start = Instant::now();
    let Built {
        deb,
        tests,
        root: root_tar,
    } = build(arch)?;
    if build_only {
        println!(
            "xtask vm-test --smoke ({arch}): built in {:.0} s",
            start.elapsed().as_secs_f64()
        );
        return Ok(0);
    }

    // The clean root, in a share of this test's own (under target/: it takes ~220 MB).
    let share = tempfile::Builder::new()
        .prefix("smoke-share-")
        .tempdir_in(crate::target_dir())
        .context("create the smoke's share")?;
    let root = share.path().join(ROOT);
    std::fs::create_dir(&root)?;
    dist_test::unpack_root(&root_tar, &root)?;
    dist_test::ensure_no_toolchain(&root)?;
    let deb_name = deb.file_name().context("a package without a file name")?;
    std::fs::copy(&deb, root.join("tmp").join(deb_name)).context("copy the package")?;
    let built = start.elapsed();

    let mut payload = Payload::for_arch(arch);
    let tests = payload.add_file(&tests)?;
    let in_root = format!("/mnt/host/{ROOT}");
    let mut script = format!(
        "set -e; chroot {in_root} dpkg -i /tmp/{}; chroot {in_root} hookprof --version; \
         exec {tests} --test-threads=1",
        deb_name.to_string_lossy()
    );
    for arg in test_args {
        script += &format!(" '{}'", arg.replace('\'', r"'\''"));
    }
    let command = ["sh".to_string(), "-c".to_string(), script];
    let mut env = vec![
        // what dpkg installed, run in the guest's own root (its /sys, bpffs, tracefs)
        (
            "HOOKPROF_BIN".to_string(),
            format!("{in_root}/usr/bin/hookprof"),
        ),
        // the guest tests refuse to run anywhere else
        ("HOOKPROF_IN_GUEST".to_string(), "1".to_string()),
    ];
    if boot.kernel.is_none() {
        // Both default kernels load fentry programs: a refusal there is a failure.
        env.push(("HOOKPROF_EXPECT_FENTRY".to_string(), "1".to_string()));
    }
    let mut boot = boot.clone();
    boot.timeout = boot.timeout.or(Some(SMOKE_TIMEOUT_S));
    boot.share = Some(share.path().to_path_buf());
    let booted = Instant::now();
    let code = super::boot(&boot, payload, &command, &env)?;
    println!(
        "xtask vm-test --smoke ({arch}): exit code {code}; build and root {:.0} s, guest {:.0} s",
        built.as_secs_f64(),
        booted.elapsed().as_secs_f64()
    );
    Ok(code)
}

/// The other architecture's smoke, built in the background (`vm-test --arch ARCH --build-only`
/// in a process group of its own, on one CPU, its output in a log) while the guest suite's
/// TCG has the other CPU: a cross build of several CPU-minutes off `cargo xtask test`'s path.
/// Killed with its group if dropped before `wait`.
pub struct Prebuild {
    child: std::process::Child,
    log: PathBuf,
    arch: Arch,
    start: Instant,
}

impl Prebuild {
    pub fn start(arch: Arch) -> Result<Prebuild> {
        use std::os::unix::process::CommandExt;
        let dir = Target(arch).target_dir();
        std::fs::create_dir_all(&dir)?;
        let log = dir.join(format!("prebuild-{arch}.log"));
        let out =
            std::fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
        println!(
            "xtask: building the {arch} smoke beside the guest suite (one CPU; output in {})",
            log.display()
        );
        let child = std::process::Command::new(std::env::current_exe()?)
            .args(["vm-test", "--arch", arch.name(), "--build-only"])
            .env("CARGO_BUILD_JOBS", "1")
            .stdin(std::process::Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .context("start the background build")?;
        Ok(Prebuild {
            child,
            log,
            arch,
            start: Instant::now(),
        })
    }

    /// Waits for the build; fails with the end of its log if it failed.
    pub fn wait(mut self) -> Result<()> {
        let status = self.child.wait()?;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        println!(
            "xtask: the {} smoke's background build ended ({status}) after {:.0} s",
            self.arch,
            self.start.elapsed().as_secs_f64()
        );
        anyhow::ensure!(
            status.success(),
            "building the {} smoke failed ({status}); {} ends:\n{}",
            self.arch,
            self.log.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        Ok(())
    }
}

impl Drop for Prebuild {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on the group this struct started; nothing else is in it.
            unsafe { libc::kill(-(self.child.id() as i32), libc::SIGTERM) };
            let _ = self.child.wait();
        }
    }
}
