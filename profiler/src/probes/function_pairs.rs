//! fentry/fexit pairs: one pair per timed function, in a slot of its own (`hook_enter_N`,
//! `hook_exit_N`), loaded on the function through the kernel's BTF. Where the kernel refuses
//! trampolines it refuses them all, so the rest are recorded refused without asking. `focus`
//! chooses which loaded pairs `attach` attaches; a pair that loads but will not attach is
//! dropped (`drop_function`).
//!
//! A trampoline program (fentry, fexit) cannot be attached again once detached on kernels
//! before 5.12 ("bpf: Allow trampoline re-attach for tracing and lsm programs"): its target
//! goes with its first link. `trampolines_reattach` tries it once per process, and where it
//! fails such a program is loaded anew before each attach after its first.
use std::sync::OnceLock;

use anyhow::{Context, Result};
use aya::programs::{FEntry, FExit, ProgramError};

use super::{
    calibration::CALIBRATION_FUNCTIONS,
    ebpf_object::{self, Object},
    refusal,
    refusal::reason,
    scope_globals::{Globals, GroupBy, Scope},
    KernelBtf, Kind, OwnedLink, ProbePlan, Probes, Target, TaskLayout, CALIBRATION_SLOT,
    USER_SLOTS,
};
use crate::results::Refusal;

impl Probes {
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
        let aya = self.kernel_btf_to_load()?;
        let p: &mut FEntry = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, aya.btf())
    }

    pub(super) fn load_fexit(&mut self, program: &str, function: &str) -> Result<(), ProgramError> {
        let aya = self.kernel_btf_to_load()?;
        let p: &mut FExit = self
            .ebpf
            .program_mut(program)
            .ok_or(ProgramError::NotLoaded)?
            .try_into()?;
        p.load(function, aya.btf())
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

    /// Lends the calibration slot's pair on getppid's function (`top`'s probe cost): loads it
    /// where the kernel has the function and takes the pair, runs `borrow` with whether it
    /// loaded, and gives everything back: all detached, and the pair's attachments, refusals
    /// and slot forgotten.
    pub(crate) fn with_calibration_pair<T>(
        &mut self,
        kernel: &KernelBtf,
        borrow: impl FnOnce(&mut Probes, bool) -> T,
    ) -> T {
        let (attachments, refused, hooks) =
            (self.attachments.len(), self.refused.len(), self.hooks.len());
        let function = CALIBRATION_FUNCTIONS
            .iter()
            .find(|f| kernel.has_function(f));
        let pair = function.is_some_and(|f| {
            self.load_pair(CALIBRATION_SLOT, &Target::top(f), false)
                .is_ok()
        });
        let borrowed = borrow(self, pair);
        // Back as they were: the borrowed pair stays loaded, never attached, until the object goes.
        self.detach();
        self.attachments.truncate(attachments);
        self.refused.truncate(refused);
        self.hooks.truncate(hooks);
        borrowed
    }

    /// From the next `attach` on, time only `functions` (None: every loaded function).
    pub fn focus(&mut self, functions: Option<Vec<String>>) {
        self.focus = functions;
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

    /// Forgets a timed function the kernel would not attach: its programs are detached and
    /// never attached again, its slot goes empty, and the refusal is recorded for the pair.
    pub(super) fn drop_function(&mut self, refusal: Refusal) {
        let target = refusal.target.clone();
        // Dropping an attachment drops its link, which detaches it.
        self.attachments
            .retain(|a| !(matches!(a.kind, Kind::FEntry | Kind::FExit) && a.target == target));
        for slot in self.hooks.iter_mut() {
            if slot.as_ref().is_some_and(|t| t.function == target) {
                *slot = None;
            }
        }
        if self.refused.iter().any(|r| r.target == target) {
            return;
        }
        for kind in [Kind::FEntry, Kind::FExit] {
            self.refused.push(Refusal {
                kind,
                ..refusal.clone()
            });
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

/// Attaches an fentry program on its function; with `reload` (the kernel's BTF), loads it anew
/// first (`trampolines_reattach`).
pub(super) fn attach_fentry(
    program: &mut aya::programs::Program,
    target: &str,
    reload: Option<&aya::Btf>,
) -> Result<OwnedLink, ProgramError> {
    let p: &mut FEntry = program.try_into()?;
    if let Some(btf) = reload {
        p.unload()?;
        p.load(target, btf)?;
    }
    let id = p.attach()?;
    Ok(OwnedLink::Fd(p.take_link(id)?.into()))
}

/// As `attach_fentry`, for the fexit program.
pub(super) fn attach_fexit(
    program: &mut aya::programs::Program,
    target: &str,
    reload: Option<&aya::Btf>,
) -> Result<OwnedLink, ProgramError> {
    let p: &mut FExit = program.try_into()?;
    if let Some(btf) = reload {
        p.unload()?;
        p.load(target, btf)?;
    }
    let id = p.attach()?;
    Ok(OwnedLink::Fd(p.take_link(id)?.into()))
}

/// Whether an fentry program attached, detached and attached again runs again on this kernel:
/// tried once per process, with the calibration slot's fentry on getppid's function and the
/// kernel's run-time statistics. Where it cannot be tried (no such function, trampolines
/// refused), taken as yes: nothing will be attached twice then.
pub(super) fn trampolines_reattach(
    btf: &aya::Btf,
    layout: &TaskLayout,
    getppid_function: Option<&str>,
) -> bool {
    static REATTACH: OnceLock<bool> = OnceLock::new();
    *REATTACH.get_or_init(|| {
        getppid_function.is_none_or(|f| try_reattach(btf, layout, f).unwrap_or(true))
    })
}

fn try_reattach(btf: &aya::Btf, layout: &TaskLayout, function: &str) -> Result<bool> {
    let mut ebpf = ebpf_object::load_object(
        Object::CalibrationSlotOnly,
        Globals::new(&Scope::Gate, GroupBy::Cgroup),
        false,
        layout,
    )?;
    let p: &mut FEntry = ebpf
        .program_mut(&format!("hook_enter_{CALIBRATION_SLOT}"))
        .context("no calibration slot")?
        .try_into()?;
    p.load(function, btf)?;
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime)?;
    let runs = |p: &FEntry| -> Result<u64> { Ok(p.info()?.run_count()) };
    let id = p.attach()?;
    // SAFETY: getppid has no preconditions.
    unsafe { libc::getppid() };
    p.detach(id)?;
    // Before 5.12 the second attach fails (ENOENT: the program's target went with its link).
    let Ok(id) = p.attach() else {
        return Ok(false);
    };
    let before = runs(p)?;
    for _ in 0..4 {
        // SAFETY: as above.
        unsafe { libc::getppid() };
    }
    let after = runs(p)?;
    p.detach(id)?;
    Ok(after > before)
}
