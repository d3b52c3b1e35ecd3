//! What `top`'s probes cost, measured when it starts with the very programs it attaches (its
//! scope, its aggregate map) on a runner's tracked thread: a getppid loop with nothing attached
//! and with the syscall probes (what a counted syscall pays), and the span those probes time
//! around a syscall that does nothing, a number no syscall has (the part of their cost inside
//! every syscall's time). Where the kernel takes fentry, the same for a timed function's pair on
//! getppid's function. Rounds alternate the modes (each starting with the next); each mode's
//! fastest round is kept, since whatever else runs only adds time (under emulation a median
//! of seven 10 ms loops moved by more than a fentry pair costs, and read the pair as
//! negative), and the spans' medians. The function pair is borrowed through
//! `Probes::with_calibration_pair`: nothing stays attached, and the slot is given back.
use anyhow::{bail, Result};
use profiler_common::HOOK_PATHS;
use serde::Serialize;

use super::aggregate::path_total;
use crate::probes::{
    calibration::{calls_for, median, LOOP_TIME, ROUNDS, SYSCALL_PAIR},
    KernelBtf, Probes, CALIBRATION_SLOT,
};

/// The probes' own cost per call, in ns of CPU time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ProbeCost {
    /// A getppid call with nothing attached.
    pub bare_ns: f64,
    /// What the syscall probes add to each syscall of a counted task.
    pub syscall_pair_ns: f64,
    /// The part of it inside each syscall's timed span: the span they time around a syscall
    /// that does nothing.
    pub syscall_in_span_ns: f64,
    /// The same for a timed function's fentry/fexit pair (None where fentry is refused).
    pub function_pair_ns: Option<f64>,
    pub function_in_span_ns: Option<f64>,
}

/// The runner's calibration loops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    Getppid,
    /// A syscall number no syscall has: the kernel answers ENOSYS at once.
    Unassigned,
}

/// Runs `calls` calls of a loop in the runner, inside its tracking window if `tracked`, and
/// returns the ns of thread CPU time per call.
pub type Loops<'a> = dyn FnMut(Loop, u32, bool) -> Result<f64> + 'a;

/// One way of running a loop: what is attached, and the path whose span is read (if any).
struct Mode {
    programs: Vec<String>,
    run: Loop,
    span_of: Option<u32>,
}

/// Measures `ProbeCost` with `probes` loaded for `top` and not attached. `unassigned` is the
/// number `Loop::Unassigned` calls.
pub fn measure(
    probes: &mut Probes,
    kernel: &KernelBtf,
    unassigned: u32,
    loops: &mut Loops,
) -> Result<ProbeCost> {
    probes.with_calibration_pair(kernel, |probes, pair| {
        measure_modes(probes, pair, unassigned, loops)
    })
}

fn measure_modes(
    probes: &mut Probes,
    pair: bool,
    unassigned: u32,
    loops: &mut Loops,
) -> Result<ProbeCost> {
    let syscalls: Vec<String> = SYSCALL_PAIR.iter().map(|p| p.to_string()).collect();
    let mut modes = vec![
        Mode {
            programs: Vec::new(),
            run: Loop::Getppid,
            span_of: None,
        },
        Mode {
            programs: syscalls.clone(),
            run: Loop::Getppid,
            span_of: None,
        },
        Mode {
            programs: syscalls.clone(),
            run: Loop::Unassigned,
            span_of: Some(unassigned),
        },
    ];
    if pair {
        let mut programs = syscalls;
        programs.extend([
            format!("hook_enter_{CALIBRATION_SLOT}"),
            format!("hook_exit_{CALIBRATION_SLOT}"),
        ]);
        modes.push(Mode {
            programs,
            run: Loop::Getppid,
            span_of: Some(HOOK_PATHS + CALIBRATION_SLOT as u32),
        });
    }
    let calls = calls_for(LOOP_TIME, &mut |calls, tracked| {
        loops(Loop::Getppid, calls, tracked)
    })?;
    let mut loop_ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let mut span_ns: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for round in 0..ROUNDS {
        for k in 0..modes.len() {
            let i = (round + k) % modes.len();
            let (ns, span) = run_mode(probes, &modes[i], calls, loops)?;
            loop_ns[i].push(ns);
            span_ns[i].extend(span);
        }
    }
    let loop_ns: Vec<f64> = loop_ns
        .iter()
        .map(|t| t.iter().copied().fold(f64::INFINITY, f64::min))
        .collect();
    Ok(ProbeCost {
        bare_ns: loop_ns[0],
        syscall_pair_ns: loop_ns[1] - loop_ns[0],
        syscall_in_span_ns: median(&mut span_ns[2]),
        function_pair_ns: pair.then(|| loop_ns[3] - loop_ns[1]),
        function_in_span_ns: pair.then(|| median(&mut span_ns[3])),
    })
}

/// The loop's ns per call in `mode`, and the mean span the probes timed on its path.
fn run_mode(
    probes: &mut Probes,
    mode: &Mode,
    calls: u32,
    loops: &mut Loops,
) -> Result<(f64, Option<f64>)> {
    let before = mode.span_of.map(|p| path_total(probes, p)).transpose()?;
    let programs: Vec<&str> = mode.programs.iter().map(String::as_str).collect();
    probes.attach_only(&programs)?;
    let ns = loops(mode.run, calls, !programs.is_empty());
    probes.detach();
    let ns = ns?;
    let (Some(path), Some((total_before, timed_before))) = (mode.span_of, before) else {
        return Ok((ns, None));
    };
    let (total, timed) = path_total(probes, path)?;
    let (total, timed) = (
        total.saturating_sub(total_before),
        timed.saturating_sub(timed_before),
    );
    // Other tasks in scope may make a call or two on the path; the loop's are the bulk.
    if timed < u64::from(calls) {
        bail!(
            "the probes timed {timed} of the calibration loop's {calls} calls on path {path}: \
             they do not see the runner"
        );
    }
    Ok((ns, Some(total as f64 / timed as f64)))
}
