//! The run's first stage: bad input fails here, in one line, before anything is loaded or
//! started (the results' destination, the baseline, the store, `--pin`, `--parallel`,
//! `--probes`, `--inject`, `--user`, the policies), then the supervisor and the environment
//! are set up.
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;

use super::{
    args::ProbeChoice,
    probe_setup::{probe_kinds, Kinds},
    shape::RunShape,
    CommonMeasureArgs, Plan, SessionArgs,
};
use crate::{
    environment,
    probes::injection,
    probes::kallsyms,
    results::{Destination, Environment, Refusal},
    runner::{Credentials, Supervisor},
    store::baseline,
};

/// What the checks found, for the stages after them.
pub(super) struct Checked {
    /// Where `-o` writes the results.
    pub destination: Option<Destination>,
    /// Where `--save-baseline`/`--append-baseline` keeps them.
    pub baseline: Option<baseline::Pending>,
    /// The results store that records the run (None: `--no-store`).
    pub store: Option<crate::store::Pending>,
    /// `--probes` (None: clean only).
    pub kinds: Option<Kinds>,
    /// Probes left out before loading, with why (the stacks, where kallsyms hides addresses).
    pub refused: Vec<Refusal>,
    /// `--inject`'s LSM hooks and their ns.
    pub lsm_inject: Vec<(String, u64)>,
    /// `--user`'s credentials.
    pub user: Option<Credentials>,
    /// The run's variants and where their results go.
    pub shape: RunShape,
}

pub(super) fn check(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
) -> Result<Checked> {
    // The runners' status and children are read there, probes or not.
    crate::machine::namespaces::check_proc()?;
    let destination = session
        .output
        .as_deref()
        .map(Destination::prepare)
        .transpose()?;
    let baseline = session.baseline.prepare()?;
    let command = if plan.setup.command.is_some() {
        "stat"
    } else {
        "run"
    };
    let store = session.store.prepare(command, &session.baseline)?;
    if let Some(store) = store.as_ref().filter(|s| s.keeps_nothing()) {
        if destination.as_ref().is_none_or(Destination::discards) {
            bail!(
                "results store {}: an in-memory database keeps nothing once hookprof exits, and \
                 no -o file keeps the run: give -o FILE, or a database file",
                store.shown()
            );
        }
    }
    if let Some(store) = &store {
        if let Err(e) = store.writable() {
            if destination.as_ref().is_none_or(Destination::discards) {
                bail!(
                    "results store {}: {e:#}; and no -o file would keep the run: give -o FILE, \
                     --no-store, or a store that can be written",
                    store.shown()
                );
            }
        }
    }
    check_pin(&args.pin)?;
    check_temp_dir()?;
    if let Some(command) = &plan.setup.command {
        check_executable(&command.argv[0])?;
    }
    // build runs parallel jobs of its own (--jobs), and its extra metrics are one build's.
    let swept_copies = session
        .sweep
        .as_ref()
        .is_some_and(|s| s.parameter == crate::sweep::Parameter::Copies);
    if (args.parallel > 1 || swept_copies) && plan.specs.iter().any(|s| s.name == "build") {
        let option = match swept_copies {
            true => "--sweep copies".to_string(),
            false => format!("--parallel {}", args.parallel),
        };
        bail!(
            "{option}: build runs parallel jobs of its own (--jobs); leave it out of a \
             parallel run"
        );
    }
    let mut kinds = probe_kinds(&args.probes, args.sample_hz)?;
    let refused = hidden_symbols(&args.probes, &mut kinds)?;
    let lsm_inject = injection::lsm_hooks(&args.inject);
    if kinds.is_none() && (args.stack_noop || !lsm_inject.is_empty()) {
        bail!(
            "--inject HOOK=NS and --stack-noop need probes: they cannot be combined with \
             --probes none (--inject syscall:NAME=NS can)"
        );
    }
    let user = args.user.as_deref().map(Credentials::lookup).transpose()?;
    let shape = RunShape::build(session, args, (&destination, &baseline), user)?;
    Ok(Checked {
        destination,
        baseline,
        store,
        kinds,
        refused,
        lsm_inject,
        user,
        shape,
    })
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
fn check_temp_dir() -> Result<()> {
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
fn check_executable(program: &str) -> Result<()> {
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

/// The supervisor, set up before anything is loaded so an interrupt at any point ends the run
/// the same way, and the environment it runs in, whose LSMs the policies are checked against.
pub(super) fn supervise(
    args: &CommonMeasureArgs,
    checked: &Checked,
    bar: &ProgressBar,
) -> Result<(Supervisor, Environment)> {
    let mut supervisor = Supervisor::new(
        checked.user,
        Duration::from_secs(args.timeout_per_workload),
        bar.clone(),
    )?;
    crate::safety::scratch::remove_stale();
    environment::ensure_securityfs();
    let environment = environment::detect();
    for policy in checked.shape.variants.iter().flat_map(|v| &v.policies) {
        policy.check(&environment.active_lsms)?;
    }
    // The discovery pass runs under the variant with the most policies, so it finds the LSM
    // functions the policies make the kernel call.
    let discovery = checked
        .shape
        .variants
        .iter()
        .rev()
        .max_by_key(|v| v.policies.len())
        .expect("a run has a variant");
    supervisor.confine(discovery.policies.clone());
    Ok((supervisor, environment))
}

/// `--pin` names one CPU or two (the second for the other end of two-process workloads), and
/// only CPUs this process is allowed on (`taskset`, a cpuset), not merely CPUs the machine has.
fn check_pin(pin: &[usize]) -> Result<()> {
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
