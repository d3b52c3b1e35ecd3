//! The perf_event sampler of kernel stacks: the `cpu_sample` program on the software cpu-clock
//! event, one perf event (and one link) per online CPU, each sample counted in the kernel under
//! its stack and syscall. After every probed sample, with the programs detached, `take_samples`
//! reads the counts and the stacks and empties both maps, so the stack map never fills over a
//! run. `attach_for_stacks` decides what a pass for the stacks alone attaches beside it.
use std::collections::{BTreeSet, HashMap};

use anyhow::{Context, Result};
use aya::{
    maps::{Map, MapData, PerCpuHashMap, StackTraceMap},
    programs::{
        perf_event::{PerfEventConfig, PerfEventScope, SamplePolicy, SoftwareEvent},
        PerfEvent, ProgramError,
    },
};
use profiler_common::SampleKey;

use super::{
    kallsyms::{Symbol, SymbolTable},
    syscall_tracepoints::SCOPE_PROGRAM,
    task_tracepoints::TASK_TRACEPOINTS,
    Kind, OwnedLink, Probes,
};

/// How a program's JIT'd kallsyms symbol ends: `_` and its name, cut to the kernel's 15
/// bytes (`bpf_prog_<tag>_<name>`).
fn jited_suffix(program: &str) -> String {
    format!("_{}", &program[..program.len().min(15)])
}

/// The sampling program's name in the object.
pub(super) const PROGRAM: &str = "cpu_sample";

/// One kind of sample since the last read: its kernel stack (innermost frame first; empty
/// for a user-mode sample or a lost stack), the syscall its task was in, and how many.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawSample {
    pub ips: Vec<u64>,
    /// The task's saved syscall number (-1 outside one); meaningful only for stacks that
    /// came in through the syscall path.
    pub syscall_nr: i32,
    pub user: bool,
    pub count: u64,
}

impl Probes {
    /// The tags of hookprof's loaded programs, as their JIT'd symbols spell them
    /// (`bpf_prog_<tag>_<name>`): how a sample tells them from another tool's program of the
    /// same name.
    pub fn program_tags(&self) -> Vec<String> {
        self.ebpf
            .programs()
            .filter_map(|(_, program)| program.info().ok())
            .map(|info| format!("{:016x}", info.tag()))
            .collect()
    }

    /// Names into `named` each of the sampled `addresses` it lacks, for counting samples as
    /// they come (`KeptTable`: kallsyms is read again only for code outside the kernel's own
    /// text and the programs loaded for the whole run).
    pub fn name_addresses(
        &mut self,
        addresses: &[u64],
        named: &mut HashMap<u64, Symbol>,
    ) -> Result<()> {
        // A trampoline's programs may be loaded anew at each attach (5.10, 5.11).
        let stay: Vec<String> = self
            .attachments
            .iter()
            .filter(|a| !matches!(a.kind, Kind::FEntry | Kind::FExit))
            .map(|a| jited_suffix(&a.program))
            .collect();
        let stays =
            |name: &str| name.starts_with("bpf_prog_") && stay.iter().any(|s| name.ends_with(s));
        self.symbols.name_new(addresses, named, stays)
    }

    /// The kernel's symbols read afresh, to name every stack of a run as it ends; the table
    /// kept for `name_addresses` is given up for it.
    pub fn fresh_symbols(&mut self) -> Result<SymbolTable> {
        self.symbols.take_fresh()
    }

    /// Attaches what a pass for the stacks alone needs (`stacks_unprobed`), and nothing that
    /// would show in its stacks: the sampler and the task tracepoints that follow the
    /// workload's children, which read the runners' window words. No syscall program, no
    /// sched_switch: the stacks are the kernel's as the workload runs it, not the probes' (a
    /// program on sys_enter, however empty, sends every syscall down the kernel's slow path).
    /// Where the workload's children count from their execve on (`children_from_exec`), the
    /// scope gate joins them without the syscall timing: only it sees an execve begin. The BPF
    /// LSM programs of `--inject` and `--stack-noop` stay: they are the kernel measured.
    /// Otherwise everything, as `attach`.
    pub fn attach_for_stacks(&mut self, children_from_exec: bool) -> Result<()> {
        if !self.stacks_unprobed() {
            return self.attach();
        }
        self.attach_where(|a| serves_stacks(a, children_from_exec))
    }

    /// The programs `attach_for_stacks` attaches, each named once (for the results), where
    /// those passes run unprobed.
    pub fn stack_pass_programs(&self, children_from_exec: bool) -> Vec<String> {
        if !self.stacks_unprobed() {
            return Vec::new();
        }
        let names: BTreeSet<&str> = self
            .attachments
            .iter()
            .filter(|a| serves_stacks(a, children_from_exec))
            .map(|a| a.program.as_str())
            .collect();
        names.into_iter().map(String::from).collect()
    }

    /// Whether the passes for the stacks alone run without the timing probes: where the
    /// gate-only program loaded and the workload has no function timed by a pair. A timed
    /// function's probes are priced by the samples inside its span that landed in them
    /// (`attribution::correct_by_samples`), which needs the stacks taken with them.
    pub fn stacks_unprobed(&self) -> bool {
        self.attachments.iter().any(|a| a.program == SCOPE_PROGRAM)
            && self.focused_functions().iter().all(Option::is_none)
    }

    /// Loads the sampling program and plans one attachment per online CPU (a refusal is
    /// recorded, as any program's).
    pub(super) fn load_stacks(&mut self) {
        let loaded = (|| -> Result<(), ProgramError> {
            let p: &mut PerfEvent = self
                .ebpf
                .program_mut(PROGRAM)
                .ok_or(ProgramError::NotLoaded)?
                .try_into()?;
            p.load()
        })();
        if let Err(e) = loaded {
            let refusal = super::refusal::refusal(Kind::PerfEvent, "cpu-clock", &e);
            self.refused.push(refusal);
            return;
        }
        for cpu in aya::util::online_cpus().unwrap_or_else(|_| vec![0]) {
            self.attachments.push(super::Attachment {
                program: PROGRAM.into(),
                kind: Kind::PerfEvent,
                target: format!("cpu-clock/cpu{cpu}"),
                link: None,
                attached_before: false,
            });
        }
    }

    /// The sampling period in ns, when the sampling program is loaded.
    pub fn sample_period_ns(&self) -> Option<u64> {
        self.attachments
            .iter()
            .any(|a| a.kind == Kind::PerfEvent)
            .then_some(self.sample_period_ns)
    }

    /// Samples one every `period_ns` of CPU time from the next attach on (the perf events
    /// are opened at each attach).
    pub fn set_sample_period_ns(&mut self, period_ns: u64) {
        self.sample_period_ns = period_ns;
    }

    /// The samples counted since the last call, and what was read emptied from both maps.
    /// `run` calls it with the programs detached. `top` reads while they run: a stack the
    /// kernel stores during the read is left for the next one, and only a sample of a stack
    /// already read, landing inside the read, can be lost or lose its stack.
    pub fn take_samples(&mut self) -> Result<Vec<RawSample>> {
        if self.sample_period_ns().is_none() {
            return Ok(Vec::new());
        }
        let (counts, stacks) = self.sample_maps()?;
        let mut counts: PerCpuHashMap<&mut MapData, SampleKey, u64> =
            PerCpuHashMap::try_from(counts)?;
        let mut stacks: StackTraceMap<&mut MapData> = StackTraceMap::try_from(stacks)?;

        // The stacks there before the counts are read: counted already, or (a full count
        // map) never to be, so they can all go.
        let mut read: BTreeSet<u32> = stacks.stack_ids().collect::<Result<_, _>>()?;
        let keys: Vec<SampleKey> = counts.keys().collect::<Result<_, _>>()?;
        let mut samples = Vec::with_capacity(keys.len());
        for key in &keys {
            let count: u64 = counts.get(key, 0)?.iter().sum();
            // Every stack is read before any is removed; one the map lost reads as none.
            let id = u32::try_from(key.stack_id).ok();
            let trace = id.and_then(|id| stacks.get(&id, 0).ok());
            if trace.is_some() {
                read.extend(id);
            }
            let ips = trace
                .map(|trace| trace.frames().iter().map(|f| f.ip).collect())
                .unwrap_or_default();
            samples.push(RawSample {
                ips,
                syscall_nr: key.syscall_nr,
                user: key.user != 0,
                count,
            });
        }
        for key in &keys {
            counts.remove(key).context("empty the sample counts")?;
        }
        for id in read {
            stacks.remove(&id).context("empty the stack map")?;
        }
        Ok(samples)
    }

    /// The sample counts and the stack map, borrowed together.
    fn sample_maps(&mut self) -> Result<(&mut Map, &mut Map)> {
        let mut counts = None;
        let mut stacks = None;
        for (name, map) in self.ebpf.maps_mut() {
            match name {
                "SAMPLES" => counts = Some(map),
                "STACKS" => stacks = Some(map),
                _ => {}
            }
        }
        Ok((
            counts.context("no SAMPLES map")?,
            stacks.context("no STACKS map")?,
        ))
    }
}

/// Whether a pass for the stacks alone attaches `a` (`Probes::attach_for_stacks`).
fn serves_stacks(a: &super::Attachment, children_from_exec: bool) -> bool {
    a.kind == Kind::PerfEvent
        || (children_from_exec && a.program == SCOPE_PROGRAM)
        || TASK_TRACEPOINTS.contains(&a.target.as_str())
}

/// Attaches the sampling program to CPU `cpu`'s cpu-clock, one sample every `period_ns` of
/// CPU time; the returned link owns the perf event.
pub(super) fn attach_cpu_clock(
    program: &mut aya::programs::Program,
    target: &str,
    period_ns: u64,
) -> Result<OwnedLink, ProgramError> {
    let cpu = target
        .strip_prefix("cpu-clock/cpu")
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let p: &mut PerfEvent = program.try_into()?;
    let id = p.attach(
        PerfEventConfig::Software(SoftwareEvent::CpuClock),
        PerfEventScope::AllProcessesOneCpu { cpu },
        SamplePolicy::Period(period_ns),
        false,
    )?;
    // A perf link where the kernel has them (5.15), else the event with the program set by
    // ioctl: kept as aya hands it back, which detaches either when dropped.
    Ok(OwnedLink::Perf(p.take_link(id)?))
}
