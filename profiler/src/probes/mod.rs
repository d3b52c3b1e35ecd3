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
use profiler_common::{GATE_CLOSE, GATE_FD, GATE_OPEN, HOOK_SLOTS};

pub use self::{
    btf::{KernelBtf, VMLINUX_BTF},
    catalog::Target,
    lsm::lsm_hook_of,
    refusal::reason,
    snapshot::{tally_sum, Snapshot},
};
use crate::results::{ProbeRecord, ProbeReport, Refusal};

/// What to probe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// raw_syscalls sys_enter/sys_exit (always needed for scoping when anything is probed).
    pub syscalls: bool,
    /// sched_process_fork/exec/exit.
    pub tasks: bool,
    /// Kernel functions to time with fentry/fexit pairs, one slot each.
    pub functions: Vec<Target>,
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
}

impl Probes {
    /// Loads every program of the plan; refusals are recorded, not fatal.
    pub fn load(plan: &ProbePlan, kernel: &KernelBtf) -> Result<Probes> {
        raise_memlock_limit();
        let pid_offset = kernel.member_offset("task_struct", "pid")?;
        let ebpf = EbpfLoader::new()
            .override_global("TASK_PID_OFFSET", &pid_offset, true)
            .override_global("OWNER_TGID", &std::process::id(), true)
            .load(crate::ebpf_object())
            .context("load hookprof's eBPF object")?;
        let btf = aya::Btf::from_sys_fs().context("read the kernel BTF for aya")?;
        let mut probes = Probes {
            ebpf,
            attachments: Vec::new(),
            hooks: Vec::new(),
            refused: Vec::new(),
            lsm_programs: Vec::new(),
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
                // tp_btf is cheaper; raw_tracepoint works on kernels that refuse it.
                if !probes.load_tp_btf(&format!("{name}_btf"), tp, &btf) {
                    probes.load_raw(&format!("{name}_raw"), tp);
                }
            }
        }
        probes.load_functions(&plan.functions, kernel, &btf)?;
        Ok(probes)
    }

    fn load_raw(&mut self, program: &str, tracepoint: &str) -> bool {
        let result = (|| -> Result<(), ProgramError> {
            let p: &mut RawTracePoint = self.program(program)?.try_into()?;
            p.load()
        })();
        self.record(program, Kind::RawTracepoint, tracepoint, result)
    }

    fn load_tp_btf(&mut self, program: &str, tracepoint: &str, btf: &aya::Btf) -> bool {
        let result = (|| -> Result<(), ProgramError> {
            let p: &mut BtfTracePoint = self.program(program)?.try_into()?;
            p.load(tracepoint, btf)
        })();
        self.record(program, Kind::TpBtf, tracepoint, result)
    }

    /// One fentry/fexit pair per function. Once the kernel refuses trampolines with EPERM it
    /// refuses them all, so the rest are recorded with the same reason without asking again.
    fn load_functions(
        &mut self,
        functions: &[Target],
        kernel: &KernelBtf,
        btf: &aya::Btf,
    ) -> Result<()> {
        anyhow::ensure!(
            functions.len() <= HOOK_SLOTS as usize,
            "{} functions to time, but hookprof has {HOOK_SLOTS} probe slots",
            functions.len()
        );
        let mut trampolines_refused: Option<i32> = None;
        for (slot, target) in functions.iter().enumerate() {
            let function = &target.function;
            if !kernel.has_function(function) {
                self.refuse_pair(
                    function,
                    Some(libc::ENOENT),
                    "not a traceable function on this kernel",
                );
                continue;
            }
            if let Some(errno) = trampolines_refused {
                self.refuse_pair(function, Some(errno), &reason("fentry", Some(errno)));
                continue;
            }
            let entry = format!("hook_enter_{slot}");
            let exit = format!("hook_exit_{slot}");
            let entered = (|| -> Result<(), ProgramError> {
                let p: &mut FEntry = self.program(&entry)?.try_into()?;
                p.load(function, btf)
            })();
            if let Err(e) = &entered {
                if refusal::errno_of(e) == Some(libc::EPERM) {
                    trampolines_refused = Some(libc::EPERM);
                }
            }
            if !self.record(&entry, Kind::FEntry, function, entered) {
                // The pair stands or falls together: its fexit is refused for the same reason.
                let mut exit_refusal = self.refused.last().expect("just recorded").clone();
                exit_refusal.kind = "fexit".into();
                self.refused.push(exit_refusal);
                continue;
            }
            let exited = (|| -> Result<(), ProgramError> {
                let p: &mut FExit = self.program(&exit)?.try_into()?;
                p.load(function, btf)
            })();
            if self.record(&exit, Kind::FExit, function, exited) {
                self.hooks.resize(slot, None); // keeps slot numbers aligned
                self.hooks.push(Some(target.clone()));
            } else {
                // An entry without its exit would count calls it can never time.
                self.attachments.pop();
            }
        }
        Ok(())
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

    fn program(&mut self, name: &str) -> Result<&mut aya::programs::Program, ProgramError> {
        self.ebpf.program_mut(name).ok_or(ProgramError::NotLoaded)
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

    /// Attaches every loaded program (a no-op for those already attached).
    pub fn attach(&mut self) -> Result<()> {
        for a in &mut self.attachments {
            if a.link.is_some() {
                continue;
            }
            let program = self
                .ebpf
                .program_mut(&a.program)
                .with_context(|| format!("program {} vanished", a.program))?;
            let what = || format!("attach {} {}", a.kind.name(), a.target);
            a.link = Some(match a.kind {
                Kind::RawTracepoint => {
                    let p: &mut RawTracePoint = program.try_into()?;
                    Link::RawTracepoint(p.attach(&a.target).with_context(what)?)
                }
                Kind::TpBtf => {
                    let p: &mut BtfTracePoint = program.try_into()?;
                    Link::TpBtf(p.attach().with_context(what)?)
                }
                Kind::FEntry => {
                    let p: &mut FEntry = program.try_into()?;
                    Link::FEntry(p.attach().with_context(what)?)
                }
                Kind::FExit => {
                    let p: &mut FExit = program.try_into()?;
                    Link::FExit(p.attach().with_context(what)?)
                }
            });
        }
        Ok(())
    }

    /// Attaches only the named programs (calibration compares subsets).
    fn attach_only(&mut self, programs: &[&str]) -> Result<()> {
        let (chosen, rest): (Vec<_>, Vec<_>) = self
            .attachments
            .drain(..)
            .partition(|a| programs.contains(&a.program.as_str()));
        self.attachments = chosen;
        let attached = self.attach();
        self.attachments.extend(rest);
        attached
    }

    /// Detaches every attached program; they stay loaded for the next attach.
    pub fn detach(&mut self) -> Result<()> {
        for a in &mut self.attachments {
            let Some(link) = a.link.take() else { continue };
            let program = self
                .ebpf
                .program_mut(&a.program)
                .with_context(|| format!("program {} vanished", a.program))?;
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
        }
        Ok(())
    }

    /// True if anything at all could be loaded.
    pub fn any_loaded(&self) -> bool {
        !self.attachments.is_empty()
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

    /// Timed functions by slot (None for a slot whose pair was refused).
    pub fn hook_functions(&self) -> &[Option<Target>] {
        &self.hooks
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

    /// The eBPF object, for kernel run-time statistics and tests.
    pub fn ebpf(&self) -> &Ebpf {
        &self.ebpf
    }
}

/// Opens (or closes) the calling thread's tracking window. The call fails with EBADF by
/// design; the sys_enter program sees it first and never counts it.
pub fn gate(open: bool) {
    let cmd = if open { GATE_OPEN } else { GATE_CLOSE };
    // SAFETY: ioctl on an invalid fd has no effect beyond returning EBADF.
    unsafe { libc::ioctl(GATE_FD as libc::c_int, cmd as libc::c_ulong) };
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
