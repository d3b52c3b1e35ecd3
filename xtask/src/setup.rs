//! Installs what is missing of the toolchain described in the README, as much as a command
//! needs: for building and running hookprof, Debian's build packages, the Debian Rust
//! toolchain linked as `debian` (it ships a prebuilt `core` for bpfel) and bpf-linker built
//! against LLVM 22; for the other architecture's build (x86_64 and arm64), Debian's standard
//! library of that architecture (multiarch) and its cross gcc; for the tests, the guests' qemu
//! and busybox, the checkers, browsers and servers they run. Every step checks first, so
//! running it again is cheap.
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use hookprof_guest::Arch;

/// What a command needs installed, each level with all of the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Needs {
    /// Building and running hookprof on this machine (`build`, `run`, `install`).
    Run,
    /// And building it for the other architecture (`build --arch`, `dist`).
    Cross,
    /// And every test: guests, checkers, servers (`test`, `setup`, the VM commands).
    Test,
}

/// The build and the run: what `cargo xtask run -- run` needs, and nothing else.
const RUN_PACKAGES: &[&str] = &[
    // bpf-linker's LLVM and the C toolchain (gcc and make also build the `build` workload)
    "llvm-22-dev",
    "libzstd-dev",
    "zlib1g-dev",
    "libxml2-dev",
    "build-essential",
    "pkg-config",
    "bpftool",
    // Debian's Rust, with core for bpfel-unknown-none
    "rustc-web",
    "cargo-web",
    "libstd-rust-web-dev-bpf",
    // `man hookprof-run` reads the pages the run installs
    "man-db",
];

/// What the tests add.
const TEST_PACKAGES: &[&str] = &[
    // the test VMs of both architectures
    "qemu-system-x86",
    "qemu-system-arm",
    "busybox-static",
    "cpio",
    "lz4",
    "python3",
    // apparmor_parser, with which the guest's policy tests load a profile
    "apparmor",
    // the HTML report test renders its pages in a real browser
    "chromium",
    // the export tests check their output with the ecosystem's own checkers: promtool, and
    // kcidb-io in a venv of Debian's python
    "prometheus",
    "python3-venv",
    // and `go tool pprof` reads the pprof profiles
    "golang-go",
    // the results store's tests start a PostgreSQL server of their own
    "postgresql",
    // top's tests: promtool (above) checks the endpoint, curl scrapes it, tmux hosts the
    // terminal view
    "curl",
    "tmux",
    // the package test installs `cargo xtask dist`'s .deb into a clean Debian root
    "debootstrap",
    // another tool's BPF program beside a run, which the run prices (tests/other_bpf.rs)
    "bpftrace",
];
const BPF_LINKER_VERSION: &str = "0.13.0";
/// `cargo xtask dist` packages with it; installed on first use, not by every set-up.
const CARGO_DEB_VERSION: &str = "3.8.0";
/// KernelCI's schema package (PyPI), whose validator the KCIDB export tests run.
const KCIDB_IO_VERSION: &str = "141";

/// The `other` architecture's build: its Rust standard library for Debian's toolchain (same
/// version as rustc-web: multiarch), its C library and cross gcc (the linker).
fn cross_packages(other: Arch) -> &'static [&'static str] {
    match other {
        Arch::Arm64 => &[
            "libstd-rust-web-dev:arm64",
            "gcc-aarch64-linux-gnu",
            "libc6-dev-arm64-cross",
        ],
        Arch::Amd64 => &[
            "libstd-rust-web-dev:amd64",
            "gcc-x86-64-linux-gnu",
            "libc6-dev-amd64-cross",
        ],
    }
}

/// The Debian packages `needs` takes on a machine of architecture `host` (the other
/// architecture's cross build packages from `Needs::Cross` on).
pub fn packages(needs: Needs, host: Option<Arch>) -> Vec<&'static str> {
    let cross = match host {
        Some(host) if needs >= Needs::Cross => cross_packages(host.other()),
        _ => &[],
    };
    let tests = if needs >= Needs::Test {
        TEST_PACKAGES
    } else {
        &[]
    };
    [RUN_PACKAGES, cross, tests].concat()
}

/// Installs what is missing of what `needs` takes.
pub fn ensure(needs: Needs) -> Result<()> {
    let foreign = Arch::host()
        .map(Arch::other)
        .filter(|_| needs >= Needs::Cross);
    let missing: Vec<&str> = packages(needs, Arch::host())
        .into_iter()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if !missing.is_empty() {
        require_root("install Debian packages")?;
        if Command::new("apt-get")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            bail!("apt-get not found: install {} by hand", missing.join(" "));
        }
        if let Some(arch) = foreign.filter(|a| !dpkg_has_architecture(*a)) {
            println!("xtask setup: dpkg --add-architecture {arch}");
            run(Command::new("dpkg").args(["--add-architecture", arch.name()]))?;
        }
        println!("xtask setup: apt-get install {}", missing.join(" "));
        run(Command::new("apt-get").args(["update", "-qq"]))?;
        run(Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(&missing)
            .env("DEBIAN_FRONTEND", "noninteractive"))?;
    }
    if !debian_toolchain_linked()? {
        println!("xtask setup: rustup toolchain link debian /usr");
        run(Command::new("rustup").args(["toolchain", "link", "debian", "/usr"]))?;
    }
    if !bpf_linker_ok() {
        println!("xtask setup: cargo install bpf-linker {BPF_LINKER_VERSION} (llvm-22, ~4 min)");
        let path = format!(
            "/usr/lib/llvm-22/bin:{}",
            std::env::var("PATH").unwrap_or_default()
        );
        run(Command::new("cargo")
            .args([
                "+stable",
                "install",
                "bpf-linker",
                "--version",
                BPF_LINKER_VERSION,
            ])
            .args(["--locked", "--no-default-features", "--features", "llvm-22"])
            .env("PATH", path))?;
    }
    if needs >= Needs::Test {
        ensure_kcidb_io()?;
    }
    Ok(())
}

/// cargo-deb, pinned, in cargo's bin directory like bpf-linker (a build of ~2 min, once).
pub fn ensure_cargo_deb() -> Result<()> {
    let installed = Command::new("cargo")
        .args(["deb", "--version"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(CARGO_DEB_VERSION));
    if installed {
        return Ok(());
    }
    println!("xtask setup: cargo install cargo-deb {CARGO_DEB_VERSION} (~2 min)");
    run(Command::new("cargo").args([
        "+stable",
        "install",
        "cargo-deb",
        "--version",
        CARGO_DEB_VERSION,
        "--locked",
    ]))
}

/// Where the export tests find kcidb-io: a venv in the target directory.
fn kcidb_io_venv() -> std::path::PathBuf {
    crate::target_dir().join("checkers/kcidb-io")
}

fn ensure_kcidb_io() -> Result<()> {
    let venv = kcidb_io_venv();
    let python = venv.join("bin/python3");
    let installed = Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m, kcidb_io; print(m.version('kcidb-io'))",
        ])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == KCIDB_IO_VERSION);
    if installed {
        return Ok(());
    }
    println!(
        "xtask setup: kcidb-io {KCIDB_IO_VERSION} in {}",
        venv.display()
    );
    // Debian's python (python3-venv), not whichever python3 comes first on PATH.
    run(Command::new("/usr/bin/python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv))?;
    run(Command::new(&python).args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        &format!("kcidb-io=={KCIDB_IO_VERSION}"),
    ]))
}

/// dpkg installs packages of `arch` (the host's own, or a foreign one it was given).
fn dpkg_has_architecture(arch: Arch) -> bool {
    let list = |flag: &str| {
        Command::new("dpkg")
            .arg(flag)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    let (native, foreign) = (
        list("--print-architecture"),
        list("--print-foreign-architectures"),
    );
    native
        .split_whitespace()
        .chain(foreign.split_whitespace())
        .any(|a| a == arch.name())
}

fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("install ok installed"))
        .unwrap_or(false)
}

fn debian_toolchain_linked() -> Result<bool> {
    let out = Command::new("rustup")
        .args(["toolchain", "list"])
        .output()
        .context("rustup not found: hookprof builds with the machine's rustup toolchains")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .any(|l| l.starts_with("debian")))
}

fn bpf_linker_ok() -> bool {
    Command::new("bpf-linker")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains(BPF_LINKER_VERSION))
        .unwrap_or(false)
}

fn require_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("need root to {what}: run `sudo cargo xtask setup` once");
    }
    Ok(())
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd.status().with_context(|| format!("run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_installs_the_build_alone_and_the_tests_add_the_rest() {
        let run = packages(Needs::Run, Some(Arch::Amd64));
        for build in [
            "llvm-22-dev",
            "rustc-web",
            "libstd-rust-web-dev-bpf",
            "man-db",
        ] {
            assert!(run.contains(&build), "{build}: {run:?}");
        }
        for test_only in [
            "qemu-system-x86",
            "qemu-system-arm",
            "chromium",
            "prometheus",
            "postgresql",
            "debootstrap",
            "golang-go",
            "gcc-aarch64-linux-gnu",
            "libstd-rust-web-dev:arm64",
        ] {
            assert!(!run.contains(&test_only), "{test_only} in {run:?}");
        }
        // The cross build adds the other architecture's toolchain, on either host.
        let cross = packages(Needs::Cross, Some(Arch::Amd64));
        assert!(cross.contains(&"gcc-aarch64-linux-gnu") && !cross.contains(&"qemu-system-x86"));
        let cross = packages(Needs::Cross, Some(Arch::Arm64));
        assert!(cross.contains(&"gcc-x86-64-linux-gnu"), "{cross:?}");
        // The tests take everything, each package once.
        let test = packages(Needs::Test, Some(Arch::Amd64));
        for p in run.iter().chain(&cross_packages(Arch::Arm64).to_vec()) {
            assert!(test.contains(p), "{p}");
        }
        assert!(test.contains(&"debootstrap") && test.contains(&"chromium"));
        let mut unique = test.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), test.len());
        // A machine of neither architecture gets no cross packages.
        assert_eq!(packages(Needs::Cross, None), RUN_PACKAGES);
    }
}
