//! The guest's root filesystem: a cached base archive (busybox, /init, glibc, the 9p modules,
//! /etc) and a per-run payload archive (the command's binaries and libraries, its run script)
//! concatenated after it. The kernel unpacks both, the second over the first.
use std::io::{BufWriter, Seek, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use flate2::{write::GzEncoder, Compression};

use crate::archive::Archive;
use crate::debian::{AptLists, Arch};
use crate::kernel::{Kernel, DEFAULT_SUITE};
use crate::Log;

const INIT: &str = include_str!("init.sh");
/// Where the guest has busybox; for the host's own architecture, the host's (busybox-static).
const BUSYBOX: &str = "/bin/busybox";
/// glibc's runtime, in the base so that binaries reached through the share also run: the
/// host's own, or for arm64 on another host the arm64 libc6 of multiarch (`cargo xtask setup`
/// installs it with the arm64 Rust standard library); what is missing stays out, and a static
/// payload needs none.
fn glibc(arch: Arch) -> [String; 7] {
    let (loader, triplet) = match arch {
        Arch::Amd64 => ("/lib64/ld-linux-x86-64.so.2", "x86_64-linux-gnu"),
        Arch::Arm64 => ("/lib/ld-linux-aarch64.so.1", "aarch64-linux-gnu"),
    };
    let lib = |name: &str| format!("/lib/{triplet}/{name}");
    [
        loader.to_string(),
        lib("libc.so.6"),
        lib("libm.so.6"),
        lib("libgcc_s.so.1"),
        lib("libpthread.so.0"),
        lib("libdl.so.2"),
        lib("librt.so.1"),
    ]
}
/// Where init runs the payload from.
const RUN_SCRIPT: &str = "/payload/run.sh";

/// The gzip'd base archive for this kernel, built once per distinct content: the file name is a
/// hash of everything in it (init script, busybox, libraries, modules).
pub fn base(kernel: &Kernel, cache: &Path, log: &Log) -> Result<PathBuf> {
    let busybox = busybox(kernel.arch, cache, log)?;
    let archive = base_archive(kernel, &busybox)?;
    let path = cache
        .join("initramfs")
        .join(format!("base-{}.cpio.gz", archive.digest()));
    if path.exists() {
        return Ok(path);
    }
    log.say(format_args!("building {}", path.display()));
    std::fs::create_dir_all(path.parent().unwrap())?;
    // a unique temporary name: runs in other worktrees share the cache
    let tmp = tempfile::NamedTempFile::new_in(path.parent().unwrap())?;
    let mut file = BufWriter::new(tmp.as_file());
    let gz = archive.write(GzEncoder::new(&mut file, Compression::default()))?;
    gz.finish()?;
    // The payload archive follows uncompressed: the kernel takes an uncompressed archive
    // only at a 4-byte aligned offset, and skips the zero padding before it.
    let len = file.stream_position()?;
    file.write_all(&vec![0; (4 - len % 4) as usize % 4])?;
    file.flush()?;
    drop(file);
    tmp.as_file().sync_all()?;
    tmp.persist(&path)?;
    Ok(path)
}

/// The static busybox for a guest of `arch`: the host's for its own architecture, else
/// Debian's busybox-static of that architecture, from the project's apt lists, unpacked once
/// into the cache (never installed).
fn busybox(arch: Arch, cache: &Path, log: &Log) -> Result<PathBuf> {
    if Arch::host() == Some(arch) {
        return Ok(PathBuf::from(BUSYBOX));
    }
    const PACKAGE: &str = "busybox-static";
    let lists = AptLists::open(cache, DEFAULT_SUITE, arch, log)?;
    let stanza = lists
        .show(PACKAGE)?
        .with_context(|| format!("no {PACKAGE} in Debian {DEFAULT_SUITE} ({arch})"))?;
    let version = stanza.version().to_string();
    let dir = cache
        .join("busybox")
        .join(format!("{}_{arch}", version.replace(':', "%3a")));
    let binary = dir.join("root").join(BUSYBOX.trim_start_matches('/'));
    if !binary.exists() {
        crate::package::unpack(&lists, &[(PACKAGE.to_string(), version)], &dir, log)?;
    }
    Ok(binary)
}

fn base_archive(kernel: &Kernel, busybox: &Path) -> Result<Archive> {
    let mut a = Archive::default();
    let libraries_dir = match kernel.arch {
        Arch::Amd64 => "/usr/lib/x86_64-linux-gnu",
        Arch::Arm64 => "/usr/lib/aarch64-linux-gnu",
    };
    for dir in [
        "/sbin",
        "/usr/bin",
        "/usr/sbin",
        "/usr/local/bin",
        libraries_dir,
        "/proc",
        "/sys",
        "/dev",
        "/run",
        "/mnt/host",
        "/payload",
        "/var/tmp",
    ] {
        a.dir(dir, 0o755);
    }
    a.dir("/root", 0o700);
    a.dir("/tmp", 0o1777);
    // init's stdio before devtmpfs is mounted
    a.char_dev("/dev/console", 0o600, 5, 1);
    a.file("/init", 0o755, INIT);

    if !libraries(busybox)?.is_empty() {
        bail!(
            "{} is dynamically linked: install busybox-static",
            busybox.display()
        );
    }
    a.host_file(BUSYBOX, busybox)
        .context("busybox not found: install busybox-static")?;
    for lib in glibc(kernel.arch).iter().filter(|l| Path::new(l).exists()) {
        a.host_file(lib, Path::new(lib))?;
    }

    let mut order = String::new();
    if let Some(dir) = &kernel.modules {
        for m in crate::modules::for_9p(dir)? {
            let file = format!("{}.ko", m.name);
            a.file(&format!("/lib/modules/{file}"), 0o644, m.data);
            order.push_str(&file);
            order.push('\n');
        }
    }
    a.file("/lib/modules/order", 0o644, order);

    a.file(
        "/etc/passwd",
        0o644,
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n",
    );
    a.file("/etc/group", 0o644, "root:x:0:\nnogroup:x:65534:\n");
    a.file("/etc/hostname", 0o644, "hookprof-vm\n");
    a.file(
        "/etc/hosts",
        0o644,
        "127.0.0.1\tlocalhost hookprof-vm\n::1\tlocalhost\n",
    );
    Ok(a)
}

/// What one run adds to the base: host binaries at their host paths (so command lines stay
/// valid), their shared libraries, and the script init runs. Programs must be the guest's
/// architecture's (`Payload::default()`: amd64).
#[derive(Default)]
pub struct Payload {
    archive: Archive,
    arch: Arch,
}

impl Payload {
    /// A payload for a guest of `arch`.
    pub fn for_arch(arch: Arch) -> Payload {
        Payload {
            archive: Archive::default(),
            arch,
        }
    }

    /// Copies a host file and the libraries `ldd` lists for it; returns its guest path. A
    /// program for another architecture than the guest's is refused.
    pub fn add_file(&mut self, host: &Path) -> Result<String> {
        let abs = std::path::absolute(host)?;
        if !abs.is_file() {
            bail!("{} is not a file on this host", host.display());
        }
        if let Some(other) = elf_arch(&abs).filter(|a| *a != self.arch) {
            bail!(
                "{} is a program for {other}: the {} guest runs {} programs (build it for that \
                 architecture)",
                host.display(),
                self.arch,
                self.arch
            );
        }
        let guest = abs.to_string_lossy().into_owned();
        self.archive.host_file(&guest, &abs)?;
        for lib in libraries(&abs)? {
            if !self.archive.contains(&lib) {
                self.archive.host_file(&lib, Path::new(&lib))?;
            }
        }
        Ok(guest)
    }

    /// Rewrites COMMAND for the guest: its program and any argument naming an executable host
    /// file are copied in, at their absolute host path. A bare program name that busybox
    /// provides stays the guest's busybox applet; otherwise it is looked up on the host's PATH.
    pub fn add_command(&mut self, command: &[String]) -> Result<Vec<String>> {
        let applets = busybox_applets()?;
        let mut out = Vec::with_capacity(command.len());
        for (i, word) in command.iter().enumerate() {
            let host = if word.contains('/') {
                let p = Path::new(word);
                (p.is_file() && (i == 0 || is_executable(p))).then(|| p.to_path_buf())
            } else if i == 0 && !applets.iter().any(|a| a == word) {
                Some(which(word).with_context(|| {
                    format!("{word}: no such busybox applet nor program on this host's PATH")
                })?)
            } else {
                None
            };
            out.push(match host {
                Some(h) => self.add_file(&h)?,
                None => word.clone(),
            });
        }
        Ok(out)
    }

    /// Writes base + payload (with the run script) as the initrd qemu loads.
    pub fn write_initrd(
        mut self,
        base: &Path,
        command: &[String],
        env: &[(String, String)],
        out: &Path,
    ) -> Result<()> {
        let mut script = String::from("#!/bin/sh\n");
        for (k, v) in env {
            script += &format!("export {k}={}\n", quote(v));
        }
        script += "exec";
        for w in command {
            script += " ";
            script += &quote(w);
        }
        script += "\n";
        self.archive.file(RUN_SCRIPT, 0o755, script);

        let mut file = BufWriter::new(std::fs::File::create(out)?);
        std::io::copy(&mut std::fs::File::open(base)?, &mut file)?;
        self.archive.write(&mut file)?;
        file.into_inner()?.sync_all()?;
        Ok(())
    }
}

/// The architecture an ELF file is for (its e_machine), if it is an ELF file of one a guest has.
fn elf_arch(path: &Path) -> Option<Arch> {
    use std::io::Read;
    let mut head = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    if !head.starts_with(b"\x7fELF") {
        return None;
    }
    match u16::from_le_bytes([head[18], head[19]]) {
        62 => Some(Arch::Amd64),  // EM_X86_64
        183 => Some(Arch::Arm64), // EM_AARCH64
        _ => None,
    }
}

/// The shared libraries a dynamically linked host binary loads, as `ldd` resolves them.
fn libraries(binary: &Path) -> Result<Vec<String>> {
    let out = Command::new("ldd")
        .arg(binary)
        .output()
        .context("ldd not found (package libc-bin)")?;
    if !out.status.success() {
        return Ok(Vec::new()); // static binary or script
    }
    let mut libs = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let line = line.trim();
        if line.contains("=> not found") {
            bail!("{}: library {line} (ldd)", binary.display());
        }
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(p.to_string());
        }
    }
    Ok(libs)
}

fn busybox_applets() -> Result<Vec<String>> {
    let out = Command::new(BUSYBOX)
        .arg("--list")
        .output()
        .context("busybox not found: install busybox-static")?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect())
}

pub fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file() && is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Single-quotes a word for sh.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_sh() {
        assert_eq!(quote("a b"), "'a b'");
        assert_eq!(quote("it's"), r"'it'\''s'");
    }

    #[test]
    fn a_program_of_another_architecture_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let elf = |machine: u16| {
            let mut head = b"\x7fELF\x02\x01\x01".to_vec();
            head.resize(18, 0);
            head.extend_from_slice(&machine.to_le_bytes());
            let path = dir.path().join(format!("prog-{machine}"));
            std::fs::write(&path, head).unwrap();
            path
        };
        let (x86, arm) = (elf(62), elf(183));
        let mut p = Payload::for_arch(Arch::Arm64);
        assert!(p.add_file(&arm).is_ok());
        let err = p.add_file(&x86).unwrap_err().to_string();
        assert!(
            err.contains("is a program for amd64: the arm64 guest"),
            "{err}"
        );
        assert!(Payload::default().add_file(&x86).is_ok());
        assert!(Payload::default().add_file(&arm).is_err());
    }

    #[test]
    fn bare_applet_names_stay_and_host_paths_are_copied() {
        let mut p = Payload::default();
        let cmd = p
            .add_command(&["sh".into(), "-c".into(), "exit 3".into()])
            .unwrap();
        assert_eq!(cmd, ["sh", "-c", "exit 3"]);
        let busybox = p.add_command(&[BUSYBOX.into(), "true".into()]).unwrap();
        assert_eq!(busybox, [BUSYBOX, "true"]);
        assert!(p.archive.contains(BUSYBOX));
    }
}
