//! The namespaces hookprof runs in (pid, user, mount, cgroup, network), read once, and every
//! feature one changes, in one place: each is handled, or refused or noted in one line that
//! names the namespace.
//!
//! - pid: the probes translate pids with the namespace's device and inode (`PidNamespace`);
//!   /proc must be this namespace's (`check_proc`); other tools' BPF programs are found through
//!   /proc, which lists only its processes: links held outside it are listed unnamed, and
//!   the rest is said once (`other_programs_unseen`).
//! - user: BPF, perf events and kallsyms answer to capabilities in the initial user namespace:
//!   refused (`refuse_user_namespace`), and named where kallsyms hides addresses.
//! - mount: sysfs (the kernel's BTF) and /proc/kallsyms may be missing or covered in a
//!   container's mount namespace (`sysfs_hidden`, `kallsyms_hidden`). hookprof needs neither
//!   tracefs nor debugfs: its tracepoints are raw and BTF ones.
//! - network: the network workloads (lat_tcp, bw_tcp, lat_udp, ...) run in it: recorded, and
//!   compare states a difference.
//! - cgroup: recorded; `top --cgroup` paths are read under this namespace's /sys/fs/cgroup,
//!   while the ids the probes match are the kernel's own, the same in every namespace.
use std::{os::unix::fs::MetadataExt, sync::OnceLock};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// One namespace of the process, as /proc/self/ns names it (`net:[4026531833]`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Namespace {
    /// Its inode; 0 where /proc could not tell.
    pub inode: u64,
    /// Whether it is the host's (the initial one); absent where hookprof cannot tell (a mount
    /// or network namespace before Linux 6.18 gave those fixed inodes, seen from a container).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial: Option<bool>,
}

/// The namespaces a run ran in.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Namespaces {
    pub pid: Namespace,
    pub user: Namespace,
    pub mount: Namespace,
    pub cgroup: Namespace,
    pub network: Namespace,
}

/// A kind of namespace: its file under /proc/PID/ns and its initial namespace's inode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pid,
    User,
    Mount,
    Cgroup,
    Network,
}

impl Kind {
    fn file(self) -> &'static str {
        match self {
            Kind::Pid => "pid",
            Kind::User => "user",
            Kind::Mount => "mnt",
            Kind::Cgroup => "cgroup",
            Kind::Network => "net",
        }
    }

    /// The kernel's fixed inode of the initial namespace (`PROC_*_INIT_INO`); mount and
    /// network namespaces have one from Linux 6.18, before which theirs were allocated like
    /// any other's (from 0xF0000000 up, so a fixed one is never a container's).
    fn initial_inode(self) -> u64 {
        match self {
            Kind::Pid => 0xEFFF_FFFC,
            Kind::User => 0xEFFF_FFFD,
            Kind::Mount => 0xEFFF_FFF8,
            Kind::Cgroup => 0xEFFF_FFFB,
            Kind::Network => 0xEFFF_FFF9,
        }
    }

    fn fixed_since(self) -> (u32, u32) {
        match self {
            Kind::Mount | Kind::Network => (6, 18),
            Kind::Pid | Kind::User | Kind::Cgroup => (0, 0),
        }
    }
}

impl Namespace {
    /// `pid:[4026532100]`, as /proc/self/ns names it.
    fn name(&self, kind: Kind) -> String {
        format!("{}:[{}]", kind.file(), self.inode)
    }

    /// As compare shows it: "the host's", or the namespace by name.
    fn shown(&self, kind: Kind) -> String {
        match (self.inode, self.initial) {
            (0, _) => String::new(),
            (_, Some(true)) => "the host's".into(),
            (_, Some(false)) => self.name(kind),
            (_, None) => format!("{} (the host's or not: unknown)", self.name(kind)),
        }
    }

    fn nested(&self) -> bool {
        self.initial == Some(false)
    }
}

impl Namespaces {
    /// This process's namespaces, read from /proc the first time they are asked for (the
    /// run's checks, before anything is measured; hookprof never changes its own).
    pub fn detected() -> &'static Namespaces {
        static DETECTED: OnceLock<Namespaces> = OnceLock::new();
        DETECTED.get_or_init(|| {
            let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
            Namespaces::read(release_version(&release))
        })
    }

    fn read(kernel: (u32, u32)) -> Namespaces {
        let pid = read(Kind::Pid, kernel, false);
        let pid_initial = pid.initial == Some(true);
        Namespaces {
            pid,
            user: read(Kind::User, kernel, pid_initial),
            mount: read(Kind::Mount, kernel, pid_initial),
            cgroup: read(Kind::Cgroup, kernel, pid_initial),
            network: read(Kind::Network, kernel, pid_initial),
        }
    }

    /// The pid namespace as compare shows it: in a nested one every probe translates pids.
    pub fn pid_shown(&self) -> String {
        self.pid.shown(Kind::Pid)
    }

    /// The network namespace as compare shows it: the network workloads' stack.
    pub fn network_shown(&self) -> String {
        self.network.shown(Kind::Network)
    }
}

/// One of this process's namespaces. Where the kind's initial inode is not fixed on this
/// kernel, init's (pid 1's) namespace is the initial one, when init is the host's.
fn read(kind: Kind, kernel: (u32, u32), pid_initial: bool) -> Namespace {
    let inode_of = |pid: &str| {
        std::fs::metadata(format!("/proc/{pid}/ns/{}", kind.file()))
            .ok()
            .map(|m| m.ino())
    };
    let Some(inode) = inode_of("self") else {
        return Namespace::default();
    };
    let initial = if inode == kind.initial_inode() || kernel >= kind.fixed_since() {
        Some(inode == kind.initial_inode())
    } else if pid_initial {
        inode_of("1").map(|init| init == inode)
    } else {
        None
    };
    Namespace { inode, initial }
}

/// A release's major and minor version ("6.18.4-amd64": (6, 18)); (0, 0) when unreadable.
fn release_version(release: &str) -> (u32, u32) {
    let mut parts = release
        .trim()
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => (0, 0),
    }
}

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
        PidNamespace::of("self").filter(|ns| ns.ino != Kind::Pid.initial_inode())
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

/// Refuses a user namespace other than the initial one, named first: root there has every
/// capability in its own namespace, and none over the kernel's BPF, perf events and
/// kallsyms, which belong to the initial one (the probes would fail later, blaming
/// kptr_restrict or a map's EPERM).
pub fn refuse_user_namespace() -> Result<()> {
    let user = Namespaces::detected().user;
    if !user.nested() {
        return Ok(()); // the host's, or no /proc (check_proc has said so)
    }
    // The map's first line: an id here, the id it is outside, how many.
    let map = std::fs::read_to_string("/proc/self/uid_map").unwrap_or_default();
    let ids: Vec<&str> = map
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let outside = match ids[..] {
        [here, there, _] => format!(", where uid {here} is uid {there} outside"),
        _ => String::new(),
    };
    bail!(
        "hookprof runs in a user namespace ({}{outside}): its capabilities there do not reach \
         the kernel's BPF, perf events and kallsyms, which the initial user namespace owns; run \
         it in the host's user namespace (on the host, or in a container that shares it)",
        user.name(Kind::User)
    )
}

/// Filesystem magic numbers (linux/magic.h) of what is found where sysfs or procfs should be.
const SYSFS_MAGIC: i64 = 0x6265_6572;
const PROC_MAGIC: i64 = 0x9fa0;

/// The filesystem type (`f_type`) of `path`, None where it is missing.
fn filesystem(path: &str) -> Option<i64> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: statfs fills the zeroed struct; c is a valid C string.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between architectures
    (unsafe { libc::statfs(c.as_ptr(), &mut fs) } == 0).then_some(fs.f_type as i64)
}

fn filesystem_name(magic: i64) -> String {
    match magic {
        0x0102_1994 => "tmpfs".into(),
        0x794c_7630 => "overlayfs".into(),
        0xef53 => "ext4".into(),
        PROC_MAGIC => "procfs".into(),
        other => format!("filesystem of type {other:#x}"),
    }
}

/// Why `dir`, a directory of the kernel's sysfs, is missing or another filesystem in this
/// mount namespace (a container's /sys not mounted, or covered), None when it is the kernel's
/// sysfs or missing from it (then the kernel has no such thing).
pub fn sysfs_hidden(dir: &str) -> Option<String> {
    let mount = Namespaces::detected().mount.name(Kind::Mount);
    match filesystem(dir) {
        Some(SYSFS_MAGIC) => None,
        Some(other) => Some(format!(
            "{dir} is a {} in this mount namespace ({mount}), not the kernel's sysfs",
            filesystem_name(other)
        )),
        None => (filesystem("/sys") != Some(SYSFS_MAGIC))
            .then(|| format!("sysfs is not mounted on /sys in this mount namespace ({mount})")),
    }
}

/// Why /proc/kallsyms lists every address as 0, and the fix, each a clause naming its cause:
/// a file covering the kernel's in this mount namespace, kernel.kptr_restrict at 2 (hidden
/// from everyone), or a reader without CAP_SYSLOG in the initial user namespace (a user
/// namespace's root, or a container that dropped it).
pub fn kallsyms_hidden(path: &str) -> (String, String) {
    if let Some(other) = filesystem(path).filter(|&f| f != PROC_MAGIC) {
        let mount = Namespaces::detected().mount.name(Kind::Mount);
        return (
            format!(
                "it is a {} file in this mount namespace ({mount}), not the kernel's",
                filesystem_name(other)
            ),
            "unmount what covers it, or mount procfs (mount -t proc proc /proc)".into(),
        );
    }
    let level = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
        .map_or_else(|_| "unknown".into(), |l| l.trim().to_string());
    let user = Namespaces::detected().user;
    const CAP_SYSLOG: u32 = 34;
    let has_syslog = crate::safety::credentials::Capabilities::of_this_thread()
        .is_ok_and(|c| c.has_effective(CAP_SYSLOG));
    let cause = if level == "2" {
        "kernel.kptr_restrict is 2, which hides them from root too".to_string()
    } else if user.nested() {
        format!(
            "kernel.kptr_restrict is {level}, and this process is in a user namespace ({}): \
             only CAP_SYSLOG in the host's shows them",
            user.name(Kind::User)
        )
    } else if !has_syslog {
        // At 0 they show to everyone only where perf_event_paranoid is 1 or less.
        let paranoid = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
            .map_or_else(|_| "unknown".into(), |l| l.trim().to_string());
        format!(
            "kernel.kptr_restrict is {level} and kernel.perf_event_paranoid {paranoid}, and \
             this process lacks CAP_SYSLOG"
        )
    } else {
        format!("hidden; kernel.kptr_restrict is {level}")
    };
    let fix = if level == "2" {
        "set kernel.kptr_restrict=1, which shows them to root (CAP_SYSLOG)"
    } else {
        "run as root in the host's user namespace with CAP_SYSLOG (a container's default set \
         drops it: add it, e.g. docker run --cap-add SYSLOG)"
    };
    (cause, fix.into())
}

/// hookprof's pid namespace by name (`pid:[4026532175]`) where it is not the host's: other
/// tools' BPF links no process of it holds are listed as held outside it.
pub fn nested_pid_namespace() -> Option<String> {
    let pid = Namespaces::detected().pid;
    pid.nested().then(|| pid.name(Kind::Pid))
}

/// The one note a run in a nested pid namespace gives about other tools' BPF programs: they
/// are found through /proc, which lists this namespace's processes only.
pub fn other_programs_unseen() -> Option<String> {
    nested_pid_namespace().map(|pid| {
        format!(
            "this run is in a pid namespace ({pid}), whose /proc lists its own processes only: \
             another tool's BPF link on the measured paths held outside it is listed as held \
             by 'a process outside {pid}, or a pin', and a program attached to a perf event \
             without a link there is not seen"
        )
    })
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
        let detected = Namespaces::detected();
        assert_eq!(detected.pid.inode, ns.ino);
        assert_eq!(
            detected.pid.initial,
            Some(PidNamespace::own_if_nested().is_none())
        );
        for (ns, file) in [
            (detected.user, "user"),
            (detected.mount, "mnt"),
            (detected.cgroup, "cgroup"),
            (detected.network, "net"),
        ] {
            let link = std::fs::read_link(format!("/proc/self/ns/{file}")).unwrap();
            assert_eq!(link.to_string_lossy(), format!("{file}:[{}]", ns.inode));
        }
    }

    #[test]
    fn a_release_is_its_major_and_minor_version() {
        assert_eq!(release_version("6.18.4-amd64\n"), (6, 18));
        assert_eq!(release_version("5.10.0-30-cloud-amd64"), (5, 10));
        assert_eq!(release_version("6.19-rc1"), (6, 19));
        assert_eq!(release_version("garbage"), (0, 0));
    }

    #[test]
    fn a_namespace_is_shown_as_the_hosts_or_by_name() {
        let ns = |inode, initial| Namespace { inode, initial };
        assert_eq!(
            ns(0xEFFF_FFF9, Some(true)).shown(Kind::Network),
            "the host's"
        );
        assert_eq!(
            ns(4026532300, Some(false)).shown(Kind::Network),
            "net:[4026532300]"
        );
        assert_eq!(
            ns(4026532300, None).shown(Kind::Network),
            "net:[4026532300] (the host's or not: unknown)"
        );
        assert_eq!(ns(0, None).shown(Kind::Pid), "");
    }

    #[test]
    fn sysfs_and_proc_here_are_the_kernels() {
        assert_eq!(sysfs_hidden("/sys/kernel"), None);
        assert_eq!(filesystem("/proc/kallsyms"), Some(PROC_MAGIC));
    }
}
