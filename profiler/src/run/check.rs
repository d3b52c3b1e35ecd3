//! The run's first stage: bad input fails here, in one line, before anything is loaded or
//! started (the results' destination, the baseline, `--pin`, `--parallel`, `--probes`,
//! `--inject`, `--user`, the policies), then the supervisor and the environment are set up.
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::ProgressBar;

use super::{
    probe_setup::{probe_kinds, Kinds},
    CommonMeasureArgs, Plan, SessionArgs,
};
use crate::{
    baseline, environment, injection,
    results::{Destination, Environment},
    runner::{Credentials, Supervisor},
    workloads,
};

/// What the checks found, for the stages after them.
pub(super) struct Checked {
    /// Where `-o` writes the results.
    pub destination: Option<Destination>,
    /// Where `--save-baseline`/`--append-baseline` keeps them.
    pub baseline: Option<baseline::Pending>,
    /// `--probes` (None: clean only).
    pub kinds: Option<Kinds>,
    /// `--inject`'s LSM hooks and their ns.
    pub lsm_inject: Vec<(String, u64)>,
    /// `--user`'s credentials.
    pub user: Option<Credentials>,
}

pub(super) fn check(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
) -> Result<Checked> {
    let destination = session
        .output
        .as_deref()
        .map(Destination::prepare)
        .transpose()?;
    let baseline = session.baseline.prepare()?;
    check_pin(&args.pin)?;
    // build runs parallel jobs of its own (--jobs), and its extra metrics are one build's.
    if args.parallel > 1 && plan.specs.iter().any(|s| s.name == "build") {
        bail!(
            "--parallel {}: build runs parallel jobs of its own (--jobs); leave it out of a \
             parallel run",
            args.parallel
        );
    }
    let kinds = probe_kinds(&args.probes)?;
    let lsm_inject = injection::lsm_hooks(&args.inject);
    if kinds.is_none() && (args.stack_noop || !lsm_inject.is_empty()) {
        bail!(
            "--inject HOOK=NS and --stack-noop need probes: they cannot be combined with \
             --probes none (--inject syscall:NAME=NS can)"
        );
    }
    let user = args.user.as_deref().map(Credentials::lookup).transpose()?;
    Ok(Checked {
        destination,
        baseline,
        kinds,
        lsm_inject,
        user,
    })
}

/// The supervisor, set up before anything is loaded so an interrupt at any point ends the run
/// the same way, and the environment it runs in, whose LSMs the policies are checked against.
pub(super) fn supervise(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    checked: &Checked,
    bar: &ProgressBar,
) -> Result<(Supervisor, Environment)> {
    let mut supervisor = Supervisor::new(
        checked.user,
        Duration::from_secs(args.timeout_per_workload),
        bar.clone(),
    )?;
    crate::scratch::remove_stale();
    environment::ensure_securityfs();
    let environment = environment::detect();
    let policies = &session.policy.policy;
    for policy in policies {
        policy.check(&environment.active_lsms)?;
    }
    supervisor.confine(policies.clone());
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
    let allowed = workloads::allowed_cpus().context("sched_getaffinity")?;
    if let Some(&cpu) = pin.iter().find(|c| !allowed.contains(c)) {
        let list: Vec<String> = allowed.iter().map(usize::to_string).collect();
        bail!(
            "--pin {cpu}: CPU {cpu} is not one this process may run on ({})",
            list.join(",")
        );
    }
    Ok(())
}
