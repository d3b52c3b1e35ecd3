//! Opening a file the user named for reading: it must be a regular file (a FIFO would block
//! forever waiting for a writer, a device or /dev/zero would stream without end), checked on
//! the opened descriptor so nothing can swap it in between, and it is read only up to a stated
//! bound, whose figure the error names.
use std::{
    fs::{File, OpenOptions},
    io::Read,
    os::{
        fd::AsRawFd,
        unix::fs::{FileTypeExt, OpenOptionsExt},
    },
    path::Path,
};

/// The most any input file is read to: far above any results file, lmbench summary or time
/// log (a quick run's results are about 250 KB), so a wrong file ends in an error, not in
/// memory exhaustion.
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// Opens `path` for reading if it is a regular file (symlinks followed); anything else is an
/// error that says what it is. A FIFO is opened without waiting for a writer, then refused.
pub fn open_regular(path: &Path) -> std::io::Result<File> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path);
    // A socket cannot be opened at all (ENXIO): say what it is, as for the others.
    let file = match opened {
        Ok(file) => file,
        Err(e) => match std::fs::metadata(path)
            .ok()
            .and_then(|m| not_regular(m.file_type()))
        {
            Some(refusal) => return Err(refusal),
            None => return Err(e),
        },
    };
    if let Some(refusal) = not_regular(file.metadata()?.file_type()) {
        return Err(refusal);
    }
    // Reads block again from here on (a regular file never waits, but be plain about it).
    // SAFETY: F_SETFL on a descriptor this function owns.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETFL, 0) };
    Ok(file)
}

/// The error for a file of `file_type`, unless it is a regular file.
fn not_regular(file_type: std::fs::FileType) -> Option<std::io::Error> {
    let what = if file_type.is_file() {
        None
    } else if file_type.is_dir() {
        Some("a directory")
    } else if file_type.is_fifo() {
        Some("a FIFO")
    } else if file_type.is_socket() {
        Some("a socket")
    } else if file_type.is_char_device() {
        Some("a character device")
    } else if file_type.is_block_device() {
        Some("a block device")
    } else {
        Some("not a regular file")
    };
    what.map(|what| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {what}, not a regular file: name a file"),
        )
    })
}

/// The whole of the regular file `path`, at most `max` bytes; `what` names the file in errors
/// (`hookprof: error: {what}: ...`).
pub fn read_bounded(path: &Path, max: u64) -> anyhow::Result<Vec<u8>> {
    let shown = path.display();
    let file = open_regular(path).map_err(|e| anyhow::anyhow!("{shown}: cannot read: {e}"))?;
    // A file already past the bound is refused before a byte is read; the bounded read below
    // still holds one that grows while it is read.
    let size = file.metadata().map_or(0, |m| m.len());
    anyhow::ensure!(size <= max, "{shown}: {}", too_large(max));
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| anyhow::anyhow!("{shown}: cannot read: {e}"))?;
    anyhow::ensure!(bytes.len() as u64 <= max, "{shown}: {}", too_large(max));
    Ok(bytes)
}

fn too_large(max: u64) -> String {
    format!(
        "more than {} MiB, the most hookprof reads of a file: name the right file",
        max >> 20
    )
}

/// [`read_bounded`] at [`MAX_INPUT_BYTES`], as text (invalid UTF-8 is an error naming the file).
pub fn read_text(path: &Path) -> anyhow::Result<String> {
    String::from_utf8(read_bounded(path, MAX_INPUT_BYTES)?)
        .map_err(|e| anyhow::anyhow!("{}: not UTF-8 text: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_and_a_directory_are_refused_at_once_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: c is a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let err = read_bounded(&fifo, 10).unwrap_err().to_string();
        assert!(
            err.ends_with("is a FIFO, not a regular file: name a file"),
            "{err}"
        );
        let err = read_bounded(Path::new("/dev/zero"), 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is a character device"), "{err}");
        let err = read_bounded(dir.path(), 10).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
    }

    #[test]
    fn a_file_past_the_bound_is_refused_with_the_figure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big");
        std::fs::write(&path, vec![b'x'; (2 << 20) + 1]).unwrap();
        let err = read_bounded(&path, 2 << 20).unwrap_err().to_string();
        assert!(err.contains("more than 2 MiB"), "{err}");
        assert_eq!(read_bounded(&path, 3 << 20).unwrap().len(), (2 << 20) + 1);
    }
}
