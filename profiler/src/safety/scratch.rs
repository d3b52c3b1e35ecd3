//! Scratch directories for workloads' files, `hookprof-<workload>-<pid>-<random>` in the temp
//! dir, and the temporary results file, `.hookprof-<pid>-<random>` beside the output. A run
//! that was killed (SIGKILL) cannot remove its own, so each run removes at start-up those whose
//! owner is gone. The owner holds an exclusive `flock` on each for as long as it lives (the
//! kernel drops it when the process dies, however it dies): a pid in a name would be judged
//! in the wrong namespace when runs in containers share a temp directory.
use std::{
    ffi::{OsStr, OsString},
    fs::File,
    os::{
        fd::AsRawFd,
        unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt},
    },
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{safety::credentials::Credentials, safety::owned_files::Dir};

const PREFIX: &str = "hookprof-";
const RESULTS_PREFIX: &str = ".hookprof-";
/// tempfile's random suffix: this many ASCII letters and digits.
const RANDOM_LEN: usize = 6;
/// What a new results file is created with before the umask: 0644 under the usual 022, as any
/// file a command writes.
pub const NEW_FILE_MODE: u32 = 0o666;

/// A scratch directory, locked while it lives, removed when dropped. It is root's own, made
/// 0700 by this process in a temp directory no other user can take names from; with `--user`
/// it is opened to that user only for search (0711) and holds their work directory `w`, so
/// the user can change what is in `w` but never swap `w` or the scratch directory itself for
/// a link to somewhere root would then write or delete.
pub struct Scratch {
    /// The scratch directory itself, removed when dropped.
    root: PathBuf,
    /// Where the workload's files go: `root`, or `root/w` for `--user`.
    path: PathBuf,
    _lock: File,
}

impl Scratch {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `depth` directories one inside the next in the work directory (`d/d/...`), owned by
    /// `user` as it is: the innermost, whose files every lookup reaches through all of them.
    /// Each is handed over through its own descriptor, never by a path the user could swap.
    pub fn nested(&self, depth: usize, user: Option<Credentials>) -> Result<PathBuf> {
        let mut dir = self.path.clone();
        for _ in 0..depth {
            dir.push("d");
            std::fs::create_dir(&dir).with_context(|| format!("make {}", dir.display()))?;
            if let Some(user) = user {
                hand_over(&dir, user)?;
            }
        }
        Ok(dir)
    }
}

/// Gives the directory just made at `dir` to `user`, through a descriptor opened without
/// following a link: a link swapped in is an error, never chowned through.
fn hand_over(dir: &Path, user: Credentials) -> Result<()> {
    let opened = std::fs::File::options()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(dir)
        .with_context(|| format!("open {}", dir.display()))?;
    std::os::unix::fs::fchown(&opened, Some(user.uid), Some(user.gid))
        .with_context(|| format!("hand {} to uid {}", dir.display(), user.uid))
}

impl Drop for Scratch {
    /// Retries a little: an interrupted workload thread may still be writing in it. The
    /// removal never follows a link (the standard library's opens each directory it empties).
    fn drop(&mut self) {
        for _ in 0..10 {
            if std::fs::remove_dir_all(&self.root).is_ok() || !self.root.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

/// The temp directory, if no other user can take or replace names in it (sticky and
/// root-owned, as /tmp, will do): one error line naming the fix otherwise.
pub fn checked_temp_dir() -> Result<PathBuf> {
    let temp = std::env::temp_dir();
    Dir::open(&temp)
        .with_context(|| format!("temp directory {}", temp.display()))?
        .refuse_shared("temp directory (TMPDIR)")?;
    Ok(temp)
}

/// A fresh scratch directory for `workload`, its work directory owned by `user` if given.
pub fn create(workload: &str, user: Option<Credentials>) -> Result<Scratch> {
    use std::os::unix::fs::PermissionsExt;
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
    let temp = checked_temp_dir()?;
    let (dir, lock) = locked(|| {
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{workload}-{}-", std::process::id()))
            .rand_bytes(RANDOM_LEN)
            .tempdir_in(&temp)?
            .keep();
        open_made(dir)
    })
    .context("create a scratch directory")?;
    let work = match user {
        None => dir.clone(),
        Some(user) => {
            lock.set_permissions(std::fs::Permissions::from_mode(0o711))
                .with_context(|| format!("open {} to uid {}", dir.display(), user.uid))?;
            let work = dir.join("w");
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(&work)
                .with_context(|| format!("make {}", work.display()))?;
            hand_over(&work, user)?;
            work
        }
    };
    Ok(Scratch {
        root: dir,
        path: work,
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

/// A temporary results file, `.hookprof-<pid>-<random>` made O_EXCL|O_NOFOLLOW in an open
/// directory, locked while it lives; removed when dropped unless [`TempFile::persist`]ed, and
/// only if its name is still the file it made.
pub struct TempFile<'d> {
    dir: &'d Dir,
    name: OsString,
    /// Its device and inode, as made.
    made: (u64, u64),
    file: File,
    kept: bool,
}

impl TempFile<'_> {
    pub fn as_file(&self) -> &File {
        &self.file
    }

    /// Its name in its directory.
    pub fn name(&self) -> &OsStr {
        &self.name
    }

    pub fn as_file_mut(&mut self) -> &mut File {
        &mut self.file
    }

    /// Renames the file to `name` in its directory, replacing what was there by that name
    /// (a file or a link: the name, never what a link points to).
    pub fn persist(mut self, name: &OsStr) -> std::io::Result<()> {
        self.dir.rename(&self.name, name)?;
        self.kept = true;
        Ok(())
    }
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if !self.kept {
            let _ = self.dir.remove_own(&self.name, self.made);
        }
    }
}

/// A temporary file for the results, in `dir`, named so that [`remove_stale_results`] finds it
/// if this process dies before renaming it. Its mode is the umask's, as the results file's will
/// be.
pub fn results_temp_file(dir: &Dir) -> std::io::Result<TempFile<'_>> {
    use rand::distributions::{Alphanumeric, DistString};
    let ((name, made), file) = locked(|| {
        for _ in 0..100 {
            let random = Alphanumeric.sample_string(&mut rand::thread_rng(), RANDOM_LEN);
            let name = OsString::from(format!("{RESULTS_PREFIX}{}-{random}", std::process::id()));
            match dir.create_new(&name, NEW_FILE_MODE) {
                Ok(file) => {
                    let meta = file.metadata()?;
                    return Ok(Some(((name, (meta.dev(), meta.ino())), file)));
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::from(std::io::ErrorKind::AlreadyExists))
    })?;
    Ok(TempFile {
        dir,
        name,
        made,
        file,
        kept: false,
    })
}

/// Removes the scratch directories of hookprof processes that no longer exist; returns them.
pub fn remove_stale() -> Vec<PathBuf> {
    checked_temp_dir().map_or_else(|_| Vec::new(), |temp| remove_stale_in(&temp))
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
        // Only this user's own: another's entry, whatever its name, is not hookprof's to remove.
        // SAFETY: geteuid has no preconditions.
        if file
            .metadata()
            .map_or(true, |m| m.uid() != unsafe { libc::geteuid() })
        {
            continue;
        }
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
    fn a_removed_directory_is_an_error_not_a_retry() {
        let temp = tempfile::tempdir().unwrap();
        let gone = temp.path().join("gone");
        std::fs::create_dir(&gone).unwrap();
        let dir = Dir::open(&gone).unwrap();
        std::fs::remove_dir(&gone).unwrap();
        assert!(results_temp_file(&dir).is_err());
    }

    #[test]
    fn a_temp_file_is_removed_unless_kept_and_never_another_in_its_place() {
        let temp = tempfile::tempdir().unwrap();
        let dir = Dir::open(temp.path()).unwrap();
        let dropped = results_temp_file(&dir).unwrap();
        let name = dropped.name().to_os_string();
        drop(dropped);
        assert!(!temp.path().join(&name).exists());
        // A name swapped for another file while it lived: that file stays.
        let swapped = results_temp_file(&dir).unwrap();
        let name = temp.path().join(swapped.name());
        std::fs::remove_file(&name).unwrap();
        std::fs::write(&name, "someone else's").unwrap();
        drop(swapped);
        assert_eq!(std::fs::read(&name).unwrap(), b"someone else's");
        let mut kept = results_temp_file(&dir).unwrap();
        std::io::Write::write_all(kept.as_file_mut(), b"results").unwrap();
        kept.persist(OsStr::new("r.json")).unwrap();
        assert_eq!(
            std::fs::read(temp.path().join("r.json")).unwrap(),
            b"results"
        );
    }

    #[test]
    fn only_dead_owners_results_temp_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let dead = dir
            .path()
            .join(format!(".hookprof-{}-abc123", std::process::id()));
        let opened = Dir::open(dir.path()).unwrap();
        let mine = results_temp_file(&opened).unwrap();
        let user_file = dir.path().join(".hookprof-2147483646-r.json");
        for f in [&dead, &user_file] {
            std::fs::write(f, "{}").unwrap();
        }
        assert_eq!(remove_stale_results(dir.path()), vec![dead.clone()]);
        assert!(dir.path().join(mine.name()).exists() && user_file.exists());
    }
}
