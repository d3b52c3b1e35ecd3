//! `hookprof hooks`: the catalog of what can be probed on this kernel, what it refuses and
//! why.
use std::{fmt::Write as _, process::ExitCode};

use anyhow::{bail, Context, Result};

use crate::{
    environment,
    probes::{
        catalog,
        kallsyms::FunctionNames,
        refusal,
        selection::{self, Selection},
        AyaKernel, KernelBtf, ProbePlan, Probes, Target, USER_SLOTS,
    },
    results::{HookLookup, Missing, ProbeKind, ProbeReport},
    run::probe_setup::require_bpf_privileges,
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

pub fn hooks(args: &HooksArgs) -> Result<ExitCode> {
    require_bpf_privileges()?;
    environment::ensure_securityfs();
    let active_lsms = environment::active_lsms();
    // One read of aya's BTF for every batch (each batch's probes would read it anew).
    let _aya = AyaKernel::hold()?;
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
    let symbols = FunctionNames::read()?;
    report.lsm_lookups = catalog::lsm_lookups(&kernel, &symbols, &functions, &active_lsms);
    let catalog = serde_json::json!({
        "kernel_release": environment::detect().kernel_release,
        "active_lsms": active_lsms,
        "lockdown": environment::lockdown_mode(),
        "security_hooks": catalog::security_hooks(&kernel).len(),
        "probe_kinds": probe_kind_summary(&report, &lsm),
        "attached": report.attached,
        "refused": report.refused,
        "lsm_lookups": report.lsm_lookups,
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
    out += &lookup_lines(&report.lsm_lookups, args.verbose);
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

/// What was looked for under the hooks: with `verbose` a line per hook, else the LSM
/// functions found and those missing, counted by why.
fn lookup_lines(lookups: &[HookLookup], verbose: bool) -> String {
    if verbose {
        return lookups.iter().map(|l| l.describe() + "\n").collect();
    }
    let each = || lookups.iter().flat_map(|l| &l.lsms);
    let found = each().filter(|l| l.found.is_some()).count();
    let mut why: Vec<(Missing, usize)> = Vec::new();
    for missing in each().filter_map(|l| l.missing) {
        match why.iter_mut().find(|(m, _)| *m == missing) {
            Some((_, n)) => *n += 1,
            None => why.push((missing, 1)),
        }
    }
    let why: Vec<String> = why
        .iter()
        .map(|(m, n)| format!("{n} {}", m.describe()))
        .collect();
    format!(
        "LSM functions looked for under {} hooks: {found} found{}{} (-v lists them)\n",
        lookups.len(),
        if why.is_empty() { "" } else { "; missing: " },
        why.join(", ")
    )
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
            lsm_lookups: Vec::new(),
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
