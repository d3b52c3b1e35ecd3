//! `hookprof hooks` (the catalog: what can be probed on this kernel, what it refuses and why)
//! and `hookprof calibrate` (what the probes themselves cost here).
use std::{fmt::Write as _, process::ExitCode};

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;

use crate::{
    environment,
    probes::{
        calibration::{
            CLOCK_PAIR, EMPTY_PAIR, EMPTY_SYSCALL_PAIR, PAIR_PARTS, SYSCALL_CLOCK_PAIR,
            SYSCALL_PAIR_PARTS,
        },
        catalog, refusal,
        selection::{self, Selection},
        KernelBtf, ProbePlan, Probes, Target, USER_SLOTS,
    },
    results::{ProbeKind, ProbeReport},
    run::probe_setup::{measure_probe_cost, require_bpf_privileges},
    runner::{Supervisor, Wait},
};

#[derive(clap::Args, Debug)]
pub struct HooksArgs {
    /// Functions to try attaching: `all` (every security_* hook with the active LSMs'
    /// functions under it, and the task paths; tried in batches) or a comma-separated list.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    pub hooks: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
    /// List every function the kernel refused, not only how many and why.
    #[arg(short, long)]
    pub verbose: bool,
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn hooks(args: &HooksArgs) -> Result<ExitCode> {
    require_bpf_privileges()?;
    environment::ensure_securityfs();
    let active_lsms = environment::active_lsms();
    let kernel = KernelBtf::load_in_child()?;
    let functions = match args.hooks.as_slice() {
        [one] if one == "all" => selection::catalog(&kernel, &active_lsms),
        names => match selection::from_hooks_option(&kernel, names, &active_lsms)? {
            Selection::Listed(functions) => functions,
            Selection::Discover => bail!(
                "--hooks default is what a run's discovery pass finds; `hookprof hooks` takes \
                 all or a list of functions"
            ),
        },
    };
    // Loading proves the verifier accepts a program; attaching proves the kernel runs it. A
    // catalog larger than the probe slots is tried a batch at a time.
    let mut report = ProbeReport::default();
    let mut lsm = String::new();
    let batches: Vec<&[Target]> = if functions.is_empty() {
        vec![&[]]
    } else {
        functions.chunks(USER_SLOTS).collect()
    };
    for (i, batch) in batches.into_iter().enumerate() {
        let plan = ProbePlan {
            syscalls: i == 0,
            tasks: i == 0,
            functions: batch.to_vec(),
            entries_only: false,
            ..ProbePlan::default()
        };
        let mut probes = Probes::load(&plan, &kernel)?;
        let attached = probes.attach();
        probes.detach();
        attached.context("attach the loaded probes")?;
        if i == 0 {
            lsm = lsm_availability(&mut probes, &kernel, &active_lsms);
        }
        let batch_report = probes.report();
        report.attached.extend(batch_report.attached);
        report.refused.extend(batch_report.refused);
    }
    let catalog = serde_json::json!({
        "kernel_release": environment::detect().kernel_release,
        "active_lsms": active_lsms,
        "lockdown": environment::lockdown_mode(),
        "security_hooks": catalog::security_hooks(&kernel).len(),
        "probe_kinds": probe_kind_summary(&report, &lsm),
        "attached": report.attached,
        "refused": report.refused,
        "functions": functions.iter().map(|t| serde_json::json!({
            "function": t.function, "parent": t.parent, "lsm": t.lsm,
        })).collect::<Vec<_>>(),
    });
    if args.json {
        crate::stdio::print(serde_json::to_string_pretty(&catalog)? + "\n")?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    writeln!(
        out,
        "kernel {}, LSMs {}, lockdown {}; {} security_* hooks in BTF",
        catalog["kernel_release"].as_str().unwrap_or("?"),
        active_lsms.join(","),
        catalog["lockdown"].as_str().unwrap_or("?"),
        catalog["security_hooks"]
    )?;
    let mut kinds = comfy_table::Table::new();
    kinds
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["probe kind", "status"]);
    for (kind, status) in catalog["probe_kinds"].as_object().into_iter().flatten() {
        kinds.add_row([kind.as_str(), status.as_str().unwrap_or("")]);
    }
    writeln!(out, "{kinds}\n")?;
    out += &function_lines(&functions, &report, args.verbose);
    crate::stdio::print(out)?;
    Ok(ExitCode::SUCCESS)
}

/// The functions tried, one line each; without `verbose` the refused ones are counted per
/// reason instead, in the line `run` and `top` print (on a kernel that refuses trampolines that
/// is every one of them).
fn function_lines(functions: &[Target], report: &ProbeReport, verbose: bool) -> String {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["function", "under", "lsm", "fentry/fexit"]);
    for t in functions {
        // The reason is on the probe kind's line above; here the errno is enough.
        let refusal = report.refused.iter().find(|r| r.target == t.function);
        if refusal.is_some() && !verbose {
            continue;
        }
        let status = refusal.map_or_else(
            || "attached".to_string(),
            |r| match r.errno {
                Some(n) => format!("refused ({})", std::io::Error::from_raw_os_error(n)),
                None => "refused".to_string(),
            },
        );
        table.add_row([
            t.function.as_str(),
            t.parent.as_deref().unwrap_or(""),
            t.lsm.as_deref().unwrap_or(""),
            &status,
        ]);
    }
    let mut out = String::new();
    if !table.is_empty() {
        out.push_str(&format!("{table}\n"));
    }
    if !verbose {
        let pairs: Vec<_> = report
            .refused
            .iter()
            .filter(|r| r.kind.is_trampoline_pair())
            .cloned()
            .collect();
        for line in refusal::lines(&pairs) {
            out.push_str(&format!("{line} (-v lists them)\n"));
        }
    }
    out
}

/// Whether a BPF LSM program loads and attaches here ("available" or the reason it does not).
fn lsm_availability(probes: &mut Probes, kernel: &KernelBtf, active_lsms: &[String]) -> String {
    if !active_lsms.iter().any(|l| l == "bpf") {
        return "refused: bpf is not in the active LSM list (add it to lsm= on the kernel command line)".into();
    }
    match probes.attach_lsm(kernel, "file_open", 0) {
        Ok(()) => {
            probes.detach_lsm();
            "available".into()
        }
        Err(e) => format!("refused: {e:#}"),
    }
}

/// Each probe kind: "available" if any program of that kind attached, else the first refusal.
fn probe_kind_summary(
    report: &ProbeReport,
    lsm: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let mut kinds = serde_json::Map::new();
    for kind in [
        ProbeKind::RawTracepoint,
        ProbeKind::TpBtf,
        ProbeKind::FEntry,
        ProbeKind::FExit,
    ] {
        let status = if report.attached.iter().any(|a| a.kind == kind) {
            "available".to_string()
        } else if let Some(r) = report.refused.iter().find(|r| r.kind == kind) {
            format!("refused: {}", r.reason)
        } else {
            "not tried".to_string()
        };
        kinds.insert(kind.name().into(), status.into());
    }
    kinds.insert("lsm".into(), lsm.into());
    kinds
}

/// Generous: calibration's loops last well under a second each, even under emulation.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::Refusal;

    #[test]
    fn refused_functions_are_counted_per_reason_and_listed_with_verbose() {
        let functions: Vec<Target> = ["security_file_open", "security_file_free", "do_exit"]
            .into_iter()
            .map(Target::top)
            .collect();
        let refusal = |target: &str| Refusal {
            kind: ProbeKind::FEntry,
            target: target.into(),
            errno: Some(libc::EPERM),
            reason: "EPERM: the kernel refuses BPF trampolines here".into(),
        };
        let report = ProbeReport {
            attached: Vec::new(),
            refused: vec![refusal("security_file_open"), refusal("security_file_free")],
        };
        let short = function_lines(&functions, &report, false);
        assert_eq!(short.lines().count(), 3, "{short}");
        assert!(
            short.contains(" do_exit ") && short.contains(" attached"),
            "{short}"
        );
        // The line `run` prints, with the same count and examples.
        assert!(
            short.ends_with(
                "fentry refused on security_file_open, security_file_free: EPERM: the kernel \
                 refuses BPF trampolines here (-v lists them)\n"
            ),
            "{short}"
        );
        let all = function_lines(&functions, &report, true);
        assert_eq!(all.lines().count(), 4, "{all}");
        assert!(
            all.contains("security_file_free") && !all.contains("-v lists"),
            "{all}"
        );
    }
}
