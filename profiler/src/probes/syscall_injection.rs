//! Ground truth on kernels that refuse BPF LSM programs (`--inject syscall:NAME=NS`): a raw
//! tracepoint on sys_exit makes the runners' tracked tasks busy-wait NS ns on their way out of
//! the chosen syscalls. It lives in an instance of the eBPF object of its own (its own gate
//! owners and task storage, the same gate ioctl, children joining at fork), attached for the
//! whole run: the injection is the kernel change, so clean and probed samples both carry it,
//! whether or not the timing probes are attached. Nothing of it exists without `--inject`.
//!
//! `run --versus` alternates two variants of the injection in one run: the program waits on
//! the union of both variants' syscalls, and switching a variant rewrites the waits (0 ns where
//! the variant injects nothing), so both variants carry the program's own cost.
use std::collections::BTreeMap;

use anyhow::{Context, Result};
use aya::{
    maps::{Array, HashMap, MapData},
    programs::{links::FdLink, BtfTracePoint, RawTracePoint},
    Ebpf,
};
use profiler_common::SyscallInjectConfig;

use super::{
    ebpf_object::{self, Object},
    scope_globals::{Globals, GroupBy, Scope},
    syscall_tracepoints::replace_gate_owners,
    task_tracepoints::FREE_PROGRAM,
    Features, Snapshot, TaskLayout,
};
use crate::{probes::injection::InjectedSyscall, results::SyscallInjectionRecord};

/// The program that waits, and the tracker that lets children join the window at fork.
const WAIT_PROGRAM: &str = "inject_sys_exit";
const FORK_PROGRAM: &str = "fork_btf";

pub struct SyscallInjection {
    /// Declared before `ebpf`, so the links go before the programs.
    _links: Vec<FdLink>,
    ebpf: Ebpf,
    /// Each variant's syscalls: one variant in a plain run, base and versus with `--versus`.
    variants: Vec<Vec<InjectedSyscall>>,
    /// Every syscall any variant injects, by number, with its name.
    union: BTreeMap<u32, String>,
    /// The variant in force.
    current: usize,
    /// Each variant's waits so far, per syscall number: (calls, ns).
    waits: Vec<BTreeMap<u32, (u64, u64)>>,
    /// The program's tallies when the variant in force took over.
    tallies_then: BTreeMap<u32, (u64, u64)>,
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
    /// Loads and attaches the injection for each variant's `syscalls` (the first in force);
    /// nobody owns its gate yet.
    pub fn attach(
        variants: &[Vec<InjectedSyscall>],
        layout: &TaskLayout,
    ) -> Result<(SyscallInjection, GateOwners)> {
        let features = Features::get()?;
        features.check_syscall_injection()?;
        let aya = ebpf_object::shared()?;
        // Its own instance of the object (no timed function: the calibration slot only), with
        // the run's gate.
        let mut ebpf = ebpf_object::load_object(
            Object::CalibrationSlotOnly,
            Globals::new(&Scope::Gate, GroupBy::Cgroup),
            false,
            layout,
        )
        .context("load hookprof's eBPF object for --inject syscall:")?;
        let union: BTreeMap<u32, String> = variants
            .iter()
            .flatten()
            .map(|s| (s.nr, s.name.clone()))
            .collect();
        let owners = ebpf.take_map("GATE_OWNERS").context("no GATE_OWNERS map")?;
        let owners = GateOwners(HashMap::try_from(owners)?);
        let fork: &mut BtfTracePoint = ebpf
            .program_mut(FORK_PROGRAM)
            .context("no fork tracker")?
            .try_into()?;
        fork.load("sched_process_fork", aya.btf())
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
        let mut links: Vec<FdLink> = vec![fork_link.into(), wait.take_link(id)?.into()];
        if !features.task_storage {
            // Per-task state by thread id: a freed task's entry goes with it.
            let free: &mut RawTracePoint = ebpf
                .program_mut(FREE_PROGRAM)
                .context("no task cleanup program")?
                .try_into()?;
            free.load().context(
                "the kernel refused the injection's raw tracepoint on sched_process_free",
            )?;
            let id = free.attach("sched_process_free")?;
            links.push(free.take_link(id)?.into());
        }
        let mut injection = SyscallInjection {
            _links: links,
            ebpf,
            waits: vec![BTreeMap::new(); variants.len()],
            variants: variants.to_vec(),
            union,
            current: 0,
            tallies_then: BTreeMap::new(),
        };
        injection.write_waits(0)?;
        Ok((injection, owners))
    }

    /// Puts variant `v`'s waits in force (the time waited so far goes to the variant before).
    pub fn use_variant(&mut self, v: usize) -> Result<()> {
        if v == self.current {
            return Ok(());
        }
        self.settle()?;
        self.write_waits(v)?;
        self.current = v;
        Ok(())
    }

    /// Writes variant `v`'s wait for every syscall of the union (0 ns where `v` has none).
    fn write_waits(&mut self, v: usize) -> Result<()> {
        let waits: Vec<(u32, u64, String)> = self
            .union
            .iter()
            .map(|(&nr, name)| (nr, self.busy_ns(v, nr), name.clone()))
            .collect();
        let mut config: Array<_, SyscallInjectConfig> = Array::try_from(
            self.ebpf
                .map_mut("SYSCALL_INJECT")
                .context("no SYSCALL_INJECT map")?,
        )?;
        for (nr, busy_ns, name) in waits {
            let entry = SyscallInjectConfig {
                busy_ns,
                injected: 1,
                _pad: 0,
            };
            config
                .set(nr, entry, 0)
                .with_context(|| format!("inject on {name}"))?;
        }
        Ok(())
    }

    fn busy_ns(&self, v: usize, nr: u32) -> u64 {
        self.variants[v]
            .iter()
            .find(|s| s.nr == nr)
            .map_or(0, |s| s.ns)
    }

    /// Adds the waits since the variant in force took over to its account.
    fn settle(&mut self) -> Result<()> {
        let tallies = Snapshot::read(&self.ebpf, 0)?.syscalls;
        for &nr in self.union.keys() {
            let now = (tallies[nr as usize].timed, tallies[nr as usize].total_ns);
            let then = self.tallies_then.insert(nr, now).unwrap_or((0, 0));
            let account = self.waits[self.current].entry(nr).or_default();
            account.0 += now.0 - then.0;
            account.1 += now.1 - then.1;
        }
        Ok(())
    }

    /// One record per injected syscall of variant `v`'s (every syscall of the union, at 0 ns
    /// where `v` injects none): the calls that waited and how long (the injection's own count,
    /// while `v` was in force), and the kernel's statistics of the program, which runs on
    /// every syscall exit on the machine (most return after one lookup) in either variant.
    pub fn records(&mut self, v: usize) -> Result<Vec<SyscallInjectionRecord>> {
        self.settle()?;
        let (runs, mean_run_ns) = self.run_stats().unwrap_or((0, 0.0));
        Ok(self
            .union
            .iter()
            .map(|(&nr, name)| {
                let (calls, total_ns) = self.waits[v].get(&nr).copied().unwrap_or_default();
                SyscallInjectionRecord {
                    syscall: name.clone(),
                    nr,
                    busy_ns: self.busy_ns(v, nr),
                    calls,
                    mean_wait_ns: total_ns as f64 / calls.max(1) as f64,
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
