//! Every file hookprof creates, replaces or deletes goes through here, so a link planted or a
//! directory swapped by another user never makes root write or delete outside its own files.
//! A directory is reached component by component from an open descriptor (O_NOFOLLOW |
//! O_DIRECTORY), a symlink on the way followed only where no other user could have planted it;
//! a new file is made O_EXCL | O_NOFOLLOW in the directory's descriptor, a replacement is a
//! rename within that descriptor, and a deletion checks it removes the file it means (the
//! inode it recorded). Who else can write a directory is judged on the open descriptor: a
//! directory another user owns, or one that others may write, is shared; one that is sticky
//! and root-owned (/tmp) lets others add names but never take or replace root's.
use std::{
    collections::VecDeque,
    ffi::{CString, OsStr, OsString},
    fs::File,
    io,
    os::{
        fd::{AsRawFd, FromRawFd, OwnedFd},
        unix::ffi::{OsStrExt, OsStringExt},
    },
    path::{Component, Path, PathBuf},
};

/// The most symlinks followed in one path, as the kernel's limit.
const MAX_LINKS: usize = 40;

/// An open directory, reached without following a link another user could have planted.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    /// As the caller named it, for messages.
    path: PathBuf,
    stat: libc::stat,
    /// Why another user could swap a directory or link on the way here for another (one
    /// that user can write, or not root's or this user's in a sticky one), if they could.
    swappable: Option<String>,
}

/// Who besides this process (and root) can change what a directory holds, if anyone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Writers {
    /// Only this user (and root).
    Private,
    /// Others can add names, but not take or replace ours: sticky and root-owned, as /tmp.
    StickyRoot,
    /// Another user can rename or replace what is in it: the reason, "uid 65534 owns it".
    Shared(String),
}

impl Dir {
    /// Opens the directory `path`.
    pub fn open(path: &Path) -> io::Result<Dir> {
        resolve(path, None)
    }

    /// Opens the directory `path`, making what is missing of it with `mode` (0700 for
    /// hookprof's own data).
    pub fn create(path: &Path, mode: libc::mode_t) -> io::Result<Dir> {
        resolve(path, Some(mode))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who can change what this directory holds.
    pub fn writers(&self) -> Writers {
        writers(&self.stat)
    }

    /// An error unless no other user can replace what this directory holds (sticky and
    /// root-owned will do): `what` names the use, as `spool` or `baseline dir`.
    pub fn refuse_shared(&self, what: &str) -> anyhow::Result<()> {
        let why = match (self.writers(), &self.swappable) {
            (Writers::Shared(why), _) => Some(why),
            (_, Some(on_the_way)) => Some(on_the_way.clone()),
            _ => None,
        };
        match why {
            None => Ok(()),
            Some(why) => anyhow::bail!(
                "{what} {}: another user can write it ({why}), and a link planted there would \
                 make hookprof write or read elsewhere: name a directory only you (or root) can \
                 write",
                self.path.display()
            ),
        }
    }

    /// Creates the new file `name` (never an existing one, never through a link) with `mode`,
    /// for writing.
    pub fn create_new(&self, name: &OsStr, mode: libc::mode_t) -> io::Result<File> {
        self.open_at(
            name,
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW,
            mode,
        )
    }

    /// Opens `name` with `flags` (plus O_NOFOLLOW and O_CLOEXEC): a link there is ELOOP.
    pub fn open_at(
        &self,
        name: &OsStr,
        flags: libc::c_int,
        mode: libc::mode_t,
    ) -> io::Result<File> {
        let name = c_name(name)?;
        // SAFETY: a valid directory fd and NUL-terminated name; the fd returned is ours.
        let fd = unsafe {
            libc::openat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                flags | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                libc::c_uint::from(mode),
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: openat returned a new descriptor this function owns.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// What `name` is, not following a link.
    pub fn stat_at(&self, name: &OsStr) -> io::Result<libc::stat> {
        let name = c_name(name)?;
        // SAFETY: plain data, filled in by fstatat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: a valid directory fd, NUL-terminated name and out-pointer.
        let r = unsafe {
            libc::fstatat(
                self.fd.as_raw_fd(),
                name.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(st)
    }

    /// Renames `from` to `to`, both in this directory: the name `to` is replaced, whatever it
    /// was (a file or a link), and nothing it pointed to is touched.
    pub fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = self.fd.as_raw_fd();
        // SAFETY: a valid directory fd and NUL-terminated names.
        if unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Removes the file `name` if it is still the one `made` (device and inode) names: a name
    /// another user swapped in the meantime is left alone. True when it was removed.
    pub fn remove_own(&self, name: &OsStr, made: (u64, u64)) -> io::Result<bool> {
        let now = match self.stat_at(name) {
            Ok(now) => now,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        if (now.st_dev, now.st_ino) != made {
            return Ok(false);
        }
        let c = c_name(name)?;
        // SAFETY: a valid directory fd and NUL-terminated name.
        if unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(true)
    }

    /// The directory as a path that reaches it through its descriptor (`/proc/self/fd/N`),
    /// for a library that takes paths: nothing renamed on the way can redirect it.
    pub fn fd_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// The directory's own metadata, from its descriptor.
    pub fn stat(&self) -> &libc::stat {
        &self.stat
    }
}

/// Who can change what the directory `st` holds.
pub fn writers(st: &libc::stat) -> Writers {
    // SAFETY: geteuid and getegid have no preconditions.
    let (me, my_group) = unsafe { (libc::geteuid(), libc::getegid()) };
    let sticky_root = st.st_mode & libc::S_ISVTX != 0 && st.st_uid == 0;
    if st.st_uid != me && st.st_uid != 0 {
        return Writers::Shared(format!("uid {} owns it", st.st_uid));
    }
    if st.st_mode & 0o002 != 0 {
        return if sticky_root {
            Writers::StickyRoot
        } else {
            Writers::Shared("every user may write it".into())
        };
    }
    if st.st_mode & 0o020 != 0 && st.st_gid != 0 && st.st_gid != my_group {
        return if sticky_root {
            Writers::StickyRoot
        } else {
            Writers::Shared(format!("group {} may write it", st.st_gid))
        };
    }
    Writers::Private
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn open_dir(at: libc::c_int, name: &CString) -> io::Result<OwnedFd> {
    // SAFETY: a valid fd (or AT_FDCWD) and NUL-terminated name; the fd returned is ours.
    let fd = unsafe {
        libc::openat(
            at,
            name.as_ptr(),
            // O_PATH: a directory this user may search but not list is reached too.
            libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: plain data, filled in by fstat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: a valid fd and out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// Walks `path` from `/` or the current directory, one component at a time, making missing
/// ones with `create`'s mode if given.
fn resolve(path: &Path, create: Option<libc::mode_t>) -> io::Result<Dir> {
    let start = if path.is_absolute() { "/" } else { "." };
    let mut fd = open_dir(libc::AT_FDCWD, &CString::new(start)?)?;
    let mut stat = fstat(&fd)?;
    let mut todo: VecDeque<OsString> = components(path);
    let mut links = 0;
    let mut swappable = None;
    while let Some(name) = todo.pop_front() {
        let c = c_name(&name)?;
        let next = match open_dir(fd.as_raw_fd(), &c) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && create.is_some() => {
                // SAFETY: a valid directory fd and NUL-terminated name.
                let made =
                    unsafe { libc::mkdirat(fd.as_raw_fd(), c.as_ptr(), create.unwrap_or(0o700)) };
                if made != 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
                    return Err(io::Error::last_os_error());
                }
                open_dir(fd.as_raw_fd(), &c)
            }
            other => other,
        };
        let next = match next {
            Ok(next) => next,
            Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR)) => {
                let dir = Dir {
                    fd,
                    path: path.to_path_buf(),
                    stat,
                    swappable: None,
                };
                let (target, link) = followed_link(&dir, &name, path)?;
                swappable = swappable.or_else(|| swap_reason(&dir.stat, &link, &name));
                links += 1;
                if links > MAX_LINKS {
                    return Err(io::Error::from_raw_os_error(libc::ELOOP));
                }
                for part in components(&target).into_iter().rev() {
                    todo.push_front(part);
                }
                fd = if target.is_absolute() {
                    open_dir(libc::AT_FDCWD, &CString::new("/")?)?
                } else {
                    dir.fd
                };
                stat = fstat(&fd)?;
                continue;
            }
            Err(e) => return Err(e),
        };
        let child = fstat(&next)?;
        swappable = swappable.or_else(|| swap_reason(&stat, &child, &name));
        fd = next;
        stat = child;
    }
    Ok(Dir {
        fd,
        path: path.to_path_buf(),
        stat,
        swappable,
    })
}

/// Why another user could replace the entry `name` (`child`) of the directory `parent`, if
/// they could: `parent` is theirs to write, or sticky and `child` is not root's or ours.
fn swap_reason(parent: &libc::stat, child: &libc::stat, name: &OsStr) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let shown = Path::new(name).display();
    match writers(parent) {
        Writers::Private => None,
        Writers::StickyRoot if child.st_uid == me || child.st_uid == 0 => None,
        Writers::StickyRoot => Some(format!("{shown} on the way is uid {}'s", child.st_uid)),
        Writers::Shared(why) => Some(format!("the directory holding {shown} on the way: {why}")),
    }
}

/// The target of the link `name` in `dir`, if it may be followed: in a directory no other
/// user can write, or made by root or this user (as the kernel's protected_symlinks judges);
/// and the link's own metadata.
fn followed_link(dir: &Dir, name: &OsStr, path: &Path) -> io::Result<(PathBuf, libc::stat)> {
    let link = dir.stat_at(name)?;
    if link.st_mode & libc::S_IFMT != libc::S_IFLNK {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let others = match dir.writers() {
        Writers::Private => None,
        Writers::StickyRoot => Some("sticky: every user may add to it".to_string()),
        Writers::Shared(why) => Some(why),
    };
    if let Some(why) = others {
        if link.st_uid != me && link.st_uid != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{}: {} is a link uid {} made in a directory another user can write \
                     ({why}): not followed; name the real directory",
                    path.display(),
                    Path::new(name).display(),
                    link.st_uid
                ),
            ));
        }
    }
    let c = c_name(name)?;
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    // SAFETY: a valid directory fd, NUL-terminated name and a buffer of the given length.
    let n = unsafe {
        libc::readlinkat(
            dir.fd.as_raw_fd(),
            c.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(n as usize);
    Ok((PathBuf::from(OsString::from_vec(buf)), link))
}

/// The components of `path` to walk: names and `..`, nothing for `/` and `.`.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{chown, symlink, PermissionsExt};

    use super::*;

    const NOBODY: u32 = 65534;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    fn as_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn who_can_write_a_directory_is_judged_on_what_was_opened() {
        let temp = tempfile::tempdir().unwrap();
        let dir = temp.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        mode(&dir, 0o700);
        assert_eq!(Dir::open(&dir).unwrap().writers(), Writers::Private);
        mode(&dir, 0o777);
        let shared = Dir::open(&dir).unwrap();
        assert!(matches!(shared.writers(), Writers::Shared(ref why) if why.contains("every user")));
        let e = shared.refuse_shared("spool").unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("spool {}: another user", dir.display())),
            "{e}"
        );
        mode(&dir, 0o1777);
        // A private directory inside a shared one: its owner could rename it away.
        let inner = dir.join("inner");
        std::fs::create_dir(&inner).unwrap();
        mode(&inner, 0o700);
        mode(&dir, 0o777);
        let e = Dir::open(&inner).unwrap().refuse_shared("store directory");
        assert!(e.unwrap_err().to_string().contains("on the way"));
        mode(&dir, 0o1777);
        if as_root() {
            // In a sticky root-owned directory, root's own is safe; another's is not.
            assert!(Dir::open(&inner).unwrap().refuse_shared("spool").is_ok());
            chown(&inner, Some(NOBODY), None).unwrap();
            let e = Dir::open(&inner)
                .unwrap()
                .refuse_shared("spool")
                .unwrap_err();
            assert!(e.to_string().contains("uid 65534 owns it"), "{e}");
            // Root's inside nobody's, inside the sticky one: nobody can rename it away.
            let deeper = inner.join("deeper");
            std::fs::create_dir(&deeper).unwrap();
            let e = Dir::open(&deeper)
                .unwrap()
                .refuse_shared("spool")
                .unwrap_err();
            assert!(e.to_string().contains("on the way"), "{e}");
            chown(&inner, Some(0), None).unwrap();
            assert_eq!(Dir::open(&dir).unwrap().writers(), Writers::StickyRoot);
            chown(&dir, Some(NOBODY), None).unwrap();
            let theirs = Dir::open(&dir).unwrap().writers();
            assert_eq!(theirs, Writers::Shared("uid 65534 owns it".into()));
        }
    }

    #[test]
    fn a_link_another_user_planted_in_a_shared_directory_is_never_followed() {
        if !as_root() {
            return; // planting as another user needs root
        }
        let temp = tempfile::tempdir().unwrap();
        let shared = temp.path().join("shared");
        let target = temp.path().join("root-only");
        std::fs::create_dir(&shared).unwrap();
        std::fs::create_dir(&target).unwrap();
        chown(&shared, Some(NOBODY), Some(NOBODY)).unwrap();
        let planted = shared.join("sub");
        symlink(&target, &planted).unwrap();
        std::os::unix::fs::lchown(&planted, Some(NOBODY), Some(NOBODY)).unwrap();
        let e = Dir::open(&planted.join("x")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(e.to_string().contains("a link uid 65534 made"), "{e}");
        let e = Dir::create(&planted.join("new"), 0o700).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        assert!(!target.join("new").exists(), "made through the link");
        // Root's own link there, or any link in a directory only root writes, is followed.
        std::os::unix::fs::lchown(&planted, Some(0), Some(0)).unwrap();
        assert_eq!(Dir::open(&planted).unwrap().stat().st_ino, ino(&target));
        let private = temp.path().join("link");
        symlink(&target, &private).unwrap();
        std::os::unix::fs::lchown(&private, Some(NOBODY), Some(NOBODY)).unwrap();
        assert_eq!(Dir::open(&private).unwrap().stat().st_ino, ino(&target));
    }

    fn ino(path: &Path) -> u64 {
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(path).unwrap())
    }

    #[test]
    fn new_files_are_never_made_through_a_link_and_renames_stay_in_the_directory() {
        let temp = tempfile::tempdir().unwrap();
        let victim = temp.path().join("victim");
        std::fs::write(&victim, "root's").unwrap();
        let dir = Dir::create(&temp.path().join("a/b"), 0o700).unwrap();
        let b = temp.path().join("a/b");
        symlink(&victim, b.join("planted")).unwrap();
        let e = dir.create_new(OsStr::new("planted"), 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        // A directory renamed after it was opened: the file goes where it was opened.
        std::fs::rename(&b, temp.path().join("moved")).unwrap();
        std::fs::create_dir(&b).unwrap();
        dir.create_new(OsStr::new("f"), 0o600).unwrap();
        dir.rename(OsStr::new("f"), OsStr::new("planted")).unwrap();
        assert!(temp.path().join("moved/planted").is_file());
        assert!(!b.join("f").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's");
        // Removing checks the inode: the name now holds another file, left alone.
        let st = dir.stat_at(OsStr::new("planted")).unwrap();
        // The other file made while the first still exists, so it cannot reuse its inode.
        std::fs::write(temp.path().join("moved/other"), "another").unwrap();
        std::fs::rename(
            temp.path().join("moved/other"),
            temp.path().join("moved/planted"),
        )
        .unwrap();
        assert!(!dir
            .remove_own(OsStr::new("planted"), (st.st_dev, st.st_ino))
            .unwrap());
        assert!(temp.path().join("moved/planted").exists());
    }

    /// A tree of directories and links (relative, absolute, to files, dangling, in loops),
    /// none another user's: every path through it resolves as the kernel resolves it.
    fn tree() -> tempfile::TempDir {
        let temp = tempfile::tempdir().unwrap();
        let root = temp.path();
        for dir in ["a/b/c", "a/d", "e"] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
        }
        std::fs::write(root.join("a/file"), "").unwrap();
        for (link, to) in [
            ("a/up", PathBuf::from("..")),
            ("a/b/toe", PathBuf::from("../../e")),
            ("e/abs", root.join("a/b")),
            ("e/f", PathBuf::from("../a/file")),
            ("e/none", PathBuf::from("nowhere")),
            ("a/loop", PathBuf::from("loop")),
        ] {
            symlink(to, root.join(link)).unwrap();
        }
        temp
    }

    proptest::proptest! {
        #[test]
        fn every_path_resolves_to_the_directory_the_kernel_opens(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "a", "b", "c", "d", "e", "up", "toe", "abs", "f", "none", "loop", "..", ".",
                    "file",
                ]),
                0..8,
            )
        ) {
            let temp = tree();
            let path = parts.iter().fold(temp.path().to_path_buf(), |p, c| p.join(c));
            let ours = Dir::open(&path).map(|d| d.stat().st_ino);
            let kernel = std::fs::metadata(&path)
                .and_then(|m| if m.is_dir() { Ok(m) } else { Err(io::Error::from_raw_os_error(libc::ENOTDIR)) })
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m));
            match (ours, kernel) {
                (Ok(a), Ok(b)) => proptest::prop_assert_eq!(a, b, "{}", path.display()),
                (Err(_), Err(_)) => {}
                (a, b) => proptest::prop_assert!(false, "{}: ours {a:?}, the kernel's {b:?}", path.display()),
            }
        }
    }

    #[test]
    fn relative_paths_dot_dot_and_link_loops_resolve_as_the_kernel_would() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(temp.path().join("a/b")).unwrap();
        symlink("b", temp.path().join("a/rel")).unwrap();
        let via = Dir::open(&temp.path().join("a/rel/../b")).unwrap();
        assert_eq!(via.stat().st_ino, ino(&temp.path().join("a/b")));
        symlink("loop", temp.path().join("loop")).unwrap();
        let e = Dir::open(&temp.path().join("loop")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ELOOP), "{e}");
        std::fs::write(temp.path().join("file"), "").unwrap();
        let e = Dir::open(&temp.path().join("file")).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTDIR), "{e}");
    }
}
