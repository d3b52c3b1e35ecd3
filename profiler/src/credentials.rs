//! Whom the runner runs as (`--user`).
use anyhow::{anyhow, bail, Result};

/// Whom the workload runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Credentials {
    pub uid: u32,
    pub gid: u32,
}

impl Credentials {
    /// A user by name or uid, from the passwd database (a bare uid not listed there runs with
    /// gid = uid).
    pub fn lookup(user: &str) -> Result<Credentials> {
        let found = match user.parse::<u32>() {
            Ok(uid) => passwd_entry(|pw, buf, out| {
                // SAFETY: valid out-pointers and buffer of the given length.
                unsafe { libc::getpwuid_r(uid, pw, buf.as_mut_ptr(), buf.len(), out) }
            })
            .or(Some(Credentials { uid, gid: uid })),
            Err(_) => {
                let name = std::ffi::CString::new(user)
                    .map_err(|_| anyhow!("--user '{user}': not a user name"))?;
                passwd_entry(|pw, buf, out| {
                    // SAFETY: a NUL-terminated name, valid out-pointers and buffer.
                    unsafe { libc::getpwnam_r(name.as_ptr(), pw, buf.as_mut_ptr(), buf.len(), out) }
                })
            }
        };
        found.ok_or_else(|| anyhow!("--user '{user}': no such user in the passwd database"))
    }
}

/// Calls a getpw*_r function and returns the uid and gid it found.
fn passwd_entry(
    get: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<Credentials> {
    // SAFETY: passwd is plain data, filled in by `get`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out = std::ptr::null_mut();
    let r = get(&mut pw, &mut buf, &mut out);
    (r == 0 && !out.is_null()).then_some(Credentials {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Drops the runner's credentials to `user`'s, for good (real, effective and saved ids, no
/// supplementary groups). The runner is single-threaded, so the raw syscalls change them all.
pub fn become_user(user: Credentials) -> Result<()> {
    // SAFETY: plain syscalls on this thread's credentials; a null list with size 0 is valid.
    unsafe {
        if libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0 {
            bail!("setgroups: {}", std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_setresgid, user.gid, user.gid, user.gid) != 0 {
            bail!(
                "setresgid({}): {}",
                user.gid,
                std::io::Error::last_os_error()
            );
        }
        if libc::syscall(libc::SYS_setresuid, user.uid, user.uid, user.uid) != 0 {
            bail!(
                "setresuid({}): {}",
                user.uid,
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}
