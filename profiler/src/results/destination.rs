//! Where `-o` sends a results file, decided before anything runs, so a run is never lost to a
//! bad path and nothing at the path is destroyed: `-` (or the file stdout already goes to) is
//! stdout; a character device or FIFO, behind symlinks or not, is written through, never
//! replaced; only a regular file is replaced, atomically, at the symlink's target if the path
//! is one; a directory, block device, socket, dangling symlink, unwritable or full directory is
//! refused. Nothing is made at the path before the results are complete (a run killed by
//! SIGKILL leaves no empty file that looks like results), and nothing beside it either: the
//! run's claim on the path is an abstract unix socket named for it, which the kernel frees when
//! the run ends however it ends, so a second run writing the same file is refused and a killed
//! one leaves no lock behind.
use std::{
    ffi::{OsStr, OsString},
    fs::{File, OpenOptions},
    os::{
        fd::AsRawFd,
        linux::net::SocketAddrExt,
        unix::{
            fs::{FileTypeExt, MetadataExt, OpenOptionsExt},
            net::{SocketAddr, UnixListener},
        },
    },
    path::Path,
};

use anyhow::{bail, Context};

use crate::safety::owned_files::{Dir, Writers};
use sha2::{Digest, Sha256};

use super::write::{dir_and_name, keep_if_unwritten, print_or_keep, replace_in, Contents};

/// The least free space a results file's filesystem must have before a run: more than a full
/// suite's results file (a few hundred KiB) needs.
const MIN_FREE_BYTES: u64 = 1 << 20;

/// Where a run's results go, checked before it runs.
#[derive(Debug)]
pub struct Destination {
    /// `-o PATH`, as errors name it.
    shown: String,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Stdout,
    /// A character device or FIFO, opened before the run and written through.
    Through(File),
    /// A regular file, or a name not yet taken: replaced atomically, by its name in its
    /// directory, opened now.
    Regular {
        /// Boxed: a directory's metadata is most of its size.
        dir: Box<Dir>,
        name: OsString,
        /// The claim on the path, held (bound) for the run; see [`claim`].
        _claim: UnixListener,
    },
}

impl Destination {
    /// Checks `path` and claims it for this run; every refusal is one line naming the path
    /// and what to do.
    pub fn prepare(path: &Path) -> anyhow::Result<Destination> {
        let shown = format!("-o {}", path.display());
        let kind = if path == Path::new("-") {
            Kind::Stdout
        } else {
            kind(path, &shown)?
        };
        Ok(Destination { shown, kind })
    }

    /// True when what is written is thrown away: the null device (1:3), whatever its name.
    pub fn discards(&self) -> bool {
        let Kind::Through(file) = &self.kind else {
            return false;
        };
        file.metadata().is_ok_and(|m| {
            m.file_type().is_char_device()
                && libc::major(m.rdev()) == 1
                && libc::minor(m.rdev()) == 3
        })
    }

    /// True when the results go to stdout (anything else printed belongs on stderr then).
    pub fn is_stdout(&self) -> bool {
        matches!(self.kind, Kind::Stdout)
    }

    /// Writes the results; if that fails, they are kept in a file of their own and the error
    /// says where.
    pub fn write(self, contents: &[u8]) -> anyhow::Result<()> {
        self.write_contents(&mut Contents::Bytes(contents))
    }

    /// Writes what `spool` holds (from its start), as `write` writes bytes: for output made
    /// over a long time, spooled to a temp file instead of kept in memory until the end.
    pub fn write_spooled(self, spool: &mut File) -> anyhow::Result<()> {
        self.write_contents(&mut Contents::Spooled(spool))
    }

    fn write_contents(mut self, contents: &mut Contents) -> anyhow::Result<()> {
        let shown = self.shown.clone();
        if let Kind::Stdout = self.kind {
            // Stdout is the results' only copy: kept elsewhere if the print fails.
            let mut bytes = Vec::new();
            contents.write_to(&mut bytes)?;
            return Ok(print_or_keep(&bytes, Some(&bytes))?);
        }
        keep_if_unwritten(&shown, contents, |contents| match &mut self.kind {
            Kind::Stdout => unreachable!("printed above"),
            Kind::Through(file) => contents.write_to(file),
            Kind::Regular { dir, name, .. } => replace_in(dir, name, contents),
        })
    }
}

fn kind(path: &Path, shown: &str) -> anyhow::Result<Kind> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Ok(to) = std::fs::read_link(path) {
                bail!(
                    "{shown} is a symlink to {}, which does not exist: create it, or name a file",
                    to.display()
                );
            }
            let (dir, name) = refuse_planted_link(path, shown)?;
            return regular(dir, name, shown);
        }
        Err(e) => bail!("{shown}: {e}"),
    };
    if is_stdout(&meta) {
        return Ok(Kind::Stdout);
    }
    let file_type = meta.file_type();
    if file_type.is_dir() {
        bail!(
            "{shown} is a directory: name a file in it, such as {}",
            path.join("results.json").display()
        );
    }
    if file_type.is_block_device() {
        bail!("{shown} is a block device: results are never written onto a disk; name a file");
    }
    if file_type.is_socket() {
        bail!("{shown} is a socket: name a file, or - for stdout");
    }
    if file_type.is_char_device() || file_type.is_fifo() {
        return through(path, shown, file_type.is_fifo()).map(Kind::Through);
    }
    // A regular file, perhaps behind symlinks: the file is replaced, the links stay, unless a
    // link is one another user could have planted.
    let (dir, name) = refuse_planted_link(path, shown)?;
    if !dir
        .stat_at(&name)
        .is_ok_and(|st| st.st_mode & libc::S_IFMT == libc::S_IFLNK)
    {
        return regular(dir, name, shown);
    }
    let target = std::fs::canonicalize(dir.fd_path().join(&name))
        .with_context(|| format!("{shown}: cannot resolve"))?;
    let (dir, name) = dir_and_name(&target).with_context(|| shown.to_string())?;
    regular(dir, name.to_os_string(), shown)
}

/// Opens a device or FIFO for writing now; a FIFO must have its reader already.
fn through(path: &Path, shown: &str, fifo: bool) -> anyhow::Result<File> {
    let flags = if fifo { libc::O_NONBLOCK } else { 0 };
    let file = match OpenOptions::new()
        .write(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(file) => file,
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            bail!("{shown} is a FIFO with no reader: start its reader first, or name a file")
        }
        Err(e) => bail!("{shown}: cannot open for writing: {e}"),
    };
    if fifo {
        // Blocking writes from here on: the reader takes the results at its own pace.
        // SAFETY: F_SETFL on an fd this function owns.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) } != 0 {
            bail!("{shown}: {}", std::io::Error::last_os_error());
        }
    }
    Ok(file)
}

/// `path`'s directory, opened (the directories on the way checked as they are opened,
/// `crate::safety::owned_files`), and its name there; refused if the name is a link in a directory
/// another user can write, made by someone but root or this user: following it, root would
/// replace a file the link's maker chose.
fn refuse_planted_link(path: &Path, shown: &str) -> anyhow::Result<(Dir, OsString)> {
    let (dir, name) = dir_and_name(path).with_context(|| shown.to_string())?;
    let name = name.to_os_string();
    let Ok(link) = dir.stat_at(&name) else {
        return Ok((dir, name));
    };
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let planted = link.st_mode & libc::S_IFMT == libc::S_IFLNK
        && link.st_uid != me
        && link.st_uid != 0
        && dir.writers() != Writers::Private;
    anyhow::ensure!(
        !planted,
        "{shown} is a link made by uid {} in a directory other users can write: not followed \
         (root would replace the file it names); remove it, or name the file itself",
        link.st_uid
    );
    Ok((dir, name))
}

/// Checks the directory of the regular file `target` and takes the lock beside it; `target`
/// itself is not touched.
fn regular(dir: Dir, name: OsString, shown: &str) -> anyhow::Result<Kind> {
    let shown_dir = dir.path().display();
    crate::safety::scratch::remove_stale_results(&dir.fd_path());
    crate::safety::scratch::results_temp_file(&dir)
        .map(drop)
        .with_context(|| format!("{shown}: cannot write into {shown_dir}"))?;
    let free = free_bytes(&dir.fd_path()).with_context(|| format!("{shown}: {shown_dir}"))?;
    if free < MIN_FREE_BYTES {
        bail!(
            "{shown}: only {} KiB free in {shown_dir}: free some space, or name a file elsewhere",
            free / 1024,
        );
    }
    let claim = claim(&dir, &name, shown)?;
    Ok(Kind::Regular {
        dir: Box::new(dir),
        name,
        _claim: claim,
    })
}

/// Claims `target` for this run: binds the abstract unix socket named for it (its
/// directory's device and inode, so every spelling of the path is one name, and a digest of
/// its file name). An abstract name is no file: the kernel frees it when its last descriptor
/// closes, so a run killed by SIGKILL leaves nothing behind, where a lock file stays (and a
/// lock file in a read-only parent of a writable file could not be made at all). The socket is
/// close-on-exec, so a runner or a `stat` command never holds it past the run. Its limit:
/// abstract names are per network namespace, so two runs in different ones (two containers
/// sharing a directory) do not see each other's claim.
fn claim(dir: &Dir, file_name: &OsStr, shown: &str) -> anyhow::Result<UnixListener> {
    let digest = Sha256::digest(file_name.as_encoded_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    let (dev, ino) = (dir.stat().st_dev, dir.stat().st_ino);
    let name = format!("hookprof-o/{dev}:{ino}/{hex}");
    let addr = SocketAddr::from_abstract_name(name.as_bytes())
        .with_context(|| format!("{shown}: cannot name its claim"))?;
    match UnixListener::bind_addr(&addr) {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => bail!(
            "{shown}: another run is writing it: wait for that run to end, or name another file"
        ),
        Err(e) => bail!("{shown}: cannot claim it for this run: {e}"),
    }
}

/// Bytes an unprivileged writer may still use on the filesystem of `dir`.
fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: statvfs fills the zeroed struct; c is a valid C string.
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(s.f_bavail * s.f_frsize)
}

/// True when `meta` is the file stdout already goes to (`-o /dev/stdout`, `-o r.json > r.json`).
fn is_stdout(meta: &std::fs::Metadata) -> bool {
    use std::os::fd::AsFd;
    let Ok(fd) = std::io::stdout().as_fd().try_clone_to_owned() else {
        return false;
    };
    File::from(fd)
        .metadata()
        .is_ok_and(|out| (out.dev(), out.ino()) == (meta.dev(), meta.ino()))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn refusal(path: &Path) -> String {
        Destination::prepare(path).unwrap_err().to_string()
    }

    #[test]
    fn a_directory_a_dangling_symlink_and_a_fifo_without_reader_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = refusal(dir.path());
        assert!(err.contains("is a directory: name a file in it"), "{err}");
        let dangling = dir.path().join("dangling.json");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
        let err = refusal(&dangling);
        assert!(err.contains("which does not exist"), "{err}");
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let err = refusal(&fifo);
        assert!(err.contains("FIFO with no reader"), "{err}");
        // Nothing was made or replaced.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        assert!(std::fs::symlink_metadata(&dangling).unwrap().is_symlink());
    }

    #[test]
    fn a_spooled_recording_is_written_whole_from_its_start() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("recording.jsonl");
        std::fs::write(&target, "old").unwrap();
        let mut spool = tempfile::tempfile().unwrap();
        for i in 0..1000 {
            writeln!(spool, "{{\"interval\": {i}}}").unwrap();
        }
        // The spool stands at its end, where the last interval left it.
        Destination::prepare(&target)
            .unwrap()
            .write_spooled(&mut spool)
            .unwrap();
        let written = std::fs::read_to_string(&target).unwrap();
        let lines: Vec<&str> = written.lines().collect();
        assert_eq!(lines.len(), 1000);
        assert_eq!(
            (lines[0], lines[999]),
            ("{\"interval\": 0}", "{\"interval\": 999}")
        );
    }

    #[test]
    fn a_symlinked_file_is_replaced_at_its_target_and_the_link_stays() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target.json");
        std::fs::write(&target, "old").unwrap();
        let link = dir.path().join("link.json");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        Destination::prepare(&link).unwrap().write(b"new").unwrap();
        assert!(std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
    }

    #[test]
    fn a_fifo_with_a_reader_is_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read(fifo).unwrap())
        };
        // The reader opens in its own time: retry until it is there.
        let destination = (0..500)
            .find_map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(10));
                Destination::prepare(&fifo).ok()
            })
            .expect("the reader opened the FIFO");
        destination.write(b"through").unwrap();
        assert_eq!(reader.join().unwrap(), b"through");
        assert!(std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo());
    }

    #[test]
    fn a_second_writer_is_refused_and_nothing_is_made_before_the_results() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        let first = Destination::prepare(&path).unwrap();
        assert!(!path.exists(), "a file was made before the results");
        let err = refusal(&path);
        assert!(err.contains("another run is writing it"), "{err}");
        drop(first);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            0,
            "the lock stayed"
        );
        let first = Destination::prepare(&path).unwrap();
        first.write(b"done").unwrap();
        // Once written, the file is free for the next run.
        Destination::prepare(&path)
            .unwrap()
            .write(b"again")
            .unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"again");
    }

    #[test]
    fn dash_is_stdout() {
        assert!(Destination::prepare(Path::new("-")).unwrap().is_stdout());
    }

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
}
