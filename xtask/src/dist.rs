//! `cargo xtask dist`: what a machine without Rust or LLVM installs, for x86_64 and arm64. For
//! each, a statically linked `hookprof` (the eBPF objects, built for that architecture, are
//! inside it: `hookprof::ebpf_object`), and a Debian package made by cargo-deb (metadata in
//! profiler/Cargo.toml) that carries it with a man page per command and completions for bash,
//! zsh and fish. The architecture that is not the host's is cross-built with Debian's
//! toolchain (its standard library for that architecture and its cross gcc: `cargo xtask
//! setup` installs them).
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, ensure, Context, Result};
use hookprof_guest::Arch;

use crate::{setup, target_dir, workspace_root};

/// A machine the release artifacts are built for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target(pub Arch);

impl Target {
    pub const ALL: [Target; 2] = [Target(Arch::Amd64), Target(Arch::Arm64)];

    /// The Rust target, named explicitly even for the host's own: with `--target`, cargo gives
    /// the target's rustflags to the binary alone, not to build scripts and proc macros (which
    /// cannot link with a static C runtime).
    pub fn triple(self) -> &'static str {
        match self.0 {
            Arch::Amd64 => "x86_64-unknown-linux-gnu",
            Arch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// The GNU triplet of its C toolchain (`aarch64-linux-gnu-gcc` links a cross build).
    fn gnu(self) -> &'static str {
        match self.0 {
            Arch::Amd64 => "x86_64-linux-gnu",
            Arch::Arm64 => "aarch64-linux-gnu",
        }
    }

    /// `uname -m` of its machines.
    pub fn machine(self) -> &'static str {
        self.triple().split('-').next().expect("a triple")
    }

    pub fn is_host(self) -> bool {
        Arch::host() == Some(self.0)
    }

    /// Where cargo builds for it: the workspace's target directory for the host's own
    /// architecture; for the other, `target/cross`, so that a cross build never waits on the
    /// lock of the host's builds (`cargo xtask test` runs it beside the guest suite). Its
    /// build scripts are another toolchain's anyway.
    pub fn target_dir(self) -> PathBuf {
        if self.is_host() {
            target_dir()
        } else {
            target_dir().join("cross")
        }
    }

    /// The statically linked binary `build_static` makes.
    pub fn binary(self) -> PathBuf {
        self.release_dir().join("hookprof")
    }

    fn release_dir(self) -> PathBuf {
        self.target_dir().join(self.triple()).join("release")
    }

    /// cargo for this target: the host's own toolchain for its own architecture; Debian's
    /// (which has the other architecture's standard library) for the other, linked by that
    /// architecture's gcc.
    pub fn cargo(self) -> Command {
        let mut cargo = if self.is_host() {
            Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        } else {
            let mut rustup = Command::new("rustup");
            rustup.args(["run", "debian", "cargo"]);
            rustup.env(self.env("LINKER"), format!("{}-gcc", self.gnu()));
            rustup
        };
        cargo
            .current_dir(workspace_root())
            .env("CARGO_TARGET_DIR", self.target_dir());
        cargo
    }

    /// `cargo` with glibc linked in statically (`+crt-static`) for this target: one set of
    /// flags for the static binary and what is built beside it (the guest smoke's tests), so
    /// they share their dependencies' build.
    pub fn static_cargo(self) -> Command {
        let mut cargo = self.cargo();
        cargo.env(self.env("RUSTFLAGS"), "-C target-feature=+crt-static");
        cargo
    }

    /// cargo's per-target variable `CARGO_TARGET_<TRIPLE>_<what>`.
    fn env(self, what: &str) -> String {
        format!(
            "CARGO_TARGET_{}_{what}",
            self.triple().to_uppercase().replace('-', "_")
        )
    }
}

/// Builds the artifacts of `targets` into target/dist; returns each target's package.
pub fn dist(targets: &[Target]) -> Result<Vec<(Target, PathBuf)>> {
    setup::ensure_cargo_deb()?;
    let out = target_dir().join("dist");
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let mut debs = Vec::new();
    let mut artifacts = Vec::new();
    for &target in targets {
        build_static(target)?;
        let deb = package(target, &out)?;
        let binary = out.join(format!(
            "hookprof-{}-{}-linux-static",
            env!("CARGO_PKG_VERSION"),
            target.machine()
        ));
        std::fs::copy(target.binary(), &binary)
            .with_context(|| format!("copy the binary to {}", binary.display()))?;
        artifacts.extend([binary, deb.clone()]);
        debs.push((target, deb));
    }
    let artifacts: Vec<&Path> = artifacts.iter().map(PathBuf::as_path).collect();
    let sums = sha256sums(&out, &artifacts)?;
    std::fs::write(out.join("SHA256SUMS"), &sums).context("write SHA256SUMS")?;
    println!(
        "xtask dist: in {} (sha256sum -c SHA256SUMS there):",
        out.display()
    );
    print!("{sums}");
    Ok(debs)
}

/// `cargo build --release --target TRIPLE` with glibc linked in statically (`+crt-static`),
/// checked to need no dynamic loader; returns the binary.
pub fn build_static(target: Target) -> Result<PathBuf> {
    let args = [
        "build",
        "--release",
        "--bin",
        "hookprof",
        "--target",
        target.triple(),
    ];
    println!("xtask: cargo {} (statically linked)", args.join(" "));
    let status = target
        .static_cargo()
        .args(args)
        .status()
        .context("run cargo build")?;
    ensure!(status.success(), "the static build failed ({status})");
    let binary = target.binary();
    ensure_statically_linked(&binary)?;
    Ok(binary)
}

/// Fails unless the ELF file asks for no program interpreter (no dynamic loader, so no shared
/// library), as a binary built with a RUSTFLAGS that overrode `+crt-static` would.
pub fn ensure_statically_linked(path: &Path) -> Result<()> {
    const PT_INTERP: u32 = 3;
    let elf = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let field = |at: usize, len: usize| -> Result<u64> {
        let bytes = elf
            .get(at..at + len)
            .with_context(|| format!("{}: a truncated ELF header", path.display()))?;
        Ok(bytes
            .iter()
            .rev()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    };
    ensure!(
        elf.starts_with(b"\x7fELF\x02\x01"),
        "{}: not a little-endian 64-bit ELF file",
        path.display()
    );
    let (phoff, phentsize, phnum) = (field(0x20, 8)?, field(0x36, 2)?, field(0x38, 2)?);
    for i in 0..phnum {
        let at = usize::try_from(phoff + i * phentsize)?;
        if field(at, 4)? == u64::from(PT_INTERP) {
            bail!(
                "{} is dynamically linked: is RUSTFLAGS set? It overrides the target's \
                 `+crt-static`",
                path.display()
            );
        }
    }
    Ok(())
}

/// The man pages and completions, from the command line's clap definition
/// (profiler/examples/dist_assets.rs). Written afresh, so a removed command leaves no page.
/// The pages are gzipped as Debian's man expects (cargo-deb leaves build output as it is).
pub(crate) fn write_assets(dir: &Path) -> Result<()> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    let dir_str = dir
        .to_str()
        .context("a target directory that is not UTF-8")?;
    crate::cargo(&[
        "run",
        "--quiet",
        "--release",
        "-p",
        "hookprof",
        "--example",
        "dist_assets",
        "--",
        dir_str,
    ])?;
    let man = dir.join("man");
    let pages = std::fs::read_dir(&man)
        .with_context(|| format!("read {}", man.display()))?
        .map(|entry| Ok(entry?.path()))
        .collect::<Result<Vec<_>>>()?;
    ensure!(!pages.is_empty(), "no man pages in {}", man.display());
    // -n: no name or time stamp inside, so the same pages give the same package.
    let status = Command::new("gzip")
        .args(["-9", "-n"])
        .args(&pages)
        .status()
        .context("run gzip")?;
    ensure!(status.success(), "gzip of the man pages failed ({status})");
    Ok(())
}

/// The Debian package of `target`'s static binary (`build_static` first), in `out`; returns
/// its path.
pub fn package(target: Target, out: &Path) -> Result<PathBuf> {
    // Where the package metadata's "target/release/dist-assets/..." points for this target.
    write_assets(&target.release_dir().join("dist-assets"))?;
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .env("CARGO_TARGET_DIR", target.target_dir())
        .args(["deb", "-p", "hookprof", "--no-build", "--target"])
        .arg(target.triple())
        // gzip rather than xz: the arm64 package is tested with the arm64 guest's dpkg,
        // busybox's, which reads no xz (and every dpkg reads gzip)
        .args(["--compress-type", "gz"])
        .arg("--output")
        .arg(out)
        .current_dir(workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("run cargo deb")?;
    ensure!(
        output.status.success(),
        "cargo deb failed ({})",
        output.status
    );
    // cargo-deb prints the package's path as its last line.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let deb = PathBuf::from(stdout.lines().last().unwrap_or_default().trim());
    ensure!(
        deb.extension().is_some_and(|e| e == "deb") && deb.is_file(),
        "cargo deb printed no package path: {stdout}"
    );
    Ok(deb)
}

/// `sha256sum`'s lines for the files in `dir`, by their names there.
fn sha256sums(dir: &Path, files: &[&Path]) -> Result<String> {
    let names = files
        .iter()
        .map(|f| {
            f.file_name()
                .context("an artifact path without a file name")
        })
        .collect::<Result<Vec<_>>>()?;
    let output = Command::new("sha256sum")
        .args(names)
        .current_dir(dir)
        .output()
        .context("run sha256sum")?;
    ensure!(
        output.status.success(),
        "sha256sum failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8(output.stdout)?)
}
