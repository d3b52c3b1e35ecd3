//! The sampling engine's loop: one round of one workload in a `WorkloadSession` (a fresh
//! runner, set-up, calibration to lmbench's ENOUGH, warm-up), then clean and probed samples
//! interleaved so drift hits both alike. Probes are attached only for probed samples
//! (`probed_pass`), and only the runner's tracking window (and what it forks) is counted. The
//! workload lives in the runner process (see `runner`); this process attaches probes and reads
//! maps. A workload that fails keeps the samples taken before, with the failure and its phase
//! recorded. What the samples come to is the attribution's (`attribution::Measured`).
use std::time::Duration;

use anyhow::{Context, Result};

use super::{
    engine::Engine,
    probed_pass::{attached, Pass, PassRuns},
    session::{copy_values, Phase, WorkloadSession},
};
use crate::{
    attribution::Measured,
    machine::{bpf_stats::Pricing, other_probes::OtherProgram},
    probes::Probes,
    results::{CopySamples, ExtraMetric, WorkloadFailure},
    runner::{RemoteWorkload, Supervisor, Wait},
    workloads::{whole_rounds, Extra, Metric, WorkloadSpec},
};

/// Progress callback: (samples done, samples total).
pub type Progress<'a> = &'a dyn Fn(usize, usize);

/// Testing only: the profiler panics after a workload's first sample, with its probes
/// loaded, to prove that a panic leaves nothing behind (tests/safety.rs).
pub const PANIC_FOR_TEST: &str = "HOOKPROF_TEST_PANIC";

/// A sample whose runner was stopped is taken again at most this many times (then kept, as
/// the note says): a run under a debugger's breakpoints would never end otherwise.
const MAX_RETAKES: usize = 3;

/// Which round of how many is being measured (phases are named after it when there are
/// several).
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub index: usize,
    pub of: usize,
}

/// One workload's round: what it is measured with, and which round it is.
#[derive(Clone, Copy)]
pub struct WorkloadRound<'a> {
    pub engine: Engine<'a>,
    pub spec: &'static WorkloadSpec,
    pub round: Round,
    /// Other tools' programs seen so far: their statistics price them over one more sample.
    pub others: &'a [OtherProgram],
}

/// Measures one round of a workload into `measured`: a fresh runner, set-up, calibration (the
/// first round only: every round times the same number of ops), warm-up and the samples. A
/// failure is recorded with its phase and ends the workload's rounds. Returns true when the
/// run was interrupted.
pub fn measure_round(
    job: &WorkloadRound,
    probes: Option<&mut Probes>,
    supervisor: &mut Supervisor,
    measured: &mut Measured,
    progress: Progress,
) -> bool {
    let before = measured.result.clean.len();
    measured.taken.stacks.start_round();
    supervisor.start_clock();
    let sampled = match WorkloadSession::start(job, probes, supervisor, &mut *measured) {
        Ok(Wait::Done(session)) => session.sample(progress),
        Ok(Wait::Interrupted) => Ok(Wait::Interrupted),
        Err(e) => Err((Phase::SetUp, e)),
    };
    let taken = measured.result.clean.len() - before;
    if taken > 0 {
        measured.result.round_sizes.push(taken);
    }
    match sampled {
        Ok(Wait::Done(())) => false,
        Ok(Wait::Interrupted) => true,
        Err((phase, e)) => {
            let phase = if job.round.of > 1 {
                format!("round {} of {}, {phase}", job.round.index + 1, job.round.of)
            } else {
                phase.to_string()
            };
            measured.result.failure = Some(WorkloadFailure {
                phase,
                error: format!("{e:#}"),
            });
            false
        }
    }
}

impl<'r, 's> WorkloadSession<'r, 's> {
    /// Starts the workload in its runners. With probes, set-up runs attached and inside the
    /// tracking window, so the helper processes it forks are followed.
    fn start(
        job: &WorkloadRound<'r>,
        mut probes: Option<&'r mut Probes>,
        supervisor: &'s mut Supervisor,
        measured: &'r mut Measured,
    ) -> Result<Wait<Self>> {
        let setup = job.engine.setup;
        let tracked = probes.is_some();
        let pids = supervisor.runner_pids(setup.copies)?;
        let Wait::Done(workload) = attached(probes.as_deref_mut(), &pids, || {
            RemoteWorkload::start(supervisor, job.spec, setup, tracked)
        })?
        else {
            return Ok(Wait::Interrupted);
        };
        Ok(Wait::Done(WorkloadSession {
            engine: job.engine,
            spec: job.spec,
            probes,
            workload,
            pids,
            measured,
            last: None,
            ops: 0,
            phase: Phase::SetUp,
            others: job.others,
        }))
    }

    /// Takes the round's samples, then tears the workload down; an error comes back with the
    /// phase it happened in.
    fn sample(mut self, progress: Progress) -> Result<Wait<()>, (Phase, anyhow::Error)> {
        match self.take_samples(progress) {
            Ok(Wait::Done(())) => {}
            Ok(Wait::Interrupted) => return Ok(Wait::Interrupted),
            Err(e) => return Err((self.phase, e)),
        }
        let WorkloadSession {
            workload, measured, ..
        } = self;
        let peak = workload.finish().map_err(|e| (Phase::TearDown, e))?;
        let result = &mut measured.result;
        result.runner_peak_rss_kib = result.runner_peak_rss_kib.max(peak);
        Ok(Wait::Done(()))
    }

    /// Calibration, warm-up, the timed samples (clean and probed in turn) and, with probes,
    /// the passes for the stacks alone.
    fn take_samples(&mut self, progress: Progress) -> Result<Wait<()>> {
        if let Wait::Interrupted = self.calibrate()? {
            return Ok(Wait::Interrupted);
        }
        if let Wait::Interrupted = self.warm_up()? {
            return Ok(Wait::Interrupted);
        }
        self.count_from_here()?;
        let total = self.engine.sampling.samples;
        for i in 0..total {
            // Alternate which pass goes first, so neither always follows the other.
            let probed_first = i % 2 == 1;
            for probed in [probed_first, !probed_first] {
                let took = match (probed, self.probes.is_some()) {
                    (false, _) => self.clean_sample(i + 1)?,
                    (true, true) => self.probed_sample(i + 1)?,
                    (true, false) => Wait::Done(()),
                };
                if let Wait::Interrupted = took {
                    return Ok(Wait::Interrupted);
                }
            }
            progress(i + 1, total);
        }
        if let Wait::Interrupted = self.price_others()? {
            return Ok(Wait::Interrupted);
        }
        if self.probes.is_some() {
            self.phase = Phase::StackSamples;
            if let Wait::Interrupted = self.more_stacks(self.ops * total as u64)? {
                return Ok(Wait::Interrupted);
            }
        }
        self.phase = Phase::TearDown;
        Ok(Wait::Done(()))
    }

    /// The ops a sample times: lmbench's ENOUGH, found in the first round and kept after.
    fn calibrate(&mut self) -> Result<Wait<()>> {
        if self.measured.result.iterations > 0 {
            self.ops = self.measured.result.iterations;
            return Ok(Wait::Done(()));
        }
        self.phase = Phase::Calibration;
        let per_round = self.workload.ops_per_round();
        let (metric, min_sample) = (self.spec.metric, self.engine.sampling.min_sample);
        let workload = &mut self.workload;
        let mut run = |ops| workload.run_slowest(ops, false);
        let Wait::Done(ops) = ops_per_sample(per_round, metric, min_sample, &mut run)? else {
            return Ok(Wait::Interrupted);
        };
        self.ops = ops;
        Ok(Wait::Done(()))
    }

    /// Untimed samples before the timed ones; then the round's op count and copies recorded.
    fn warm_up(&mut self) -> Result<Wait<()>> {
        self.phase = Phase::WarmUp;
        for _ in 0..self.engine.sampling.warmup {
            if let Wait::Interrupted = self.workload.run(self.ops, false).context("warm-up")? {
                return Ok(Wait::Interrupted);
            }
        }
        let copies = self.workload.copies();
        let result = &mut self.measured.result;
        result.iterations = self.ops;
        if copies > 1 && result.copies.is_empty() {
            result.copies = vec![CopySamples::default(); copies];
        }
        Ok(Wait::Done(()))
    }

    /// Where other tools' programs run where this run measures, one more sample, untimed and
    /// unprobed, with the kernel's BPF statistics on: what each program costs per op. Apart
    /// from the timed samples, so neither the clean op nor the probed spans pay the
    /// statistics' two clock reads a program run.
    fn price_others(&mut self) -> Result<Wait<()>> {
        let Some(pricing) = Pricing::start(self.others) else {
            return Ok(Wait::Done(()));
        };
        let Wait::Done(runs) = self.workload.run(self.ops, false).context("pricing")? else {
            return Ok(Wait::Interrupted);
        };
        let ops = self.ops * runs.len() as u64;
        pricing.finish(ops, &mut self.measured.result.other_programs);
        Ok(Wait::Done(()))
    }

    /// The probes' counters from here on are the samples': the set-up ran attached, and its
    /// stacks are not the workload's ops (as its counts are not, this snapshot being the
    /// baseline).
    fn count_from_here(&mut self) -> Result<()> {
        self.last = self.probes.as_deref().map(Probes::snapshot).transpose()?;
        if let Some(p) = self.probes.as_deref_mut() {
            p.take_samples()?;
        }
        Ok(())
    }

    /// Clean sample `number`, taken again while a runner was stopped in it (at most
    /// [`MAX_RETAKES`] times).
    fn clean_sample(&mut self, number: usize) -> Result<Wait<()>> {
        self.phase = Phase::Sample {
            number,
            probed: false,
        };
        let mut tries = 0;
        let runs = loop {
            let Wait::Done(runs) = self.workload.run(self.ops, false)? else {
                return Ok(Wait::Interrupted);
            };
            if !runs.iter().any(|r| r.stopped) || tries == MAX_RETAKES {
                break runs;
            }
            tries += 1;
            self.measured.taken.retaken[0] += 1;
        };
        let Measured { result, taken } = &mut *self.measured;
        let (spec, overhead) = (self.spec, self.engine.overhead);
        let values = copy_values(spec, overhead, self.ops, &runs, &mut taken.clean_ns_per_op);
        result.clean.push(over_copies(spec.metric, &values));
        for ((copy, run), value) in result.copies.iter_mut().zip(&runs).zip(values) {
            copy.clean.push(value);
            copy.clean_spans.push([run.start_ns, run.end_ns]);
        }
        for run in runs {
            add_extras(&mut result.extra, run.extras);
        }
        Ok(Wait::Done(()))
    }

    /// Probed sample `number`: a timed pass, taken again while a runner was stopped in it (at
    /// most [`MAX_RETAKES`] times).
    fn probed_sample(&mut self, number: usize) -> Result<Wait<()>> {
        self.phase = Phase::Sample {
            number,
            probed: true,
        };
        let mut tries = 0;
        let PassRuns { runs, values } = loop {
            let pass = Pass::Timed {
                retake_if_stopped: tries < MAX_RETAKES,
            };
            let Wait::Done(ran) = self.probed_pass(pass, self.ops)? else {
                return Ok(Wait::Interrupted);
            };
            match ran {
                Some(ran) => break ran,
                None => {
                    tries += 1;
                    self.measured.taken.retaken[1] += 1;
                }
            }
        };
        let result = &mut self.measured.result;
        result.probed.push(over_copies(self.spec.metric, &values));
        for ((copy, run), value) in result.copies.iter_mut().zip(&runs).zip(values) {
            copy.probed.push(value);
            copy.probed_spans.push([run.start_ns, run.end_ns]);
        }
        assert!(
            std::env::var_os(PANIC_FOR_TEST).is_none(),
            "{PANIC_FOR_TEST} is set"
        );
        Ok(Wait::Done(()))
    }
}

/// One sample's figure over the copies that ran at once: the mean latency a copy saw, or the
/// bandwidth they moved together.
fn over_copies(metric: Metric, values: &[f64]) -> f64 {
    let sum: f64 = values.iter().sum();
    match metric {
        Metric::Bandwidth { .. } => sum,
        _ => sum / values.len().max(1) as f64,
    }
}

/// lmbench's BENCH: double the op count until one sample lasts `min_sample` (the
/// "calibration" phase of a workload). `run` runs that
/// many ops of a workload whose ops come in rounds of `per_round`, and returns their time.
fn ops_per_sample(
    per_round: u64,
    metric: Metric,
    min_sample: Duration,
    run: &mut dyn FnMut(u64) -> Result<Wait<Duration>>,
) -> Result<Wait<u64>> {
    if metric == Metric::Seconds {
        return Ok(Wait::Done(1)); // one op is one whole run
    }
    let mut ops = whole_rounds(1, per_round);
    loop {
        let Wait::Done(elapsed) = run(ops).context("calibrate")? else {
            return Ok(Wait::Interrupted);
        };
        if elapsed >= min_sample || ops >= 1 << 40 {
            return Ok(Wait::Done(ops));
        }
        // Jump close to the target once the time is measurable, then settle by doubling.
        let scale = if elapsed > Duration::from_micros(100) {
            (min_sample.as_secs_f64() / elapsed.as_secs_f64() * 1.1).ceil() as u64
        } else {
            2
        };
        ops = whole_rounds(ops.saturating_mul(scale.clamp(2, 1024)), per_round);
    }
}

fn add_extras(extra: &mut Vec<ExtraMetric>, extras: Vec<Extra>) {
    for e in extras {
        match extra.iter_mut().find(|m| m.name == e.name) {
            Some(m) => m.clean.push(e.value),
            None => extra.push(ExtraMetric {
                name: e.name,
                unit: e.unit,
                clean: vec![e.value],
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{self, tests::options};

    /// Copies report their mean latency but their summed bandwidth: two copies moving 100 MB/s
    /// each move 200 MB/s together, while each op still takes what one copy's op takes.
    #[test]
    fn copies_combine_as_mean_latency_and_summed_bandwidth() {
        assert_eq!(over_copies(Metric::LatencyUs, &[1.0, 3.0]), 2.0);
        assert_eq!(over_copies(Metric::LatencyNs, &[5.0]), 5.0);
        let bw = Metric::Bandwidth { bytes_per_op: 64 };
        assert_eq!(over_copies(bw, &[100.0, 150.0]), 250.0);
    }

    /// A token ring goes all the way round, so the engine must ask it for whole rounds: a
    /// single op of an 8-process ring is 8 hops, and counting it as one made events per op
    /// come out 8 times too high.
    #[test]
    fn calibration_asks_a_ring_for_whole_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let spec = workloads::find("ctx_8p_16k").unwrap();
        let mut ring = (spec.create)(&options(dir.path())).unwrap();
        let per_round = ring.ops_per_round();
        assert_eq!(whole_rounds(1, per_round), 8);
        assert_eq!(whole_rounds(9, per_round), 16);
        for min_sample_us in [1, 200, 2000] {
            let min_sample = Duration::from_micros(min_sample_us);
            let mut asked = Vec::new();
            let mut run = |ops| {
                asked.push(ops);
                ring.run(ops).map(Wait::Done)
            };
            let Wait::Done(ops) =
                ops_per_sample(per_round, spec.metric, min_sample, &mut run).unwrap()
            else {
                panic!("interrupted")
            };
            assert_eq!(ops % 8, 0, "{ops} ops for {min_sample:?}");
            assert!(asked.iter().all(|n| n % 8 == 0), "asked for {asked:?}");
        }
    }
}
