//! The run's measuring stage: every workload in every round (`--rounds`, each a fresh random
//! order with fresh runners), through the sampling engine (`measure`); a workload that fails
//! is said and skipped in later rounds, an interrupt ends the rounds. Then each workload's
//! probed samples become its attribution.
use indicatif::ProgressBar;
use rand::{seq::SliceRandom, SeedableRng};

use super::{
    measure::{self, Measured, Overhead, Round, SamplingOptions},
    probe_setup::RunProbes,
};
use crate::{memory, results::WorkloadResult, runner::Supervisor, workloads::WorkloadSpec};

/// How many rounds, and the seed of their random orders (recorded in the results).
#[derive(Debug, Clone, Copy)]
pub(super) struct Rounds {
    pub of: usize,
    pub seed: u64,
}

/// What the rounds came to: the workloads measured (or failed), and whether every round of
/// every workload was measured.
pub(super) struct Measuring {
    pub workloads: Vec<WorkloadResult>,
    pub complete: bool,
}

pub(super) fn measure_workloads(
    specs: &[&'static WorkloadSpec],
    rounds: Rounds,
    options: &SamplingOptions,
    overhead: Overhead,
    probes: &mut RunProbes,
    supervisor: &mut Supervisor,
    bar: &ProgressBar,
) -> Measuring {
    let mut measured: Vec<Measured> = specs.iter().map(|s| Measured::new(s)).collect();
    let complete = measure_rounds(
        specs,
        rounds,
        options,
        overhead,
        probes,
        supervisor,
        bar,
        &mut measured,
    );
    let mut workloads = Vec::new();
    for (spec, m) in specs.iter().zip(measured) {
        let result = m.finish(probes.focused_on(spec.name).as_deref());
        if !result.clean.is_empty() || result.failure.is_some() {
            workloads.push(result);
        }
    }
    Measuring {
        workloads,
        complete,
    }
}

/// Measures the rounds into `measured` (one per spec); false when a workload failed or the
/// run was interrupted.
#[expect(
    clippy::too_many_arguments,
    reason = "the measuring stage's inputs, handed on"
)]
fn measure_rounds(
    specs: &[&'static WorkloadSpec],
    rounds: Rounds,
    options: &SamplingOptions,
    overhead: Overhead,
    probes: &mut RunProbes,
    supervisor: &mut Supervisor,
    bar: &ProgressBar,
    measured: &mut [Measured],
) -> bool {
    let mut complete = true;
    let mut rng = rand::rngs::StdRng::seed_from_u64(rounds.seed);
    let per_workload = options.samples;
    let mut done_workloads = 0;
    for round in 0..rounds.of {
        // A fresh order each round, so no workload always follows the same one.
        let mut order: Vec<usize> = (0..specs.len()).collect();
        if rounds.of > 1 {
            order.shuffle(&mut rng);
        }
        for i in order {
            let spec = specs[i];
            if measured[i].failed() {
                continue;
            }
            bar.set_message(if rounds.of > 1 {
                format!("{} (round {}/{})", spec.name, round + 1, rounds.of)
            } else {
                spec.name.to_string()
            });
            let progress = |done: usize, _total: usize| {
                bar.set_length((specs.len() * rounds.of * per_workload) as u64);
                bar.set_position((done_workloads * per_workload + done) as u64);
            };
            let interrupted = measure::measure_round(
                spec,
                options,
                overhead,
                probes.focused_on(spec.name),
                supervisor,
                &progress,
                &mut measured[i],
                Round {
                    index: round,
                    of: rounds.of,
                },
            );
            done_workloads += 1;
            memory::note_phase(&format!("workload {}", spec.name));
            if let Some(failure) = &measured[i].result.failure {
                supervisor.warn(&format!(
                    "workload {} failed in {}: {}",
                    spec.name, failure.phase, failure.error
                ));
                complete = false;
            }
            if interrupted {
                return false;
            }
        }
    }
    complete
}
