//! The probes' own cost on this kernel, measured on getppid (a syscall with a trivial body):
//! the same loop with nothing attached, with the syscall probes, with an empty fentry/fexit
//! pair added on the syscall's function, and with a timed pair instead. Rounds alternate (each
//! starting with the next mode) and medians are kept, so drift hits every mode alike. The
//! kernel's own BPF run-time statistics are read beside them as a cross-check. It borrows the
//! run's loaded probes for a moment and leaves them as they were. The loops run in the runner
//! (the gate owner), through the `GetppidLoop` its caller passes in.
use std::time::Duration;

use anyhow::{Context, Result};

pub use crate::results::Calibration;

use super::{catalog::Target, KernelBtf, Kind, Probes, CALIBRATION_SLOT};

/// Runs `calls` getppid calls in the runner, inside its tracking window if `tracked`, and
/// returns the ns per call.
pub type GetppidLoop<'a> = dyn FnMut(u32, bool) -> Result<f64> + 'a;

/// The function behind getppid(2), with and without x86_64 syscall wrappers in BTF.
const CALIBRATION_FUNCTIONS: &[&str] = &["__x64_sys_getppid", "__do_sys_getppid", "sys_getppid"];
const ROUNDS: usize = 7;
/// How long one mode's loop lasts with nothing attached.
const LOOP_TIME: Duration = Duration::from_millis(10);

pub fn calibrate(
    probes: &mut Probes,
    kernel: &KernelBtf,
    getppid_loop: &mut GetppidLoop,
) -> Result<Calibration> {
    let function = CALIBRATION_FUNCTIONS
        .iter()
        .find(|f| kernel.has_function(f))
        .context("no getppid function in this kernel's BTF to calibrate on")?;
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
    let mut cal = Calibration {
        function: function.to_string(),
        ..Default::default()
    };
    let first_new = probes.attachments.len();
    let refusals_before = probes.refused.len();
    let pair_loaded = probes
        .load_pair(CALIBRATION_SLOT, &Target::top(function), false)
        .is_ok()
        && probes.load_empty_pair(function);
    if !pair_loaded {
        cal.refused = probes
            .refused
            .get(refusals_before)
            .map(|r| format!("{} {}: {}", r.kind, r.target, r.reason));
    }
    let measured = measure(probes, pair_loaded, &mut cal, getppid_loop);
    // Put the run's probes back as they were: these programs must not ride along (they stay
    // loaded, never attached, until the object is dropped).
    probes.detach()?;
    probes.attachments.truncate(first_new);
    probes.refused.truncate(refusals_before);
    probes.hooks.truncate(CALIBRATION_SLOT);
    while probes.hooks.last() == Some(&None) {
        probes.hooks.pop();
    }
    measured?;
    Ok(cal)
}

fn measure(
    probes: &mut Probes,
    pair_loaded: bool,
    cal: &mut Calibration,
    getppid_loop: &mut GetppidLoop,
) -> Result<()> {
    let timed_enter = format!("hook_enter_{CALIBRATION_SLOT}");
    let timed_exit = format!("hook_exit_{CALIBRATION_SLOT}");
    let syscalls = vec!["sys_enter", "sys_exit"];
    let mut modes: Vec<Vec<&str>> = vec![vec![], syscalls.clone()];
    if pair_loaded {
        modes.push([syscalls.as_slice(), &["empty_enter", "empty_exit"]].concat());
        modes.push(
            [
                syscalls.as_slice(),
                &[timed_enter.as_str(), timed_exit.as_str()],
            ]
            .concat(),
        );
    }
    let calls = calls_for(LOOP_TIME, getppid_loop)?;
    let before = probes.snapshot()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..ROUNDS {
        // Each round starts one mode later, so what follows a detach (the kernel freeing a
        // trampoline, say) lands on every mode in turn, not always on the same one.
        for k in 0..modes.len() {
            let mode = (round + k) % modes.len();
            let programs = &modes[mode];
            probes.attach_only(programs)?;
            let t = getppid_loop(calls, true);
            probes.detach()?;
            times[mode].push(t?);
        }
    }
    let median: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    cal.bare_ns = median[0];
    cal.syscall_probes_ns = median[1] - median[0];
    if pair_loaded {
        let empty = median[2] - median[1];
        let timed = median[3] - median[1];
        cal.empty_pair_ns = Some(empty);
        cal.timed_pair_ns = Some(timed);
        cal.timed_over_empty = (empty > 0.0).then(|| timed / empty);
        let after = probes.snapshot()?;
        let pair = &after.since(&before).hooks[CALIBRATION_SLOT];
        cal.self_ns = (pair.timed > 0).then(|| pair.total_ns as f64 / pair.timed as f64);
    }
    for (name, program) in probes.ebpf.programs() {
        let Ok(info) = program.info() else { continue };
        if info.run_count() > 0 {
            let avg = info.run_time().as_nanos() as f64 / info.run_count() as f64;
            cal.kernel_run_ns.push((name.to_string(), avg));
        }
    }
    cal.kernel_run_ns.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(())
}

impl Probes {
    /// Loads the empty fentry/fexit pair on `function`; false if the kernel refused it.
    fn load_empty_pair(&mut self, function: &str) -> bool {
        let entry = self.load_fentry("empty_enter", function);
        if !self.record("empty_enter", Kind::FEntry, function, entry) {
            return false;
        }
        let exit = self.load_fexit("empty_exit", function);
        self.record("empty_exit", Kind::FExit, function, exit)
    }
}

/// Enough getppid calls to last `target` with nothing attached (lmbench-style doubling).
fn calls_for(target: Duration, getppid_loop: &mut GetppidLoop) -> Result<u32> {
    let mut calls = 1000u32;
    loop {
        let ns_per_call = getppid_loop(calls, false)?;
        if ns_per_call * f64::from(calls) >= target.as_nanos() as f64 || calls >= 1 << 24 {
            return Ok(calls);
        }
        calls *= 2;
    }
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
