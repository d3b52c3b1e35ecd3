//! Scratch directories for workloads' files, `hookprof-<workload>-<pid>-<random>` in the temp
//! dir, and the temporary results file, `.hookprof-<pid>-<random>` beside the output. A run
//! that was killed (SIGKILL) cannot remove its own, so each run removes at start-up those whose
//! owner is gone. The owner holds an exclusive `flock` on each for as long as it lives (the
//! kernel drops it when the process dies, however it dies): a pid in a name would be judged
//! in the wrong namespace when runs in containers share a temp directory.
use std::{
    fs::File,
    os::{
        fd::AsRawFd,
        unix::fs::{MetadataExt, OpenOptionsExt},
    },
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::credentials::Credentials;

const PREFIX: &str = "hookprof-";
const RESULTS_PREFIX: &str = ".hookprof-";
/// tempfile's random suffix: this many ASCII letters and digits.
const RANDOM_LEN: usize = 6;
/// What a new results file is created with before the umask: 0644 under the usual 022, as any
/// file a command writes.
pub const NEW_FILE_MODE: u32 = 0o666;

/// A scratch directory, locked while it lives, removed when dropped.
pub struct Scratch {
    path: PathBuf,
    _lock: File,
}

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `depth` directories one inside the next in this one (`d/d/...`), owned by `user` as it
    /// is: the innermost, whose files every lookup reaches through all of them.
    pub fn nested(&self, depth: usize, user: Option<Credentials>) -> Result<PathBuf> {
        let mut dir = self.path.clone();
        for _ in 0..depth {
            dir.push("d");
            std::fs::create_dir(&dir).with_context(|| format!("make {}", dir.display()))?;
            if let Some(user) = user {
                std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
                    .with_context(|| format!("hand {} to uid {}", dir.display(), user.uid))?;
            }
        }
        Ok(dir)
    }
}

impl Drop for Scratch {
    /// Retries a little: an interrupted workload thread may still be writing in it.
    fn drop(&mut self) {
        for _ in 0..10 {
            if std::fs::remove_dir_all(&self.path).is_ok() || !self.path.exists() {
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
    let (dir, lock) = locked(|| {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{workload}-{}-", std::process::id()))
            .rand_bytes(RANDOM_LEN)
            .tempdir()?
            .keep();
        open_made(dir)
    })
    .context("create a scratch directory")?;
    if let Some(user) = user {
        std::os::unix::fs::chown(&dir, Some(user.uid), Some(user.gid))
            .with_context(|| format!("hand {} to uid {}", dir.display(), user.uid))?;
    }
    Ok(Scratch {
        path: dir,
        _lock: lock,
    })
}

/// The directory just made at `dir`, opened to be locked; None if a sweep removed it first.
fn open_made(dir: PathBuf) -> std::io::Result<Option<(PathBuf, File)>> {
    match File::open(&dir) {
        Ok(file) => Ok(Some((dir, file))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Makes an entry with `make` and locks the file it returns, until the lock is taken on an
/// entry still linked: a start-up sweep of another run may have found it unlocked in between
/// and removed it (before `make` could open it, or before the lock).
fn locked<T>(make: impl Fn() -> std::io::Result<Option<(T, File)>>) -> std::io::Result<(T, File)> {
    loop {
        // None: swept between being made and being opened.
        let Some((entry, file)) = make()? else {
            continue;
        };
        // SAFETY: flock on an fd this function owns; it waits while a sweep holds the lock.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if file.metadata()?.nlink() > 0 {
            return Ok((entry, file));
        }
    }
}

/// A temporary file for the results, in `dir`, named so that [`remove_stale_results`] finds it
/// if this process dies before renaming it. Its mode is the umask's, as the results file's will
/// be.
pub fn results_temp_file(dir: &Path) -> std::io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let (file, _) = locked(|| {
        let file = tempfile::Builder::new()
            .prefix(&format!("{RESULTS_PREFIX}{}-", std::process::id()))
            .rand_bytes(RANDOM_LEN)
            .permissions(std::fs::Permissions::from_mode(NEW_FILE_MODE))
            .tempfile_in(dir)?;
        // The lock belongs to the open file, which the temporary file keeps; this second
        // handle only takes it.
        let handle = file.as_file().try_clone()?;
        Ok(Some((file, handle)))
    })?;
    Ok(file)
}

/// Removes the scratch directories of hookprof processes that no longer exist; returns them.
pub fn remove_stale() -> Vec<PathBuf> {
    remove_stale_in(&std::env::temp_dir())
}

/// Removes temporary results files of dead hookprof processes in `dir`; returns them.
pub fn remove_stale_results(dir: &Path) -> Vec<PathBuf> {
    remove_unlocked(dir, |name, is_dir| {
        let pid = name.strip_prefix(RESULTS_PREFIX)?;
        let (pid, random) = pid.split_once('-')?;
        (!is_dir && is_random(random) && pid.parse::<u32>().is_ok()).then_some(())
    })
}

fn remove_stale_in(temp: &Path) -> Vec<PathBuf> {
    remove_unlocked(temp, |name, is_dir| {
        (is_dir && owner_pid(name).is_some()).then_some(())
    })
}

/// Removes the entries of `dir` that `ours` recognises and no process holds locked.
fn remove_unlocked(dir: &Path, ours: impl Fn(&str, bool) -> Option<()>) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        // Directories and regular files only: nothing else is opened, let alone removed.
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let is_dir = kind.is_dir();
        let name = entry.file_name();
        if !(is_dir || kind.is_file()) || name.to_str().and_then(|n| ours(n, is_dir)).is_none() {
            continue;
        }
        // Never followed: the entry itself is what is locked and removed.
        let Ok(file) = std::fs::File::options()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(entry.path())
        else {
            continue;
        };
        // SAFETY: flock on an fd this function owns; LOCK_NB never waits.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            continue; // its owner lives
        }
        // Removed while locked, so an owner that has just made it sees it unlinked.
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
    fn only_unlocked_directories_are_removed() {
        let temp = tempfile::tempdir().unwrap();
        // A dead owner's: nobody holds its lock, whatever pid its name says (here, ours).
        let dead = temp
            .path()
            .join(format!("hookprof-w-{}-abc123", std::process::id()));
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join("f"), "x").unwrap();
        let live = locked(|| {
            let dir = tempfile::Builder::new()
                .prefix("hookprof-w-2147483646-")
                .rand_bytes(RANDOM_LEN)
                .tempdir_in(temp.path())?
                .keep();
            open_made(dir)
        })
        .unwrap();
        let symlink = temp.path().join("hookprof-w-1-zzz999");
        std::os::unix::fs::symlink(&live.0, &symlink).unwrap();
        assert_eq!(remove_stale_in(temp.path()), vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(live.0.exists() && symlink.exists());
        drop(live.1);
        assert_eq!(remove_stale_in(temp.path()).len(), 1);
    }

    #[test]
    fn a_missing_directory_is_an_error_not_a_retry() {
        let missing = Path::new("/nonexistent-hookprof-dir");
        assert!(results_temp_file(missing).is_err());
    }

    #[test]
    fn only_dead_owners_results_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir
            .path()
            .join(format!(".hookprof-{}-abc123", std::process::id()));
        let mine = results_temp_file(dir.path()).unwrap();
        let user_file = dir.path().join(".hookprof-2147483646-r.json");
        for f in [&dead, &user_file] {
            std::fs::write(f, "{}").unwrap();
        }
        assert_eq!(remove_stale_results(dir.path()), vec![dead.clone()]);
        assert!(mine.path().exists() && user_file.exists());
    }
}
