//! The run's arguments checked against each other and this machine, before anything is loaded
//! or started: `--pin`, the temp directory, `stat`'s command, `--parallel` with `build`, and
//! what `--probes`, `--inject` and `--stack-noop` ask of the probes. Each fails in one line.
use anyhow::{bail, Context, Result};

use super::{
    args::ProbeChoice,
    probe_setup::{Kinds, ProbeRequest},
    CommonMeasureArgs,
};
use crate::{
    environment, probes::injection, probes::kallsyms, results::Refusal, sweep::SweepSpec,
    workloads::WorkloadSpec,
};

/// `--parallel` (or `--sweep copies`) with the `build` workload, which runs parallel jobs of
/// its own (`--jobs`), and whose extra metrics are one build's.
pub(super) fn copies(
    args: &CommonMeasureArgs,
    sweep: Option<&SweepSpec>,
    specs: &[&'static WorkloadSpec],
) -> Result<()> {
    let swept_copies = sweep.is_some_and(|s| s.parameter == crate::sweep::Parameter::Copies);
    if (args.parallel > 1 || swept_copies) && specs.iter().any(|s| s.name == "build") {
        let option = match swept_copies {
            true => "--sweep copies".to_string(),
            false => format!("--parallel {}", args.parallel),
        };
        bail!(
            "{option}: build runs parallel jobs of its own (--jobs); leave it out of a \
             parallel run"
        );
    }
    Ok(())
}

/// What `--probes`, `--hooks`, `--inject` and `--stack-noop` ask of the probes, checked: the
/// kinds this machine lets be sampled (`refused`: those it does not), and ground truth only
/// where probes are loaded.
pub(super) fn probes(args: &CommonMeasureArgs, verbose: bool) -> Result<ProbeRequest> {
    let mut kinds = probe_kinds(&args.probes, args.sample_hz)?;
    let refused = hidden_symbols(&args.probes, &mut kinds)?;
    let lsm_inject = injection::lsm_hooks(&args.inject);
    if kinds.is_none() && (args.stack_noop || !lsm_inject.is_empty()) {
        bail!(
            "--inject HOOK=NS and --stack-noop need probes: they cannot be combined with \
             --probes none (--inject syscall:NAME=NS can)"
        );
    }
    Ok(ProbeRequest {
        kinds,
        refused,
        hooks: args.hooks.clone(),
        lsm_inject,
        stack_noop: args.stack_noop,
        verbose,
    })
}

/// `--probes` into kinds (stacks sampled `sample_hz` times a CPU-second); None means clean
/// only.
pub(super) fn probe_kinds(chosen: &[ProbeChoice], sample_hz: u64) -> Result<Option<Kinds>> {
    let alone = [ProbeChoice::Auto, ProbeChoice::CleanOnly];
    let all = match chosen {
        [ProbeChoice::CleanOnly] => return Ok(None),
        [ProbeChoice::Auto] => true,
        list => {
            if let Some(p) = list.iter().find(|p| alone.contains(p)) {
                bail!(
                    "--probes {}: {} stands alone, not in a list of kinds",
                    list.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
                    p.name()
                );
            }
            false
        }
    };
    let has = |kind: ProbeChoice| all || chosen.contains(&kind);
    Ok(Some(Kinds {
        tasks: has(ProbeChoice::Tasks),
        hooks: has(ProbeChoice::Hooks),
        sched: has(ProbeChoice::Sched),
        stacks: has(ProbeChoice::Stacks).then(|| 1_000_000_000 / sample_hz.max(1)),
    }))
}

/// Sampled stacks are named from kallsyms: where it hides every address (kernel.kptr_restrict),
/// `--probes stacks` is refused and `--probes auto` leaves the stacks out, recorded as refused,
/// rather than naming every frame after the last symbol listed.
fn hidden_symbols(asked: &[ProbeChoice], kinds: &mut Option<Kinds>) -> Result<Vec<Refusal>> {
    let Some(kinds) = kinds.as_mut().filter(|k| k.stacks.is_some()) else {
        return Ok(Vec::new());
    };
    // Without root kallsyms hides addresses anyway, and the missing privilege is the error.
    super::probe_setup::require_bpf_privileges()?;
    if !kallsyms::addresses_hidden()? {
        return Ok(Vec::new());
    }
    let reason = kallsyms::hidden_reason();
    if asked.contains(&ProbeChoice::Stacks) {
        bail!("--probes stacks: {reason}");
    }
    kinds.stacks = None;
    eprintln!("hookprof: no sampled stacks: {reason}");
    Ok(vec![Refusal {
        kind: crate::results::ProbeKind::PerfEvent,
        target: "cpu-clock".into(),
        errno: None,
        reason,
    }])
}

/// Every workload makes its scratch files in the temp directory: one that cannot be written
/// fails here, once, not in every workload after the probes load.
pub(super) fn temp_dir() -> Result<()> {
    let dir = std::env::temp_dir();
    let why = match std::fs::metadata(&dir) {
        Err(e) => e.to_string(),
        Ok(m) if !m.is_dir() => "not a directory".into(),
        Ok(_) => match tempfile::tempdir_in(&dir) {
            // Writable: and no other user can swap what is made in it.
            Ok(_) => return crate::safety::scratch::checked_temp_dir().map(drop),
            // tempfile's message names its random path; the reason is the io error's kind.
            Err(e) => format!("cannot create a scratch directory in it ({})", e.kind()),
        },
    };
    bail!(
        "temp directory {}: {why}: set TMPDIR to a writable directory",
        dir.display()
    )
}

/// `stat`'s command exists and may be executed (looked up in PATH as exec does), checked
/// before the probes load; the runner, running as `--user`, may still be refused later.
pub(super) fn executable(program: &str) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        if !runnable(std::path::Path::new(program)) {
            let why = match std::fs::metadata(program) {
                Err(e) => e.to_string(),
                Ok(m) if m.is_dir() => "is a directory".into(),
                Ok(_) => "not an executable file".into(),
            };
            bail!("stat -- {program}: {why}: name the program to measure");
        }
        return Ok(());
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    if !std::env::split_paths(&path).any(|dir| runnable(&dir.join(program))) {
        bail!("stat -- {program}: no such program in PATH: name the program to measure");
    }
    Ok(())
}

/// `--pin` names one CPU or two (the second for the other end of two-process workloads), and
/// only CPUs this process is allowed on (`taskset`, a cpuset), not merely CPUs the machine has.
pub(super) fn pin(pin: &[usize]) -> Result<()> {
    if pin.is_empty() {
        return Ok(());
    }
    if pin.len() > 2 {
        let given: Vec<String> = pin.iter().map(usize::to_string).collect();
        bail!(
            "--pin {}: give one CPU, or two (the second pins the other end of two-process \
             workloads)",
            given.join(",")
        );
    }
    let allowed = environment::allowed_cpus().context("sched_getaffinity")?;
    if let Some(&cpu) = pin.iter().find(|c| !allowed.contains(c)) {
        let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
        bail!(
            "--pin {cpu}: CPU {cpu} is not one this process may run on ({})",
            list.join(",")
        );
    }
    Ok(())
}
