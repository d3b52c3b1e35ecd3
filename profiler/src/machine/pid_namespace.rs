//! The pid namespace hookprof runs in. In a container the pids hookprof knows (its runners',
//! `top --pid`'s) are that namespace's, while the kernel's programs see the initial
//! namespace's: the probes translate with the namespace's device and inode. `/proc` must show
//! the same namespace, or every pid read there would name another process.
use std::os::unix::fs::MetadataExt;

use anyhow::{bail, Result};

/// The inode of the initial pid namespace (the kernel's `PROC_PID_INIT_INO`).
const INITIAL_INODE: u64 = 0xEFFF_FFFC;

/// A pid namespace as `bpf_get_ns_current_pid_tgid` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PidNamespace {
    /// The nsfs device, encoded as the kernel's own `dev_t` (major << 20 | minor).
    pub dev: u64,
    pub ino: u64,
}

impl PidNamespace {
    /// The namespace of process `pid` (`self` for this one), None if /proc cannot tell.
    pub fn of(pid: &str) -> Option<PidNamespace> {
        let meta = std::fs::metadata(format!("/proc/{pid}/ns/pid")).ok()?;
        let dev = meta.dev();
        Some(PidNamespace {
            dev: (u64::from(libc::major(dev)) << 20) | u64::from(libc::minor(dev)),
            ino: meta.ino(),
        })
    }

    /// This process's namespace if it is not the initial one (None on the host).
    pub fn own_if_nested() -> Option<PidNamespace> {
        PidNamespace::of("self").filter(|ns| ns.ino != INITIAL_INODE)
    }
}

/// Refuses a /proc that is missing, or that shows another pid namespace's processes (a
/// namespace entered without mounting its own /proc): hookprof reads its runners' and
/// children's status there and would kill and count other processes by their numbers.
pub fn check_proc() -> Result<()> {
    let shown = std::fs::read_link("/proc/self")
        .ok()
        .and_then(|target| target.to_string_lossy().parse::<u32>().ok());
    let Some(shown) = shown else {
        bail!(
            "/proc is not mounted (no /proc/self): hookprof reads its processes' status there; \
             mount it (mount -t proc proc /proc)"
        );
    };
    let own = std::process::id();
    if shown != own {
        bail!(
            "/proc belongs to another pid namespace (it calls this process {shown}, which is \
             {own} here): mount this namespace's own (unshare --mount-proc, or mount -t proc \
             proc /proc in a new mount namespace)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_namespace_and_a_proc_of_its_own() {
        let ns = PidNamespace::of("self").expect("/proc/self/ns/pid");
        assert!(ns.ino != 0);
        assert_eq!(PidNamespace::of(&std::process::id().to_string()), Some(ns));
        check_proc().unwrap();
    }
}
