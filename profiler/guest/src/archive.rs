//! An in-memory tree of guest files written as a newc cpio archive, the format the kernel
//! unpacks into its initramfs.
use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;

enum Entry {
    Dir { mode: u32 },
    File { mode: u32, data: Vec<u8> },
    CharDev { mode: u32, major: u32, minor: u32 },
}

/// Guest paths (absolute) to entries. Sorted, so every directory is written before what it
/// holds: the kernel does not create missing parents.
#[derive(Default)]
pub struct Archive {
    entries: BTreeMap<String, Entry>,
}

impl Archive {
    pub fn dir(&mut self, path: &str, mode: u32) {
        self.parents(path);
        self.entries.insert(
            key(path),
            Entry::Dir {
                mode: mode & 0o7777,
            },
        );
    }

    pub fn file(&mut self, path: &str, mode: u32, data: impl Into<Vec<u8>>) {
        self.parents(path);
        let data = data.into();
        self.entries.insert(
            key(path),
            Entry::File {
                mode: mode & 0o7777,
                data,
            },
        );
    }

    /// Copies a host file (following symlinks) to `guest`, keeping its permission bits.
    pub fn host_file(&mut self, guest: &str, host: &Path) -> Result<()> {
        let data = std::fs::read(host).with_context(|| format!("read {}", host.display()))?;
        let mode = std::fs::metadata(host)?.permissions().mode();
        self.file(guest, mode, data);
        Ok(())
    }

    pub fn char_dev(&mut self, path: &str, mode: u32, major: u32, minor: u32) {
        self.parents(path);
        self.entries.insert(
            key(path),
            Entry::CharDev {
                mode: mode & 0o7777,
                major,
                minor,
            },
        );
    }

    pub fn contains(&self, path: &str) -> bool {
        self.entries.contains_key(&key(path))
    }

    /// A hash of everything the archive holds, to key a cache on.
    pub fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (path, entry) in &self.entries {
            h.update(path.as_bytes());
            h.update([0]);
            let (kind, mode, data): (u8, u32, &[u8]) = match entry {
                Entry::Dir { mode } => (b'd', *mode, &[]),
                Entry::File { mode, data } => (b'f', *mode, data),
                Entry::CharDev { mode, major, minor } => {
                    h.update(major.to_le_bytes());
                    h.update(minor.to_le_bytes());
                    (b'c', *mode, &[])
                }
            };
            h.update([kind]);
            h.update(mode.to_le_bytes());
            h.update((data.len() as u64).to_le_bytes());
            h.update(data);
        }
        crate::hex(&h.finalize())
    }

    pub fn write<W: Write>(&self, mut w: W) -> Result<W> {
        for (ino, (path, entry)) in self.entries.iter().enumerate() {
            let builder = cpio::newc::Builder::new(path)
                .ino(ino as u32 + 1)
                .nlink(1) // no hard links: the kernel links entries with nlink >= 2
                .uid(0)
                .gid(0);
            let (builder, data): (_, &[u8]) = match entry {
                Entry::Dir { mode } => (builder.mode(S_IFDIR | mode), &[]),
                Entry::File { mode, data } => (builder.mode(S_IFREG | mode), data),
                Entry::CharDev { mode, major, minor } => (
                    builder
                        .mode(S_IFCHR | mode)
                        .rdev_major(*major)
                        .rdev_minor(*minor),
                    &[],
                ),
            };
            let size = u32::try_from(data.len()).context("file too large for cpio")?;
            let mut out = builder.write(w, size);
            out.write_all(data)?;
            w = out.finish()?;
        }
        Ok(cpio::newc::trailer(w)?)
    }

    fn parents(&mut self, path: &str) {
        let mut dir = Path::new(path).parent();
        while let Some(d) = dir {
            let k = key(&d.to_string_lossy());
            if k.is_empty() {
                break;
            }
            self.entries.entry(k).or_insert(Entry::Dir { mode: 0o755 });
            dir = d.parent();
        }
    }
}

/// Archive names are relative ("bin/sh"), like `find . | cpio -o` writes them.
fn key(path: &str) -> String {
    path.trim_start_matches('/')
        .trim_end_matches('/')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn parents_come_before_children_and_content_survives() {
        let mut a = Archive::default();
        a.file("/usr/local/bin/tool", 0o755, "#!/bin/sh\n");
        a.dir("/tmp", 0o1777);
        a.char_dev("/dev/console", 0o600, 5, 1);
        let bytes = a.write(Vec::new()).unwrap();

        let mut seen = Vec::new();
        let mut rest = &bytes[..];
        loop {
            let mut entry = cpio::NewcReader::new(rest).unwrap();
            if entry.entry().is_trailer() {
                break;
            }
            let (name, mode) = (entry.entry().name().to_string(), entry.entry().mode());
            let mut data = String::new();
            entry.read_to_string(&mut data).unwrap();
            seen.push((name, mode, data));
            rest = entry.finish().unwrap();
        }
        let names: Vec<_> = seen.iter().map(|(n, ..)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "dev",
                "dev/console",
                "tmp",
                "usr",
                "usr/local",
                "usr/local/bin",
                "usr/local/bin/tool"
            ]
        );
        assert_eq!(seen[2].1, S_IFDIR | 0o1777);
        assert_eq!(
            seen[6],
            (
                "usr/local/bin/tool".into(),
                S_IFREG | 0o755,
                "#!/bin/sh\n".into()
            )
        );
    }

    #[test]
    fn digest_follows_content() {
        let mut a = Archive::default();
        a.file("/init", 0o755, "one");
        let before = a.digest();
        a.file("/init", 0o755, "two");
        assert_ne!(before, a.digest());
        assert_eq!(before.len(), 16);
    }
}
