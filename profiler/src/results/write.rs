//! Writing results files: atomic writes that never leave an existing file truncated, created
//! with the umask's mode (or the replaced file's), and a file elsewhere for results that could
//! not be written where they were asked to go.
use std::{
    ffi::OsStr,
    fs::{File, Permissions},
    io::{Seek, Write},
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use super::Results;
use crate::safety::owned_files::Dir;
use crate::stdio::WriteFailed;

impl Results {
    /// The results as JSON. A run's rows' `share` is derived once, as the run ends
    /// (`derive_shares`), and a loaded file's as it is read.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize")
    }
}

pub use crate::safety::scratch::NEW_FILE_MODE;

/// The directory a file named by `path` goes into (`.` for a bare name).
pub fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes `contents` to the regular file `path` atomically: a temp file in the same directory,
/// then rename, so an existing file is never left truncated by a failed run. A file that was
/// there keeps its mode (and its owner, where this process may give it away); a new one has
/// the umask's mode.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    replace_atomically(path, &mut Contents::Bytes(contents))
}

/// `write_atomically` for a file only its owner may read (mode 0600, whatever was there): one
/// that may hold what the command line held.
pub fn write_privately(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let (dir, name) = dir_and_name(path)?;
    let tmp = crate::safety::scratch::results_temp_file(&dir)?;
    tmp.as_file()
        .set_permissions(Permissions::from_mode(0o600))?;
    finish_replacing(tmp, name, &mut Contents::Bytes(contents))
}

/// The directory `path` is in, opened (`crate::safety::owned_files`), and its file name.
pub(super) fn dir_and_name(path: &Path) -> std::io::Result<(Dir, &OsStr)> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    Ok((Dir::open(parent_dir(path))?, name))
}

/// What a results file receives: bytes in memory, or a file they were spooled to as they were
/// made (a `top -o` recording, which grows with every interval: kept in memory, a day of it
/// grew the process by hundreds of MB).
pub(super) enum Contents<'a> {
    Bytes(&'a [u8]),
    Spooled(&'a mut File),
}

impl Contents<'_> {
    /// Writes all of it to `out` (a spooled file from its start, so it can be written twice).
    pub(super) fn write_to(&mut self, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Contents::Bytes(bytes) => out.write_all(bytes),
            Contents::Spooled(file) => {
                file.rewind()?;
                std::io::copy(file, out).map(drop)
            }
        }
    }
}

/// `write_atomically` of any `Contents`.
/// The name is replaced in its directory's descriptor: whatever is at the name by then (a
/// link another user swapped in included) is the name replaced, nothing it points to.
fn replace_atomically(path: &Path, contents: &mut Contents) -> std::io::Result<()> {
    let (dir, name) = dir_and_name(path)?;
    replace_in(&dir, name, contents)
}

/// `replace_atomically` of the file `name` in the open directory `dir`.
pub(super) fn replace_in(dir: &Dir, name: &OsStr, contents: &mut Contents) -> std::io::Result<()> {
    let tmp = crate::safety::scratch::results_temp_file(dir)?;
    match dir.stat_at(name) {
        Ok(old) if old.st_mode & libc::S_IFMT == libc::S_IFREG => {
            tmp.as_file()
                .set_permissions(Permissions::from_mode(old.st_mode & 0o7777))?;
            // Only root can give a file away; anyone else's replacement is theirs.
            let _ = std::os::unix::fs::fchown(tmp.as_file(), Some(old.st_uid), Some(old.st_gid));
        }
        _ => {}
    }
    finish_replacing(tmp, name, contents)
}

fn finish_replacing(
    mut tmp: crate::safety::scratch::TempFile,
    name: &OsStr,
    contents: &mut Contents,
) -> std::io::Result<()> {
    contents.write_to(tmp.as_file_mut())?;
    tmp.as_file().sync_all()?;
    tmp.persist(name)
}

/// Runs `write`; if it fails, keeps `contents` in a file of their own elsewhere and returns an
/// error that names `what` was not written, why, and where the results are instead.
pub fn write_or_keep(
    what: &str,
    contents: &[u8],
    write: impl FnOnce() -> std::io::Result<()>,
) -> anyhow::Result<()> {
    keep_if_unwritten(what, &mut Contents::Bytes(contents), |_| write())
}

/// `write_or_keep` of any `Contents`, which `write` is given.
pub(super) fn keep_if_unwritten(
    what: &str,
    contents: &mut Contents,
    write: impl FnOnce(&mut Contents) -> std::io::Result<()>,
) -> anyhow::Result<()> {
    let Err(e) = write(contents) else {
        return Ok(());
    };
    let message = match keep_elsewhere(contents) {
        Ok(kept) => format!(
            "{what}: cannot write: {e}; the results are in {} instead",
            kept.display()
        ),
        Err(e2) => format!(
            "{what}: cannot write: {e}, nor keep the results in the temp or current \
             directory: {e2}"
        ),
    };
    Err(NotWritten(message).into())
}

/// Results that could not be written where they were asked to go (a full disk, the
/// file-size limit): the command ends with the write-failed exit code, the message saying
/// where they are instead.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct NotWritten(String);

/// Prints `text` to stdout; if that fails and `results` are given (stdout was their only
/// copy), keeps them in a file elsewhere and the error says where.
pub fn print_or_keep(text: &[u8], results: Option<&[u8]>) -> Result<(), WriteFailed> {
    let Err(mut failed) = crate::stdio::print(text) else {
        return Ok(());
    };
    if let Some(results) = results {
        failed.note = Some(match keep_elsewhere(&mut Contents::Bytes(results)) {
            Ok(kept) => format!("the results are in {} instead", kept.display()),
            Err(e) => {
                format!("nor could the results be kept in the temp or current directory: {e}")
            }
        });
    }
    Err(failed)
}

/// A fallback results file, `hookprof-results-*.json` in the temp directory (else the current
/// one), kept.
fn keep_elsewhere(contents: &mut Contents) -> std::io::Result<PathBuf> {
    let mut last = None;
    for dir in [std::env::temp_dir(), PathBuf::from(".")] {
        let attempt = (|| {
            let mut file = tempfile::Builder::new()
                .prefix("hookprof-results-")
                .suffix(".json")
                .permissions(Permissions::from_mode(NEW_FILE_MODE))
                .tempfile_in(&dir)?;
            contents.write_to(&mut file)?;
            file.as_file().sync_all()?;
            let (_, path) = file.keep().map_err(|e| e.error)?;
            std::path::absolute(path)
        })();
        match attempt {
            Ok(path) => return Ok(path),
            Err(e) => last = Some(e),
        }
    }
    Err(last.expect("two directories tried"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn a_new_file_follows_the_umask_and_a_replaced_one_keeps_its_mode() {
        let dir = tempfile::tempdir().unwrap();
        let umask = umask();
        let new = dir.path().join("new.json");
        write_atomically(&new, b"{}").unwrap();
        assert_eq!(mode(&new), NEW_FILE_MODE & !umask);
        let old = dir.path().join("old.json");
        std::fs::write(&old, "old").unwrap();
        std::fs::set_permissions(&old, Permissions::from_mode(0o640)).unwrap();
        write_atomically(&old, b"new").unwrap();
        assert_eq!(
            (mode(&old), std::fs::read(&old).unwrap()),
            (0o640, b"new".to_vec())
        );
    }

    #[test]
    fn results_that_cannot_be_written_are_kept_and_the_error_says_where() {
        let contents = b"{\"kept\": true}";
        let err = write_or_keep("-o /x/r.json", contents, || {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("-o /x/r.json: cannot write: No space left"),
            "{err}"
        );
        let kept = err.rsplit_once("the results are in ").unwrap().1;
        let kept = Path::new(kept.strip_suffix(" instead").unwrap());
        assert_eq!(std::fs::read(kept).unwrap(), contents);
        std::fs::remove_file(kept).unwrap();
        assert!(write_or_keep("x", contents, || Ok(())).is_ok());
    }

    #[test]
    fn a_spooled_file_that_cannot_be_written_is_kept_whole() {
        let mut spool = tempfile::tempfile().unwrap();
        spool.write_all(b"{\"line\": 1}\n{\"line\": 2}\n").unwrap();
        let err = keep_if_unwritten("-o /x/r.jsonl", &mut Contents::Spooled(&mut spool), |_| {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        })
        .unwrap_err()
        .to_string();
        let kept = err.rsplit_once("the results are in ").unwrap().1;
        let kept = Path::new(kept.strip_suffix(" instead").unwrap());
        assert_eq!(
            std::fs::read(kept).unwrap(),
            b"{\"line\": 1}\n{\"line\": 2}\n"
        );
        std::fs::remove_file(kept).unwrap();
    }

    /// This process's umask, from /proc (reading it with umask(2) would change it).
    fn umask() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .unwrap();
        u32::from_str_radix(line.trim(), 8).unwrap()
    }
}
