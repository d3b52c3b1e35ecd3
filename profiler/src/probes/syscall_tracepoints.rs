//! The syscall tracepoints: raw tracepoints on sys_enter and sys_exit time every syscall of a
//! tracked task and carry the scope gate (a runner's gate call opens and closes its tracking
//! window, for the processes `set_gate_owners` names); `scope_sys_enter` is the gate alone, for
//! the passes that sample stacks without timing anything. `load_raw` and
//! `attach_raw_tracepoint` serve every raw tracepoint of the object.
use anyhow::{Context, Result};
use aya::programs::{ProgramError, RawTracePoint};

use super::{Features, Kind, OwnedLink, Probes};

/// The scope gate without the syscall timing (`attach_for_stacks`).
pub(super) const SCOPE_PROGRAM: &str = "scope_sys_enter";

/// Makes `tgids` the only entries of a `GATE_OWNERS` map (of any instance of the object).
pub(super) fn replace_gate_owners<T: std::borrow::BorrowMut<aya::maps::MapData>>(
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

impl Probes {
    /// Loads sys_enter and sys_exit: the syscall timing and the scope gate.
    pub(super) fn load_syscalls(&mut self) {
        self.load_raw("sys_enter", "sys_enter");
        self.load_raw("sys_exit", "sys_exit");
    }

    /// Loads the gate without the syscall timing, for the passes for the stacks alone.
    pub(super) fn load_scope_gate(&mut self) -> Result<()> {
        // The passes for the stacks alone keep the gate and drop the syscall timing,
        // where a sample's syscall is read from the task's registers, not its record.
        if Features::get()?.task_pt_regs {
            self.load_raw(SCOPE_PROGRAM, "sys_enter");
        }
        Ok(())
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

    /// The id of a loaded program that writes the probes' log (the syscall entry, which also
    /// holds the gate): aya-log finds the object's log buffer through it.
    pub fn logging_program_id(&self) -> Option<u32> {
        let loaded = self.attachments.iter().any(|a| a.program == "sys_enter");
        loaded.then(|| self.ebpf.program("sys_enter")?.info().ok().map(|i| i.id()))?
    }

    /// True if the syscall programs (which also carry the scope gate) are loaded.
    pub fn scoping_works(&self) -> bool {
        ["sys_enter", "sys_exit"]
            .iter()
            .all(|p| self.attachments.iter().any(|a| a.program == *p))
    }
}

/// Attaches a raw tracepoint program on its tracepoint.
pub(super) fn attach_raw_tracepoint(
    program: &mut aya::programs::Program,
    tracepoint: &str,
) -> Result<OwnedLink, ProgramError> {
    let p: &mut RawTracePoint = program.try_into()?;
    let id = p.attach(tracepoint)?;
    Ok(OwnedLink::Fd(p.take_link(id)?.into()))
}
