//! What the sampling engine measures every workload of a run with: how many samples a pass
//! takes and how long each lasts (`Sampling`, dealt over the rounds), the workloads' set-up,
//! and what the timing itself costs (`Overhead`, measured once and taken out of every sample).
use std::time::{Duration, Instant};

use crate::workloads::WorkloadSetup;

/// How many samples a workload takes and how long each lasts.
#[derive(Debug, Clone, Copy)]
pub struct Sampling {
    /// Timed samples per pass (clean and probed each) in each round.
    pub samples: usize,
    /// `stat --runs`: this many timed samples a pass over all the rounds instead, dealt out
    /// evenly (the first rounds take one more where they do not divide).
    pub total: Option<usize>,
    /// Untimed samples before the first timed one of a round.
    pub warmup: usize,
    /// The warm-up in the first round alone: `stat`'s every run is a fresh exec of the
    /// command, so only the machine's caches warm up, once; `run`'s each round's fresh runner.
    pub warmup_once: bool,
    /// The least time one sample lasts (lmbench's ENOUGH).
    pub min_sample: Duration,
    /// Stack samples each round's probed passes should hold (`run --stack-samples` over the
    /// rounds); 0 takes what the timed passes give.
    pub stacks_per_round: u64,
    /// The sampling period of the passes for the stacks alone (`--stack-sample-hz`).
    pub stack_pass_period_ns: u64,
}

impl Sampling {
    /// The timed samples a pass takes in round `round` of `rounds`.
    pub fn in_round(&self, round: usize, rounds: usize) -> usize {
        match self.total {
            None => self.samples,
            Some(total) => total / rounds + usize::from(round < total % rounds),
        }
    }

    /// What round `round` of `rounds` takes: its share of the samples, and its warm-up.
    pub fn for_round(&self, round: usize, rounds: usize) -> Sampling {
        Sampling {
            samples: self.in_round(round, rounds),
            warmup: if self.warmup_once && round > 0 {
                0
            } else {
                self.warmup
            },
            ..*self
        }
    }

    /// The timed samples a pass takes over `rounds` rounds.
    pub fn over(&self, rounds: usize) -> usize {
        self.total.unwrap_or(self.samples * rounds)
    }
}

/// What the engine measures every workload of a run with.
#[derive(Clone, Copy)]
pub struct Engine<'a> {
    pub sampling: Sampling,
    /// How each workload is set up in its runners.
    pub setup: &'a WorkloadSetup,
    pub overhead: Overhead,
}

/// What the timing itself costs, measured once per run and taken out of every sample.
#[derive(Debug, Clone, Copy)]
pub struct Overhead {
    /// Two clock reads around a sample.
    pub clock: Duration,
    /// One empty iteration of a workload loop, in ns.
    pub loop_ns: f64,
}

impl Overhead {
    pub fn measure() -> Overhead {
        const N: u32 = 10_000;
        let mut clock = Duration::MAX;
        for _ in 0..N {
            let t = Instant::now();
            clock = clock.min(t.elapsed());
        }
        let mut loop_ns = f64::MAX;
        for _ in 0..5 {
            let t = Instant::now();
            for i in 0..N {
                std::hint::black_box(i);
            }
            loop_ns = loop_ns.min(t.elapsed().as_nanos() as f64 / f64::from(N));
        }
        Overhead { clock, loop_ns }
    }

    pub(super) fn take_from(&self, elapsed: Duration, loop_iterations: u64) -> Duration {
        let overhead =
            self.clock + Duration::from_nanos((self.loop_ns * loop_iterations as f64) as u64);
        elapsed
            .saturating_sub(overhead)
            .max(Duration::from_nanos(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_s_runs_and_warm_up_are_dealt_over_the_rounds_and_run_s_are_each_round_s() {
        let sampling = |samples, total| Sampling {
            samples,
            total,
            warmup: 1,
            warmup_once: total.is_some(),
            min_sample: Duration::ZERO,
            stacks_per_round: 0,
            stack_pass_period_ns: 0,
        };
        let stat = sampling(0, Some(10));
        let dealt: Vec<usize> = (0..4).map(|r| stat.in_round(r, 4)).collect();
        assert_eq!(dealt, [3, 3, 2, 2]);
        assert_eq!(stat.over(4), 10);
        let run = sampling(3, None);
        assert_eq!((run.in_round(3, 4), run.over(4)), (3, 12));
        // stat warms the command up once; run warms each round's fresh runner.
        let warmups =
            |s: &Sampling| -> Vec<usize> { (0..4).map(|r| s.for_round(r, 4).warmup).collect() };
        assert_eq!(warmups(&stat), [1, 0, 0, 0]);
        assert_eq!(warmups(&run), [1, 1, 1, 1]);
        assert_eq!(stat.for_round(1, 4).samples, 3);
    }
}
