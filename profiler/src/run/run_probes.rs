//! Everything a run has in the kernel once its probes are set up (`probe_setup`): the probes,
//! focused on each workload's functions in turn, and the syscall injection, switched to each
//! variant in turn; what the ground-truth programs ran is recorded as they are unloaded.
use anyhow::Result;

use super::discovery::Found;
use crate::{
    probes::{calibration::Calibration, Probes, SyscallInjection},
    results::{LsmProgramRecord, Results},
};

/// Everything a run has in the kernel: the probes (None with `--probes none`) and the syscall
/// injection. Dropping it unloads them all.
pub(super) struct RunProbes {
    pub probes: Option<Probes>,
    pub calibration: Option<Calibration>,
    focus: Option<Found>,
    syscall_injection: Option<SyscallInjection>,
}

impl RunProbes {
    pub fn new(
        probes: Option<Probes>,
        calibration: Option<Calibration>,
        focus: Option<Found>,
        syscall_injection: Option<SyscallInjection>,
    ) -> RunProbes {
        RunProbes {
            probes,
            calibration,
            focus,
            syscall_injection,
        }
    }

    /// The probes, attaching only what `workload` calls (all of them without a discovery pass).
    pub fn focused_on(&mut self, workload: &str) -> Option<&mut Probes> {
        let probes = self.probes.as_mut()?;
        if let Some(focus) = &self.focus {
            probes.focus(Some(focus.functions_of(workload)));
        }
        Some(probes)
    }

    /// Puts variant `v`'s syscall injection in force (`run --versus`).
    pub fn use_variant(&mut self, v: usize) -> Result<()> {
        match &mut self.syscall_injection {
            Some(injection) => injection.use_variant(v),
            None => Ok(()),
        }
    }

    /// Records what the ground-truth programs ran into each variant's `results`, then unloads
    /// everything.
    pub fn unload_into(mut self, results: &mut [Results]) -> Result<()> {
        for (v, r) in results.iter_mut().enumerate() {
            if let Some(p) = &self.probes {
                r.lsm_programs = lsm_program_records(p);
            }
            if let Some(injection) = &mut self.syscall_injection {
                r.syscall_injections = injection.records(v)?;
            }
        }
        Ok(())
    }
}

fn lsm_program_records(probes: &Probes) -> Vec<LsmProgramRecord> {
    probes
        .lsm_programs()
        .iter()
        .map(|l| {
            let (runs, mean_run_ns) = probes.lsm_run_stats(l).unwrap_or((0, 0.0));
            LsmProgramRecord {
                hook: l.hook.clone(),
                busy_ns: l.busy_ns,
                runs,
                mean_run_ns,
            }
        })
        .collect()
}
