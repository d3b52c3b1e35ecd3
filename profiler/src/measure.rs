//! The sampling engine: set up a workload, calibrate how many ops a sample needs to last
//! `min_sample` (lmbench's ENOUGH), warm up, then take clean and probed samples interleaved so
//! drift hits both alike. Probes are attached only for probed samples, and only the workload
//! thread's tracking window (and what it forks) is counted. The workload lives on its own
//! thread (see `workload_thread`); this thread attaches probes, reads maps and watches `stop`.
use std::{
    sync::atomic::AtomicBool,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use crate::{
    hook_costs::{attribute, ProbedSample},
    probes::Probes,
    results::{ExtraMetric, WorkloadResult},
    scratch,
    workload_thread::{Credentials, Wait, WorkloadThread},
    workloads::{Extra, Metric, WorkloadOptions, WorkloadSpec},
};

#[derive(Debug, Clone)]
pub struct SamplingOptions {
    pub samples: usize,
    pub min_sample: Duration,
    pub pin: Vec<usize>,
    pub jobs: Option<usize>,
    /// Run the workloads with these credentials (`--user`); the profiler keeps its own.
    pub user: Option<Credentials>,
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

    fn take_from(&self, elapsed: Duration, ops: u64) -> Duration {
        let overhead = self.clock + Duration::from_nanos((self.loop_ns * ops as f64) as u64);
        elapsed
            .saturating_sub(overhead)
            .max(Duration::from_nanos(1))
    }
}

/// Progress callback: (samples done, samples total).
pub type Progress<'a> = &'a dyn Fn(usize, usize);

pub struct Outcome {
    pub result: WorkloadResult,
    /// The run was interrupted; `result` holds the samples taken so far.
    pub interrupted: bool,
}

pub fn measure(
    spec: &'static WorkloadSpec,
    options: &SamplingOptions,
    overhead: Overhead,
    mut probes: Option<&mut Probes>,
    stop: &AtomicBool,
    progress: Progress,
) -> Result<Outcome> {
    let mut result = WorkloadResult {
        name: spec.name.into(),
        family: spec.family.key().into(),
        unit: spec.metric.unit(),
        iterations: 0,
        clean: Vec::new(),
        probed: Vec::new(),
        extra: Vec::new(),
        attribution: Vec::new(),
        events_per_op: Default::default(),
        notes: Vec::new(),
    };
    let interrupted = Outcome {
        result: result.clone(),
        interrupted: true,
    };
    let probed = probes.is_some();
    let started = attached(probes.as_deref_mut(), || start(spec, options, probed, stop))?;
    let Wait::Done(Started { mut workload, .. }) = started else {
        return Ok(interrupted);
    };

    let Wait::Done(ops) = calibrate(&mut workload, spec.metric, options.min_sample, stop)? else {
        return Ok(interrupted);
    };
    if let Wait::Interrupted = workload.run(ops, false, stop).context("warm-up")? {
        return Ok(interrupted);
    }
    result.iterations = ops;

    let mut clean_ns_per_op = Vec::new();
    let mut probed_samples = Vec::new();
    let mut last = probes.as_deref().map(Probes::snapshot).transpose()?;
    let total = options.samples;
    let mut interrupted = false;
    'samples: for i in 0..total {
        // Alternate which pass goes first, so neither always follows the other.
        let probed_first = i % 2 == 1;
        for probed in [probed_first, !probed_first] {
            match (probed, probes.as_deref_mut()) {
                (false, _) => {
                    let Wait::Done((elapsed, extras)) = workload.run(ops, false, stop)? else {
                        interrupted = true;
                        break 'samples;
                    };
                    let elapsed = overhead.take_from(elapsed, ops);
                    result.clean.push(spec.metric.value(elapsed, ops));
                    clean_ns_per_op.push(elapsed.as_nanos() as f64 / ops as f64);
                    add_extras(&mut result.extra, extras);
                }
                (true, Some(p)) => {
                    let Wait::Done((elapsed, _)) =
                        attached(Some(&mut *p), || workload.run(ops, true, stop))?
                    else {
                        interrupted = true;
                        break 'samples;
                    };
                    let elapsed = overhead.take_from(elapsed, ops);
                    result.probed.push(spec.metric.value(elapsed, ops));
                    let now = p.snapshot()?;
                    let delta = now.since(last.as_ref().expect("snapshot taken with probes"));
                    probed_samples.push(ProbedSample { delta, ops });
                    last = Some(now);
                }
                (true, None) => {}
            }
        }
        progress(i + 1, total);
    }
    drop(workload);
    if let Some(p) = probes.as_deref() {
        if !probed_samples.is_empty() {
            let a = attribute(
                &probed_samples,
                &p.focused_functions(),
                mean(&clean_ns_per_op),
            );
            result.attribution = a.rows;
            result.events_per_op = a.events_per_op;
            note_untimed(&mut result);
        }
    }
    Ok(Outcome {
        result,
        interrupted,
    })
}

/// A workload thread with its private scratch directory. Fields drop in order: the workload
/// (and its files) goes before the directory.
pub struct Started {
    pub workload: WorkloadThread,
    _scratch: scratch::Scratch,
}

/// Creates the workload's scratch directory and starts its thread (set-up runs inside the
/// tracking window if `tracked`, so helper processes it forks are followed).
pub fn start(
    spec: &'static WorkloadSpec,
    options: &SamplingOptions,
    tracked: bool,
    stop: &AtomicBool,
) -> Result<Wait<Started>> {
    let scratch = scratch::create(spec.name, options.user)?;
    let workload_options = WorkloadOptions {
        scratch_dir: scratch.path().to_path_buf(),
        pin: options.pin.clone(),
        jobs: options.jobs,
    };
    Ok(
        match WorkloadThread::start(spec, workload_options, options.user, tracked, stop)? {
            Wait::Done(workload) => Wait::Done(Started {
                workload,
                _scratch: scratch,
            }),
            Wait::Interrupted => Wait::Interrupted,
        },
    )
}

/// Runs `f` with the probes attached (the workload thread opens its own tracking window).
fn attached<T>(probes: Option<&mut Probes>, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let Some(p) = probes else { return f() };
    p.attach()?;
    let out = f();
    p.detach()?;
    out
}

/// lmbench's BENCH: double the op count until one sample lasts `min_sample`.
fn calibrate(
    workload: &mut WorkloadThread,
    metric: Metric,
    min_sample: Duration,
    stop: &AtomicBool,
) -> Result<Wait<u64>> {
    if metric == Metric::Seconds {
        return Ok(Wait::Done(1)); // one op is one whole run
    }
    let mut ops = workload.whole_rounds(1);
    loop {
        let Wait::Done((elapsed, _)) = workload.run(ops, false, stop).context("calibrate")? else {
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
        ops = workload.whole_rounds(ops.saturating_mul(scale.clamp(2, 1024)));
    }
}

fn add_extras(extra: &mut Vec<ExtraMetric>, extras: Vec<Extra>) {
    for e in extras {
        match extra.iter_mut().find(|m| m.name == e.name) {
            Some(m) => m.clean.push(e.value),
            None => extra.push(ExtraMetric {
                name: e.name.into(),
                unit: e.unit,
                clean: vec![e.value],
            }),
        }
    }
}

fn note_untimed(result: &mut WorkloadResult) {
    for row in &result.attribution {
        // These never return: their calls are counted and can never be timed.
        if ["exit", "exit_group"].contains(&row.name.as_str()) {
            continue;
        }
        let calls = row.calls_per_op * result.iterations as f64 * result.probed.len() as f64;
        if row.untimed_calls > 0 && row.untimed_calls as f64 > 0.01 * calls {
            result.notes.push(format!(
                "{}: {} calls were counted but not timed (the task was preempted or migrated \
                 inside the call); ns/call comes from the timed ones",
                row.name, row.untimed_calls
            ));
        }
    }
}

fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        0.0
    } else {
        xs.iter().sum::<f64>() / xs.len() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::{self, tests::options};

    /// A token ring goes all the way round, so the engine must ask it for whole rounds: a
    /// single op of an 8-process ring is 8 hops, and counting it as one made events per op
    /// come out 8 times too high.
    #[test]
    fn calibration_asks_a_ring_for_whole_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let spec = workloads::find("ctx_8p_16k").unwrap();
        let stop = AtomicBool::new(false);
        let Wait::Done(mut ring) =
            WorkloadThread::start(spec, options(dir.path()), None, false, &stop).unwrap()
        else {
            panic!("interrupted")
        };
        assert_eq!(ring.whole_rounds(1), 8);
        assert_eq!(ring.whole_rounds(9), 16);
        for min_sample_us in [1, 200, 2000] {
            let min_sample = Duration::from_micros(min_sample_us);
            let Wait::Done(ops) = calibrate(&mut ring, spec.metric, min_sample, &stop).unwrap()
            else {
                panic!("interrupted")
            };
            assert_eq!(ops % 8, 0, "{ops} ops for {min_sample:?}");
        }
    }
}
