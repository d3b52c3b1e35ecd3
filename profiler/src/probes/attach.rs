//! Attaching and detaching the loaded programs. Each attachment owns its aya link: dropping it
//! detaches the program, so nothing outlives `Probes` (or a `detach`).
use anyhow::{Context, Result};
use aya::programs::{links::FdLink, BtfTracePoint, FEntry, FExit, ProgramError, RawTracePoint};

use super::{refusal, Attachment, Kind, Probes};
use crate::results::Refusal;

impl Probes {
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
    pub(super) fn attach_only(&mut self, programs: &[&str]) -> Result<()> {
        self.attach_where(|a| programs.contains(&a.program.as_str()))
    }

    fn attach_where(&mut self, chosen: impl Fn(&Attachment) -> bool) -> Result<()> {
        if self.attachments.iter().all(|a| a.link.is_none()) {
            self.start_window()?;
        }
        let mut unattachable: Vec<Refusal> = Vec::new();
        let mut sampling_refused: Option<Refusal> = None;
        for a in &mut self.attachments {
            if a.link.is_some() || !chosen(a) {
                continue;
            }
            let program = self
                .ebpf
                .program_mut(&a.program)
                .with_context(|| format!("program {} vanished", a.program))?;
            match attach_one(program, a, self.sample_period_ns) {
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
                // Sampling is one probe kind among others: where the kernel will not open
                // a cpu-clock event for it, the run goes on without stacks.
                Err(e) if a.kind == Kind::PerfEvent => {
                    sampling_refused
                        .get_or_insert_with(|| refusal::refusal(a.kind.name(), "cpu-clock", &e));
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("attach {} {}", a.kind.name(), a.target))
                }
            }
        }
        for refusal in unattachable {
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
        for kind in ["fentry", "fexit"] {
            self.refused.push(Refusal {
                kind: kind.into(),
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

/// Attaches `program` where `a` says, and takes the link from aya: the caller owns it.
fn attach_one(
    program: &mut aya::programs::Program,
    a: &Attachment,
    sample_period_ns: u64,
) -> Result<FdLink, ProgramError> {
    Ok(match a.kind {
        Kind::PerfEvent => super::stacks::attach_cpu_clock(program, &a.target, sample_period_ns)?,
        Kind::RawTracepoint => {
            let p: &mut RawTracePoint = program.try_into()?;
            let id = p.attach(&a.target)?;
            p.take_link(id)?.into()
        }
        Kind::TpBtf => {
            let p: &mut BtfTracePoint = program.try_into()?;
            let id = p.attach()?;
            p.take_link(id)?.into()
        }
        Kind::FEntry => {
            let p: &mut FEntry = program.try_into()?;
            let id = p.attach()?;
            p.take_link(id)?.into()
        }
        Kind::FExit => {
            let p: &mut FExit = program.try_into()?;
            let id = p.attach()?;
            p.take_link(id)?.into()
        }
    })
}
