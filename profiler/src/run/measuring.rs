//! The run's measuring stage, on its plan: the supervisor and the environment it runs in, the
//! probes set up (`probe_setup`), the results begun, every workload measured in its rounds
//! (`rounds`), what else the machine ran recorded, and every program unloaded before anything
//! is printed.
use anyhow::Result;

use super::{
    engine::{Engine, Overhead},
    plan::RunPlan,
    probe_setup::{self, ProbeSetup},
    rounds::{self, Lineup, Measurer, Rounds},
};
use crate::{
    environment,
    machine::beside::Beside,
    probes::Probes,
    results::{Environment, Results, RunOptions},
    runner::{Supervisor, Wait},
};

/// What the measuring came to: each variant's results, and whether an interrupt ended it.
pub(super) struct Ran {
    pub variants: Vec<Results>,
    pub interrupted: bool,
}

/// Measures what `plan` asks, each variant into its results; `Wait::Interrupted` when an
/// interrupt came before the first workload.
pub(super) fn measure(plan: &RunPlan) -> Result<Wait<Ran>> {
    let (mut supervisor, environment) = supervise(plan)?;
    let asked = ProbeSetup {
        request: &plan.probes,
        injections: plan
            .shape
            .variants
            .iter()
            .map(|v| v.inject.clone())
            .collect(),
        specs: &plan.work.specs,
        setup: &plan.work.setup,
        active_lsms: &environment.active_lsms,
        bar: &plan.bar,
    };
    let Wait::Done(mut probes) = probe_setup::set_up(&asked, &mut supervisor)? else {
        plan.bar.finish_and_clear();
        eprintln!("hookprof: interrupted before measuring");
        return Ok(Wait::Interrupted);
    };
    if let Some(p) = probes.probes.as_mut() {
        p.add_refusals(plan.probes.refused.iter().cloned());
    }
    // The kernel's run-time statistics cross-check the ground-truth programs' cost; they are
    // only switched on when such programs are attached (they cost every program a little).
    let _run_stats = plan
        .ground_truth
        .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime).ok());
    let engine = Engine {
        sampling: plan.work.sampling,
        setup: &plan.work.setup,
        overhead: Overhead::measure(),
    };
    let schedule = Rounds {
        of: plan.rounds,
        seed: rand::random(),
    };
    let Overhead { clock, loop_ns } = engine.overhead;
    let options = RunOptions {
        round_seed: Some(schedule.seed),
        clock_overhead_ns: Some(clock.as_nanos() as u64),
        loop_overhead_ns: Some(loop_ns),
        ..plan.options.clone()
    };
    let label = (plan.label.clone()).unwrap_or_else(|| environment.kernel_release.clone());
    let report = probes
        .probes
        .as_ref()
        .map(Probes::report)
        .unwrap_or_default();
    let begun = Results::begun(
        label,
        environment,
        options,
        report,
        probes.calibration.take(),
    );
    let mut variants = plan.shape.results_of(begun, schedule.seed);
    // Another tool's programs on the paths measured are in every time: said before the
    // workloads run, and again for any that come between them.
    let mut beside = Beside::start(|line| supervisor.warn(line));
    let lineup = Lineup {
        specs: &plan.work.specs,
        variants: &plan.shape.variants,
    };
    let with = Measurer {
        engine: &engine,
        probes: &mut probes,
        others: &mut beside.programs,
        supervisor: &mut supervisor,
        bar: &plan.bar,
    };
    let measured = rounds::measure_workloads(lineup, schedule, with)?;
    for (r, workloads) in variants.iter_mut().zip(measured.workloads) {
        r.workloads = workloads;
        r.complete = measured.complete;
    }
    plan.bar.finish_and_clear();
    let interrupted = supervisor.interrupted();
    drop(supervisor); // the runner ends with its workload
    let seen = beside.end();
    for r in &mut variants {
        r.environment.machine_load = seen.load;
        r.environment.other_bpf_programs = Some(seen.programs.clone());
    }
    // Unloads every program before anything else is printed.
    probes.unload_into(&mut variants)?;
    Ok(Wait::Done(Ran {
        variants,
        interrupted,
    }))
}

/// The supervisor, set up before anything is loaded so an interrupt at any point ends the run
/// the same way, and the environment it runs in, whose LSMs the policies are checked against.
fn supervise(plan: &RunPlan) -> Result<(Supervisor, Environment)> {
    let mut supervisor = Supervisor::new(plan.user, plan.timeout, plan.bar.clone())?;
    crate::safety::scratch::remove_stale();
    environment::ensure_securityfs();
    let environment = environment::detect();
    let variants = &plan.shape.variants;
    for policy in variants.iter().flat_map(|v| &v.policies) {
        policy.check(&environment.active_lsms)?;
    }
    // The discovery pass runs under the variant with the most policies, so it finds the LSM
    // functions the policies make the kernel call.
    let discovery = variants
        .iter()
        .rev()
        .max_by_key(|v| v.policies.len())
        .expect("a run has a variant");
    supervisor.confine(discovery.policies.clone());
    Ok((supervisor, environment))
}
