//! `cargo xtask dist`: what a machine without Rust or LLVM installs. A statically linked
//! `hookprof` (the eBPF objects are inside it: `hookprof::ebpf_object`), and a Debian package
//! made by cargo-deb (metadata in profiler/Cargo.toml) that carries it with a man page per
//! command and completions for bash, zsh and fish.
use std::{
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{bail, ensure, Context, Result};

use crate::{setup, target_dir, workspace_root};

/// The static binary is built for the host's own triple, named explicitly: with `--target`,
/// cargo gives the target's rustflags to the binary alone, not to build scripts and proc
/// macros (which cannot link with a static C runtime).
pub const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Builds the artifacts into target/dist; returns the package's path.
pub fn dist() -> Result<PathBuf> {
    setup::ensure_cargo_deb()?;
    let release = target_dir().join(TARGET).join("release");
    build_static()?;
    ensure_statically_linked(&release.join("hookprof"))?;
    // Where the package metadata's "target/release/dist-assets/..." points for this target.
    write_assets(&release.join("dist-assets"))?;

    let out = target_dir().join("dist");
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let deb = package(&out)?;
    let binary = out.join(format!(
        "hookprof-{}-x86_64-linux-static",
        env!("CARGO_PKG_VERSION")
    ));
    std::fs::copy(release.join("hookprof"), &binary)
        .with_context(|| format!("copy the binary to {}", binary.display()))?;

    let sums = sha256sums(&out, &[&binary, &deb])?;
    std::fs::write(out.join("SHA256SUMS"), &sums).context("write SHA256SUMS")?;
    println!(
        "xtask dist: in {} (sha256sum -c SHA256SUMS there):",
        out.display()
    );
    print!("{sums}");
    Ok(deb)
}

/// `cargo build --release --target TARGET` with glibc linked in statically (`+crt-static`).
fn build_static() -> Result<()> {
    let args = [
        "build",
        "--release",
        "--bin",
        "hookprof",
        "--target",
        TARGET,
    ];
    println!("xtask: cargo {} (statically linked)", args.join(" "));
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .env(
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS",
            "-C target-feature=+crt-static",
        )
        .current_dir(workspace_root())
        .status()
        .context("run cargo build")?;
    ensure!(status.success(), "the static build failed ({status})");
    Ok(())
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
fn write_assets(dir: &Path) -> Result<()> {
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

/// `cargo deb` around the binary built above; returns the package's path.
fn package(out: &Path) -> Result<PathBuf> {
    let output = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["deb", "-p", "hookprof", "--no-build", "--target", TARGET])
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
