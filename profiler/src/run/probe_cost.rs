//! The probes' own cost in the runner, for `run` once its probes are loaded and for
//! `hookprof calibrate`.
use anyhow::{Context, Result};

use crate::{
    probes::{
        calibration::{self, Calibration},
        KernelBtf, Probes,
    },
    runner::{Supervisor, Wait},
};

/// The probes' own cost, measured with getppid loops in the runner (the gate owner).
pub(crate) fn measure_probe_cost(
    probes: &mut Probes,
    kernel: &KernelBtf,
    supervisor: &mut Supervisor,
) -> Result<Wait<Calibration>> {
    probes.set_gate_owners(&[supervisor.runner_pid()?])?;
    supervisor.start_clock();
    let mut getppid_loop = |calls, tracked| supervisor.getppid_loop(calls, tracked);
    let calibrated = calibration::calibrate(probes, kernel, &mut getppid_loop);
    supervisor.stop_runners(); // the first workload starts in a fresh runner too
    if supervisor.interrupted() {
        return Ok(Wait::Interrupted);
    }
    Ok(Wait::Done(calibrated.context("calibrate the probes")?))
}
