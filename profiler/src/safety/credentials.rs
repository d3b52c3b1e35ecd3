//! Whom the runner runs as (`--user`), and the process's capability sets.
use anyhow::{anyhow, bail, ensure, Result};

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
        let found =
            found.ok_or_else(|| anyhow!("--user '{user}': no such user in the passwd database"))?;
        // setresuid and setresgid take -1 as "leave unchanged": such a runner would stay root.
        for (kind, id, map) in [
            ("uid", found.uid, "/proc/self/uid_map"),
            ("gid", found.gid, "/proc/self/gid_map"),
        ] {
            if !id_is_mapped(id, map) {
                bail!(
                    "--user '{user}': {kind} {id} is not one this kernel can give a process \
                     (valid: {}): name a real user",
                    mapped_ranges(map)
                );
            }
        }
        Ok(found)
    }
}

/// The id ranges `map` (/proc/self/uid_map or gid_map) gives this namespace, as (first, count);
/// the initial namespace's where /proc cannot tell: every id but -1.
fn id_ranges(map: &str) -> Vec<(u64, u64)> {
    let parsed: Vec<(u64, u64)> = std::fs::read_to_string(map)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let f: Vec<u64> = l
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect();
            (f.len() == 3).then(|| (f[0], f[2]))
        })
        .collect();
    if parsed.is_empty() {
        return vec![(0, u64::from(u32::MAX))];
    }
    parsed
}

fn id_is_mapped(id: u32, map: &str) -> bool {
    let id = u64::from(id);
    id != u64::from(u32::MAX)
        && id_ranges(map)
            .iter()
            .any(|&(first, count)| id >= first && id - first < count)
}

fn mapped_ranges(map: &str) -> String {
    let ranges: Vec<String> = id_ranges(map)
        .iter()
        .map(|&(first, count)| {
            format!(
                "{first}-{}",
                (first + count)
                    .saturating_sub(1)
                    .min(u64::from(u32::MAX) - 1)
            )
        })
        .collect();
    ranges.join(", ")
}

/// The environment of a process run as `user`: a plain PATH, the user's HOME, the language
/// and the temp directory the scratch files are in, and nothing else of the profiler's (test
/// hooks aside, which name no secret and are only read by the runner).
pub fn minimal_environment(user: Credentials) -> Vec<(String, std::ffi::OsString)> {
    let home = passwd_home(user.uid).unwrap_or_else(|| "/".into());
    let mut env = vec![
        ("PATH".to_string(), "/usr/local/bin:/usr/bin:/bin".into()),
        ("HOME".to_string(), home),
        ("TMPDIR".to_string(), std::env::temp_dir().into_os_string()),
    ];
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str() else { continue };
        if name == "LANG" || name.starts_with("HOOKPROF_TEST_") {
            env.push((name.to_string(), value));
        }
    }
    env
}

/// The home directory the passwd database gives `uid`.
fn passwd_home(uid: u32) -> Option<std::ffi::OsString> {
    use std::os::unix::ffi::OsStrExt;
    with_passwd(
        |pw, buf, out| {
            // SAFETY: valid out-pointers and buffer of the given length.
            unsafe { libc::getpwuid_r(uid, pw, buf.as_mut_ptr(), buf.len(), out) }
        },
        |pw| {
            // SAFETY: getpwuid_r sets pw_dir to a NUL-terminated string (or NULL) in its buffer.
            (!pw.pw_dir.is_null())
                .then(|| unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) })
                .map(|dir| std::ffi::OsStr::from_bytes(dir.to_bytes()).to_os_string())
        },
    )
    .flatten()
}

/// Calls a getpw*_r function and returns the uid and gid it found.
fn passwd_entry(
    get: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
) -> Option<Credentials> {
    with_passwd(get, |pw| Credentials {
        uid: pw.pw_uid,
        gid: pw.pw_gid,
    })
}

/// Calls a getpw*_r function and reads the entry it found (while its strings are valid).
fn with_passwd<T>(
    get: impl Fn(&mut libc::passwd, &mut [libc::c_char], &mut *mut libc::passwd) -> libc::c_int,
    read: impl FnOnce(&libc::passwd) -> T,
) -> Option<T> {
    // SAFETY: passwd is plain data, filled in by `get`.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    let mut out = std::ptr::null_mut();
    let r = get(&mut pw, &mut buf, &mut out);
    (r == 0 && !out.is_null()).then(|| read(&pw))
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
    check_became(user)
}

/// Checks that the switch held: every id is `user`'s, no supplementary group, and (for
/// anyone but root) no capability in any set a process can use or pass on.
fn check_became(user: Credentials) -> Result<()> {
    let (mut r, mut e, mut s) = (0, 0, 0);
    // SAFETY: valid out-pointers.
    unsafe { libc::getresuid(&mut r, &mut e, &mut s) };
    ensure!(
        [r, e, s] == [user.uid; 3],
        "after setresuid({}) the runner's uids are {r}/{e}/{s} (real/effective/saved)",
        user.uid
    );
    // SAFETY: valid out-pointers.
    unsafe { libc::getresgid(&mut r, &mut e, &mut s) };
    ensure!(
        [r, e, s] == [user.gid; 3],
        "after setresgid({}) the runner's gids are {r}/{e}/{s} (real/effective/saved)",
        user.gid
    );
    // SAFETY: getgroups with size 0 only counts.
    let groups = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    ensure!(
        groups == 0,
        "after setgroups the runner has {groups} supplementary groups"
    );
    if user.uid == 0 {
        return Ok(());
    }
    let caps = Capabilities::of_this_thread()?;
    ensure!(
        caps.effective == 0 && caps.permitted == 0 && caps.ambient == 0,
        "the runner kept capabilities as uid {} (effective {:#x}, permitted {:#x}, ambient \
         {:#x}): a securebits or file-capability setting keeps them; run without --user or \
         clear it",
        user.uid,
        caps.effective,
        caps.permitted,
        caps.ambient
    );
    Ok(())
}

/// The calling thread's capability sets, as masks of capability numbers (from the kernel,
/// not /proc, which may be missing or out of file descriptors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    pub effective: u64,
    pub permitted: u64,
    pub ambient: u64,
}

impl Capabilities {
    pub fn of_this_thread() -> Result<Capabilities> {
        #[repr(C)]
        struct Header {
            version: u32,
            pid: i32,
        }
        #[repr(C)]
        #[derive(Clone, Copy, Default)]
        struct Data {
            effective: u32,
            permitted: u32,
            inheritable: u32,
        }
        const VERSION_3: u32 = 0x2008_0522;
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let mut data = [Data::default(); 2];
        // SAFETY: a version 3 header and room for its two data words.
        let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
        ensure!(r == 0, "capget: {}", std::io::Error::last_os_error());
        let mask = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
        let mut ambient = 0;
        for cap in 0..64 {
            // SAFETY: prctl with plain integer arguments; an unknown capability is EINVAL.
            let set = unsafe {
                libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_IS_SET, cap, 0, 0)
            };
            if set < 0 {
                break;
            }
            ambient |= u64::from(set == 1) << cap;
        }
        Ok(Capabilities {
            effective: mask(data[0].effective, data[1].effective),
            permitted: mask(data[0].permitted, data[1].permitted),
            ambient,
        })
    }

    pub fn has_effective(&self, cap: u32) -> bool {
        self.effective & (1u64 << cap) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_one_and_unmapped_ids_are_refused() {
        for bad in ["4294967295", "-1"] {
            let e = Credentials::lookup(bad).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.contains(bad) || e.contains("not a user"), "{e}");
        }
        assert!(!id_is_mapped(u32::MAX, "/nonexistent"));
        assert!(id_is_mapped(u32::MAX - 1, "/nonexistent"));
        assert_eq!(Credentials::lookup("0").unwrap().uid, 0);
    }

    #[test]
    fn capabilities_are_read_from_the_kernel() {
        let caps = Capabilities::of_this_thread().unwrap();
        assert_eq!(caps.effective & !caps.permitted, 0, "{caps:?}");
    }
}
