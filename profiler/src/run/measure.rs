//! The sampling engine: set up a workload, calibrate how many ops a sample needs to last
//! `min_sample` (lmbench's ENOUGH), warm up, then take clean and probed samples interleaved so
//! drift hits both alike. Probes are attached only for probed samples, and only the runner's
//! tracking window (and what it forks) is counted. The workload lives in the runner process
//! (see `runner`); this process attaches probes and reads maps. A workload that fails keeps
//! the samples taken before, with the failure and its phase recorded.
use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use anyhow::{Context, Result};

use crate::{
    attribution::{self, attribute, ProbedSample, SampledStacks},
    probes::{
        kallsyms::{Symbol, SymbolTable},
        Probes, Snapshot,
    },
    results::{
        AttributionRow, CopySamples, Estimate, ExtraMetric, PathKind, StackPasses, WorkloadFailure,
        WorkloadResult,
    },
    runner::{CopyRun, RemoteWorkload, Supervisor, Wait},
    workloads::{whole_rounds, Extra, Metric, WorkloadSetup, WorkloadSpec},
};

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

/// The most wall time a round's extra sampling passes may take: a workload mostly off its CPU
/// gathers samples slowly, and its count (shown beside every share) then says how far it got.
pub const MAX_STACK_PASSES_TIME: Duration = Duration::from_secs(2);

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

    fn take_from(&self, elapsed: Duration, loop_iterations: u64) -> Duration {
        let overhead =
            self.clock + Duration::from_nanos((self.loop_ns * loop_iterations as f64) as u64);
        elapsed
            .saturating_sub(overhead)
            .max(Duration::from_nanos(1))
    }
}

/// Progress callback: (samples done, samples total).
pub type Progress<'a> = &'a dyn Fn(usize, usize);

/// Testing only: the profiler panics after a workload's first sample, with its probes
/// loaded, to prove that a panic leaves nothing behind (tests/safety.rs).
pub const PANIC_FOR_TEST: &str = "HOOKPROF_TEST_PANIC";

/// What the samples so far add up to.
#[derive(Default)]
struct Taken {
    clean_ns_per_op: Vec<f64>,
    probed: Vec<ProbedSample>,
    /// The timed probed passes' time and ops over all copies: the wall time per op the
    /// counters' sums are over.
    probed_wall: (f64, u64),
    /// Samples taken in the timed probed passes (the rest in passes for the stacks alone, at
    /// their own rate).
    timed_samples: u64,
    /// The sampling period of the passes for the stacks alone, once one ran.
    stack_pass_period_ns: Option<u64>,
    /// The programs those passes attached (`Probes::stack_pass_programs`).
    stack_pass_programs: Vec<String>,
    /// Those passes' ops over all copies, and the samples they took: their CPU time per op.
    stack_pass_ops: u64,
    stack_pass_samples: u64,
    /// Their op time, ns, one per pass and copy: beside the clean passes' it says what their
    /// sampling added.
    stack_pass_ns_per_op: Vec<f64>,
    /// The slowest copy's op time in the last probed pass, ns: what sizes the next pass.
    last_pass_ns_per_op: f64,
    stacks: SampledStacks,
    /// The addresses of `stacks` named so far, to count the workload's own samples by
    /// (`Probes::name_addresses`; the profile names them all again when the run ends).
    named: HashMap<u64, Symbol>,
    /// Clean and probed samples taken again because a runner was stopped while they ran.
    retaken: [usize; 2],
}

/// A sample whose runner was stopped is taken again at most this many times (then kept, as
/// the note says): a run under a debugger's breakpoints would never end otherwise.
const MAX_RETAKES: usize = 3;

/// One workload's samples over the rounds measured so far.
pub struct Measured {
    pub result: WorkloadResult,
    taken: Taken,
}

impl Measured {
    pub fn new(spec: &WorkloadSpec) -> Measured {
        Measured {
            result: WorkloadResult::new(spec.name, spec.family, spec.metric.unit(), Vec::new()),
            taken: Taken::default(),
        }
    }

    pub fn failed(&self) -> bool {
        self.result.failure.is_some()
    }

    /// The result, with the attribution of every round's probed samples (`probes` focused on
    /// this workload) and their stacks named by `symbols` (kallsyms as the run ended).
    pub fn finish(
        self,
        probes: Option<&Probes>,
        symbols: Option<&Result<SymbolTable, String>>,
    ) -> WorkloadResult {
        let Measured { mut result, taken } = self;
        let [clean, probed] = taken.retaken;
        if clean + probed > 0 {
            result.notes.push(format!(
                "{clean} clean and {probed} probed samples were taken again: the runner was \
                 stopped (SIGSTOP or SIGTSTP) and continued while they ran, so their time held \
                 the stop"
            ));
        }
        if let Some(p) = probes {
            if !taken.probed.is_empty() {
                let a = attribute(
                    &taken.probed,
                    &p.focused_functions(),
                    mean(&taken.clean_ns_per_op),
                    p.correction(),
                    p.waits_measured(),
                );
                result.attribution = a.rows;
                result.events_per_op = a.events_per_op;
                note_untimed(&mut result);
                if p.bpf_lsm_on_demand() {
                    result
                        .notes
                        .extend(bpf_lsm_on_demand_note(&result.attribution));
                }
                sampled(&mut result, &taken, p, symbols);
            }
        }
        result
    }
}

/// The probed samples' accounting (on and off CPU, where sched_switch was probed) and their
/// stack profile, into `result`.
fn sampled(
    result: &mut WorkloadResult,
    taken: &Taken,
    probes: &Probes,
    symbols: Option<&Result<SymbolTable, String>>,
) {
    let (wall_ns, wall_ops) = taken.probed_wall;
    let wall = wall_ns / wall_ops.max(1) as f64;
    // Without sched_switch the CPU counters hold only what the gate added: no accounting.
    let measured = probes.waits_measured();
    let account = |profile| {
        measured
            .then(|| attribution::account(&taken.probed, wall, profile))
            .flatten()
    };
    let Some(period) = probes.sample_period_ns() else {
        result.accounting = account(None);
        return;
    };
    // The probed op's CPU time is the timed passes' alone: the passes for the stacks alone
    // sample faster, and their interrupts would inflate it.
    let ops: u64 = taken.probed.iter().map(|s| s.ops).sum();
    let probed_on_cpu = account(None).map_or_else(
        || taken.timed_samples as f64 * period as f64 / ops.max(1) as f64,
        |a| a.on_cpu_ns_per_op,
    );
    let unprobed = taken.stack_pass_ops > 0 && probes.stacks_unprobed();
    let sampling_cost = unprobed
        .then(|| sampling_cost(&taken.clean_ns_per_op, &taken.stack_pass_ns_per_op))
        .flatten();
    // Shares from unprobed passes are of the op as the kernel runs it unprobed: their time is
    // that op's CPU time as those passes' own samples count it (each one sampling period of a
    // tracked task's CPU time), not the probed op's, which holds the probes' cost. Their
    // interrupts' cost is in it (`sampling_cost` says how much they added to the op's time):
    // it falls between two samples, in no sample's stack, so the shares are the kernel's own.
    let on_cpu = if unprobed {
        let stack_period = taken.stack_pass_period_ns.unwrap_or(period);
        taken.stack_pass_samples as f64 * stack_period as f64 / taken.stack_pass_ops as f64
    } else {
        probed_on_cpu
    };
    let names = match symbols {
        Some(Ok(table)) => Ok(table.names(&taken.stacks.addresses())),
        Some(Err(e)) => Err(e.clone()),
        None => Err("kallsyms was not read".to_string()),
    };
    match names {
        Ok(names) => {
            let mut profile =
                attribution::profile(&taken.stacks, &names, period, ops, Some(on_cpu));
            profile.stack_passes = taken.stack_pass_period_ns.map(|period_ns| StackPasses {
                period_ns,
                samples: profile.samples - taken.timed_samples,
                unprobed,
                programs: taken.stack_pass_programs.clone(),
                sampling_cost: sampling_cost.map(|e| e.value),
                sampling_cost_half_width: sampling_cost
                    .map(|e| e.half_width)
                    .filter(|h| h.is_finite()),
            });
            attribution::correct_by_samples(&mut result.attribution, &profile);
            result.accounting = account(Some(&profile));
            result.profile = Some(profile);
        }
        Err(e) => {
            result.accounting = account(None);
            result
                .notes
                .push(format!("the sampled stacks could not be named: {e}"));
        }
    }
}

/// What the passes for the stacks alone added to the op's time, as a fraction of the clean
/// op's, with the 95% half-width of that fraction (Welch, their passes against the clean
/// samples): below zero by noise it stays below zero, for the reader to see within noise.
/// None without a clean op to weigh them by.
fn sampling_cost(clean_ns_per_op: &[f64], stack_pass_ns_per_op: &[f64]) -> Option<Estimate> {
    let (clean, stacks) = (
        crate::stats::summarize(clean_ns_per_op)?,
        crate::stats::summarize(stack_pass_ns_per_op)?,
    );
    if clean.mean <= 0.0 {
        return None;
    }
    let half_width = crate::stats::difference_interval(&clean, &stacks)
        .map_or(f64::INFINITY, |(low, high)| (high - low) / 2.0);
    Some(Estimate {
        value: stacks.mean / clean.mean - 1.0,
        half_width: half_width / clean.mean,
    })
}

/// Which round of how many is being measured (phases are named after it when there are
/// several).
#[derive(Debug, Clone, Copy)]
pub struct Round {
    pub index: usize,
    pub of: usize,
}

/// Measures one round of a workload into `measured`: a fresh runner, set-up, calibration (the
/// first round only: every round times the same number of ops), warm-up and the samples. A
/// failure is recorded with its phase and ends the workload's rounds. Returns true when the
/// run was interrupted.
pub fn measure_round(
    engine: &Engine,
    spec: &'static WorkloadSpec,
    probes: Option<&mut Probes>,
    supervisor: &mut Supervisor,
    progress: Progress,
    measured: &mut Measured,
    round: Round,
) -> bool {
    let before = measured.result.clean.len();
    measured.taken.stacks.start_round();
    let mut phase = String::from("set-up");
    supervisor.start_clock();
    let sampled = sample(
        engine,
        spec,
        probes,
        supervisor,
        progress,
        (&mut measured.result, &mut measured.taken, &mut phase),
    );
    let taken = measured.result.clean.len() - before;
    if taken > 0 {
        measured.result.round_sizes.push(taken);
    }
    match sampled {
        Ok(Wait::Done(())) => false,
        Ok(Wait::Interrupted) => true,
        Err(e) => {
            let phase = if round.of > 1 {
                format!("round {} of {}, {phase}", round.index + 1, round.of)
            } else {
                phase
            };
            measured.result.failure = Some(WorkloadFailure {
                phase,
                error: format!("{e:#}"),
            });
            false
        }
    }
}

/// Sets the workload up and takes its samples into `result` and `taken`, naming each phase
/// in `phase` as it starts.
fn sample(
    engine: &Engine,
    spec: &'static WorkloadSpec,
    mut probes: Option<&mut Probes>,
    supervisor: &mut Supervisor,
    progress: Progress,
    (result, taken, phase): (&mut WorkloadResult, &mut Taken, &mut String),
) -> Result<Wait<()>> {
    // With probes, set-up runs attached and inside the tracking window, so the helper
    // processes it forks are followed.
    let Engine {
        sampling,
        setup,
        overhead,
    } = *engine;
    let tracked = probes.is_some();
    let pids = supervisor.runner_pids(setup.copies)?;
    let Wait::Done(mut workload) = attached(probes.as_deref_mut(), &pids, || {
        RemoteWorkload::start(supervisor, spec, setup, tracked)
    })?
    else {
        return Ok(Wait::Interrupted);
    };
    let copies = workload.copies();

    let ops = if result.iterations > 0 {
        result.iterations
    } else {
        *phase = "calibration".into();
        let per_round = workload.ops_per_round();
        let mut run = |ops| workload.run_slowest(ops, false);
        let Wait::Done(ops) =
            ops_per_sample(per_round, spec.metric, sampling.min_sample, &mut run)?
        else {
            return Ok(Wait::Interrupted);
        };
        ops
    };
    *phase = "warm-up".into();
    for _ in 0..sampling.warmup {
        if let Wait::Interrupted = workload.run(ops, false).context("warm-up")? {
            return Ok(Wait::Interrupted);
        }
    }
    result.iterations = ops;
    if copies > 1 && result.copies.is_empty() {
        result.copies = vec![CopySamples::default(); copies];
    }

    let mut last = probes.as_deref().map(Probes::snapshot).transpose()?;
    // The set-up ran attached: its stacks are not the workload's ops (as its counts are not,
    // the snapshot above being the baseline).
    if let Some(p) = probes.as_deref_mut() {
        p.take_samples()?;
    }
    let context = PassContext {
        spec,
        overhead,
        copies,
    };
    let total = sampling.samples;
    for i in 0..total {
        // Alternate which pass goes first, so neither always follows the other.
        let probed_first = i % 2 == 1;
        for probed in [probed_first, !probed_first] {
            match (probed, probes.as_deref_mut()) {
                (false, _) => {
                    *phase = format!("sample {} (clean)", i + 1);
                    let mut tries = 0;
                    let runs = loop {
                        let Wait::Done(runs) = workload.run(ops, false)? else {
                            return Ok(Wait::Interrupted);
                        };
                        if !runs.iter().any(|r| r.stopped) || tries == MAX_RETAKES {
                            break runs;
                        }
                        tries += 1;
                        taken.retaken[0] += 1;
                    };
                    let values =
                        copy_values(spec, overhead, ops, &runs, &mut taken.clean_ns_per_op);
                    result.clean.push(over_copies(spec.metric, &values));
                    for ((copy, run), value) in result.copies.iter_mut().zip(&runs).zip(values) {
                        copy.clean.push(value);
                        copy.clean_spans.push([run.start_ns, run.end_ns]);
                    }
                    for run in runs {
                        add_extras(&mut result.extra, run.extras);
                    }
                }
                (true, Some(p)) => {
                    *phase = format!("sample {} (probed)", i + 1);
                    let mut tries = 0;
                    let (runs, values) = loop {
                        let pass = Pass::Timed {
                            retake_if_stopped: tries < MAX_RETAKES,
                        };
                        let Wait::Done(ran) = probed_pass(
                            p,
                            &mut workload,
                            &pids,
                            (&context, pass, ops),
                            (&mut *taken, &mut last),
                        )?
                        else {
                            return Ok(Wait::Interrupted);
                        };
                        match ran {
                            Some(ran) => break ran,
                            None => {
                                tries += 1;
                                taken.retaken[1] += 1;
                            }
                        }
                    };
                    result.probed.push(over_copies(spec.metric, &values));
                    for ((copy, run), value) in result.copies.iter_mut().zip(&runs).zip(values) {
                        copy.probed.push(value);
                        copy.probed_spans.push([run.start_ns, run.end_ns]);
                    }
                    assert!(
                        std::env::var_os(PANIC_FOR_TEST).is_none(),
                        "{PANIC_FOR_TEST} is set"
                    );
                }
                (true, None) => {}
            }
        }
        progress(i + 1, total);
    }
    if let Some(p) = probes {
        *phase = "stack samples".into();
        let timed_ops = ops * total as u64;
        let more = more_stacks(
            p,
            &mut workload,
            &pids,
            (&context, sampling),
            (&mut *taken, &mut last),
            timed_ops,
        )?;
        if let Wait::Interrupted = more {
            return Ok(Wait::Interrupted);
        }
    }
    *phase = "tear-down".into();
    let peak = workload.finish()?;
    result.runner_peak_rss_kib = result.runner_peak_rss_kib.max(peak);
    Ok(Wait::Done(()))
}

/// Probed passes for the stacks alone, after a round's timed ones (`timed_ops` ops), until the
/// round holds `sampling.stacks_per_round` of the workload's own samples or has spent
/// [`MAX_STACK_PASSES_TIME`] on them. Each pass is sized from the samples per op seen so far,
/// so the probes attach once or twice, not once per short sample.
fn more_stacks(
    p: &mut Probes,
    workload: &mut RemoteWorkload,
    pids: &[u32],
    (context, sampling): (&PassContext, Sampling),
    (taken, last): (&mut Taken, &mut Option<Snapshot>),
    timed_ops: u64,
) -> Result<Wait<()>> {
    let want = sampling.stacks_per_round;
    let Some(timed_period_ns) = p.sample_period_ns().filter(|_| want > 0) else {
        return Ok(Wait::Done(()));
    };
    let pass = Pass::StacksOnly {
        period_ns: sampling.stack_pass_period_ns,
    };
    let per_round = workload.ops_per_round();
    let started = Instant::now();
    let round_timed_samples = taken.stacks.round_total();
    let mut stack_ops = 0;
    let mut timed_own = None;
    loop {
        // The round's own samples are counted, not estimated from a fraction: the probes'
        // part differs by workload and by pass (over half of null_call's probed loop is the
        // syscall probes'), and an estimate a little high leaves the round short.
        p.name_addresses(&taken.stacks.addresses(), &mut taken.named)?;
        let own = taken.stacks.own_samples(&taken.named);
        if own.round_own >= want {
            return Ok(Wait::Done(()));
        }
        let timed_own = *timed_own.get_or_insert(own.round_own);
        // A pass lasts about ops x the last pass's time per op: none starts that would end
        // past the bound (a one-op workload such as build lasts a minute a pass).
        let ns_per_op = taken.last_pass_ns_per_op.max(1.0);
        // Own samples per op at the passes' own rate: their own once one ran; before, the
        // larger of the timed passes' few scaled by the rates and the op's wall time taken as
        // all CPU (the most a copy's tasks taking turns on a CPU hold), times the own part of
        // the samples so far, so a first pass errs short rather than long.
        let per_op = if stack_ops > 0 {
            (own.round_own - timed_own).max(1) as f64 / stack_ops as f64
        } else {
            let period = sampling.stack_pass_period_ns.max(1) as f64;
            let scaled =
                round_timed_samples as f64 / timed_ops.max(1) as f64 * timed_period_ns as f64;
            let own_part = if own.all == 0 {
                1.0
            } else {
                (own.own as f64 / own.all as f64).max(0.05)
            };
            (scaled / period).max(ns_per_op * context.copies as f64 / period) * own_part
        };
        // The first pass gets a quarter of the time left: its ops may take longer than the
        // timed ones (its interrupts), and a two-task ping-pong's timed passes may hold no
        // sample at all to size it by (a 2 s pass then held 29,416 of lat_rpc_udp's).
        let budget = MAX_STACK_PASSES_TIME.saturating_sub(started.elapsed());
        let left = if stack_ops == 0 { budget / 4 } else { budget };
        // One op that fits the whole budget runs even where a quarter is too short for it:
        // `stat` of a command that takes half a second would never sample faster otherwise.
        let fits = ((left.as_nanos() as f64 / ns_per_op) as u64)
            .max(u64::from(budget.as_nanos() as f64 >= ns_per_op));
        let wanted = ((want - own.round_own) as f64 / per_op * 1.1).ceil() as u64;
        let ops = whole_rounds(wanted.min(fits), per_round);
        if ops > fits {
            return Ok(Wait::Done(()));
        }
        if let Wait::Interrupted = probed_pass(
            p,
            workload,
            pids,
            (context, pass, ops),
            (&mut *taken, &mut *last),
        )? {
            return Ok(Wait::Interrupted);
        }
        stack_ops += ops;
    }
}

/// A pass's runs, and each copy's metric of it.
type PassRuns = (Vec<CopyRun>, Vec<f64>);

/// What every probed pass of one workload's round shares.
struct PassContext {
    spec: &'static WorkloadSpec,
    overhead: Overhead,
    copies: usize,
}

/// What a probed pass is for.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Pass {
    /// A timed sample: its counters, time and stacks all count; with `retake_if_stopped`,
    /// none of them if a runner was stopped while it ran (the caller takes it again).
    Timed { retake_if_stopped: bool },
    /// Stacks alone, one every `period_ns` of CPU time: its counters and time are left out,
    /// its faster sampling's interrupts being in them.
    StacksOnly { period_ns: u64 },
}

/// One probed pass of `ops` ops: its stacks into `taken`, with (a timed pass) its counters'
/// change since `last`; its runs and each copy's metric back (None: a timed pass set aside
/// because a runner was stopped in it). The timed passes put their runs into the results; a
/// pass for the stacks alone adds its samples alone, so the clean and probed samples stay
/// paired and the CPU time per op stays the timed passes'.
fn probed_pass(
    p: &mut Probes,
    workload: &mut RemoteWorkload,
    pids: &[u32],
    (context, pass, ops): (&PassContext, Pass, u64),
    (taken, last): (&mut Taken, &mut Option<Snapshot>),
) -> Result<Wait<Option<PassRuns>>> {
    let PassContext {
        spec,
        overhead,
        copies,
    } = *context;
    let timed_period_ns = p.sample_period_ns();
    if let Pass::StacksOnly { period_ns } = pass {
        p.set_sample_period_ns(period_ns);
        taken.stack_pass_period_ns = Some(period_ns);
    }
    let attach = match pass {
        Pass::Timed { .. } => Attach::All,
        Pass::StacksOnly { .. } => {
            let children_from_exec = workload.children_count_from_exec();
            taken.stack_pass_programs = p.stack_pass_programs(children_from_exec);
            Attach::ForStacks { children_from_exec }
        }
    };
    let ran = attached_as(Some(&mut *p), pids, attach, || workload.run(ops, true));
    if let Some(period_ns) = timed_period_ns {
        p.set_sample_period_ns(period_ns);
    }
    let Wait::Done(runs) = ran? else {
        return Ok(Wait::Interrupted);
    };
    if pass
        == (Pass::Timed {
            retake_if_stopped: true,
        })
        && runs.iter().any(|r| r.stopped)
    {
        // Nothing of it counts: the next pass starts from here.
        *last = Some(p.snapshot()?);
        p.take_samples()?;
        return Ok(Wait::Done(None));
    }
    let mut ns_per_op = Vec::with_capacity(runs.len());
    let values = copy_values(spec, overhead, ops, &runs, &mut ns_per_op);
    taken.last_pass_ns_per_op = ns_per_op.iter().copied().fold(0.0, f64::max);
    let now = p.snapshot()?;
    let samples = p.take_samples()?;
    if let Pass::Timed { .. } = pass {
        for copy in &ns_per_op {
            taken.probed_wall.0 += copy * ops as f64;
            taken.probed_wall.1 += ops;
        }
        let delta = now
            .since(last.as_ref().expect("snapshot taken with probes"))
            .into();
        // The counters hold every copy's calls: per op is over all copies' ops.
        taken.probed.push(ProbedSample {
            delta,
            ops: ops * copies as u64,
        });
        taken.timed_samples += samples.iter().map(|s| s.count).sum::<u64>();
    } else {
        taken.stack_pass_ns_per_op.extend(&ns_per_op);
        taken.stack_pass_ops += ops * copies as u64;
        taken.stack_pass_samples += samples.iter().map(|s| s.count).sum::<u64>();
    }
    *last = Some(now);
    taken.stacks.set_own_programs(p.program_tags());
    taken.stacks.add(samples);
    Ok(Wait::Done(Some((runs, values))))
}

/// Each copy's metric of one sample, the timing overhead taken out; each copy's ns per op
/// goes into `ns_per_op`.
fn copy_values(
    spec: &WorkloadSpec,
    overhead: Overhead,
    ops: u64,
    runs: &[CopyRun],
    ns_per_op: &mut Vec<f64>,
) -> Vec<f64> {
    runs.iter()
        .map(|run| {
            let elapsed = overhead.take_from(run.elapsed, spec.loop_iterations(ops));
            ns_per_op.push(elapsed.as_nanos() as f64 / ops as f64);
            spec.metric.value(elapsed, ops)
        })
        .collect()
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

/// Runs `f` with the probes attached, counting the gate calls of the runners `pids`.
fn attached<T>(
    probes: Option<&mut Probes>,
    pids: &[u32],
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    attached_as(probes, pids, Attach::All, f)
}

/// What a probed pass attaches.
#[derive(Debug, Clone, Copy)]
enum Attach {
    All,
    /// What the stacks need (`Probes::attach_for_stacks`).
    ForStacks {
        children_from_exec: bool,
    },
}

/// `attached`, with what `attach` says.
fn attached_as<T>(
    probes: Option<&mut Probes>,
    pids: &[u32],
    attach: Attach,
    f: impl FnOnce() -> Result<T>,
) -> Result<T> {
    let Some(p) = probes else { return f() };
    p.set_gate_owners(pids)?;
    match attach {
        Attach::All => p.attach()?,
        Attach::ForStacks { children_from_exec } => p.attach_for_stacks(children_from_exec)?,
    }
    let out = f();
    p.detach();
    out
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

/// Where the kernel calls BPF LSM functions only with a BPF LSM program on their hook: the
/// timed ones its hooks ran without calling, said once, so a row of 0 calls reads as the
/// kernel's, not as the probes' doing (fentry attaches no BPF LSM program, and turns no call
/// on). With `--stack-noop` or `--inject` the programs hookprof attached are what turn them on.
fn bpf_lsm_on_demand_note(rows: &[AttributionRow]) -> Option<String> {
    let hook_calls = |hook: &str| {
        rows.iter()
            .find(|r| r.kind == PathKind::Hook && r.name == hook)
            .map_or(0.0, |r| r.calls_per_op)
    };
    let uncalled: Vec<&str> = rows
        .iter()
        .filter(|r| r.kind == PathKind::Lsm && r.name.starts_with("bpf_lsm_"))
        .filter(|r| {
            let hook = r.parent.as_deref().unwrap_or_default();
            r.calls_per_op < 0.01 * hook_calls(hook) && hook_calls(hook) > 0.0
        })
        .map(|r| r.name.as_str())
        .collect();
    (!uncalled.is_empty()).then(|| {
        format!(
            "{}: timed and never called: this kernel calls a BPF LSM function only while a \
             BPF LSM program is attached to its hook (static calls, Linux 6.12), and the \
             fentry programs that time it attach none, so they change nothing the kernel calls",
            uncalled.join(", ")
        )
    })
}

fn note_untimed(result: &mut WorkloadResult) {
    for row in &result.attribution {
        // These never return: their calls are counted and can never be timed.
        if ["exit", "exit_group"].contains(&row.name.as_str()) {
            continue;
        }
        let copies = result.copies.len().max(1) as f64;
        let calls =
            row.calls_per_op * result.iterations as f64 * result.probed.len() as f64 * copies;
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

    #[test]
    fn the_sampling_cost_is_the_stack_passes_time_over_the_clean_op_s_with_its_interval() {
        let clean = [99.0, 100.0, 101.0, 100.0];
        let cost = sampling_cost(&clean, &[109.0, 110.0, 111.0, 110.0]).unwrap();
        assert!((cost.value - 0.10).abs() < 1e-12, "{cost:?}");
        assert!(cost.half_width > 0.0 && !cost.within_noise(), "{cost:?}");
        // Below the clean op by noise: kept as measured, and read as within noise.
        let cost = sampling_cost(&clean, &[97.0, 101.0, 99.0, 102.0]).unwrap();
        assert!(cost.value < 0.0 && cost.within_noise(), "{cost:?}");
        assert_eq!(sampling_cost(&[0.0], &[1.0]), None);
        assert_eq!(sampling_cost(&clean, &[]), None);
    }
    use crate::{
        results::fixtures::row,
        workloads::{self, tests::options},
    };

    #[test]
    fn bpf_lsm_functions_a_hook_ran_without_calling_are_named_once() {
        let hook = "security_file_open";
        let mut rows = vec![
            row(PathKind::Hook, hook, None, 1.0, 400.0),
            row(PathKind::Lsm, "apparmor_file_open", Some(hook), 1.0, 300.0),
            row(PathKind::Lsm, "bpf_lsm_file_open", Some(hook), 0.0, 0.0),
        ];
        let note = bpf_lsm_on_demand_note(&rows).expect("a note");
        assert!(
            note.starts_with("bpf_lsm_file_open: timed and never called"),
            "{note}"
        );
        assert!(!note.contains("apparmor"), "{note}");
        // Called (a BPF LSM program on the hook turned it on): nothing to say.
        rows[2].calls_per_op = 1.0;
        assert_eq!(bpf_lsm_on_demand_note(&rows), None);
    }

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
