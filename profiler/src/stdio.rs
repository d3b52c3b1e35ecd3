//! The one way the program writes to stdout and stderr, checked. Rust leaves SIGPIPE ignored
//! (so a workload's broken pipe is an error it reports, not a silent death), and std's
//! `print!` panics on any other failed write and ignores a closed stdout. Here a document goes
//! to stdout whole through [`print`], whose failure is a [`WriteFailed`] that `main` turns into
//! its exit code: quiet on a reader that stopped early (EPIPE, as `seq | head` ends), one line
//! otherwise (a full disk, a closed stdout). Lines for stderr go through [`eprintln!`], which
//! never panics: a terminal gone with its SSH session must not cost the run being saved.
use std::{
    fmt,
    fs::File,
    io::Write,
    mem::ManuallyDrop,
    os::fd::{FromRawFd, RawFd},
};

/// A write to stdout that failed; `main` maps it to its exit code.
#[derive(Debug)]
pub struct WriteFailed {
    pub error: std::io::Error,
    /// Where the results that stdout should have carried went instead, said after the error.
    pub note: Option<String>,
}

impl WriteFailed {
    /// Ends the command without a word: the reader stopped early and nothing needs saying.
    pub fn is_quiet(&self) -> bool {
        self.error.kind() == std::io::ErrorKind::BrokenPipe && self.note.is_none()
    }
}

impl fmt::Display for WriteFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // EBADF is what a closed stdout (`>&-`) gives once `guard_standard_fds` holds it.
        if self.error.raw_os_error() == Some(libc::EBADF) {
            f.write_str("stdout: cannot write: stdout is closed")?;
        } else {
            write!(f, "stdout: cannot write: {}", self.error)?;
        }
        match &self.note {
            Some(note) => write!(f, "; {note}"),
            None => Ok(()),
        }
    }
}

impl std::error::Error for WriteFailed {}

/// Writes `text` to stdout, all of it, unbuffered.
pub fn print(text: impl AsRef<[u8]>) -> Result<(), WriteFailed> {
    write_fd(libc::STDOUT_FILENO, text.as_ref()).map_err(|error| WriteFailed { error, note: None })
}

/// Writes `text` to stderr as it is; a failure is dropped, as there is nowhere left to say it.
pub fn eprint(text: &str) {
    let _ = write_fd(libc::STDERR_FILENO, text.as_bytes());
}

/// Writes a line to stderr; a failure is dropped, as there is nowhere left to say it.
pub fn eprint_line(args: fmt::Arguments<'_>) {
    let mut line = args.to_string();
    line.push('\n');
    let _ = write_fd(libc::STDERR_FILENO, line.as_bytes());
}

/// `eprintln!` that never panics (std's panics on a failed write: a hung-up terminal, a full
/// disk). Defined at the crate root, it takes the place of std's in every module.
#[macro_export]
macro_rules! eprintln {
    ($($arg:tt)*) => { $crate::stdio::eprint_line(format_args!($($arg)*)) };
}

fn write_fd(fd: RawFd, bytes: &[u8]) -> std::io::Result<()> {
    // SAFETY: fd is one of the three standard descriptors, open for the process's whole life
    // (`guard_standard_fds`); ManuallyDrop never closes it.
    let mut file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    file.write_all(bytes)?;
    file.flush()
}

/// Run first in `main`: a stdout the caller closed (`>&-`) is held by /dev/null opened
/// read-only, so that a write to it fails (EBADF) instead of vanishing. Rust's start-up code has
/// already put /dev/null, opened read-write, on any closed standard descriptor (so no file the
/// program opens takes its number); that is how a closed stdout is told from `> /dev/null`,
/// which a shell opens write-only.
pub fn guard_standard_fds() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let fd = libc::STDOUT_FILENO;
    // SAFETY: F_GETFL only reads the descriptor's flags.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    // SAFETY: as in write_fd; never closed.
    let file = ManuallyDrop::new(unsafe { File::from_raw_fd(fd) });
    let is_dev_null = file
        .metadata()
        .is_ok_and(|m| m.file_type().is_char_device() && m.rdev() == libc::makedev(1, 3));
    let closed = flags == -1 || (is_dev_null && flags & libc::O_ACCMODE == libc::O_RDWR);
    if !closed {
        return;
    }
    // SAFETY: open with a constant C string, then dup2 and close on descriptors this function
    // opened or that were closed.
    unsafe {
        let opened = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
        if opened >= 0 && opened != fd {
            libc::dup2(opened, fd);
            libc::close(opened);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_names_stdout_and_the_reason_once() {
        let failed = |errno, note: Option<&str>| WriteFailed {
            error: std::io::Error::from_raw_os_error(errno),
            note: note.map(String::from),
        };
        let full = failed(libc::ENOSPC, None);
        assert_eq!(
            full.to_string(),
            "stdout: cannot write: No space left on device (os error 28)"
        );
        assert!(!full.is_quiet());
        assert!(failed(libc::EPIPE, None).is_quiet());
        // A broken pipe that cost the results their place says where they went.
        let kept = failed(libc::EPIPE, Some("the results are in r.json instead"));
        assert!(!kept.is_quiet());
        assert!(kept
            .to_string()
            .ends_with("; the results are in r.json instead"));
        let closed = failed(libc::EBADF, None);
        assert_eq!(closed.to_string(), "stdout: cannot write: stdout is closed");
    }
}
