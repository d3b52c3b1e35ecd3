//! The run's measuring stage: every workload in every round (`--rounds`, each a fresh random
//! order with fresh runners), through the sampling engine (`measure`); a workload that fails
//! is said and skipped in later rounds, an interrupt ends the rounds. Then each workload's
//! probed samples become its attribution. With `--versus`, each workload of a round is
//! measured in both variants, back to back in a random order, so the two share the round.
use indicatif::ProgressBar;
use rand::{seq::SliceRandom, SeedableRng};

use super::{
    engine::Engine,
    measure::{self, Round, WorkloadRound},
    run_probes::RunProbes,
};
use crate::{
    attribution::Measured,
    machine::other_probes,
    peak_rss,
    results::WorkloadResult,
    runner::Supervisor,
    variant::Variant,
    workloads::{WorkloadSetup, WorkloadSpec},
};

/// How many rounds, and the seed of their random orders (recorded in the results).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rounds {
    pub of: usize,
    pub seed: u64,
}

/// What the rounds came to: each variant's workloads measured (or failed), and whether every
/// round of every workload was measured.
pub(super) struct Measuring {
    pub workloads: Vec<Vec<WorkloadResult>>,
    pub complete: bool,
}

/// What the rounds measure: the workloads, and the variants each is measured in.
pub(super) struct Lineup<'a> {
    pub specs: &'a [&'static WorkloadSpec],
    pub variants: &'a [Variant],
}

/// What the rounds measure with: the engine, the probes, the watch on other tools' programs,
/// the runners' supervisor and the progress bar.
pub(super) struct Measurer<'a> {
    pub engine: &'a Engine<'a>,
    pub probes: &'a mut RunProbes,
    pub others: &'a mut other_probes::Watch,
    pub supervisor: &'a mut Supervisor,
    pub bar: &'a ProgressBar,
}

pub(super) fn measure_workloads(
    work: Lineup,
    rounds: Rounds,
    mut with: Measurer,
) -> anyhow::Result<Measuring> {
    let mut measured: Vec<Vec<Measured>> = work
        .variants
        .iter()
        .map(|_| work.specs.iter().map(|s| Measured::new(s)).collect())
        .collect();
    let complete = with.measure_rounds(&work, rounds, &mut measured)?;
    let probes = with.probes;
    // One read of kallsyms names every workload's stacks as the run ends.
    let symbols = probes
        .probes
        .as_mut()
        .filter(|p| p.sample_period_ns().is_some())
        .map(|p| p.fresh_symbols().map_err(|e| format!("{e:#}")));
    let mut workloads = Vec::new();
    for variant in measured {
        let mut results = Vec::new();
        for (spec, m) in work.specs.iter().zip(variant) {
            let result = m.finish(probes.focused_on(spec.name).as_deref(), symbols.as_ref());
            if !result.clean.is_empty() || result.failure.is_some() {
                results.push(result);
            }
        }
        workloads.push(results);
    }
    drop(symbols);
    crate::peak_rss::note_phase("stacks named");
    Ok(Measuring {
        workloads,
        complete,
    })
}

impl Measurer<'_> {
    /// Measures the rounds into `measured` (per variant, one per spec); false when a workload
    /// failed or the run was interrupted.
    fn measure_rounds(
        &mut self,
        work: &Lineup,
        rounds: Rounds,
        measured: &mut [Vec<Measured>],
    ) -> anyhow::Result<bool> {
        let Measurer {
            engine,
            probes,
            others,
            supervisor,
            bar,
        } = self;
        let engine = *engine;
        let specs = work.specs;
        let paired = work.variants.len() > 1;
        let mut complete = true;
        let mut rng = rand::rngs::StdRng::seed_from_u64(rounds.seed);
        // Samples a pass takes over the rounds, and those of the rounds done, for the bar.
        let per_workload = engine.sampling.over(rounds.of);
        let mut done_samples = 0;
        for round in 0..rounds.of {
            // A fresh order each round, so no workload always follows the same one.
            let mut order: Vec<usize> = (0..specs.len()).collect();
            if rounds.of > 1 {
                order.shuffle(&mut rng);
            }
            for (i, v) in order.into_iter().flat_map(|i| {
                // Both variants of a workload back to back, the first chosen at random.
                let mut variants: Vec<usize> = (0..work.variants.len()).collect();
                variants.shuffle(&mut rng);
                variants.into_iter().map(move |v| (i, v))
            }) {
                let spec = specs[i];
                // A pair needs both: a workload failed in one variant goes on in neither.
                if measured.iter().any(|m| m[i].failed()) {
                    continue;
                }
                let variant = if paired {
                    supervisor.confine(work.variants[v].policies.clone());
                    probes.use_variant(v)?;
                    format!(", {}", work.variants[v].name)
                } else {
                    String::new()
                };
                bar.set_message(if rounds.of > 1 {
                    format!("{} (round {}/{}{variant})", spec.name, round + 1, rounds.of)
                } else {
                    format!("{}{variant}", spec.name)
                });
                let total = specs.len() * work.variants.len() * per_workload;
                let progress = |done: usize, _total: usize| {
                    bar.set_length(total as u64);
                    bar.set_position((done_samples + done) as u64);
                };
                let setup = own_setup(&work.variants[v], engine.setup);
                let seen = others.seen_so_far().to_vec();
                let job = WorkloadRound {
                    engine: Engine {
                        setup: setup.as_ref().unwrap_or(engine.setup),
                        sampling: engine.sampling.for_round(round, rounds.of),
                        ..*engine
                    },
                    spec,
                    round: Round {
                        index: round,
                        of: rounds.of,
                    },
                    others: &seen,
                };
                let interrupted = measure::measure_round(
                    &job,
                    probes.focused_on(spec.name),
                    supervisor,
                    &mut measured[v][i],
                    &progress,
                );
                done_samples += job.engine.sampling.samples;
                peak_rss::note_phase(&format!("workload {}", spec.name));
                if let Some(note) = others.look() {
                    supervisor.warn(&format!("note: while {} ran, {note}", spec.name));
                }
                if let Some(failure) = &measured[v][i].result.failure {
                    supervisor.warn(&format!(
                        "workload {} failed in {}{variant}: {}",
                        spec.name, failure.phase, failure.error
                    ));
                    complete = false;
                }
                if interrupted {
                    return Ok(false);
                }
            }
        }
        Ok(complete)
    }
}

/// A variant's own copy count or file depth (`--sweep`) in the run's set-up; None where it
/// has neither and measures with the run's.
fn own_setup(own: &Variant, setup: &WorkloadSetup) -> Option<WorkloadSetup> {
    (own.copies.is_some() || own.scratch_depth.is_some()).then(|| WorkloadSetup {
        copies: own.copies.unwrap_or(setup.copies),
        scratch_depth: own.scratch_depth.unwrap_or(setup.scratch_depth),
        ..setup.clone()
    })
}
