//! Scratch directories for workloads' files, `hookprof-<workload>-<pid>-<random>` in the temp
//! dir, and the temporary results file, `.hookprof-<pid>-<random>` beside the output. A run
//! that was killed (SIGKILL) cannot remove its own, so each run removes at start-up those whose
//! owning process is gone.
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::credentials::Credentials;

const PREFIX: &str = "hookprof-";
const RESULTS_PREFIX: &str = ".hookprof-";
/// tempfile's random suffix: this many ASCII letters and digits.
const RANDOM_LEN: usize = 6;
/// What a new results file is created with before the umask: 0644 under the usual 022, as any
/// file a command writes.
pub const NEW_FILE_MODE: u32 = 0o666;

/// A scratch directory, removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    /// Retries a little: an interrupted workload thread may still be writing in it.
    fn drop(&mut self) {
        for _ in 0..10 {
            if std::fs::remove_dir_all(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// A fresh scratch directory for `workload`, owned by `user` if given.
pub fn create(workload: &str, user: Option<Credentials>) -> Result<Scratch> {
    // `stat`'s workloads are command lines: keep a short, path-safe part of the name.
    let workload: String = workload
        .chars()
        .take(32)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let dir = tempfile::Builder::new()
        .prefix(&format!("{PREFIX}{workload}-{}-", std::process::id()))
        .rand_bytes(RANDOM_LEN)
        .tempdir()
        .context("create a scratch directory")?;
    if let Some(user) = user {
        std::os::unix::fs::chown(dir.path(), Some(user.uid), Some(user.gid))
            .with_context(|| format!("hand {} to uid {}", dir.path().display(), user.uid))?;
    }
    Ok(Scratch(dir.keep()))
}

/// A temporary file for the results, in `dir`, named so that [`remove_stale_results`] finds it
/// if this process dies before renaming it. Its mode is the umask's, as the results file's will
/// be.
pub fn results_temp_file(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    tempfile::Builder::new()
        .prefix(&format!("{RESULTS_PREFIX}{}-", std::process::id()))
        .rand_bytes(RANDOM_LEN)
        .permissions(std::fs::Permissions::from_mode(NEW_FILE_MODE))
        .tempfile_in(dir)
}

/// Removes the scratch directories of hookprof processes that no longer exist; returns them.
pub fn remove_stale() -> Vec<PathBuf> {
    remove_stale_in(&std::env::temp_dir())
}

/// Removes temporary results files of dead hookprof processes in `dir`; returns them.
pub fn remove_stale_results(dir: &Path) -> Vec<PathBuf> {
    remove_dead_owners(dir, |name, is_dir| {
        let pid = name.strip_prefix(RESULTS_PREFIX)?;
        let (pid, random) = pid.split_once('-')?;
        (!is_dir && is_random(random)).then_some(pid)?.parse().ok()
    })
}

fn remove_stale_in(temp: &Path) -> Vec<PathBuf> {
    remove_dead_owners(temp, |name, is_dir| is_dir.then(|| owner_pid(name))?)
}

/// Removes the entries of `dir` for which `owner` names a pid that no longer exists.
fn remove_dead_owners(
    dir: &Path,
    owner: impl Fn(&str, bool) -> Option<libc::pid_t>,
) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        let Some(pid) = entry.file_name().to_str().and_then(|n| owner(n, is_dir)) else {
            continue;
        };
        if pid <= 0 || process_exists(pid) {
            continue;
        }
        let gone = if is_dir {
            std::fs::remove_dir_all(entry.path())
        } else {
            std::fs::remove_file(entry.path())
        };
        if gone.is_ok() {
            removed.push(entry.path());
        }
    }
    removed
}

/// The owning pid in a scratch directory's name (`hookprof-<workload>-<pid>-<random>`).
fn owner_pid(name: &str) -> Option<libc::pid_t> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut parts = rest.rsplitn(3, '-');
    let (random, pid, workload) = (parts.next()?, parts.next()?, parts.next()?);
    if workload.is_empty() || !is_random(random) {
        return None;
    }
    pid.parse().ok()
}

fn is_random(s: &str) -> bool {
    s.len() == RANDOM_LEN && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

fn process_exists(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks whether the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_owner_pid_is_read_from_the_name() {
        assert_eq!(owner_pid("hookprof-null_call-4242-Ab3xYz"), Some(4242));
        assert_eq!(owner_pid("hookprof-ctx-2p-0k-17-abc123"), Some(17));
        assert_eq!(owner_pid("hookprof-null_call-abc123"), None);
        assert_eq!(owner_pid("hookprof--12-abc123"), None);
        assert_eq!(owner_pid("hookprof-run-12-final.json"), None);
        assert_eq!(owner_pid("other-x-12-abc123"), None);
    }

    #[test]
    fn only_dead_owners_directories_are_removed() {
        let temp = tempfile::tempdir().unwrap();
        // A pid above pid_max cannot exist.
        let dead = temp.path().join("hookprof-w-2147483646-abc123");
        let live = temp
            .path()
            .join(format!("hookprof-w-{}-abc123", std::process::id()));
        for d in [&dead, &live] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("f"), "x").unwrap();
        }
        assert_eq!(remove_stale_in(temp.path()), vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(live.exists());
    }

    #[test]
    fn only_dead_owners_results_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir.path().join(".hookprof-2147483646-abc123");
        let mine = results_temp_file(dir.path()).unwrap();
        let user_file = dir.path().join(".hookprof-2147483646-r.json");
        for f in [&dead, &user_file] {
            std::fs::write(f, "{}").unwrap();
        }
        assert_eq!(remove_stale_results(dir.path()), vec![dead.clone()]);
        assert!(mine.path().exists() && user_file.exists());
    }
}
