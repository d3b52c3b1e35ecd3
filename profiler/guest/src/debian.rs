//! Debian's archive through apt, with package lists of the project's own: one apt configuration
//! per suite and architecture under the guest cache, reading none of the host's sources,
//! preferences or installed packages, so any suite the archive serves can be named on any host.
//! apt checks each suite's Release signature against debian-archive-keyring and each download
//! against the hash its Packages index gives.
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};

use crate::Log;

/// The archive, unless `MIRROR_ENV` names another (a snapshot, a local mirror).
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";
pub const MIRROR_ENV: &str = "HOOKPROF_DEBIAN_MIRROR";
/// What a suite's Release file must be signed with (package debian-archive-keyring).
const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
/// Lists older than this are fetched again before a package is looked up in them.
const LISTS_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// A Debian architecture: the packages' `Architecture` field and the kernel meta package's
/// suffix.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Arch {
    #[default]
    #[value(alias = "x86_64")]
    Amd64,
    #[value(alias = "aarch64")]
    Arm64,
}

impl Arch {
    /// The architecture of this host (of the running program), if a guest can have it.
    pub fn host() -> Option<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Some(Arch::Amd64),
            "aarch64" => Some(Arch::Arm64),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The other one.
    pub fn other(self) -> Arch {
        match self {
            Arch::Amd64 => Arch::Arm64,
            Arch::Arm64 => Arch::Amd64,
        }
    }

    /// The meta package that depends on a suite's current kernel: `linux-image-amd64`.
    pub fn kernel_meta_package(self) -> String {
        format!("linux-image-{}", self.name())
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A suite name as the archive spells it: a codename (`bookworm`, `sid`), an alias
/// (`stable`, `unstable`) or a derived suite (`bookworm-backports`, `bullseye-security`).
pub fn check_suite(suite: &str) -> Result<()> {
    let ok = !suite.is_empty()
        && suite.starts_with(|c: char| c.is_ascii_lowercase())
        && suite
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !ok {
        bail!("{suite:?} is not a Debian suite name (e.g. bookworm, trixie, sid)");
    }
    Ok(())
}

/// One suite's package lists for one architecture, in `cache/apt/SUITE-ARCH`. Held, it holds
/// a lock: other processes sharing the cache wait rather than update the lists under it.
pub struct AptLists {
    suite: String,
    arch: Arch,
    dir: PathBuf,
    _lock: std::fs::File,
}

impl AptLists {
    /// The lists of `suite` for `arch`, fetched if missing or older than a day (kept as they
    /// are if the archive cannot be reached then).
    pub fn open(cache: &Path, suite: &str, arch: Arch, log: &Log) -> Result<AptLists> {
        check_suite(suite)?;
        if !Path::new(KEYRING).is_file() {
            bail!("{KEYRING} is missing: install package debian-archive-keyring");
        }
        let dir = cache.join("apt").join(format!("{suite}-{arch}"));
        for sub in ["lists/partial", "cache/archives/partial", "etc"] {
            std::fs::create_dir_all(dir.join(sub))
                .with_context(|| format!("create {}", dir.join(sub).display()))?;
        }
        let lock = lock(&dir.join("lock"))?;
        let lists = AptLists {
            suite: suite.to_string(),
            arch,
            dir,
            _lock: lock,
        };
        lists.write_config()?;
        match lists.age() {
            None => {
                if let Err(e) = lists.update(log) {
                    // Nothing worth keeping of a suite that was never fetched.
                    let _ = std::fs::remove_dir_all(&lists.dir);
                    return Err(e);
                }
            }
            Some(age) if age > LISTS_MAX_AGE => {
                if let Err(e) = lists.update(log) {
                    log.say(format_args!(
                        "keeping the {suite} lists of {} hours ago: {e:#}",
                        age.as_secs() / 3600
                    ));
                }
            }
            Some(_) => {}
        }
        Ok(lists)
    }

    pub fn suite(&self) -> &str {
        &self.suite
    }

    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// Fetches the suite's Release file (its signature checked) and Packages index.
    pub fn update(&self, log: &Log) -> Result<()> {
        let started = std::time::Instant::now();
        let out = self
            .apt("apt-get")
            .args(["update", "-q"])
            .output()
            .context("apt-get not found: Debian kernels by name need apt (package apt)")?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if stderr.contains("does not have a Release file") {
            bail!(
                "Debian has no suite {} at {} (no Release file there): name one it serves, e.g. \
                 bullseye, bookworm, trixie, sid",
                self.suite,
                self.mirror()
            );
        }
        // A fetch that failed is only a warning to apt (exit 0, the old lists kept).
        let failed = stderr
            .lines()
            .find(|l| l.starts_with("E:") || l.starts_with("W: Failed to fetch"));
        if !out.status.success() || failed.is_some() || !self.has_packages_index() {
            let why = failed.unwrap_or(stderr.trim());
            bail!(
                "apt-get update of suite {} ({}) at {} failed: {why}",
                self.suite,
                self.arch,
                self.mirror()
            );
        }
        std::fs::write(self.dir.join("updated"), b"")?;
        log.say(format_args!(
            "fetched the package lists of {} ({}) from {} in {:.1} s",
            self.suite,
            self.arch,
            self.mirror(),
            started.elapsed().as_secs_f64()
        ));
        Ok(())
    }

    /// Whether the lists hold this suite's Packages index for the architecture.
    fn has_packages_index(&self) -> bool {
        let suffix = format!("_binary-{}_Packages", self.arch);
        entries(&self.dir.join("lists")).is_ok_and(|files| {
            files.iter().any(|f| {
                f.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(&suffix))
            })
        })
    }

    /// The candidate version's stanza of `package`, if the suite has it.
    pub fn show(&self, package: &str) -> Result<Option<Stanza>> {
        if !is_package_name(package) {
            bail!("{package:?} is not a Debian package name");
        }
        let out = self
            .apt("apt-cache")
            .args(["show", "--no-all-versions", package])
            .output()
            .context("apt-cache not found: Debian kernels by name need apt (package apt)")?;
        if !out.status.success() {
            // "No packages found" (exit 100), or a virtual package without a provider
            return Ok(None);
        }
        Ok(Stanza::parse(&String::from_utf8_lossy(&out.stdout)))
    }

    /// Downloads `package` at `version` into `dir` and returns the file; apt checks it against
    /// the hash in the lists.
    pub fn download(&self, package: &str, version: &str, dir: &Path, log: &Log) -> Result<PathBuf> {
        log.say(format_args!(
            "apt-get download {package}={version} ({}, {})",
            self.suite, self.arch
        ));
        let before = entries(dir)?;
        let out = self
            .apt("apt-get")
            .args(["download", "-q"])
            .arg(format!("{package}={version}"))
            .current_dir(dir)
            .output()
            .context("apt-get not found: Debian kernels by name need apt (package apt)")?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let why = stderr
                .lines()
                .find(|l| l.starts_with("E:"))
                .unwrap_or(stderr.trim());
            bail!("apt-get download {package}={version} failed: {why}");
        }
        entries(dir)?
            .into_iter()
            .find(|e| !before.contains(e) && e.extension().is_some_and(|x| x == "deb"))
            .with_context(|| format!("apt-get download {package} left no .deb"))
    }

    fn mirror(&self) -> String {
        let base = std::env::var(MIRROR_ENV)
            .ok()
            .filter(|m| !m.is_empty())
            .unwrap_or_else(|| DEFAULT_MIRROR.to_string());
        let base = base.trim_end_matches('/');
        // Security updates are a separate archive beside the main one.
        if self.suite.ends_with("-security") {
            format!("{base}-security")
        } else {
            base.to_string()
        }
    }

    /// apt with this suite's configuration alone (APT_CONFIG is read before any other file).
    fn apt(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        c.env("APT_CONFIG", self.dir.join("etc/apt.conf"))
            .env("LC_ALL", "C")
            .env_remove("APT_CONFIG_DIR");
        c
    }

    fn write_config(&self) -> Result<()> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        let sources = format!(
            "deb [arch={} signed-by={KEYRING}] {} {} main\n",
            self.arch,
            self.mirror(),
            self.suite
        );
        let conf = format!(
            "Dir::Etc::main \"/dev/null\";\n\
             Dir::Etc::parts \"{etc}\";\n\
             Dir::Etc::sourcelist \"{sources}\";\n\
             Dir::Etc::sourceparts \"-\";\n\
             Dir::Etc::preferences \"/dev/null\";\n\
             Dir::Etc::preferencesparts \"{etc}\";\n\
             Dir::State \"{state}\";\n\
             Dir::State::lists \"{lists}\";\n\
             Dir::State::status \"{status}\";\n\
             Dir::Cache \"{cache}\";\n\
             APT::Architecture \"{arch}\";\n\
             APT::Architectures {{ \"{arch}\"; }};\n\
             Acquire::Languages \"none\";\n\
             Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled \"false\";\n\
             // The cache may be where apt's unprivileged _apt user cannot write.\n\
             APT::Sandbox::User \"root\";\n\
             // Snapshots and frozen mirrors serve Release files past their Valid-Until; the\n\
             // signature is still checked.\n\
             Acquire::Check-Valid-Until \"false\";\n",
            etc = d("etc"),
            sources = d("etc/sources.list"),
            state = d(""),
            lists = d("lists"),
            status = d("etc/status"),
            cache = d("cache"),
            arch = self.arch,
        );
        write_if_changed(&self.dir.join("etc/sources.list"), &sources)?;
        write_if_changed(&self.dir.join("etc/status"), "")?;
        write_if_changed(&self.dir.join("etc/apt.conf"), &conf)
    }

    /// Since the last successful update, if there was one.
    fn age(&self) -> Option<Duration> {
        let modified = std::fs::metadata(self.dir.join("updated"))
            .and_then(|m| m.modified())
            .ok()?;
        Some(
            SystemTime::now()
                .duration_since(modified)
                .unwrap_or_default(),
        )
    }
}

/// Package names are lower-case letters, digits and `+-.`, starting alphanumeric.
fn is_package_name(s: &str) -> bool {
    s.len() >= 2
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c))
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|t| t == text) {
        return Ok(());
    }
    let dir = path.parent().context("no parent directory")?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, text.as_bytes())?;
    tmp.persist(path)?;
    Ok(())
}

/// An exclusive lock on `path`, held until the file is dropped.
fn lock(path: &Path) -> Result<std::fs::File> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    // SAFETY: flock on an fd this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("lock {}", path.display()));
    }
    Ok(file)
}

fn entries(dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::read_dir(dir)
        .with_context(|| format!("read {}", dir.display()))?
        .map(|e| Ok(e?.path()))
        .collect()
}

/// One paragraph of a Packages index (deb822): its fields in order, continuation lines joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stanza {
    fields: Vec<(String, String)>,
}

impl Stanza {
    /// The first paragraph of `text`; None if it has no field.
    pub fn parse(text: &str) -> Option<Stanza> {
        let mut fields: Vec<(String, String)> = Vec::new();
        for line in text.lines() {
            if line.trim().is_empty() {
                if fields.is_empty() {
                    continue;
                }
                break;
            }
            if line.starts_with([' ', '\t']) {
                if let Some((_, value)) = fields.last_mut() {
                    value.push('\n');
                    value.push_str(line.trim());
                }
            } else if let Some((name, value)) = line.split_once(':') {
                fields.push((name.trim().to_string(), value.trim().to_string()));
            }
        }
        (!fields.is_empty()).then_some(Stanza { fields })
    }

    /// A field's value (field names are case-insensitive).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn package(&self) -> &str {
        self.get("Package").unwrap_or_default()
    }

    pub fn version(&self) -> &str {
        self.get("Version").unwrap_or_default()
    }

    /// `Depends` as its groups of alternatives, each a list of package names (version
    /// constraints and architecture qualifiers dropped).
    pub fn depends(&self) -> Vec<Vec<String>> {
        self.get("Depends")
            .unwrap_or_default()
            .split(',')
            .map(|group| {
                group
                    .split('|')
                    .filter_map(|alt| {
                        let name = alt.split_whitespace().next()?;
                        let name = name.split(':').next().unwrap_or(name);
                        (!name.is_empty()).then(|| name.to_string())
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|g| !g.is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stanza_gives_its_fields_and_dependency_groups() {
        let s = Stanza::parse(include_str!(
            "../fixtures/sid-linux-image-7.2.13+deb14-amd64.stanza"
        ))
        .unwrap();
        assert_eq!(s.package(), "linux-image-7.2.13+deb14-amd64");
        assert_eq!(s.version(), "7.2.13-1");
        assert_eq!(s.get("architecture"), Some("amd64"));
        assert_eq!(
            s.depends(),
            [
                vec!["dracut", "initramfs-tools", "linux-initramfs-tool"],
                vec!["linux-base-7.2.13+deb14-amd64"],
                vec!["linux-binary-7.2.13+deb14-amd64"],
                vec!["linux-modules-7.2.13+deb14-amd64"],
            ]
        );
    }

    #[test]
    fn continuation_lines_join_and_only_the_first_paragraph_counts() {
        let text = "\nPackage: a\nDescription: short\n more\n .\n end\n\nPackage: b\n";
        let s = Stanza::parse(text).unwrap();
        assert_eq!(s.package(), "a");
        assert_eq!(s.get("Description"), Some("short\nmore\n.\nend"));
        assert_eq!(Stanza::parse("\n\n"), None);
        let q = Stanza::parse("Package: x\nDepends: libc6:any (>= 2), python3:native\n").unwrap();
        assert_eq!(q.depends(), [vec!["libc6"], vec!["python3"]]);
    }

    #[test]
    fn suite_and_package_names_are_checked_before_they_reach_a_file() {
        for ok in ["sid", "bookworm-backports", "bullseye-security", "stable"] {
            assert!(check_suite(ok).is_ok(), "{ok}");
        }
        for bad in ["", "Sid", "../etc", "sid main", "-x"] {
            assert!(check_suite(bad).is_err(), "{bad:?}");
        }
        assert!(is_package_name("linux-image-7.2.13+deb14-amd64"));
        assert!(!is_package_name("linux-image-amd64=1.0"));
        assert!(!is_package_name("-o"));
    }

    #[test]
    fn the_architecture_names_the_meta_package() {
        assert_eq!(Arch::Amd64.kernel_meta_package(), "linux-image-amd64");
        assert_eq!(Arch::Arm64.kernel_meta_package(), "linux-image-arm64");
    }
}
