//! A Debian kernel by package name: the meta package (`linux-image-amd64`) followed to the
//! versioned image it depends on, that image's parts where the suite splits it (sid:
//! `linux-binary-REL` with `usr/lib/modules/REL/vmlinuz`, `linux-modules-REL`, `linux-base-REL`),
//! all downloaded and unpacked into one tree in the guest cache, never installed. Both layouts
//! are read: the classic one (`boot/vmlinuz-REL`, `lib/modules/REL`) and the split one.
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::debian::{AptLists, Arch, Stanza};
use crate::Log;

/// The packages that make one kernel.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelPackages {
    /// The versioned image package (`linux-image-7.2.13+deb14-amd64`).
    pub image: String,
    pub version: String,
    /// Every package to unpack, the image's own first, each with its version.
    pub packages: Vec<(String, String)>,
}

/// The packages of the kernel `package` names: itself, or the versioned image a meta package
/// depends on, and that image's split parts. `lookup` gives a package's stanza in the suite.
pub fn resolve(
    package: &str,
    lookup: impl Fn(&str) -> Result<Option<Stanza>>,
) -> Result<KernelPackages> {
    let found = |name: &str| -> Result<Stanza> {
        lookup(name)?.with_context(|| format!("no package {name}"))
    };
    let mut image = found(package)?;
    if let Some(versioned) = first_dependency(&image, is_versioned_image) {
        image = found(&versioned)?;
    }
    let mut packages = vec![(image.package().to_string(), image.version().to_string())];
    for group in image.depends() {
        // A part is one package: never one alternative of several.
        if let [part] = &group[..] {
            if is_split_part(part) {
                let stanza = found(part)?;
                packages.push((part.clone(), stanza.version().to_string()));
            }
        }
    }
    Ok(KernelPackages {
        image: image.package().to_string(),
        version: image.version().to_string(),
        packages,
    })
}

/// The first dependency (of the first alternative of each group) that `wanted` picks.
fn first_dependency(stanza: &Stanza, wanted: impl Fn(&str) -> bool) -> Option<String> {
    stanza
        .depends()
        .into_iter()
        .filter_map(|group| group.into_iter().next())
        .find(|name| wanted(name))
}

/// `linux-image-<release>`: a release begins with a digit (the meta package's suffix does not).
fn is_versioned_image(name: &str) -> bool {
    versioned_after(name, "linux-image-")
}

/// A part of a split kernel: `linux-binary-REL`, `linux-modules-REL`, `linux-base-REL` (never
/// `linux-base` itself, the tools every kernel package depends on).
fn is_split_part(name: &str) -> bool {
    ["linux-binary-", "linux-modules-", "linux-base-"]
        .iter()
        .any(|prefix| versioned_after(name, prefix))
}

fn versioned_after(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
}

/// A kernel package unpacked in the cache.
pub struct UnpackedKernel {
    /// For messages: `linux-image-7.2.13+deb14-amd64 7.2.13-1 (sid, amd64)`.
    pub name: String,
    pub arch: Arch,
    /// `uname -r` of the kernel.
    pub release: String,
    /// The cache directory of this kernel: `root` is in it, and what is made from the image
    /// (an extracted vmlinux) may go beside it.
    pub dir: PathBuf,
    /// The packages' files, as they would be installed.
    pub root: PathBuf,
    /// The image as packaged: `boot/vmlinuz-REL` or `usr/lib/modules/REL/vmlinuz` (on amd64 a
    /// bzImage; on arm64 the packaged Image, whatever its compression).
    pub vmlinuz: PathBuf,
    /// `lib/modules/REL/kernel` (or under `usr/`).
    pub modules: PathBuf,
}

/// Downloads and unpacks the kernel `package` names from `suite` for `arch` into
/// `cache/kernels` (once: a kernel already unpacked is not downloaded again).
pub fn fetch(
    package: &str,
    suite: &str,
    arch: Arch,
    cache: &Path,
    log: &Log,
) -> Result<UnpackedKernel> {
    let lists = AptLists::open(cache, suite, arch, log)?;
    let mut kernel = locate(&lists, package)?;
    let mut dir = kernel_dir(cache, &kernel, arch);
    if !dir.join("root").exists() {
        if let Err(e) = unpack(&lists, &kernel.packages, &dir, log) {
            if e.downcast_ref::<DownloadFailed>().is_none() {
                return Err(e);
            }
            // The suite moved on since the lists were fetched (sid does weekly): fetch them
            // again and take what the suite has now.
            log.say(format_args!("{e:#}: fetching the {suite} lists again"));
            lists.update(log)?;
            kernel = locate(&lists, package)?;
            dir = kernel_dir(cache, &kernel, arch);
            if !dir.join("root").exists() {
                unpack(&lists, &kernel.packages, &dir, log)?;
            }
        }
    }
    let name = format!("{} {} ({suite}, {arch})", kernel.image, kernel.version);
    let root = dir.join("root");
    let (release, vmlinuz, modules) = layout(&root).with_context(|| format!("kernel {name}"))?;
    Ok(UnpackedKernel {
        name,
        arch,
        release,
        dir,
        root,
        vmlinuz,
        modules,
    })
}

fn locate(lists: &AptLists, package: &str) -> Result<KernelPackages> {
    let (suite, arch) = (lists.suite(), lists.arch());
    resolve(package, |name| lists.show(name)).with_context(|| {
        format!(
            "kernel package {package} not found in Debian {suite} ({arch}); name a suite's \
             kernel as PACKAGE@SUITE or SUITE (e.g. linux-image-{arch}@sid, bullseye)"
        )
    })
}

/// Where a kernel is unpacked: one directory per image package, version and architecture.
fn kernel_dir(cache: &Path, kernel: &KernelPackages, arch: Arch) -> PathBuf {
    cache.join("kernels").join(format!(
        "{}_{}_{arch}",
        kernel.image,
        kernel.version.replace(':', "%3a")
    ))
}

/// A package the lists name could not be downloaded (the archive dropped that version?).
#[derive(Debug)]
struct DownloadFailed;

impl std::fmt::Display for DownloadFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("download failed")
    }
}

impl std::error::Error for DownloadFailed {}

/// Downloads the packages (name, version) and unpacks them together into `dir/root`.
pub(crate) fn unpack(
    lists: &AptLists,
    packages: &[(String, String)],
    dir: &Path,
    log: &Log,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    // Downloaded and unpacked beside, renamed when complete: an interrupted unpack is redone,
    // and concurrent runs (other worktrees share the cache) never see half a tree. The .debs
    // go with the temporary directory: the unpacked tree is what the cache keeps.
    let debs = tempfile::Builder::new().prefix("debs.").tempdir_in(dir)?;
    let tmp = tempfile::Builder::new().prefix("root.").tempdir_in(dir)?;
    for (package, version) in packages {
        let deb = lists
            .download(package, version, debs.path(), log)
            .map_err(|e| e.context(DownloadFailed))?;
        log.say(format_args!("unpacking {}", deb.display()));
        run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(tmp.path()))?;
    }
    let root = dir.join("root");
    if let Err(e) = std::fs::rename(tmp.path(), &root) {
        if !root.exists() {
            return Err(e).context(format!("rename to {}", root.display()));
        }
    }
    Ok(())
}

/// The release, image and module tree of an unpacked kernel, in whichever layout it has.
pub fn layout(root: &Path) -> Result<(String, PathBuf, PathBuf)> {
    let module_dirs: Vec<PathBuf> = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|d| root.join(d))
        .filter(|d| d.is_dir())
        .collect();
    let mut releases = Vec::new();
    for dir in &module_dirs {
        for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
            let entry = entry?;
            if entry.path().is_dir() {
                releases.push((
                    entry.file_name().to_string_lossy().into_owned(),
                    entry.path(),
                ));
            }
        }
    }
    releases.sort();
    releases.dedup_by(|a, b| a.0 == b.0);
    let [(release, modules)] = &releases[..] else {
        bail!(
            "expected one kernel release under {}, found {}",
            root.display(),
            releases.len()
        );
    };
    let candidates = [
        root.join(format!("boot/vmlinuz-{release}")),
        modules.join("vmlinuz"),
        root.join(format!("usr/lib/modules/{release}/vmlinuz")),
        root.join(format!("lib/modules/{release}/vmlinuz")),
    ];
    let vmlinuz = candidates
        .iter()
        .find(|p| p.is_file())
        .with_context(|| {
            format!(
                "no kernel image for {release} (neither boot/vmlinuz-{release} nor \
                 modules/{release}/vmlinuz)"
            )
        })?
        .clone();
    // Modules may sit in the other directory than the image (merged /usr came in between).
    let kernel_tree = module_dirs
        .iter()
        .map(|d| d.join(release).join("kernel"))
        .find(|d| d.is_dir())
        .unwrap_or_else(|| modules.join("kernel"));
    Ok((release.clone(), vmlinuz, kernel_tree))
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

    /// Stanzas as `apt-cache show` printed them from the archive's Packages indexes.
    fn archive(name: &str) -> Result<Option<Stanza>> {
        let text = match name {
            "linux-image-amd64@sid" => include_str!("../fixtures/sid-linux-image-amd64.stanza"),
            "linux-image-7.2.13+deb14-amd64@sid" => {
                include_str!("../fixtures/sid-linux-image-7.2.13+deb14-amd64.stanza")
            }
            "linux-image-arm64@sid" => include_str!("../fixtures/sid-linux-image-arm64.stanza"),
            "linux-image-7.2.13+deb14-arm64@sid" => {
                include_str!("../fixtures/sid-linux-image-7.2.13+deb14-arm64.stanza")
            }
            "linux-image-amd64@bullseye" => {
                include_str!("../fixtures/bullseye-linux-image-amd64.stanza")
            }
            "linux-image-5.10.0-32-amd64@bullseye" => {
                include_str!("../fixtures/bullseye-linux-image-5.10.0-32-amd64.stanza")
            }
            // the split parts: only their versions are read
            n if n.starts_with("linux-") && n.ends_with("@sid") => {
                return Ok(Some(
                    Stanza::parse(&format!(
                        "Package: {}\nVersion: 7.2.13-1\n",
                        n.trim_end_matches("@sid")
                    ))
                    .unwrap(),
                ))
            }
            _ => return Ok(None),
        };
        Ok(Stanza::parse(text))
    }

    fn in_suite(suite: &'static str) -> impl Fn(&str) -> Result<Option<Stanza>> {
        move |name| archive(&format!("{name}@{suite}"))
    }

    #[test]
    fn sid_meta_package_resolves_to_the_split_parts() {
        let k = resolve("linux-image-amd64", in_suite("sid")).unwrap();
        assert_eq!(k.image, "linux-image-7.2.13+deb14-amd64");
        assert_eq!(k.version, "7.2.13-1");
        let names: Vec<&str> = k.packages.iter().map(|(p, _)| p.as_str()).collect();
        // linux-base-amd64 (the meta's own dependency) and linux-base (tools) are not parts
        assert_eq!(
            names,
            [
                "linux-image-7.2.13+deb14-amd64",
                "linux-base-7.2.13+deb14-amd64",
                "linux-binary-7.2.13+deb14-amd64",
                "linux-modules-7.2.13+deb14-amd64",
            ]
        );
    }

    #[test]
    fn arm64_is_the_same_resolution_with_another_architecture() {
        let meta = Arch::Arm64.kernel_meta_package();
        let k = resolve(&meta, in_suite("sid")).unwrap();
        assert_eq!(k.image, "linux-image-7.2.13+deb14-arm64");
        assert!(k
            .packages
            .iter()
            .any(|(p, _)| p == "linux-binary-7.2.13+deb14-arm64"));
    }

    #[test]
    fn a_classic_kernel_is_one_package() {
        let k = resolve("linux-image-amd64", in_suite("bullseye")).unwrap();
        assert_eq!(
            k.packages,
            [("linux-image-5.10.0-32-amd64".into(), "5.10.223-1".into())]
        );
        // named by its versioned package, the same
        let v = resolve("linux-image-5.10.0-32-amd64", in_suite("bullseye")).unwrap();
        assert_eq!(v, k);
    }

    #[test]
    fn a_package_the_suite_lacks_is_named() {
        let e = resolve("linux-image-9.9.9-amd64", in_suite("bullseye")).unwrap_err();
        assert_eq!(e.to_string(), "no package linux-image-9.9.9-amd64");
    }

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for f in files {
            let p = root.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            if !f.ends_with('/') {
                std::fs::write(p, "x").unwrap();
            }
        }
        root
    }

    #[test]
    fn both_layouts_give_release_image_and_modules() {
        let classic = tree(&[
            "boot/vmlinuz-5.10.0-32-amd64",
            "lib/modules/5.10.0-32-amd64/kernel/fs/9p/9p.ko",
        ]);
        let (release, image, modules) = layout(classic.path()).unwrap();
        assert_eq!(release, "5.10.0-32-amd64");
        assert!(image.ends_with("boot/vmlinuz-5.10.0-32-amd64"));
        assert!(modules.ends_with("lib/modules/5.10.0-32-amd64/kernel"));

        let split = tree(&[
            "usr/lib/modules/7.2.13+deb14-amd64/vmlinuz",
            "usr/lib/modules/7.2.13+deb14-amd64/config",
            "usr/lib/modules/7.2.13+deb14-amd64/kernel/fs/9p/9p.ko.xz",
        ]);
        let (release, image, modules) = layout(split.path()).unwrap();
        assert_eq!(release, "7.2.13+deb14-amd64");
        assert!(image.ends_with("usr/lib/modules/7.2.13+deb14-amd64/vmlinuz"));
        assert!(modules.ends_with("usr/lib/modules/7.2.13+deb14-amd64/kernel"));

        let empty = tree(&["lib/modules/6.1.0-1-amd64/kernel/"]);
        let e = layout(empty.path()).unwrap_err().to_string();
        assert!(e.contains("no kernel image for 6.1.0-1-amd64"), "{e}");
    }
}
