//! Attaching and detaching the loaded programs. Each attachment owns its aya link: dropping it
//! detaches the program, so nothing outlives `Probes` (or a `detach`).
//!
//! A trampoline program (fentry, fexit) cannot be attached again once detached on kernels
//! before 5.12 ("bpf: Allow trampoline re-attach for tracing and lsm programs"): its target
//! goes with its first link. `trampolines_reattach` tries it once per process, and where it
//! fails such a program is loaded anew before each attach after its first.
use std::sync::OnceLock;

use anyhow::{Context, Result};
use aya::programs::{BtfTracePoint, FEntry, FExit, ProgramError, RawTracePoint};

use super::{
    aggregate::{GroupBy, Scope},
    ebpf_object::{self, Object},
    load::SCOPE_PROGRAM,
    refusal, Attachment, Kind, OwnedLink, Probes, TaskLayout, CALIBRATION_SLOT,
};

/// The tracepoints through which a tracked task's children are tracked and its exit seen.
const TASK_TRACEPOINTS: [&str; 4] = [
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "sched_process_free",
];
use crate::results::Refusal;

impl Probes {
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

    /// Attaches what a pass for the stacks alone needs (`stacks_unprobed`), and nothing that
    /// would show in its stacks: the sampler, the scope gate without the syscall timing, and
    /// the task tracepoints that follow the workload's children. No syscall timing, no
    /// sched_switch: the stacks are the kernel's as the workload runs it, not the probes'
    /// (the BPF LSM programs of `--inject` and `--stack-noop` stay: they are the kernel
    /// measured). Otherwise everything, as `attach`.
    pub fn attach_for_stacks(&mut self) -> Result<()> {
        if !self.stacks_unprobed() {
            return self.attach();
        }
        self.attach_where(|a| {
            a.kind == Kind::PerfEvent
                || a.program == SCOPE_PROGRAM
                || TASK_TRACEPOINTS.contains(&a.target.as_str())
        })
    }

    /// Whether the passes for the stacks alone run without the timing probes: where the
    /// gate-only program loaded and the workload has no function timed by a pair. A timed
    /// function's probes are priced by the samples inside its span that landed in them
    /// (`attribution::correct_by_samples`), which needs the stacks taken with them.
    pub fn stacks_unprobed(&self) -> bool {
        self.attachments.iter().any(|a| a.program == SCOPE_PROGRAM)
            && self.focused_functions().iter().all(Option::is_none)
    }

    /// From the next `attach` on, time only `functions` (None: every loaded function).
    pub fn focus(&mut self, functions: Option<Vec<String>>) {
        self.focus = functions;
    }

    /// Attaches only the named programs (calibration compares subsets). The list keeps its
    /// order, so calibration can drop what it added from the end.
    pub(super) fn attach_only(&mut self, programs: &[&str]) -> Result<()> {
        self.attach_where(|a| programs.contains(&a.program.as_str()))
    }

    fn attach_where(&mut self, chosen: impl Fn(&Attachment) -> bool) -> Result<()> {
        if self.attachments.iter().all(|a| a.link.is_none()) {
            self.start_window()?;
        }
        let reattach_needs_reload =
            self.attachments.iter().any(|a| {
                a.link.is_none()
                    && a.attached_before
                    && matches!(a.kind, Kind::FEntry | Kind::FExit)
                    && chosen(a)
            }) && !trampolines_reattach(self.btf, &self.layout, self.getppid_function.as_deref());
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
            let reload = reattach_needs_reload && a.attached_before;
            match attach_one(
                program,
                a,
                self.sample_period_ns,
                reload.then_some(self.btf),
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

    /// Forgets a timed function the kernel would not attach: its programs are detached and
    /// never attached again, its slot goes empty, and the refusal is recorded for the pair.
    fn drop_function(&mut self, refusal: Refusal) {
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
            .set(0, crate::clock::monotonic_ns(), 0)
            .context("set the window start")
    }

    /// Detaches every attached program; they stay loaded for the next attach.
    pub fn detach(&mut self) {
        for a in &mut self.attachments {
            a.link = None;
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
        Kind::PerfEvent => super::stacks::attach_cpu_clock(program, &a.target, sample_period_ns)?,
        Kind::RawTracepoint => {
            let p: &mut RawTracePoint = program.try_into()?;
            let id = p.attach(&a.target)?;
            OwnedLink::Fd(p.take_link(id)?.into())
        }
        Kind::TpBtf => {
            let p: &mut BtfTracePoint = program.try_into()?;
            let id = p.attach()?;
            OwnedLink::Fd(p.take_link(id)?.into())
        }
        Kind::FEntry => {
            let p: &mut FEntry = program.try_into()?;
            if let Some(btf) = reload {
                p.unload()?;
                p.load(&a.target, btf)?;
            }
            let id = p.attach()?;
            OwnedLink::Fd(p.take_link(id)?.into())
        }
        Kind::FExit => {
            let p: &mut FExit = program.try_into()?;
            if let Some(btf) = reload {
                p.unload()?;
                p.load(&a.target, btf)?;
            }
            let id = p.attach()?;
            OwnedLink::Fd(p.take_link(id)?.into())
        }
        // BPF LSM programs are `attach_lsm`'s, kept apart from the attachments.
        Kind::Lsm => unreachable!("a BPF LSM program among the attachments"),
    })
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
        super::aggregate::Globals::new(&Scope::Gate, GroupBy::Cgroup),
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
