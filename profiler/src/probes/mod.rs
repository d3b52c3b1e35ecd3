//! Loading hookprof's eBPF object, attaching and detaching its programs, and reading what they
//! counted. A probe the kernel refuses is recorded with its errno and reason, and the rest go on.
mod btf;
pub mod calibration;
pub mod catalog;
mod lsm;
mod refusal;
pub mod selection;
mod snapshot;

use anyhow::{Context, Result};
use aya::{
    programs::{
        fentry::FEntryLinkId, fexit::FExitLinkId, raw_trace_point::RawTracePointLinkId,
        tp_btf::BtfTracePointLinkId, BtfTracePoint, FEntry, FExit, ProgramError, RawTracePoint,
    },
    Ebpf, EbpfLoader,
};
use profiler_common::HOOK_SLOTS;

/// Index of the BPF LSM program run counter in `Snapshot::events`.
pub const LSM_RUNS_EVENT: usize = profiler_common::event::LSM_RUNS as usize;

/// Slots a run may use; the last one is kept for calibration.
pub const USER_SLOTS: usize = HOOK_SLOTS as usize - 1;
const CALIBRATION_SLOT: usize = USER_SLOTS;

pub use self::{
    btf::{KernelBtf, VMLINUX_BTF},
    catalog::Target,
    lsm::lsm_hook_of,
    refusal::reason,
    snapshot::{tally_sum, Snapshot},
};
use crate::{
    attribution::Correction,
    results::{ProbeRecord, ProbeReport, Refusal},
};

/// What to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// raw_syscalls sys_enter/sys_exit (always needed for scoping when anything is probed).
    pub syscalls: bool,
    /// sched_process_fork/exec/exit.
    pub tasks: bool,
    /// Kernel functions to time with fentry/fexit pairs, one slot each.
    pub functions: Vec<Target>,
    /// Load only each function's fentry, which counts calls (the discovery pass needs no times).
    pub entries_only: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    RawTracepoint,
    TpBtf,
    FEntry,
    FExit,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::RawTracepoint => "raw_tracepoint",
            Kind::TpBtf => "tp_btf",
            Kind::FEntry => "fentry",
            Kind::FExit => "fexit",
        }
    }
}

enum Link {
    RawTracepoint(RawTracePointLinkId),
    TpBtf(BtfTracePointLinkId),
    FEntry(FEntryLinkId),
    FExit(FExitLinkId),
}

/// A loaded program and where it attaches.
struct Attachment {
    program: String,
    kind: Kind,
    target: String,
    link: Option<Link>,
}

pub struct Probes {
    ebpf: Ebpf,
    attachments: Vec<Attachment>,
    /// Slot i times `hooks[i]` (None for a slot whose pair was refused).
    hooks: Vec<Option<Target>>,
    refused: Vec<Refusal>,
    lsm_programs: Vec<lsm::LsmProgram>,
    /// Functions whose pairs `attach` attaches (None: all). Each workload attaches only the
    /// functions it calls, so a sample's attach and detach stay short.
    focus: Option<Vec<String>>,
    /// The kernel's BTF as aya needs it (see `aya_btf`).
    btf: &'static aya::Btf,
    /// The probes' own cost, once calibrated.
    correction: Option<Correction>,
}

/// The kernel's BTF as aya needs it, parsed once per process: it is slow under emulation, and
/// a run loads several probe sets (the discovery rounds, the measured one).
fn aya_btf() -> Result<&'static aya::Btf> {
    static BTF: std::sync::OnceLock<aya::Btf> = std::sync::OnceLock::new();
    if let Some(btf) = BTF.get() {
        return Ok(btf);
    }
    let btf = aya::Btf::from_sys_fs().context("read the kernel BTF for aya")?;
    Ok(BTF.get_or_init(|| btf))
}

impl Probes {
    /// Loads every program of the plan; refusals are recorded, not fatal.
    pub fn load(plan: &ProbePlan, kernel: &KernelBtf) -> Result<Probes> {
        supported_architecture(std::env::consts::ARCH)?;
        raise_memlock_limit();
        raise_open_files_limit();
        let ebpf = EbpfLoader::new()
            // The per-task state map is task storage, which only the programs use.
            .allow_unsupported_maps()
            .load(crate::ebpf_object())
            .context("load hookprof's eBPF object")?;
        let btf = aya_btf()?;
        let mut probes = Probes {
            ebpf,
            attachments: Vec::new(),
            hooks: Vec::new(),
            refused: Vec::new(),
            lsm_programs: Vec::new(),
            focus: None,
            btf,
            correction: None,
        };
        if plan.syscalls {
            probes.load_raw("sys_enter", "sys_enter");
            probes.load_raw("sys_exit", "sys_exit");
        }
        if plan.tasks {
            for (name, tp) in [
                ("fork", "sched_process_fork"),
                ("exec", "sched_process_exec"),
                ("exit", "sched_process_exit"),
            ] {
                // tp_btf is cheaper; raw_tracepoint works on kernels that refuse it (except
                // for fork, which needs the child as a BTF pointer).
                if !probes.load_tp_btf(&format!("{name}_btf"), tp) && name != "fork" {
                    probes.load_raw(&format!("{name}_raw"), tp);
                }
            }
        }
        probes.load_functions(&plan.functions, plan.entries_only, kernel)?;
        Ok(probes)
    }

    fn load_raw(&mut self, program: &str, tracepoint: &str) -> bool {
        let result = (|| -> Result<(), ProgramError> {
            let p: &mut RawTracePoint = self
                .ebpf
                .program_mut(program)
                .ok_or(ProgramError::NotLoaded)?
                .try_into()?;
            p.load()
        })();
        self.record(program, Kind::RawTracepoint, tracepoint, result)
    }

    fn load_tp_btf(&mut self, program: &str, tracepoint: &str) -> bool {
        let result = (|| -> Result<(), ProgramError> {
            let p: &mut BtfTracePoint = self
                .ebpf
                .program_mut(program)
                .ok_or(ProgramError::NotLoaded)?
                .try_into()?;
            p.load(tracepoint, self.btf)
        })();
        self.record(program, Kind::TpBtf, tracepoint, result)
    }

    /// Makes `tgid` (the runner) the only process whose gate calls open and close tracking
    /// windows; until then nobody's do.
    pub fn set_gate_owner(&mut self, tgid: u32) -> Result<()> {
        let mut owner: aya::maps::Array<_, u32> = aya::maps::Array::try_from(
            self.ebpf
                .map_mut("GATE_OWNER")
                .context("no GATE_OWNER map")?,
        )?;
        owner.set(0, tgid, 0).context("set the gate owner")
    }

    /// Records refusals met elsewhere (the discovery pass's), so the run's report has them.
    pub fn add_refusals(&mut self, refused: impl IntoIterator<Item = Refusal>) {
        self.refused.extend(refused);
    }

    /// One fentry/fexit pair per function, in the next free slots. Once the kernel refuses
    /// trampolines with EPERM it refuses them all, so the rest are recorded with the same reason
    /// without asking again.
    pub fn load_functions(
        &mut self,
        functions: &[Target],
        entries_only: bool,
        kernel: &KernelBtf,
    ) -> Result<()> {
        let first = self.hooks.len();
        anyhow::ensure!(
            first + functions.len() <= USER_SLOTS,
            "{} functions to time, but hookprof has {USER_SLOTS} probe slots",
            first + functions.len()
        );
        let mut trampolines_refused: Option<i32> = None;
        for (slot, target) in (first..).zip(functions) {
            let function = &target.function;
            if !kernel.has_function(function) {
                self.refuse_pair(
                    function,
                    Some(libc::ENOENT),
                    "not a traceable function on this kernel",
                );
            } else if let Some(errno) = trampolines_refused {
                self.refuse_pair(function, Some(errno), &reason("fentry", Some(errno)));
            } else if let Err(errno) = self.load_pair(slot, target, entries_only) {
                trampolines_refused = errno.filter(|&e| e == libc::EPERM);
            }
        }
        // Refused slots stay taken: a half-loaded pair's program cannot be loaded again.
        let end = first + functions.len();
        if self.hooks.len() < end {
            self.hooks.resize(end, None);
        }
        Ok(())
    }

    /// Loads slot `slot`'s pair (or only its fentry) on `target`; on refusal, the errno of the
    /// fentry's refusal.
    fn load_pair(
        &mut self,
        slot: usize,
        target: &Target,
        entry_only: bool,
    ) -> Result<(), Option<i32>> {
        let function = &target.function;
        let entry = format!("hook_enter_{slot}");
        let entered = self.load_fentry(&entry, function);
        let errno = entered.as_ref().err().and_then(refusal::errno_of);
        if !self.record(&entry, Kind::FEntry, function, entered) {
            // The pair stands or falls together: its fexit is refused for the same reason.
            let mut exit_refusal = self.refused.last().expect("just recorded").clone();
            exit_refusal.kind = "fexit".into();
            self.refused.push(exit_refusal);
            return Err(errno);
        }
        if !entry_only {
            let exit = format!("hook_exit_{slot}");
            let exited = self.load_fexit(&exit, function);
            if !self.record(&exit, Kind::FExit, function, exited) {
                // An entry without its exit would count calls it can never time.
                self.attachments.pop();
                return Err(None);
            }
        }
        if self.hooks.len() <= slot {
            self.hooks.resize(slot + 1, None);
        }
        self.hooks[slot] = Some(target.clone());
        Ok(())
    }

    fn load_fentry(&mut self, program: &str, function: &str) -> Result<(), ProgramError> {
        let p: &mut FEntry = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, self.btf)
    }

    fn load_fexit(&mut self, program: &str, function: &str) -> Result<(), ProgramError> {
        let p: &mut FExit = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, self.btf)
    }

    fn refuse_pair(&mut self, function: &str, errno: Option<i32>, why: &str) {
        for kind in ["fentry", "fexit"] {
            self.refused.push(Refusal {
                kind: kind.into(),
                target: function.into(),
                errno,
                reason: why.into(),
            });
        }
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
                });
                true
            }
            Err(e) => {
                self.refused.push(refusal::refusal(kind.name(), target, &e));
                false
            }
        }
    }

    /// Attaches every loaded program, of the timed functions only those in focus (a no-op for
    /// programs already attached).
    pub fn attach(&mut self) -> Result<()> {
        let focus = self.focus.take();
        let attached = self.attach_where(|a| {
            !matches!(a.kind, Kind::FEntry | Kind::FExit)
                || focus.as_ref().is_none_or(|f| f.contains(&a.target))
        });
        self.focus = focus;
        attached
    }

    /// From the next `attach` on, time only `functions` (None: every loaded function).
    pub fn focus(&mut self, functions: Option<Vec<String>>) {
        self.focus = functions;
    }

    /// Attaches only the named programs (calibration compares subsets). The list keeps its
    /// order, so calibration can drop what it added from the end.
    fn attach_only(&mut self, programs: &[&str]) -> Result<()> {
        self.attach_where(|a| programs.contains(&a.program.as_str()))
    }

    fn attach_where(&mut self, chosen: impl Fn(&Attachment) -> bool) -> Result<()> {
        let mut unattachable: Vec<Refusal> = Vec::new();
        for a in &mut self.attachments {
            if a.link.is_some() || !chosen(a) {
                continue;
            }
            let program = self
                .ebpf
                .program_mut(&a.program)
                .with_context(|| format!("program {} vanished", a.program))?;
            match attach_one(program, a) {
                Ok(link) => a.link = Some(link),
                // A function can be in BTF and load, yet not attach (an __init function the
                // kernel has freed): its pair is refused and the rest go on.
                Err(e) if matches!(a.kind, Kind::FEntry | Kind::FExit) => {
                    let mut refusal = refusal::refusal(a.kind.name(), &a.target, &e);
                    refusal.reason = format!(
                        "loads but does not attach (code the kernel freed after boot?): {}",
                        refusal.reason
                    );
                    unattachable.push(refusal);
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("attach {} {}", a.kind.name(), a.target))
                }
            }
        }
        for refusal in unattachable {
            self.drop_function(refusal)?;
        }
        Ok(())
    }

    /// Forgets a timed function the kernel would not attach: its programs are detached and
    /// never attached again, its slot goes empty, and the refusal is recorded for the pair.
    fn drop_function(&mut self, refusal: Refusal) -> Result<()> {
        let target = refusal.target.clone();
        let mut kept = Vec::with_capacity(self.attachments.len());
        for mut a in std::mem::take(&mut self.attachments) {
            let timed = matches!(a.kind, Kind::FEntry | Kind::FExit) && a.target == target;
            if !timed {
                kept.push(a);
                continue;
            }
            if let Some(link) = a.link.take() {
                detach_one(&mut self.ebpf, &a.program, link)?;
            }
        }
        self.attachments = kept;
        for slot in self.hooks.iter_mut() {
            if slot.as_ref().is_some_and(|t| t.function == target) {
                *slot = None;
            }
        }
        if self.refused.iter().any(|r| r.target == target) {
            return Ok(());
        }
        for kind in ["fentry", "fexit"] {
            self.refused.push(Refusal {
                kind: kind.into(),
                ..refusal.clone()
            });
        }
        Ok(())
    }

    /// Detaches every attached program; they stay loaded for the next attach.
    pub fn detach(&mut self) -> Result<()> {
        for a in &mut self.attachments {
            if let Some(link) = a.link.take() {
                detach_one(&mut self.ebpf, &a.program, link)?;
            }
        }
        Ok(())
    }

    /// True if the syscall programs (which also carry the scope gate) are loaded.
    pub fn scoping_works(&self) -> bool {
        self.attachments
            .iter()
            .filter(|a| a.kind == Kind::RawTracepoint && a.target.starts_with("sys_"))
            .count()
            == 2
    }

    pub fn snapshot(&self) -> Result<Snapshot> {
        Snapshot::read(&self.ebpf, self.hooks.len() as u32)
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
                    kind: a.kind.name().into(),
                    target: a.target.clone(),
                })
                .collect(),
            refused: self.refused.clone(),
        }
    }
}

fn attach_one(program: &mut aya::programs::Program, a: &Attachment) -> Result<Link, ProgramError> {
    Ok(match a.kind {
        Kind::RawTracepoint => {
            let p: &mut RawTracePoint = program.try_into()?;
            Link::RawTracepoint(p.attach(&a.target)?)
        }
        Kind::TpBtf => {
            let p: &mut BtfTracePoint = program.try_into()?;
            Link::TpBtf(p.attach()?)
        }
        Kind::FEntry => {
            let p: &mut FEntry = program.try_into()?;
            Link::FEntry(p.attach()?)
        }
        Kind::FExit => {
            let p: &mut FExit = program.try_into()?;
            Link::FExit(p.attach()?)
        }
    })
}

fn detach_one(ebpf: &mut Ebpf, program: &str, link: Link) -> Result<()> {
    let program = ebpf
        .program_mut(program)
        .with_context(|| format!("program {program} vanished"))?;
    match link {
        Link::RawTracepoint(id) => {
            let p: &mut RawTracePoint = program.try_into()?;
            p.detach(id)?
        }
        Link::TpBtf(id) => {
            let p: &mut BtfTracePoint = program.try_into()?;
            p.detach(id)?
        }
        Link::FEntry(id) => {
            let p: &mut FEntry = program.try_into()?;
            p.detach(id)?
        }
        Link::FExit(id) => {
            let p: &mut FExit = program.try_into()?;
            p.detach(id)?
        }
    }
    Ok(())
}

/// The syscall programs know x86_64's syscall numbers and `struct pt_regs` layout; elsewhere
/// they would count nothing, so hookprof refuses to load them.
fn supported_architecture(arch: &str) -> Result<()> {
    anyhow::ensure!(
        arch == "x86_64",
        "hookprof's probes support x86_64 only (this is {arch}): they read x86_64 syscall \
         numbers and registers; use --probes none for clean timings"
    );
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn other_architectures_are_refused_in_one_line() {
        assert!(supported_architecture("x86_64").is_ok());
        let e = supported_architecture("aarch64").unwrap_err().to_string();
        assert!(e.contains("x86_64 only (this is aarch64)"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}
