//! Loading the eBPF object and its programs. A program the kernel refuses is recorded with its
//! errno and reason, and the rest go on.
use anyhow::Result;
use aya::programs::{BtfTracePoint, FEntry, FExit, ProgramError, RawTracePoint};

use super::{
    aggregate::{Globals, GroupBy, Scope},
    calibration::CALIBRATION_FUNCTIONS,
    ebpf_object::{self, Object},
    refusal,
    refusal::reason,
    Attachment, Features, KernelBtf, Kind, ProbePlan, Probes, Target, CALIBRATION_SLOT, USER_SLOTS,
};

/// The function through which a kernel turns a BPF LSM hook's call on when a BPF LSM program
/// attaches, and off when the last goes (Linux 6.12); before it every hook's `bpf_lsm_*`
/// function was called always.
const BPF_LSM_TOGGLE: &str = "security_toggle_hook";

/// The scope gate without the syscall timing (`attach_for_stacks`).
pub(super) const SCOPE_PROGRAM: &str = "scope_sys_enter";

/// Deletes a freed task's entry where per-task state is kept by thread id.
pub(super) const FREE_PROGRAM: &str = "free_raw";
use crate::results::Refusal;

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
        let ebpf =
            ebpf_object::load_object(object, Globals::new(scope, by), plan.entries_only, &layout)?;
        let btf = ebpf_object::aya_btf()?;
        let mut probes = Probes {
            ebpf,
            attachments: Vec::new(),
            hooks: Vec::new(),
            refused: Vec::new(),
            lsm_programs: Vec::new(),
            focus: None,
            btf,
            correction: None,
            trampolines_refused: plan.trampolines_refused,
            sample_period_ns: plan.stacks.unwrap_or(0),
            layout,
            getppid_function: CALIBRATION_FUNCTIONS
                .iter()
                .find(|f| kernel.has_function(f))
                .map(|f| f.to_string()),
            bpf_lsm_on_demand: kernel.has_function(BPF_LSM_TOGGLE),
        };
        if plan.syscalls {
            probes.load_raw("sys_enter", "sys_enter");
            probes.load_raw("sys_exit", "sys_exit");
        }
        if !Features::get()?.task_storage {
            // Per-task state by thread id: a freed task's entry goes with it.
            probes.load_raw(FREE_PROGRAM, "sched_process_free");
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
        if plan.switches {
            if layout.switch_prev_state || layout.state_offset.is_some() {
                probes.load_tp_btf("sched_switch", "sched_switch");
            } else {
                probes.refused.push(Refusal {
                    kind: Kind::TpBtf,
                    target: "sched_switch".into(),
                    errno: None,
                    reason: "its tracepoint has no prev_state argument (Linux 5.18) and the \
                             kernel's BTF no task_struct state field to read instead"
                        .into(),
                });
            }
        }
        if plan.stacks.is_some() {
            probes.load_stacks();
            // The passes for the stacks alone keep the gate and drop the syscall timing,
            // where a sample's syscall is read from the task's registers, not its record.
            if plan.syscalls && Features::get()?.task_pt_regs {
                probes.load_raw(SCOPE_PROGRAM, "sys_enter");
            }
        }
        probes.load_functions(&plan.functions, plan.entries_only, kernel)?;
        Ok(probes)
    }

    pub(super) fn load_raw(&mut self, program: &str, tracepoint: &str) -> bool {
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
        for (slot, target) in (first..).zip(functions) {
            if !kernel.has_function(&target.function) {
                self.refused.extend(pair_refusals(target, kernel, None));
            } else if let Some(errno) = self.trampolines_refused {
                self.refused
                    .extend(pair_refusals(target, kernel, Some(errno)));
            } else if let Err(errno) = self.load_pair(slot, target, entries_only) {
                self.trampolines_refused = errno.filter(|&e| e == libc::EPERM);
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
    pub(super) fn load_pair(
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
            exit_refusal.kind = Kind::FExit;
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

    pub(super) fn load_fentry(
        &mut self,
        program: &str,
        function: &str,
    ) -> Result<(), ProgramError> {
        let p: &mut FEntry = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, self.btf)
    }

    pub(super) fn load_fexit(&mut self, program: &str, function: &str) -> Result<(), ProgramError> {
        let p: &mut FExit = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, self.btf)
    }

    /// Asks the kernel whether it takes BPF trampolines at all, with one fentry (the
    /// calibration slot's, on getppid's function) from an object without the other slots,
    /// rather than by loading a batch of pairs. Returns the errno if it refuses them all
    /// (EPERM: every trampoline is refused alike); None where that fentry loads, fails for a
    /// reason of its own, or the kernel has no getppid function to try.
    pub fn kernel_refuses_trampolines(kernel: &KernelBtf) -> Result<Option<i32>> {
        let Some(function) = CALIBRATION_FUNCTIONS
            .iter()
            .find(|f| kernel.has_function(f))
        else {
            return Ok(None);
        };
        let mut probes = Probes::load(&ProbePlan::default(), kernel)?;
        let errno = match probes.load_fentry(&format!("hook_enter_{CALIBRATION_SLOT}"), function) {
            Ok(()) => None,
            Err(e) => refusal::errno_of(&e).filter(|&errno| errno == libc::EPERM),
        };
        Ok(errno)
    }

    /// The errno with which the kernel refuses every trampoline, if known.
    pub fn trampolines_refused(&self) -> Option<i32> {
        self.trampolines_refused
    }

    pub(super) fn record(
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
}

/// What `load_functions` records for a pair it cannot load on `target`: absent from the
/// kernel's BTF, or refused with `errno` (the kernel refuses every trampoline alike).
pub fn pair_refusals(target: &Target, kernel: &KernelBtf, errno: Option<i32>) -> [Refusal; 2] {
    let function = &target.function;
    let (errno, why) = if kernel.has_function(function) {
        (errno, reason(Kind::FEntry, errno))
    } else {
        (
            Some(libc::ENOENT),
            "not a traceable function on this kernel".to_string(),
        )
    };
    [Kind::FEntry, Kind::FExit].map(|kind| Refusal {
        kind,
        target: function.clone(),
        errno,
        reason: why.clone(),
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
