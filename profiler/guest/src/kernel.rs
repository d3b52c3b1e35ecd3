//! The guest kernel: a Debian kernel package downloaded and unpacked into the cache (never
//! installed on the host), or an image file given by path. Booted as an uncompressed ELF vmlinux
//! through its PVH entry when it can be had: that skips the real-mode setup and the in-guest
//! decompression, which halves the boot under TCG.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::Log;

/// The meta package whose dependency names the current versioned kernel package.
const DEFAULT_PACKAGE: &str = "linux-image-amd64";

pub struct Kernel {
    /// For messages: the package and version, or the path.
    pub name: String,
    /// What qemu's `-kernel` gets: a vmlinux ELF (PVH) or a bzImage.
    pub image: PathBuf,
    /// `lib/modules/<release>/kernel` of the package, for the 9p modules.
    pub modules: Option<PathBuf>,
}

/// What `running` names: this host's own kernel.
pub const RUNNING: &str = "running";

pub fn resolve(spec: Option<&str>, cache: &Path, log: &Log) -> Result<Kernel> {
    let spec = spec.unwrap_or(DEFAULT_PACKAGE);
    if spec == RUNNING {
        from_path(&running_image()?, cache, log)
    } else if spec.contains('/') || Path::new(spec).exists() {
        from_path(Path::new(spec), cache, log)
    } else {
        from_package(spec, cache, log)
    }
}

/// Fails at once, before anything is built or booted, when `spec` names a file that is no x86-64
/// kernel image: neither an ELF vmlinux nor a bzImage. Package names are checked by apt.
pub fn check_format(spec: &str) -> Result<()> {
    if spec == RUNNING || !(spec.contains('/') || Path::new(spec).exists()) {
        return Ok(());
    }
    use std::{io::Read, os::unix::fs::OpenOptionsExt};
    // Opened without waiting (a FIFO would block until a writer came), then held to be a file:
    // a FIFO, device or directory is no kernel image, and /dev/zero would pass for a short one.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(spec)
        .with_context(|| format!("{spec}: cannot read the kernel image"))?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        bail!("{spec} is not a regular file: name a vmlinux, a bzImage or a Debian kernel package");
    }
    let mut head = Vec::with_capacity(HEAD);
    file.take(HEAD as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("{spec}: cannot read the kernel image"))?;
    if !is_kernel_image(&head) {
        bail!(
            "{spec} is not a kernel image (neither an x86-64 ELF vmlinux nor a bzImage): name a \
             vmlinux, a bzImage or a Debian kernel package"
        );
    }
    Ok(())
}

/// Bytes of an image's start [`is_kernel_image`] reads: past the bzImage header's magic.
const HEAD: usize = 0x210;

/// An x86-64 executable ELF (a vmlinux: e_type EXEC, e_machine x86-64), or a bzImage (the boot
/// protocol's "HdrS" magic at 0x202 and the 0xAA55 boot flag at 0x1FE).
fn is_kernel_image(head: &[u8]) -> bool {
    let elf = head.starts_with(b"\x7fELF") && head.get(16..20) == Some(&[2, 0, 62, 0][..]);
    let bzimage = head.get(0x1FE..0x200) == Some(&[0x55, 0xAA][..])
        && head.get(0x202..0x206) == Some(&b"HdrS"[..]);
    elf || bzimage
}

/// `/boot/vmlinuz-<release of the running kernel>`.
fn running_image() -> Result<PathBuf> {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .context("read /proc/sys/kernel/osrelease")?;
    let image = Path::new("/boot").join(format!("vmlinuz-{}", release.trim()));
    if !image.is_file() {
        bail!(
            "kernel `running`: {} does not exist on this host; pass that kernel's package or image path instead",
            image.display()
        );
    }
    Ok(image)
}

fn from_path(path: &Path, cache: &Path, log: &Log) -> Result<Kernel> {
    check_format(&path.to_string_lossy())?;
    let data =
        std::fs::read(path).with_context(|| format!("read kernel image {}", path.display()))?;
    let name = path.display().to_string();
    let modules = modules_for(path);
    if modules.is_none() {
        log.say(format_args!(
            "no modules found for {name}: the 9p share works only if the kernel has it built in"
        ));
    }
    if data.starts_with(b"\x7fELF") {
        return Ok(Kernel {
            name,
            image: path.to_path_buf(),
            modules,
        });
    }
    // Keyed on the content, so a rebuilt image at the same path is extracted again.
    let dir = cache
        .join("kernels")
        .join(format!("file-{}", crate::short_hash(&data)));
    let image = vmlinux(&data, path, &dir, log)?;
    Ok(Kernel {
        name,
        image,
        modules,
    })
}

/// Modules for an image named `vmlinuz-REL` (or `vmlinux-REL`): in an unpacked package tree
/// (`boot/` beside `lib/modules/REL`), else installed under /lib/modules/REL.
fn modules_for(image: &Path) -> Option<PathBuf> {
    let name = image.file_name()?.to_str()?;
    let release = name
        .strip_prefix("vmlinuz-")
        .or_else(|| name.strip_prefix("vmlinux-"))?;
    let tree = std::path::absolute(image).ok()?;
    let beside = tree.parent()?.parent()?.join("lib/modules").join(release);
    let installed = Path::new("/lib/modules").join(release);
    [beside, installed]
        .into_iter()
        .map(|d| d.join("kernel"))
        .find(|d| d.is_dir())
}

fn from_package(package: &str, cache: &Path, log: &Log) -> Result<Kernel> {
    let package = versioned_package(package)?;
    let version = candidate_version(&package)?;
    let dir = cache
        .join("kernels")
        .join(format!("{package}_{}", version.replace(':', "%3a")));
    let root = dir.join("root");
    if !root.exists() {
        let deb = download(&package, &version, &cache.join("debs"), log)?;
        log.say(format_args!("unpacking {}", deb.display()));
        std::fs::create_dir_all(&dir)?;
        // Unpacked beside and renamed when complete: an interrupted unpack is redone, and
        // concurrent runs (other worktrees share the cache) never see half a tree.
        let tmp = tempfile::Builder::new().prefix("root.").tempdir_in(&dir)?;
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(tmp.path()))?;
        if let Err(e) = std::fs::rename(tmp.path(), &root) {
            if !root.exists() {
                return Err(e).context(format!("rename to {}", root.display()));
            }
        }
    }
    let release = single_entry(&root.join("lib/modules"))?
        .to_string_lossy()
        .into_owned();
    let vmlinuz = root.join(format!("boot/vmlinuz-{release}"));
    let image = if dir.join("vmlinux").exists() {
        dir.join("vmlinux")
    } else {
        let data = std::fs::read(&vmlinuz)
            .with_context(|| format!("read {} (from {package})", vmlinuz.display()))?;
        vmlinux(&data, &vmlinuz, &dir, log)?
    };
    Ok(Kernel {
        name: format!("{package} {version}"),
        image,
        modules: Some(root.join("lib/modules").join(release).join("kernel")),
    })
}

/// `linux-image-amd64` -> `linux-image-6.1.0-NN-amd64`; a versioned name stays as it is.
fn versioned_package(package: &str) -> Result<String> {
    let out = apt_cache(&["depends", package], package)?;
    Ok(versioned_dependency(&out).unwrap_or_else(|| package.to_string()))
}

/// The first `linux-image-<digit>...` dependency in `apt-cache depends` output.
fn versioned_dependency(depends: &str) -> Option<String> {
    depends.lines().find_map(|l| {
        let l = l.trim().trim_start_matches('|');
        let name = l.strip_prefix("Depends:")?.trim();
        let rest = name.strip_prefix("linux-image-")?;
        rest.starts_with(|c: char| c.is_ascii_digit())
            .then(|| name.to_string())
    })
}

fn candidate_version(package: &str) -> Result<String> {
    let out = apt_cache(&["policy", package], package)?;
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Candidate:"))
        .map(|v| v.trim().to_string())
        .filter(|v| v != "(none)")
        .with_context(|| format!("kernel package {package} has no installable version"))
}

fn apt_cache(args: &[&str], package: &str) -> Result<String> {
    let out = Command::new("apt-cache").args(args).output().context(
        "apt-cache not found: --kernel PACKAGE needs a Debian-like host (or pass a PATH)",
    )?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() || stdout.trim().is_empty() {
        bail!("kernel package {package} not found (apt-cache knows no such package; try `apt-get update`)");
    }
    Ok(stdout)
}

/// `apt-get download`s the package once into `debs/`.
fn download(package: &str, version: &str, debs: &Path, log: &Log) -> Result<PathBuf> {
    let deb = debs.join(format!("{package}_{}.deb", version.replace(':', "%3a")));
    if deb.exists() {
        return Ok(deb);
    }
    std::fs::create_dir_all(debs)?;
    let tmp = tempfile::tempdir_in(debs)?;
    log.say(format_args!("apt-get download {package}={version}"));
    run(Command::new("apt-get")
        .arg("download")
        .arg("-q")
        // the cache may be where apt's unprivileged `_apt` user cannot write
        .args(["-o", "APT::Sandbox::User=root"])
        .arg(format!("{package}={version}"))
        .current_dir(tmp.path()))?;
    let got = single_entry(tmp.path())?;
    std::fs::rename(tmp.path().join(got), &deb)?;
    Ok(deb)
}

/// Extracts the XZ-compressed ELF vmlinux from a bzImage into `dir/vmlinux`; falls back to the
/// bzImage itself (slower boot) when it holds no XZ payload.
fn vmlinux(bzimage: &[u8], path: &Path, dir: &Path, log: &Log) -> Result<PathBuf> {
    const XZ_MAGIC: &[u8] = b"\xfd7zXZ\x00";
    let out = dir.join("vmlinux");
    if out.exists() {
        return Ok(out);
    }
    let elf = bzimage
        .windows(XZ_MAGIC.len())
        .enumerate()
        .filter(|(_, w)| *w == XZ_MAGIC)
        .find_map(|(i, _)| unxz(&bzimage[i..]).filter(|elf| elf.starts_with(b"\x7fELF")));
    let Some(elf) = elf else {
        log.say(format_args!(
            "no XZ-compressed vmlinux in {}: booting it as a bzImage",
            path.display()
        ));
        return Ok(path.to_path_buf());
    };
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&elf)?;
    tmp.persist(&out)?;
    Ok(out)
}

/// Decompresses the XZ stream at the start of `data`, ignoring whatever follows it (a bzImage
/// has more after its payload, which the `Read` adapters of xz2 take for corruption).
pub fn unxz(data: &[u8]) -> Option<Vec<u8>> {
    use xz2::stream::{Action, Status, Stream};
    let mut stream = Stream::new_stream_decoder(u64::MAX, 0).ok()?;
    let mut out = Vec::with_capacity(data.len() * 4);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity());
        }
        let (consumed, produced) = (stream.total_in(), stream.total_out());
        let status = stream
            .process_vec(&data[consumed as usize..], &mut out, Action::Run)
            .ok()?;
        if status == Status::StreamEnd {
            return Some(out);
        }
        // truncated input: xz2 reports liblzma's "no progress" as MemNeeded, not as an error
        if (stream.total_in(), stream.total_out()) == (consumed, produced) {
            return None;
        }
    }
}

/// The name of the only entry of a directory.
fn single_entry(dir: &Path) -> Result<std::ffi::OsString> {
    let mut names = std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<std::io::Result<Vec<_>>>()?;
    if names.len() != 1 {
        bail!(
            "expected exactly one entry in {}, found {}",
            dir.display(),
            names.len()
        );
    }
    Ok(names.remove(0))
}

fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("run {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_x86_64_vmlinux_or_a_bzimage_is_a_kernel_image() {
        let mut vmlinux = b"\x7fELF\x02\x01\x01".to_vec();
        vmlinux.resize(16, 0);
        vmlinux.extend_from_slice(&[2, 0, 62, 0]); // ET_EXEC, EM_X86_64
        let mut pie = vmlinux.clone();
        pie[16] = 3; // ET_DYN: a program, not a kernel
        let mut bzimage = vec![0u8; HEAD];
        bzimage[0x1FE..0x200].copy_from_slice(&[0x55, 0xAA]);
        bzimage[0x202..0x206].copy_from_slice(b"HdrS");
        assert!(is_kernel_image(&vmlinux) && is_kernel_image(&bzimage));
        assert!(!is_kernel_image(&pie));
        assert!(!is_kernel_image(b"myhost\n"));
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("hostname");
        std::fs::write(&text, "myhost\n").unwrap();
        let err = check_format(text.to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a kernel image"), "{err}");
        // Package names and `running` are not files: apt and /boot answer for them.
        assert!(check_format("linux-image-amd64").is_ok() && check_format(RUNNING).is_ok());
    }

    #[test]
    fn meta_package_resolves_to_its_versioned_image() {
        let out = "linux-image-amd64\n  Depends: linux-image-6.1.0-57-amd64\n";
        assert_eq!(
            versioned_dependency(out).as_deref(),
            Some("linux-image-6.1.0-57-amd64")
        );
        let versioned = "linux-image-6.1.0-57-amd64\n  Depends: kmod\n  Depends: linux-base\n";
        assert_eq!(versioned_dependency(versioned), None);
    }

    #[test]
    fn unxz_stops_at_the_end_of_the_stream() {
        use std::io::Write;
        let payload = b"\x7fELF and then some".repeat(1000);
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 6);
        xz.write_all(&payload).unwrap();
        let mut data = xz.finish().unwrap();
        data.extend_from_slice(b"trailing bzImage bytes");
        assert_eq!(unxz(&data).as_deref(), Some(&payload[..]));
        assert_eq!(unxz(&data[..data.len() / 2]), None);
    }
}
