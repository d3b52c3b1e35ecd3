//! Ground truth on kernels that refuse BPF LSM programs (`--inject syscall:NAME=NS`): a raw
//! tracepoint on sys_exit makes the runners' tracked tasks busy-wait NS ns on their way out of
//! the chosen syscalls. It lives in an instance of the eBPF object of its own (its own gate
//! owners and task storage, the same gate ioctl, children joining at fork), attached for the
//! whole run: the injection is the kernel change, so clean and probed samples both carry it,
//! whether or not the timing probes are attached. Nothing of it exists without `--inject`.
use anyhow::{Context, Result};
use aya::{
    maps::{Array, HashMap, MapData},
    programs::{links::FdLink, BtfTracePoint, RawTracePoint},
    Ebpf, EbpfLoader,
};
use profiler_common::SyscallInjectConfig;

use super::{load::aya_btf, replace_gate_owners, Snapshot};
use crate::{injection::InjectedSyscall, results::SyscallInjectionRecord};

/// The program that waits, and the tracker that lets children join the window at fork.
const WAIT_PROGRAM: &str = "inject_sys_exit";
const FORK_PROGRAM: &str = "fork_btf";

pub struct SyscallInjection {
    /// Declared before `ebpf`, so the links go before the programs.
    _links: Vec<FdLink>,
    ebpf: Ebpf,
    syscalls: Vec<InjectedSyscall>,
}

/// The injection's gate owners: the processes whose gate calls open its tracking windows. The
/// supervisor keeps it naming the runners (see `Supervisor::keep_windows_open`).
pub struct GateOwners(HashMap<MapData, u32, u8>);

impl GateOwners {
    pub fn set(&mut self, tgids: &[u32]) -> Result<()> {
        replace_gate_owners(&mut self.0, tgids)
    }
}

impl SyscallInjection {
    /// Loads and attaches the injection for `syscalls`; nobody owns its gate yet.
    pub fn attach(syscalls: &[InjectedSyscall]) -> Result<(SyscallInjection, GateOwners)> {
        let btf = aya_btf()?;
        let mut ebpf = EbpfLoader::new()
            .btf(Some(btf))
            // The per-task state map is task storage, which only the programs use.
            .allow_unsupported_maps()
            .load(crate::ebpf_object())
            .context("load hookprof's eBPF object for --inject syscall:")?;
        let mut config: Array<_, SyscallInjectConfig> = Array::try_from(
            ebpf.map_mut("SYSCALL_INJECT")
                .context("no SYSCALL_INJECT map")?,
        )?;
        for s in syscalls {
            let entry = SyscallInjectConfig {
                busy_ns: s.ns,
                injected: 1,
                _pad: 0,
            };
            config
                .set(s.nr, entry, 0)
                .with_context(|| format!("inject on {}", s.name))?;
        }
        let owners = ebpf.take_map("GATE_OWNERS").context("no GATE_OWNERS map")?;
        let owners = GateOwners(HashMap::try_from(owners)?);
        let fork: &mut BtfTracePoint = ebpf
            .program_mut(FORK_PROGRAM)
            .context("no fork tracker")?
            .try_into()?;
        fork.load("sched_process_fork", btf)
            .context("the kernel refused the injection's fork tracker (tp_btf)")?;
        let id = fork.attach()?;
        let fork_link = fork.take_link(id)?;
        let wait: &mut RawTracePoint = ebpf
            .program_mut(WAIT_PROGRAM)
            .context("no injection program")?
            .try_into()?;
        wait.load()
            .context("the kernel refused the injection's raw tracepoint on sys_exit")?;
        let id = wait.attach("sys_exit")?;
        let wait_link = wait.take_link(id)?;
        let injection = SyscallInjection {
            _links: vec![fork_link.into(), wait_link.into()],
            ebpf,
            syscalls: syscalls.to_vec(),
        };
        Ok((injection, owners))
    }

    /// One record per injected syscall: the calls that waited and how long (the injection's
    /// own count), and the kernel's statistics of the program, which runs on every syscall
    /// exit on the machine (most return after one lookup).
    pub fn records(&self) -> Result<Vec<SyscallInjectionRecord>> {
        let tallies = Snapshot::read(&self.ebpf, 0)?.syscalls;
        let (runs, mean_run_ns) = self.run_stats().unwrap_or((0, 0.0));
        Ok(self
            .syscalls
            .iter()
            .map(|s| {
                let waits = &tallies[s.nr as usize];
                SyscallInjectionRecord {
                    syscall: s.name.clone(),
                    nr: s.nr,
                    busy_ns: s.ns,
                    calls: waits.timed,
                    mean_wait_ns: waits.total_ns as f64 / waits.timed.max(1) as f64,
                    runs,
                    mean_run_ns,
                }
            })
            .collect())
    }

    /// The kernel's run count and mean run time (ns) of the waiting program, when BPF run-time
    /// statistics are on.
    fn run_stats(&self) -> Option<(u64, f64)> {
        let info = self.ebpf.program(WAIT_PROGRAM)?.info().ok()?;
        let runs = info.run_count();
        (runs > 0).then(|| (runs, info.run_time().as_nanos() as f64 / runs as f64))
    }
}
