//! The guest kernel: a Debian kernel package downloaded and unpacked into the cache (never
//! installed on the host, see `package`), or an image file given by path. An amd64 kernel is
//! booted as an uncompressed ELF vmlinux through its PVH entry when it can be had: that skips
//! the real-mode setup and the in-guest decompression, which halves the boot under TCG. An
//! arm64 kernel is booted as its uncompressed `Image` (Debian packages it so; a gzip'd one is
//! decompressed into the cache).
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::debian::Arch;
use crate::Log;

/// The suite a package named without one is looked up in: the one the guest tests run on.
pub const DEFAULT_SUITE: &str = "bookworm";
/// The suite of the arm64 guest's default kernel: bookworm's arm64 6.1 has no ftrace direct
/// calls (arm64 has them from 6.4), so it refuses fentry/fexit and BPF LSM programs on kernel
/// functions; trixie's 6.12 has them.
pub const DEFAULT_ARM64_SUITE: &str = "trixie";

/// The kernel a guest of `arch` boots when none is named.
pub fn default_spec(arch: Arch) -> String {
    let suite = match arch {
        Arch::Amd64 => DEFAULT_SUITE,
        Arch::Arm64 => DEFAULT_ARM64_SUITE,
    };
    format!("{}@{suite}", arch.kernel_meta_package())
}

pub struct Kernel {
    /// For messages: the package, version and suite, or the path.
    pub name: String,
    pub arch: Arch,
    /// What qemu's `-kernel` gets: a vmlinux ELF (PVH) or a bzImage for amd64, an Image for
    /// arm64.
    pub image: PathBuf,
    /// `lib/modules/<release>/kernel` of the package, for the 9p modules.
    pub modules: Option<PathBuf>,
}

/// What `running` names: this host's own kernel.
pub const RUNNING: &str = "running";

/// What `--kernel` names.
#[derive(Debug, PartialEq, Eq)]
pub enum KernelSpec {
    /// A vmlinux or bzImage file.
    Path(PathBuf),
    /// This host's kernel, from /boot.
    Running,
    /// A Debian package from a suite.
    Package { package: String, suite: String },
}

impl KernelSpec {
    /// `PATH` (has a `/` or exists), `running`, `PACKAGE@SUITE`, `PACKAGE` (a name beginning
    /// `linux-`: from `DEFAULT_SUITE`), or `SUITE` (that suite's `linux-image-ARCH`).
    pub fn parse(spec: &str, arch: Arch) -> Result<KernelSpec> {
        if spec == RUNNING {
            return Ok(KernelSpec::Running);
        }
        if is_path(spec) {
            return Ok(KernelSpec::Path(PathBuf::from(spec)));
        }
        let (package, suite) = match spec.split_once('@') {
            Some((package, suite)) => (package.to_string(), suite.to_string()),
            None if spec.starts_with("linux-") => (spec.to_string(), DEFAULT_SUITE.to_string()),
            None => (arch.kernel_meta_package(), spec.to_string()),
        };
        crate::debian::check_suite(&suite).with_context(|| format!("kernel {spec:?}"))?;
        if package.is_empty() {
            bail!("kernel {spec:?}: no package before the @");
        }
        Ok(KernelSpec::Package { package, suite })
    }
}

/// A spec that names a file: it has a `/`, or a file of that name is here.
fn is_path(spec: &str) -> bool {
    spec.contains('/') || Path::new(spec).exists()
}

/// The kernel `spec` names for a guest of `arch` (default: `default_spec`).
pub fn resolve(spec: Option<&str>, arch: Arch, cache: &Path, log: &Log) -> Result<Kernel> {
    let default = default_spec(arch);
    match KernelSpec::parse(spec.unwrap_or(&default), arch)? {
        KernelSpec::Running => {
            if Arch::host() != Some(arch) {
                bail!("kernel `running`: this host's kernel is not an {arch} kernel; name one");
            }
            from_path(&running_image()?, arch, cache, log)
        }
        KernelSpec::Path(path) => from_path(&path, arch, cache, log),
        KernelSpec::Package { package, suite } => from_package(&package, &suite, arch, cache, log),
    }
}

/// Fails at once, before anything is built or booted, when `spec` names a file that is no
/// kernel image for `arch`: for amd64 neither an ELF vmlinux nor a bzImage, for arm64 neither
/// an Image nor a gzip'd one. Package names are checked by apt.
pub fn check_format(spec: &str, arch: Arch) -> Result<()> {
    if spec == RUNNING || !is_path(spec) {
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
    let kinds = match arch {
        Arch::Amd64 => "a vmlinux, a bzImage",
        Arch::Arm64 => "an arm64 Image",
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        bail!("{spec} is not a regular file: name {kinds} or a Debian kernel package");
    }
    let mut head = Vec::with_capacity(HEAD);
    file.take(HEAD as u64)
        .read_to_end(&mut head)
        .with_context(|| format!("{spec}: cannot read the kernel image"))?;
    match arch {
        Arch::Amd64 if !is_kernel_image(&head) => bail!(
            "{spec} is not a kernel image (neither an x86-64 ELF vmlinux nor a bzImage): name \
             {kinds} or a Debian kernel package"
        ),
        Arch::Arm64 if !is_arm64_image(&head) && !head.starts_with(GZIP_MAGIC) => bail!(
            "{spec} is not an arm64 kernel image (neither an Image nor a gzip'd one): name \
             {kinds} or a Debian kernel package"
        ),
        _ => Ok(()),
    }
}

/// The arm64 boot protocol's header (Documentation/arch/arm64/booting.rst): "ARM\x64" at 0x38.
fn is_arm64_image(head: &[u8]) -> bool {
    head.get(0x38..0x3c) == Some(&b"ARM\x64"[..])
}

const GZIP_MAGIC: &[u8] = b"\x1f\x8b";

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

fn from_path(path: &Path, arch: Arch, cache: &Path, log: &Log) -> Result<Kernel> {
    check_format(&path.to_string_lossy(), arch)?;
    let data =
        std::fs::read(path).with_context(|| format!("read kernel image {}", path.display()))?;
    let name = path.display().to_string();
    let modules = modules_for(path);
    if modules.is_none() {
        log.say(format_args!(
            "no modules found for {name}: the 9p share works only if the kernel has it built in"
        ));
    }
    if data.starts_with(b"\x7fELF") || is_arm64_image(&data) {
        return Ok(Kernel {
            name,
            arch,
            image: path.to_path_buf(),
            modules,
        });
    }
    // Keyed on the content, so a rebuilt image at the same path is extracted again.
    let dir = cache
        .join("kernels")
        .join(format!("file-{}", crate::short_hash(&data)));
    let image = bootable(arch, &data, path, &dir, log)?;
    Ok(Kernel {
        name,
        arch,
        image,
        modules,
    })
}

/// What qemu boots of the packaged image `data` (at `path`), made in `dir` if it must be.
fn bootable(arch: Arch, data: &[u8], path: &Path, dir: &Path, log: &Log) -> Result<PathBuf> {
    match arch {
        Arch::Amd64 => vmlinux(data, path, dir, log),
        Arch::Arm64 => arm64_image(data, path, dir),
    }
}

/// The arm64 Image: the file itself, or a gzip'd one decompressed once into `dir/Image`.
fn arm64_image(data: &[u8], path: &Path, dir: &Path) -> Result<PathBuf> {
    if is_arm64_image(data) {
        return Ok(path.to_path_buf());
    }
    let out = dir.join("Image");
    if out.exists() {
        return Ok(out);
    }
    anyhow::ensure!(
        data.starts_with(GZIP_MAGIC),
        "{} is neither an arm64 Image nor a gzip'd one",
        path.display()
    );
    let mut image = Vec::with_capacity(data.len() * 3);
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(data), &mut image)
        .with_context(|| format!("decompress {}", path.display()))?;
    anyhow::ensure!(
        is_arm64_image(&image),
        "{} holds no arm64 Image",
        path.display()
    );
    std::fs::create_dir_all(dir)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&image)?;
    tmp.persist(&out)?;
    Ok(out)
}

/// Modules for an image named `vmlinuz-REL` (or `vmlinux-REL`): in an unpacked package tree
/// (`boot/` beside `lib/modules/REL`), else installed under /lib/modules/REL; for an image in
/// a module directory (`modules/REL/vmlinuz`, the split layout), that directory's.
fn modules_for(image: &Path) -> Option<PathBuf> {
    let name = image.file_name()?.to_str()?;
    if name == "vmlinuz" || name == "vmlinux" {
        let beside = std::path::absolute(image).ok()?.parent()?.join("kernel");
        return beside.is_dir().then_some(beside);
    }
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

fn from_package(package: &str, suite: &str, arch: Arch, cache: &Path, log: &Log) -> Result<Kernel> {
    let unpacked = crate::package::fetch(package, suite, arch, cache, log)?;
    let made = ["vmlinux", "Image"].map(|f| unpacked.dir.join(f));
    let image = match made.into_iter().find(|p| p.exists()) {
        Some(image) => image,
        None => {
            let data = std::fs::read(&unpacked.vmlinuz)
                .with_context(|| format!("read {}", unpacked.vmlinuz.display()))?;
            bootable(arch, &data, &unpacked.vmlinuz, &unpacked.dir, log)?
        }
    };
    Ok(Kernel {
        name: unpacked.name,
        arch,
        image,
        modules: Some(unpacked.modules),
    })
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
        let err = check_format(text.to_str().unwrap(), Arch::Amd64)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a kernel image"), "{err}");
        // Package names and `running` are not files: apt and /boot answer for them.
        assert!(check_format("linux-image-amd64", Arch::Amd64).is_ok());
        assert!(check_format(RUNNING, Arch::Amd64).is_ok());
    }

    #[test]
    fn an_arm64_image_plain_or_gzipped_is_booted_as_an_image() {
        use std::io::Write;
        let mut image = vec![0u8; 0x1000];
        image[0..2].copy_from_slice(b"MZ"); // the EFI stub's PE header comes first
        image[0x38..0x3c].copy_from_slice(b"ARM\x64");
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("vmlinuz-6.12.117+deb13-arm64");
        std::fs::write(&plain, &image).unwrap();
        let cache = dir.path().join("cache");
        assert_eq!(arm64_image(&image, &plain, &cache).unwrap(), plain);
        assert!(check_format(plain.to_str().unwrap(), Arch::Arm64).is_ok());
        let err = check_format(plain.to_str().unwrap(), Arch::Amd64).unwrap_err();
        assert!(err.to_string().contains("not a kernel image"), "{err}");

        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&image).unwrap();
        let gzipped = gz.finish().unwrap();
        let path = dir.path().join("vmlinuz.gz");
        std::fs::write(&path, &gzipped).unwrap();
        assert!(check_format(path.to_str().unwrap(), Arch::Arm64).is_ok());
        let out = arm64_image(&gzipped, &path, &cache).unwrap();
        assert_eq!(out, cache.join("Image"));
        assert_eq!(std::fs::read(out).unwrap(), image);

        let vmlinux = dir.path().join("bzImage");
        let mut bzimage = vec![0u8; HEAD];
        bzimage[0x1FE..0x200].copy_from_slice(&[0x55, 0xAA]);
        bzimage[0x202..0x206].copy_from_slice(b"HdrS");
        std::fs::write(&vmlinux, bzimage).unwrap();
        let err = check_format(vmlinux.to_str().unwrap(), Arch::Arm64).unwrap_err();
        assert!(
            err.to_string().contains("not an arm64 kernel image"),
            "{err}"
        );
    }

    #[test]
    fn kernel_specs_name_a_file_a_package_or_a_suite() {
        let parse = |s| KernelSpec::parse(s, Arch::Amd64).unwrap();
        let package = |p: &str, s: &str| KernelSpec::Package {
            package: p.into(),
            suite: s.into(),
        };
        assert_eq!(parse("sid"), package("linux-image-amd64", "sid"));
        assert_eq!(
            parse("linux-image-amd64@trixie"),
            package("linux-image-amd64", "trixie")
        );
        assert_eq!(
            parse("linux-image-6.1.0-50-amd64"),
            package("linux-image-6.1.0-50-amd64", DEFAULT_SUITE)
        );
        assert_eq!(
            KernelSpec::parse("bullseye", Arch::Arm64).unwrap(),
            package("linux-image-arm64", "bullseye")
        );
        assert_eq!(parse("./vmlinux"), KernelSpec::Path("./vmlinux".into()));
        assert_eq!(parse(RUNNING), KernelSpec::Running);
        for bad in ["@sid", "linux-image-amd64@Sid", "no such suite"] {
            assert!(KernelSpec::parse(bad, Arch::Amd64).is_err(), "{bad}");
        }
    }

    #[test]
    fn modules_are_found_beside_an_image_in_either_layout() {
        let root = tempfile::tempdir().unwrap();
        let make = |p: &str| {
            let p = root.path().join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "x").unwrap();
            p
        };
        let classic = make("a/boot/vmlinuz-5.10.0-32-amd64");
        make("a/lib/modules/5.10.0-32-amd64/kernel/fs/9p/9p.ko");
        assert!(modules_for(&classic)
            .unwrap()
            .ends_with("a/lib/modules/5.10.0-32-amd64/kernel"));
        let split = make("b/usr/lib/modules/7.2.13+deb14-amd64/vmlinuz");
        make("b/usr/lib/modules/7.2.13+deb14-amd64/kernel/fs/9p/9p.ko.xz");
        assert!(modules_for(&split)
            .unwrap()
            .ends_with("b/usr/lib/modules/7.2.13+deb14-amd64/kernel"));
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
