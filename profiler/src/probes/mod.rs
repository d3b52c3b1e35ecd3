//! hookprof's eBPF object on the user side: `load` loads it and its programs (recording what
//! the kernel refuses), `attach` attaches and detaches them through owned links, `snapshot`
//! reads what they counted. Around them: the hook catalog from BTF, program selection, the
//! ground-truth LSM programs and calibration; `aggregate` is `top`'s scope and its tallies,
//! `top_calibration` what top's probes cost.
mod aggregate;
mod attach;
mod btf;
pub mod calibration;
pub mod catalog;
mod ebpf_object;
pub mod features;
pub mod kallsyms;
mod load;
mod lsm;
pub mod refusal;
pub mod selection;
mod snapshot;
mod stacks;
mod syscall_injection;
pub mod top_calibration;

use anyhow::{Context, Result};
use aya::{programs::links::FdLink, Ebpf};
use profiler_common::HOOK_SLOTS;

/// Index of the BPF LSM program run counter in `Snapshot::events`.
pub const LSM_RUNS_EVENT: usize = profiler_common::event::LSM_RUNS as usize;

/// Slots a run may use; the last one is kept for calibration.
pub const USER_SLOTS: usize = HOOK_SLOTS as usize - 1;
const CALIBRATION_SLOT: usize = USER_SLOTS;

use self::calibration::Correction;
pub use self::{
    aggregate::{GroupBy, Scope},
    btf::{KernelBtf, TaskLayout, LOAD_COMMAND as KERNEL_BTF_COMMAND, VMLINUX_BTF},
    catalog::Target,
    features::Features,
    load::pair_refusals,
    lsm::lsm_hook_of,
    refusal::reason,
    snapshot::{tally_since, tally_sum, Delta, Snapshot},
    stacks::RawSample,
    syscall_injection::{GateOwners, SyscallInjection},
};
use crate::results::{ProbeKind as Kind, ProbeRecord, ProbeReport, Refusal};

/// Makes `tgids` the only entries of a `GATE_OWNERS` map (of any instance of the object).
fn replace_gate_owners<T: std::borrow::BorrowMut<aya::maps::MapData>>(
    owners: &mut aya::maps::HashMap<T, u32, u8>,
    tgids: &[u32],
) -> Result<()> {
    anyhow::ensure!(
        tgids.len() <= profiler_common::MAX_GATE_OWNERS as usize,
        "{} runners, at most {} can own the gate",
        tgids.len(),
        profiler_common::MAX_GATE_OWNERS
    );
    let old: Vec<u32> = owners.keys().collect::<Result<_, _>>()?;
    for tgid in old.iter().filter(|t| !tgids.contains(t)) {
        owners.remove(tgid).context("unset a gate owner")?;
    }
    for &tgid in tgids {
        owners.insert(tgid, 1, 0).context("set a gate owner")?;
    }
    Ok(())
}

/// What to probe.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbePlan {
    /// raw_syscalls sys_enter/sys_exit (always needed for scoping when anything is probed).
    pub syscalls: bool,
    /// sched_process_fork/exec/exit.
    pub tasks: bool,
    /// Kernel functions to time with fentry/fexit pairs, one slot each.
    pub functions: Vec<Target>,
    /// Load only each function's fentry, which counts calls (the discovery pass needs no times).
    pub entries_only: bool,
    /// More functions are timed after the load (`Probes::load_functions`: the run's, once
    /// discovery chose them), so the object must carry every slot.
    pub functions_later: bool,
    /// The errno with which the kernel refuses every trampoline, if known
    /// (`Probes::kernel_refuses_trampolines`): the object then carries no slot but the
    /// calibration's, and every function, now or later, is recorded refused without loading.
    pub trampolines_refused: Option<i32>,
    /// Sample the tracked tasks' kernel stacks on the cpu-clock, one sample per this many ns
    /// of CPU time.
    pub stacks: Option<u64>,
    /// sched_switch: the tracked tasks' time on and off a CPU.
    pub switches: bool,
}

/// The default sampling rate of timed probed passes: 249 Hz of CPU time (off any timer tick's
/// multiple, so the samples do not fall in step with periodic work). Each sample is a timer
/// interrupt on the sampled CPU and its cost lands in the timed op: on this kind of virtual
/// machine 40-90 us of fork_proc's time per sample, so 999 Hz slowed it by 5-9%; at 249 Hz
/// each probed loop's median over the sessions is within 3% (fork_proc +3.3% and +1.5%:
/// Benchmarks, the sampling cost).
pub const DEFAULT_SAMPLE_HZ: u64 = 249;
/// The default rate of `run`'s passes for the stacks alone (`--stack-sample-hz`): nothing in
/// them is timed, so their interrupts cost only their length, and 20x the timed rate gathers
/// a precise profile in a twentieth of the time. The hooks' and LSM functions' shares do not
/// move with the rate (the interrupt's own cost is never sampled; one fork step, copy_thread,
/// does: Benchmarks); CPU time per op is taken from the timed passes.
pub const DEFAULT_STACK_SAMPLE_HZ: u64 = 4_999;

impl ProbePlan {
    /// The syscall probes alone (which carry the scope gate).
    pub fn syscalls_only() -> ProbePlan {
        ProbePlan {
            syscalls: true,
            ..ProbePlan::default()
        }
    }

    /// Whether the probes may time a function besides the calibration's.
    fn needs_slots(&self) -> bool {
        (!self.functions.is_empty() || self.functions_later) && self.trampolines_refused.is_none()
    }
}

/// A loaded program and where it attaches.
struct Attachment {
    program: String,
    kind: Kind,
    target: String,
    /// Owned: dropping it detaches the program.
    link: Option<OwnedLink>,
    /// It has been attached before (a trampoline program may need loading again first: see
    /// `attach::trampolines_reattach`).
    attached_before: bool,
}

/// A link hookprof owns: dropping it detaches its program (held, never read).
#[allow(dead_code)]
enum OwnedLink {
    Fd(FdLink),
    /// A perf link, or before 5.15 (no perf links) a perf event with the program set by ioctl.
    Perf(aya::programs::perf_event::PerfEventLink),
}

pub struct Probes {
    /// Declared before `ebpf` so the links go before the programs when `Probes` is dropped.
    attachments: Vec<Attachment>,
    lsm_programs: Vec<lsm::LsmProgram>,
    ebpf: Ebpf,
    /// Slot i times `hooks[i]` (None for a slot whose pair was refused).
    hooks: Vec<Option<Target>>,
    refused: Vec<Refusal>,
    /// Functions whose pairs `attach` attaches (None: all). Each workload attaches only the
    /// functions it calls, so a sample's attach and detach stay short.
    focus: Option<Vec<String>>,
    /// The kernel's BTF as aya needs it (see `ebpf_object::aya_btf`).
    btf: &'static aya::Btf,
    /// The probes' own cost, once calibrated.
    correction: Option<Correction>,
    /// The errno with which the kernel refuses every BPF trampoline, once known: later pairs
    /// are refused alike without asking (and without their programs, in an object loaded
    /// without slots).
    trampolines_refused: Option<i32>,
    /// ns of CPU time between two stack samples (when `cpu_sample` is loaded).
    sample_period_ns: u64,
    /// The kernel's task layout the object was loaded with (for objects loaded later).
    layout: TaskLayout,
    /// The function behind getppid(2) on this kernel, if its BTF has one.
    getppid_function: Option<String>,
    /// The kernel calls a BPF LSM function only while a BPF LSM program is attached to its
    /// hook (static calls and keys, Linux 6.12: `security_toggle_hook`).
    bpf_lsm_on_demand: bool,
}

impl Probes {
    /// Makes `tgids` (the runners, one per parallel copy) the only processes whose gate calls
    /// open and close tracking windows; until then nobody's do.
    pub fn set_gate_owners(&mut self, tgids: &[u32]) -> Result<()> {
        let mut owners: aya::maps::HashMap<_, u32, u8> = aya::maps::HashMap::try_from(
            self.ebpf
                .map_mut("GATE_OWNERS")
                .context("no GATE_OWNERS map")?,
        )?;
        replace_gate_owners(&mut owners, tgids)
    }

    /// Records refusals met elsewhere (the discovery pass's), so the run's report has them.
    pub fn add_refusals(&mut self, refused: impl IntoIterator<Item = Refusal>) {
        self.refused.extend(refused);
    }

    /// The id of a loaded program that writes the probes' log (the syscall entry, which also
    /// holds the gate): aya-log finds the object's log buffer through it.
    pub fn logging_program_id(&self) -> Option<u32> {
        let loaded = self.attachments.iter().any(|a| a.program == "sys_enter");
        loaded.then(|| self.ebpf.program("sys_enter")?.info().ok().map(|i| i.id()))?
    }

    /// Whether this kernel calls a BPF LSM function (`bpf_lsm_*`) only while a BPF LSM
    /// program is attached to its hook: fentry on one then sees no call, and attaching it
    /// changes nothing the kernel calls (the toggle is for BPF LSM programs alone).
    pub fn bpf_lsm_on_demand(&self) -> bool {
        self.bpf_lsm_on_demand
    }

    /// True if the syscall programs (which also carry the scope gate) are loaded.
    pub fn scoping_works(&self) -> bool {
        ["sys_enter", "sys_exit"]
            .iter()
            .all(|p| self.attachments.iter().any(|a| a.program == *p))
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        Snapshot::read(&self.ebpf, self.hooks.len() as u32)
    }

    /// True if sched_switch is loaded: each tracked task's time on and off a CPU is known.
    pub fn waits_measured(&self) -> bool {
        self.attachments
            .iter()
            .any(|a| a.kind == Kind::TpBtf && a.target == "sched_switch")
    }

    /// What corrected figures take out of each timed duration (None until calibrated).
    pub fn correction(&self) -> Option<Correction> {
        self.correction
    }

    /// Timed functions by slot (None for a slot whose pair was refused).
    pub fn hook_functions(&self) -> &[Option<Target>] {
        &self.hooks
    }

    /// The functions `attach` times now, by slot: those in focus (None for the other slots).
    pub fn focused_functions(&self) -> Vec<Option<Target>> {
        self.hooks
            .iter()
            .map(|slot| {
                slot.clone()
                    .filter(|t| self.focus.as_ref().is_none_or(|f| f.contains(&t.function)))
            })
            .collect()
    }

    pub fn report(&self) -> ProbeReport {
        ProbeReport {
            attached: self
                .attachments
                .iter()
                .map(|a| ProbeRecord {
                    kind: a.kind,
                    target: a.target.clone(),
                })
                .collect(),
            refused: self.refused.clone(),
        }
    }
}
