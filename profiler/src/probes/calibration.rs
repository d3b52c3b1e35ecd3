//! The probes' own cost on this kernel, measured on getppid (a syscall with a trivial body):
//! the same loop with nothing attached, with empty raw_tracepoint programs on sys_enter and
//! sys_exit (the floor), with the syscall probes on an untracked and on a tracked task, and with
//! an empty or a timed fentry/fexit pair added on the syscall's function. Rounds alternate (each
//! starting with the next mode) and medians are kept, so drift hits every mode alike. The
//! kernel's BPF run-time statistics slow every program down, so they are read in a pass of their
//! own afterwards, never while the loops are timed. It borrows the run's loaded probes for a
//! moment and leaves them as they were. The loops run in the runner (the gate owner), through
//! the `GetppidLoop` its caller passes in.
use std::time::Duration;

use anyhow::{Context, Result};

pub use crate::results::Calibration;

use super::{catalog::Target, KernelBtf, Kind, Probes, CALIBRATION_SLOT};

/// The probes' own cost, from calibration, that corrected figures take out. Every timed
/// duration holds, besides the work itself, the part of its own pair that runs inside it
/// (`self_ns`, for timed functions) and one whole pair (`pair_ns`) per probed call the same
/// task made inside it (counted by the programs, so syscall rows are corrected too).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Correction {
    pub self_ns: f64,
    pub pair_ns: f64,
}

impl Correction {
    /// From a calibration with pair figures; a noisy calibration can come out negative, and a
    /// probe never costs less than nothing.
    pub fn from_calibration(cal: &Calibration) -> Option<Correction> {
        Some(Correction {
            self_ns: cal.self_ns.unwrap_or(0.0).max(0.0),
            pair_ns: cal.timed_pair_ns?.max(0.0),
        })
    }
}

/// Runs `calls` getppid calls in the runner, inside its tracking window if `tracked`, and
/// returns the ns per call.
pub type GetppidLoop<'a> = dyn FnMut(u32, bool) -> Result<f64> + 'a;

/// The function behind getppid(2): the syscall wrapper of x86_64 or arm64 where BTF has one,
/// else the generic function.
pub(crate) const CALIBRATION_FUNCTIONS: &[&str] = &[
    "__x64_sys_getppid",
    "__arm64_sys_getppid",
    "__do_sys_getppid",
    "sys_getppid",
];
pub(crate) const ROUNDS: usize = 7;
/// How long one mode's loop lasts with nothing attached.
pub(crate) const LOOP_TIME: Duration = Duration::from_millis(10);

/// Programs on sys_enter/sys_exit.
pub(crate) const SYSCALL_PAIR: [&str; 2] = ["sys_enter", "sys_exit"];
pub const EMPTY_SYSCALL_PAIR: [&str; 2] = ["empty_sys_enter", "empty_sys_exit"];
pub const EMPTY_PAIR: [&str; 2] = ["empty_enter", "empty_exit"];
/// Programs that each make one of a timed pair's helper calls (the statistics pass only): the
/// current task, the task's state (current task and storage), the clock, a tally; as fentry
/// programs beside the empty fentry, and as raw_tracepoints on sys_enter beside the empty one.
pub const PAIR_PARTS: [&str; 4] = [
    "part_current_task",
    "part_task_state",
    "part_clock",
    "part_tally",
];
pub const SYSCALL_PAIR_PARTS: [&str; 4] = [
    "sys_part_current_task",
    "sys_part_task_state",
    "sys_part_clock",
    "sys_part_tally",
];
/// A clock read on each side: the least a timed pair can cost (the statistics pass only).
pub const CLOCK_PAIR: [&str; 2] = ["part_clock", "part_clock_exit"];
pub const SYSCALL_CLOCK_PAIR: [&str; 2] = ["sys_part_clock", "sys_part_clock_exit"];

/// One way of running the loop: what is attached, and whether the loop's thread is tracked.
struct Mode {
    programs: Vec<String>,
    tracked: bool,
}

impl Mode {
    fn new(programs: &[&[&str]], tracked: bool) -> Mode {
        Mode {
            programs: programs.concat().iter().map(|p| p.to_string()).collect(),
            tracked,
        }
    }
}

pub fn calibrate(
    probes: &mut Probes,
    kernel: &KernelBtf,
    getppid_loop: &mut GetppidLoop,
) -> Result<Calibration> {
    let function = CALIBRATION_FUNCTIONS
        .iter()
        .find(|f| kernel.has_function(f))
        .context("no getppid function in this kernel's BTF to calibrate on")?;
    let mut cal = Calibration {
        function: function.to_string(),
        ..Default::default()
    };
    let first_new = probes.attachments.len();
    let refusals_before = probes.refused.len();
    anyhow::ensure!(
        probes.load_raw(EMPTY_SYSCALL_PAIR[0], "sys_enter")
            && probes.load_raw(EMPTY_SYSCALL_PAIR[1], "sys_exit")
            && SYSCALL_PAIR_PARTS
                .iter()
                .all(|part| probes.load_raw(part, "sys_enter"))
            && probes.load_raw(SYSCALL_CLOCK_PAIR[1], "sys_exit"),
        "the kernel refused raw_tracepoint programs on sys_enter/sys_exit"
    );
    let raw_refusals = probes.refused.len();
    let pair_loaded = probes
        .load_pair(CALIBRATION_SLOT, &Target::top(function), false)
        .is_ok()
        && load_empty_pair(probes, function)
        && load_pair_parts(probes, function);
    if !pair_loaded {
        cal.refused = probes
            .refused
            .get(raw_refusals)
            .map(|r| format!("{} {}: {}", r.kind, r.target, r.reason));
    }
    let measured = measure(probes, pair_loaded, &mut cal, getppid_loop);
    // Put the run's probes back as they were: these programs must not ride along (they stay
    // loaded, never attached, until the object is dropped).
    probes.detach();
    probes.attachments.truncate(first_new);
    probes.refused.truncate(refusals_before);
    probes.hooks.truncate(CALIBRATION_SLOT);
    while probes.hooks.last() == Some(&None) {
        probes.hooks.pop();
    }
    measured?;
    probes.correction = Correction::from_calibration(&cal);
    Ok(cal)
}

fn measure(
    probes: &mut Probes,
    pair_loaded: bool,
    cal: &mut Calibration,
    getppid_loop: &mut GetppidLoop,
) -> Result<()> {
    let timed_pair = [
        format!("hook_enter_{CALIBRATION_SLOT}"),
        format!("hook_exit_{CALIBRATION_SLOT}"),
    ];
    let timed_pair = [timed_pair[0].as_str(), timed_pair[1].as_str()];
    let mut modes = vec![
        Mode::new(&[], false),
        Mode::new(&[&EMPTY_SYSCALL_PAIR], false),
        Mode::new(&[&SYSCALL_PAIR], false),
        Mode::new(&[&SYSCALL_PAIR], true),
    ];
    if pair_loaded {
        modes.push(Mode::new(&[&SYSCALL_PAIR, &EMPTY_PAIR], true));
        modes.push(Mode::new(&[&SYSCALL_PAIR, &timed_pair], true));
    }
    let calls = calls_for(LOOP_TIME, getppid_loop)?;
    let before = probes.snapshot()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..ROUNDS {
        // Each round starts one mode later, so what follows a detach (the kernel freeing a
        // trampoline, say) lands on every mode in turn, not always on the same one.
        for k in 0..modes.len() {
            let i = (round + k) % modes.len();
            times[i].push(run_mode(probes, &modes[i], calls, getppid_loop)?);
        }
    }
    let median: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    cal.bare_ns = median[0];
    cal.empty_syscall_pair_ns = median[1] - median[0];
    cal.untracked_syscall_ns = median[2] - median[0];
    cal.syscall_probes_ns = median[3] - median[0];
    if pair_loaded {
        let empty = median[4] - median[3];
        let timed = median[5] - median[3];
        cal.empty_pair_ns = Some(empty);
        cal.timed_pair_ns = Some(timed);
        cal.timed_over_empty = (empty > 0.0).then(|| timed / empty);
        let after = probes.snapshot()?;
        let pair = &after.since(&before).hooks[CALIBRATION_SLOT];
        cal.self_ns = (pair.timed > 0).then(|| pair.total_ns as f64 / pair.timed as f64);
    }
    // The statistics pass: every program at once, each one's run time read on its own.
    let mut everything: Vec<&[&str]> = vec![
        &EMPTY_SYSCALL_PAIR,
        &SYSCALL_PAIR,
        &SYSCALL_PAIR_PARTS,
        &SYSCALL_CLOCK_PAIR[1..],
    ];
    if pair_loaded {
        everything.extend([&EMPTY_PAIR[..], &timed_pair, &PAIR_PARTS, &CLOCK_PAIR[1..]]);
    }
    let stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
    run_mode(probes, &Mode::new(&everything, true), calls, getppid_loop)?;
    drop(stats);
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

/// ns per getppid call in `mode`.
fn run_mode(
    probes: &mut Probes,
    mode: &Mode,
    calls: u32,
    getppid_loop: &mut GetppidLoop,
) -> Result<f64> {
    let programs: Vec<&str> = mode.programs.iter().map(String::as_str).collect();
    probes.attach_only(&programs)?;
    let t = getppid_loop(calls, mode.tracked);
    probes.detach();
    t
}

/// Loads the empty fentry/fexit pair on `function`; false if the kernel refused it.
fn load_empty_pair(probes: &mut Probes, function: &str) -> bool {
    let entry = probes.load_fentry("empty_enter", function);
    if !probes.record("empty_enter", Kind::FEntry, function, entry) {
        return false;
    }
    let exit = probes.load_fexit("empty_exit", function);
    probes.record("empty_exit", Kind::FExit, function, exit)
}

/// Loads the pair's parts and the clock pair's exit on `function`; false if the kernel
/// refused one.
fn load_pair_parts(probes: &mut Probes, function: &str) -> bool {
    let entries = PAIR_PARTS.iter().all(|part| {
        let loaded = probes.load_fentry(part, function);
        probes.record(part, Kind::FEntry, function, loaded)
    });
    let exit = CLOCK_PAIR[1];
    entries && {
        let loaded = probes.load_fexit(exit, function);
        probes.record(exit, Kind::FExit, function, loaded)
    }
}

/// Enough getppid calls to last `target` with nothing attached (lmbench-style doubling).
pub(crate) fn calls_for(target: Duration, getppid_loop: &mut GetppidLoop) -> Result<u32> {
    let mut calls = 1000u32;
    loop {
        let ns_per_call = getppid_loop(calls, false)?;
        if ns_per_call * f64::from(calls) >= target.as_nanos() as f64 || calls >= 1 << 24 {
            return Ok(calls);
        }
        calls *= 2;
    }
}

pub(crate) fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
