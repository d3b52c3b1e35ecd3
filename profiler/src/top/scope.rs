//! `top`'s scope from the command line (`--cgroup`, `--pid`, `--comm`, or the whole system),
//! checked before anything loads, and the names of the groups its tallies fall into.
use std::{
    collections::HashMap,
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use profiler_common::{AggregateKey, COMM_LEN};

use super::interval::Names;
use crate::{
    machine::namespaces::PidNamespace,
    probes::{GroupBy, Scope},
};

/// The scope and how `top` names it.
pub struct ChosenScope {
    pub scope: Scope,
    pub label: String,
}

/// Reads the scope options (at most one is given; clap sees to that).
pub fn choose(cgroup: Option<&Path>, pid: Option<u32>, comm: Option<&str>) -> Result<ChosenScope> {
    if let Some(path) = cgroup {
        let root = cgroup2_root()?;
        let dir = under_root(&root, path);
        let meta = std::fs::metadata(&dir).with_context(|| {
            format!(
                "--cgroup {}: no such cgroup (looked at {}); name a directory of the cgroup2 \
                 hierarchy",
                path.display(),
                dir.display()
            )
        })?;
        if !meta.is_dir() {
            bail!(
                "--cgroup {}: {} is not a cgroup directory",
                path.display(),
                dir.display()
            );
        }
        // `..` may lead out of the hierarchy (`--cgroup ../../etc`): what counts is where the
        // path ends, which must be a cgroup2 directory under the root.
        let dir = std::fs::canonicalize(&dir)
            .with_context(|| format!("--cgroup {}: cannot resolve", path.display()))?;
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        let Ok(relative) = dir.strip_prefix(&root) else {
            bail!(
                "--cgroup {}: {} is outside the cgroup2 hierarchy ({}): name a cgroup under it",
                path.display(),
                dir.display(),
                root.display()
            );
        };
        if !is_cgroup2(&dir) {
            bail!(
                "--cgroup {}: {} is not a cgroup directory",
                path.display(),
                dir.display()
            );
        }
        let meta = std::fs::metadata(&dir)?;
        return Ok(ChosenScope {
            scope: Scope::Cgroup {
                id: meta.ino(),
                level: relative.components().count() as u32,
            },
            label: format!("cgroup /{}", relative.display()),
        });
    }
    if let Some(pid) = pid {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|_| anyhow::anyhow!("--pid {pid}: no such process"))?;
        let tgid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if let Some(tgid) = tgid.filter(|&t| t != pid) {
            bail!("--pid {pid} is a thread of process {tgid}: name the process (--pid {tgid})");
        }
        // In a container the probes know pids as this namespace numbers them, and only for
        // its own tasks: a process of a namespace nested inside it is not one they can name.
        if let Some(own) = PidNamespace::own_if_nested() {
            if PidNamespace::of(&pid.to_string()).is_some_and(|ns| ns != own) {
                bail!(
                    "--pid {pid} runs in a pid namespace nested in hookprof's: run top in that \
                     namespace, or name its cgroup (--cgroup)"
                );
            }
        }
        return Ok(ChosenScope {
            scope: Scope::Pid(pid),
            label: format!("pid {pid}"),
        });
    }
    if let Some(name) = comm {
        if name.is_empty() || name.len() >= COMM_LEN || name.contains('\0') {
            bail!(
                "--comm '{name}': a command name has 1 to {} bytes (the kernel keeps no more)",
                COMM_LEN - 1
            );
        }
        let mut bytes = [0; COMM_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        return Ok(ChosenScope {
            scope: Scope::Comm(bytes),
            label: format!("comm {name}"),
        });
    }
    Ok(ChosenScope {
        scope: Scope::System,
        label: "system".into(),
    })
}

/// `PATH` as the user gave it: an absolute path inside the hierarchy, or one relative to its
/// root (`/system.slice` and `system.slice` alike).
fn under_root(root: &Path, path: &Path) -> PathBuf {
    if path.starts_with(root) {
        return path.to_path_buf();
    }
    root.join(path.strip_prefix("/").unwrap_or(path))
}

/// True when `dir` is on a cgroup2 filesystem (a bind mount or a link could lead elsewhere).
fn is_cgroup2(dir: &Path) -> bool {
    const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: statfs fills the zeroed struct; c is a valid C string.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    (unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0) && fs.f_type as i64 == CGROUP2_SUPER_MAGIC
}

/// Where the cgroup2 hierarchy is mounted.
fn cgroup2_root() -> Result<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").context("read /proc/self/mounts")?;
    mounts
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == "cgroup2")
        .map(|f| PathBuf::from(f[1]))
        .context("--cgroup needs the cgroup2 hierarchy, which is not mounted")
}

/// Group names: a cgroup id's path (from a walk of the hierarchy, redone when an id is new),
/// or the command name.
pub struct GroupNames {
    by: GroupBy,
    root: Option<PathBuf>,
    paths: std::cell::RefCell<HashMap<u64, String>>,
}

impl GroupNames {
    pub fn new(by: GroupBy) -> GroupNames {
        GroupNames {
            by,
            root: cgroup2_root().ok(),
            paths: Default::default(),
        }
    }

    fn walk(&self) {
        let Some(root) = &self.root else { return };
        let mut paths = HashMap::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            let Ok(meta) = std::fs::metadata(&dir) else {
                continue;
            };
            let relative = dir.strip_prefix(root).unwrap_or(Path::new(""));
            paths.insert(meta.ino(), format!("/{}", relative.display()));
            if let Ok(entries) = std::fs::read_dir(&dir) {
                stack.extend(
                    entries
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .map(|e| e.path()),
                );
            }
        }
        *self.paths.borrow_mut() = paths;
    }
}

impl Names for GroupNames {
    fn group(&self, key: &AggregateKey) -> String {
        match self.by {
            GroupBy::Comm => String::from_utf8_lossy(&key.comm)
                .trim_end_matches('\0')
                .to_string(),
            GroupBy::Cgroup => {
                if !self.paths.borrow().contains_key(&key.cgroup_id) {
                    self.walk();
                }
                self.paths
                    .borrow()
                    .get(&key.cgroup_id)
                    // A cgroup removed since: its id is all that is left.
                    .map_or_else(|| format!("cgroup:{}", key.cgroup_id), Clone::clone)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_scopes_are_one_line_errors() {
        let e = choose(None, None, Some("a-name-far-too-long"))
            .err()
            .unwrap();
        assert!(e.to_string().contains("1 to 15 bytes"), "{e}");
        let e = choose(None, Some(u32::MAX), None).err().unwrap();
        assert_eq!(
            e.to_string(),
            format!("--pid {}: no such process", u32::MAX)
        );
        let e = choose(Some(Path::new("/no/such/cgroup")), None, None)
            .err()
            .unwrap();
        assert!(format!("{e:#}").contains("no such cgroup"), "{e:#}");
        assert!(!format!("{e:#}").contains('\n'));
        for outside in ["../../../../etc", "/../../..", "/../../../../etc"] {
            let e = choose(Some(Path::new(outside)), None, None).err().unwrap();
            let e = format!("{e:#}");
            assert!(
                e.contains("is outside the cgroup2 hierarchy") || e.contains("no such cgroup"),
                "{outside}: {e}"
            );
        }
    }

    #[test]
    fn the_root_cgroup_is_level_zero_and_a_process_is_its_own_scope() {
        let root = choose(Some(Path::new("/")), None, None).unwrap();
        assert!(
            matches!(root.scope, Scope::Cgroup { level: 0, .. }),
            "{:?}",
            root.scope
        );
        let me = std::process::id();
        let t = choose(None, Some(me), None).unwrap();
        assert_eq!(t.scope, Scope::Pid(me));
        assert_eq!(choose(None, None, None).unwrap().label, "system");
    }

    #[test]
    fn paths_are_taken_under_the_root_or_inside_it() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(under_root(root, Path::new("/a/b")), root.join("a/b"));
        assert_eq!(under_root(root, Path::new("a")), root.join("a"));
        assert_eq!(under_root(root, &root.join("a")), root.join("a"));
    }
}
