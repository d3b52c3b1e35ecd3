//! `hookprof calibrate`: what the probes themselves cost here.
use std::{fmt::Write as _, process::ExitCode};

use anyhow::Result;
use indicatif::ProgressBar;

use crate::{
    probes::{
        calibration::{
            CLOCK_PAIR, EMPTY_PAIR, EMPTY_SYSCALL_PAIR, PAIR_PARTS, SYSCALL_CLOCK_PAIR,
            SYSCALL_PAIR_PARTS,
        },
        KernelBtf, ProbePlan, Probes,
    },
    run::{probe_cost::measure_probe_cost, probe_setup::require_bpf_privileges},
    runner::{Supervisor, Wait},
};

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

const CALIBRATION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

pub fn print_calibration(args: &CalibrateArgs) -> Result<ExitCode> {
    require_bpf_privileges()?;
    let kernel = KernelBtf::load_in_child()?;
    let mut probes = Probes::load(&ProbePlan::syscalls_only(), &kernel)?;
    let mut supervisor = Supervisor::new(None, CALIBRATION_TIMEOUT, ProgressBar::hidden())?;
    let Wait::Done(cal) = measure_probe_cost(&mut probes, &kernel, &mut supervisor)? else {
        eprintln!("hookprof: interrupted");
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    };
    drop(supervisor);
    drop(probes);
    if args.json {
        crate::stdio::print(serde_json::to_string_pretty(&cal)? + "\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    let ns = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:.1} ns"));
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"));
    writeln!(out, "calibration on {} (getppid):", cal.function)?;
    writeln!(
        out,
        "  getppid, nothing attached          {:.1} ns",
        cal.bare_ns
    )?;
    writeln!(
        out,
        "  empty raw_tracepoint pair adds     {:.1} ns per syscall (the floor)",
        cal.empty_syscall_pair_ns
    )?;
    writeln!(
        out,
        "  syscall probes add                 {:.1} ns per tracked syscall ({} the floor)",
        cal.syscall_probes_ns,
        ratio(
            (cal.empty_syscall_pair_ns > 0.0)
                .then(|| cal.syscall_probes_ns / cal.empty_syscall_pair_ns)
        )
    )?;
    writeln!(
        out,
        "  syscall probes add                 {:.1} ns per untracked syscall",
        cal.untracked_syscall_ns
    )?;
    writeln!(
        out,
        "  empty fentry/fexit pair adds       {}",
        ns(cal.empty_pair_ns)
    )?;
    writeln!(
        out,
        "  timed fentry/fexit pair adds       {} ({} the empty pair)",
        ns(cal.timed_pair_ns),
        ratio(cal.timed_over_empty)
    )?;
    writeln!(
        out,
        "  probe time inside each call        {}",
        ns(cal.self_ns)
    )?;
    if let Some(why) = &cal.refused {
        writeln!(out, "  pairs refused: {why}")?;
    }
    for (program, avg) in &cal.kernel_run_ns {
        writeln!(out, "  kernel stats: {program:<16} {avg:.1} ns per run")?;
    }
    let timed = format!("hook_enter_{}", crate::probes::USER_SLOTS);
    let timed_exit = format!("hook_exit_{}", crate::probes::USER_SLOTS);
    writeln!(
        out,
        "  kernel stats: syscall probes {} the empty pair, timed pair {} the empty pair",
        ratio(cal.kernel_ratio(
            ["sys_enter", "sys_exit"],
            ["empty_sys_enter", "empty_sys_exit"]
        )),
        ratio(cal.kernel_ratio([&timed, &timed_exit], ["empty_enter", "empty_exit"]))
    )?;
    print_pair_parts(
        &mut out,
        &cal,
        "syscall pair (raw_tracepoint)",
        [
            ["sys_enter", "sys_exit"],
            EMPTY_SYSCALL_PAIR,
            SYSCALL_CLOCK_PAIR,
        ],
        SYSCALL_PAIR_PARTS,
        "each side makes all four",
    );
    print_pair_parts(
        &mut out,
        &cal,
        "timed pair (fentry/fexit)",
        [[&timed, &timed_exit], EMPTY_PAIR, CLOCK_PAIR],
        PAIR_PARTS,
        "a timed entry makes the first three, its exit all four",
    );
    crate::stdio::print(out)?;
    Ok(ExitCode::SUCCESS)
}

/// The floor of a pair that times anything (a clock read on each side) against the empty pair,
/// and what each helper call of the timed pair costs: a part's run time beyond the empty entry.
/// `pairs`: the timed pair, the empty pair, the clock pair.
fn print_pair_parts(
    out: &mut String,
    cal: &crate::results::Calibration,
    what: &str,
    pairs: [[&str; 2]; 3],
    parts: [&str; 4],
    who_calls_what: &str,
) {
    let [timed, empty, clock_pair] = pairs;
    let Some(floor) = cal.kernel_ratio(clock_pair, empty) else {
        return;
    };
    let _ = writeln!(
        out,
        "  kernel stats, {what}: a pair that only reads the clock {floor:.2}x the empty pair \
         (no timed pair can cost less), the timed pair {} that pair",
        cal.kernel_ratio(timed, clock_pair)
            .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"))
    );
    let beyond_empty = |part: &str| Some(cal.run_ns(part)? - cal.run_ns(empty[0])?);
    if let [Some(task), Some(state), Some(clock), Some(tally)] = parts.map(beyond_empty) {
        let _ = writeln!(
            out,
            "  kernel stats, {what}: per helper call: current task {task:.1} ns, its storage \
             {:.1} ns, clock {clock:.1} ns, tally {tally:.1} ns ({who_calls_what})",
            state - task
        );
    }
}
