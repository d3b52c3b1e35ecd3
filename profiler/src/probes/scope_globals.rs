//! Which tasks the programs count (a `Scope`: `run`'s gate, or `top`'s whole system, cgroup,
//! process or command name) and how their tallies are grouped, as the object's read-only
//! globals, set before it loads.
use aya::EbpfLoader;
use profiler_common::{group_by, scope, COMM_LEN};

/// Which tasks the probes count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `run` and `stat`: the runners' tracking windows and what they fork.
    Gate,
    /// Every task but hookprof's own.
    System,
    /// The tasks of a cgroup (v2) and its descendants: its id and its depth below the root.
    Cgroup { id: u64, level: u32 },
    /// One process's threads, and the processes it forks from then on.
    Pid(u32),
    /// Tasks whose command name is this (NUL-padded).
    Comm([u8; COMM_LEN]),
}

/// What a tally's group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupBy {
    Cgroup,
    Comm,
}

/// The globals that make the object count `scope`, grouped `by`, for a loader (which borrows
/// them).
pub(super) struct Globals {
    mode: u32,
    /// hookprof's pid namespace where it is not the initial one (0, 0 on the host).
    pidns_dev: u64,
    pidns_ino: u64,
    self_tgid: u32,
    tgid: u32,
    cgroup: u64,
    cgroup_level: u32,
    comm: [u8; COMM_LEN],
    group_by: u32,
}

impl Globals {
    pub(super) fn new(scope: &Scope, by: GroupBy) -> Globals {
        let pidns = crate::machine::namespaces::PidNamespace::own_if_nested();
        let mut g = Globals {
            mode: scope::GATE,
            pidns_dev: pidns.map_or(0, |ns| ns.dev),
            pidns_ino: pidns.map_or(0, |ns| ns.ino),
            self_tgid: std::process::id(),
            tgid: 0,
            cgroup: 0,
            cgroup_level: 0,
            comm: [0; COMM_LEN],
            group_by: match by {
                GroupBy::Cgroup => group_by::CGROUP,
                GroupBy::Comm => group_by::COMM,
            },
        };
        g.mode = match *scope {
            Scope::Gate => scope::GATE,
            Scope::System => scope::SYSTEM,
            Scope::Cgroup { id, level } => {
                (g.cgroup, g.cgroup_level) = (id, level);
                scope::CGROUP
            }
            Scope::Pid(tgid) => {
                g.tgid = tgid;
                scope::PID
            }
            Scope::Comm(comm) => {
                g.comm = comm;
                scope::COMM
            }
        };
        g
    }

    pub(super) fn set<'a>(&'a self, loader: &mut EbpfLoader<'a>) {
        loader
            .override_global("SCOPE", &self.mode, true)
            .override_global("PIDNS_DEV", &self.pidns_dev, true)
            .override_global("PIDNS_INO", &self.pidns_ino, true)
            .override_global("SELF_TGID", &self.self_tgid, true)
            .override_global("SCOPE_TGID", &self.tgid, true)
            .override_global("SCOPE_CGROUP", &self.cgroup, true)
            .override_global("SCOPE_CGROUP_LEVEL", &self.cgroup_level, true)
            .override_global("SCOPE_COMM", &self.comm[..], true)
            .override_global("GROUP_BY", &self.group_by, true);
    }
}
