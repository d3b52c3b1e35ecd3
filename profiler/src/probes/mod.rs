//! hookprof's eBPF object on the user side, cut as aya cuts programs: one file per program
//! family, each loading and attaching its own (`syscall_tracepoints`, `task_tracepoints`,
//! `function_pairs`, `cpu_sampler`, `lsm`; `syscall_injection` in an instance of the object of
//! its own), and here the lifecycle they share: `Probes::load` loads the object and calls each
//! family's loader (what the kernel refuses is recorded), `attach` attaches through owned links,
//! `detach` (or dropping `Probes`) detaches, `snapshot` reads what they counted. Around them: the
//! hook catalog from BTF, program selection, the scope in the object's globals
//! (`scope_globals`) and the calibration of the probes' own cost. Nothing here knows its callers:
//! `top` reads its tallies through `aggregate_map` and borrows the calibration pair through
//! `with_calibration_pair`.
mod btf;
mod btf_scan;
pub mod calibration;
pub mod catalog;
mod cpu_sampler;
mod ebpf_object;
pub mod features;
mod function_pairs;
pub mod in_child;
pub mod injection;
pub mod kallsyms;
mod lsm;
pub mod refusal;
mod scope_globals;
pub mod selection;
mod snapshot;
mod syscall_injection;
mod syscall_tracepoints;
mod task_tracepoints;

use std::sync::Arc;

use anyhow::{Context, Result};
use aya::{
    maps::{MapData, PerCpuHashMap},
    programs::{links::FdLink, ProgramError},
    Ebpf,
};
use profiler_common::{AggregateKey, Tally, HOOK_SLOTS};

/// Index of the BPF LSM program run counter in `Snapshot::events`.
pub const LSM_RUNS_EVENT: usize = profiler_common::event::LSM_RUNS as usize;

/// Slots a run may use; the last one is kept for calibration.
pub const USER_SLOTS: usize = HOOK_SLOTS as usize - 1;
pub(crate) const CALIBRATION_SLOT: usize = USER_SLOTS;

pub use self::ebpf_object::AyaKernel;
pub use self::{
    btf::{KernelBtf, TaskLayout, LOAD_COMMAND as KERNEL_BTF_COMMAND, VMLINUX_BTF},
    catalog::Target,
    cpu_sampler::RawSample,
    features::Features,
    function_pairs::pair_refusals,
    lsm::lsm_hook_of,
    refusal::reason,
    scope_globals::{GroupBy, Scope},
    snapshot::{tally_since, tally_sum, Delta, Snapshot},
    syscall_injection::{GateOwners, SyscallInjection},
};
use self::{
    calibration::{Correction, CALIBRATION_FUNCTIONS},
    ebpf_object::Object,
    function_pairs::trampolines_reattach,
    scope_globals::Globals,
    syscall_tracepoints::SCOPE_PROGRAM,
};
use crate::results::{HookLookup, ProbeKind as Kind, ProbeRecord, ProbeReport, Refusal};

/// The function through which a kernel turns a BPF LSM hook's call on when a BPF LSM program
/// attaches, and off when the last goes (Linux 6.12); before it every hook's `bpf_lsm_*`
/// function was called always.
const BPF_LSM_TOGGLE: &str = "security_toggle_hook";

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
/// move with the rate (the interrupt's own cost is never sampled; fork_proc's copy_thread,
/// once read lower at 4,999 Hz, spreads as widely between runs at one rate: Benchmarks); CPU
/// time per op is taken from the timed passes.
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
    /// `function_pairs::trampolines_reattach`).
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
    /// What the plan looked for under each hook found (`catalog::lsm_lookup`).
    lsm_lookups: Vec<HookLookup>,
    /// Functions whose pairs `attach` attaches (None: all). Each workload attaches only the
    /// functions it calls, so a sample's attach and detach stay short.
    focus: Option<Vec<String>>,
    /// The kernel's BTF as aya needs it, held while programs may be loaded (see
    /// `release_kernel_btf`); read anew if one is loaded after.
    aya: Option<Arc<AyaKernel>>,
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
    /// What names the sampled stacks' addresses over the run.
    symbols: kallsyms::KeptTable,
}

impl Probes {
    /// Loads every program of the plan; refusals are recorded, not fatal.
    pub fn load(plan: &ProbePlan, kernel: &KernelBtf) -> Result<Probes> {
        Probes::load_scoped(plan, kernel, &Scope::Gate, GroupBy::Cgroup)
    }

    /// As `load`, counting the tasks of `scope` (`top`), with tallies grouped `by`.
    pub fn load_scoped(
        plan: &ProbePlan,
        kernel: &KernelBtf,
        scope: &Scope,
        by: GroupBy,
    ) -> Result<Probes> {
        raise_memlock_limit();
        raise_open_files_limit();
        let object = if plan.needs_slots() {
            Object::AllSlots
        } else {
            Object::CalibrationSlotOnly
        };
        let layout = kernel.layout();
        let aya = ebpf_object::shared()?;
        let ebpf =
            ebpf_object::load_object(object, Globals::new(scope, by), plan.entries_only, &layout)?;
        let mut probes = Probes {
            ebpf,
            attachments: Vec::new(),
            hooks: Vec::new(),
            refused: Vec::new(),
            lsm_lookups: Vec::new(),
            lsm_programs: Vec::new(),
            focus: None,
            aya: Some(aya),
            correction: None,
            trampolines_refused: plan.trampolines_refused,
            sample_period_ns: plan.stacks.unwrap_or(0),
            layout,
            getppid_function: CALIBRATION_FUNCTIONS
                .iter()
                .find(|f| kernel.has_function(f))
                .map(|f| f.to_string()),
            bpf_lsm_on_demand: kernel.has_function(BPF_LSM_TOGGLE),
            symbols: kallsyms::KeptTable::default(),
        };
        if plan.syscalls {
            probes.load_syscalls();
        }
        probes.load_task_tracepoints(plan)?;
        if plan.stacks.is_some() {
            probes.load_stacks();
            if plan.syscalls {
                probes.load_scope_gate()?;
            }
        }
        probes.load_functions(&plan.functions, plan.entries_only, kernel)?;
        Ok(probes)
    }

    fn record(
        &mut self,
        program: &str,
        kind: Kind,
        target: &str,
        result: Result<(), ProgramError>,
    ) -> bool {
        match result {
            Ok(()) => {
                self.attachments.push(Attachment {
                    program: program.into(),
                    kind,
                    target: target.into(),
                    link: None,
                    attached_before: false,
                });
                true
            }
            Err(e) => {
                self.refused.push(refusal::refusal(kind, target, &e));
                false
            }
        }
    }

    /// Attaches every loaded program, of the timed functions only those in focus (a no-op for
    /// programs already attached).
    pub fn attach(&mut self) -> Result<()> {
        let focus = self.focus.take();
        let attached = self.attach_where(|a| {
            a.program != SCOPE_PROGRAM
                && (!matches!(a.kind, Kind::FEntry | Kind::FExit)
                    || focus.as_ref().is_none_or(|f| f.contains(&a.target)))
        });
        self.focus = focus;
        attached
    }

    /// Attaches only the named programs (calibration compares subsets). The list keeps its
    /// order, so calibration can drop what it added from the end.
    pub(crate) fn attach_only(&mut self, programs: &[&str]) -> Result<()> {
        self.attach_where(|a| programs.contains(&a.program.as_str()))
    }

    /// The kernel's BTF as aya needs it: the one held, or read anew.
    fn kernel_btf(&mut self) -> Result<Arc<AyaKernel>> {
        if let Some(aya) = &self.aya {
            return Ok(Arc::clone(aya));
        }
        let aya = ebpf_object::shared()?;
        self.aya = Some(Arc::clone(&aya));
        Ok(aya)
    }

    /// `kernel_btf` for a program's load, failing as a program's load does.
    fn kernel_btf_to_load(&mut self) -> Result<Arc<AyaKernel>, ProgramError> {
        self.kernel_btf().map_err(|e| {
            ProgramError::SyscallError(aya::sys::SyscallError {
                call: "read the kernel BTF",
                io_error: std::io::Error::other(format!("{e:#}")),
            })
        })
    }

    fn trampolines_reattach(&self, aya: &AyaKernel) -> bool {
        trampolines_reattach(aya.btf(), &self.layout, self.getppid_function.as_deref())
    }

    /// Lets go of the kernel's BTF (~13 MB) once no program needs loading: after the set-up,
    /// unless a timed pair must be loaded anew before each attach (`trampolines_reattach`).
    /// Whatever does load after reads it anew.
    pub fn release_kernel_btf(&mut self) {
        let timed = self
            .attachments
            .iter()
            .any(|a| matches!(a.kind, Kind::FEntry | Kind::FExit));
        let reloads = match &self.aya {
            Some(aya) => timed && !self.trampolines_reattach(aya),
            None => return,
        };
        if !reloads {
            self.aya = None;
            crate::peak_rss::release_free_heap();
        }
    }

    fn attach_where(&mut self, chosen: impl Fn(&Attachment) -> bool) -> Result<()> {
        if self.attachments.iter().all(|a| a.link.is_none()) {
            self.start_window()?;
        }
        let reattached = self.attachments.iter().any(|a| {
            a.link.is_none()
                && a.attached_before
                && matches!(a.kind, Kind::FEntry | Kind::FExit)
                && chosen(a)
        });
        // Where a trampoline must be loaded anew to attach again, the BTF it loads with. None
        // held means none is needed: `release_kernel_btf` keeps it where pairs reload, and a
        // pair loaded after the release reads it anew.
        let reload = match (reattached, &self.aya) {
            (true, Some(aya)) => {
                Some(Arc::clone(aya)).filter(|aya| !self.trampolines_reattach(aya))
            }
            _ => None,
        };
        let mut unattachable: Vec<Refusal> = Vec::new();
        let mut timed_attached = false;
        let mut sampling_refused: Option<Refusal> = None;
        for a in &mut self.attachments {
            if a.link.is_some() || !chosen(a) {
                continue;
            }
            let program = self
                .ebpf
                .program_mut(&a.program)
                .with_context(|| format!("program {} vanished", a.program))?;
            let timed = matches!(a.kind, Kind::FEntry | Kind::FExit);
            let reload = reload.as_ref().filter(|_| a.attached_before);
            match attach_one(
                program,
                a,
                self.sample_period_ns,
                reload.map(|aya| aya.btf()),
            ) {
                Ok(link) => {
                    a.link = Some(link);
                    a.attached_before = true;
                    timed_attached |= timed;
                }
                // A function can be in BTF and load, yet not attach (an __init function the
                // kernel has freed): its pair is refused and the rest go on.
                Err(e) if timed => unattachable.push(refusal::refusal(a.kind, &a.target, &e)),
                // Sampling is one probe kind among others: where the kernel will not open
                // a cpu-clock event for it, the run goes on without stacks.
                Err(e) if a.kind == Kind::PerfEvent => {
                    sampling_refused
                        .get_or_insert_with(|| refusal::refusal(a.kind, "cpu-clock", &e));
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("attach {} {}", a.kind.name(), a.target))
                }
            }
        }
        // Where none attaches, the kernel attaches no trampoline to its functions at all
        // (programs load; only the attach needs ftrace's direct calls): not one function's fate.
        let why = match (timed_attached, cfg!(target_arch = "aarch64")) {
            (true, _) => "loads but does not attach (code the kernel freed after boot?)",
            (false, true) => {
                "loads but no function attaches: this arm64 kernel has no ftrace direct calls \
                 for BPF trampolines (Linux 6.4 added them)"
            }
            (false, false) => "loads but no function attaches",
        };
        for mut refusal in unattachable {
            refusal.reason = format!("{why}: {}", refusal.reason);
            self.drop_function(refusal);
        }
        if let Some(refusal) = sampling_refused {
            eprintln!(
                "hookprof: perf_event refused on cpu-clock: {}; no stacks are sampled",
                refusal.reason
            );
            self.attachments.retain(|a| a.kind != Kind::PerfEvent);
            self.refused.push(refusal);
        }
        Ok(())
    }

    /// Tells the programs when this attach window began: a call entered before it (in an
    /// earlier window, or while nothing was attached) is counted when it returns, never timed.
    fn start_window(&mut self) -> Result<()> {
        let mut start: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
            self.ebpf
                .map_mut("WINDOW_START")
                .context("no WINDOW_START map")?,
        )?;
        // CLOCK_MONOTONIC is bpf_ktime_get_ns's clock.
        start
            .set(0, crate::machine::clock::monotonic_ns(), 0)
            .context("set the window start")
    }

    /// Detaches every attached program; they stay loaded for the next attach.
    pub fn detach(&mut self) {
        for a in &mut self.attachments {
            a.link = None;
        }
    }

    /// Records refusals met elsewhere (the discovery pass's), so the run's report has them.
    pub fn add_refusals(&mut self, refused: impl IntoIterator<Item = Refusal>) {
        self.refused.extend(refused);
    }

    /// Records what the plan looked for under each hook found, for the results.
    pub fn set_lsm_lookups(&mut self, lookups: Vec<HookLookup>) {
        self.lsm_lookups = lookups;
    }

    /// Whether this kernel calls a BPF LSM function (`bpf_lsm_*`) only while a BPF LSM
    /// program is attached to its hook: fentry on one then sees no call, and attaching it
    /// changes nothing the kernel calls (the toggle is for BPF LSM programs alone).
    pub fn bpf_lsm_on_demand(&self) -> bool {
        self.bpf_lsm_on_demand
    }

    /// The map in which the programs add up each (group, path) tally (`top` reads it).
    pub(crate) fn aggregate_map(&self) -> Result<PerCpuHashMap<&MapData, AggregateKey, Tally>> {
        Ok(PerCpuHashMap::try_from(
            self.ebpf.map("AGGREGATE").context("no AGGREGATE map")?,
        )?)
    }

    /// The same map, to remove tallies from.
    pub(crate) fn aggregate_map_mut(
        &mut self,
    ) -> Result<PerCpuHashMap<&mut MapData, AggregateKey, Tally>> {
        Ok(PerCpuHashMap::try_from(
            self.ebpf.map_mut("AGGREGATE").context("no AGGREGATE map")?,
        )?)
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        Snapshot::read(&self.ebpf, self.hooks.len() as u32)
    }

    /// What corrected figures take out of each timed duration (None until calibrated).
    pub fn correction(&self) -> Option<Correction> {
        self.correction
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
            lsm_lookups: self.lsm_lookups.clone(),
        }
    }
}

/// Attaches `program` where `a` says, and takes the link from aya: the caller owns it. With
/// `reload` (the kernel's BTF), a trampoline program is loaded anew first.
fn attach_one(
    program: &mut aya::programs::Program,
    a: &Attachment,
    sample_period_ns: u64,
    reload: Option<&aya::Btf>,
) -> Result<OwnedLink, ProgramError> {
    Ok(match a.kind {
        Kind::PerfEvent => cpu_sampler::attach_cpu_clock(program, &a.target, sample_period_ns)?,
        Kind::RawTracepoint => syscall_tracepoints::attach_raw_tracepoint(program, &a.target)?,
        Kind::TpBtf => task_tracepoints::attach_tp_btf(program)?,
        Kind::FEntry => function_pairs::attach_fentry(program, &a.target, reload)?,
        Kind::FExit => function_pairs::attach_fexit(program, &a.target, reload)?,
        // BPF LSM programs are `attach_lsm`'s, kept apart from the attachments.
        Kind::Lsm => unreachable!("a BPF LSM program among the attachments"),
    })
}

/// Every loaded program and every link is an fd: a full set of slots needs over 1,500.
fn raise_open_files_limit() {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid rlimit; if raising fails, loads past the
    // soft limit are refused with EMFILE and reported as such.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK.
fn raise_memlock_limit() {
    let limit = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: a valid rlimit; failure only matters on old kernels, where load reports it.
    unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &limit) };
}
