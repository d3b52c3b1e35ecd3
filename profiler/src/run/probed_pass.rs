//! A workload session's probed passes: the timed ones, whose counters, time and stacks all
//! count, and, after a round's timed ones, the passes for the stacks alone (sampling faster,
//! their time left out), each sized from the samples per op seen so far. Also how the probes
//! are attached around a pass: only the runners' tracking window (and what it forks) counts.
use std::time::{Duration, Instant};

use anyhow::Result;

use super::session::{copy_values, WorkloadSession};
use crate::{
    attribution::ProbedSample,
    probes::Probes,
    runner::{CopyRun, Wait},
    workloads::whole_rounds,
};

/// The most wall time a round's extra sampling passes may take: a workload mostly off its CPU
/// gathers samples slowly, and its count (shown beside every share) then says how far it got.
pub const MAX_STACK_PASSES_TIME: Duration = Duration::from_secs(2);

/// A pass's runs, and each copy's metric of it.
pub(super) struct PassRuns {
    pub runs: Vec<CopyRun>,
    pub values: Vec<f64>,
}

/// What a probed pass is for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Pass {
    /// A timed sample: its counters, time and stacks all count; with `retake_if_stopped`,
    /// none of them if a runner was stopped while it ran (the caller takes it again).
    Timed { retake_if_stopped: bool },
    /// Stacks alone, one every `period_ns` of CPU time: its counters and time are left out,
    /// its faster sampling's interrupts being in them.
    StacksOnly { period_ns: u64 },
}

impl WorkloadSession<'_, '_> {
    /// The session's probes: a probed pass is only asked for where the run has them.
    fn attached_probes(&mut self) -> &mut Probes {
        self.probes
            .as_deref_mut()
            .expect("a probed pass runs with probes")
    }

    /// Probed passes for the stacks alone, after a round's timed ones (`timed_ops` ops), until
    /// the round holds `sampling.stacks_per_round` of the workload's own samples or has spent
    /// [`MAX_STACK_PASSES_TIME`] on them. Each pass is sized from the samples per op seen so
    /// far, so the probes attach once or twice, not once per short sample.
    pub(super) fn more_stacks(&mut self, timed_ops: u64) -> Result<Wait<()>> {
        let sampling = self.engine.sampling;
        let want = sampling.stacks_per_round;
        let timed_period_ns = self.attached_probes().sample_period_ns();
        let Some(timed_period_ns) = timed_period_ns.filter(|_| want > 0) else {
            return Ok(Wait::Done(()));
        };
        let pass = Pass::StacksOnly {
            period_ns: sampling.stack_pass_period_ns,
        };
        let per_round = self.workload.ops_per_round();
        let copies = self.workload.copies();
        let started = Instant::now();
        let round_timed_samples = self.measured.taken.stacks.round_total();
        let mut stack_ops = 0;
        let mut timed_own = None;
        loop {
            // The round's own samples are counted, not estimated from a fraction: the probes'
            // part differs by workload and by pass (over half of null_call's probed loop is
            // the syscall probes'), and an estimate a little high leaves the round short.
            let taken = &mut self.measured.taken;
            let p = self
                .probes
                .as_deref_mut()
                .expect("stack passes run with probes");
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
            // larger of the timed passes' few scaled by the rates and the op's wall time taken
            // as all CPU (the most a copy's tasks taking turns on a CPU hold), times the own
            // part of the samples so far, so a first pass errs short rather than long.
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
                (scaled / period).max(ns_per_op * copies as f64 / period) * own_part
            };
            // The first pass gets a quarter of the time left: its ops may take longer than
            // the timed ones (its interrupts), and a two-task ping-pong's timed passes may hold
            // no sample at all to size it by (a 2 s pass then held 29,416 of lat_rpc_udp's).
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
            if let Wait::Interrupted = self.probed_pass(pass, ops)? {
                return Ok(Wait::Interrupted);
            }
            stack_ops += ops;
        }
    }

    /// One probed pass of `ops` ops: its stacks into what was taken, with (a timed pass) its
    /// counters' change since the last snapshot; its runs and each copy's metric back (None:
    /// a timed pass set aside because a runner was stopped in it). The timed passes put their
    /// runs into the results; a pass for the stacks alone adds its samples alone, so the clean
    /// and probed samples stay paired and the CPU time per op stays the timed passes'.
    pub(super) fn probed_pass(&mut self, pass: Pass, ops: u64) -> Result<Wait<Option<PassRuns>>> {
        let Wait::Done(runs) = self.attached_pass(pass, ops)? else {
            return Ok(Wait::Interrupted);
        };
        let copies = self.workload.copies();
        let taken = &mut self.measured.taken;
        let p = self
            .probes
            .as_deref_mut()
            .expect("a probed pass runs with probes");
        if pass
            == (Pass::Timed {
                retake_if_stopped: true,
            })
            && runs.iter().any(|r| r.stopped)
        {
            // Nothing of it counts: the next pass starts from here.
            self.last = Some(p.snapshot()?);
            p.take_samples()?;
            return Ok(Wait::Done(None));
        }
        let mut ns_per_op = Vec::with_capacity(runs.len());
        let values = copy_values(self.spec, self.engine.overhead, ops, &runs, &mut ns_per_op);
        taken.last_pass_ns_per_op = ns_per_op.iter().copied().fold(0.0, f64::max);
        let now = p.snapshot()?;
        let samples = p.take_samples()?;
        if let Pass::Timed { .. } = pass {
            for copy in &ns_per_op {
                taken.probed_wall.0 += copy * ops as f64;
                taken.probed_wall.1 += ops;
            }
            let delta = now
                .since(self.last.as_ref().expect("snapshot taken with probes"))
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
        self.last = Some(now);
        taken.stacks.set_own_programs(p.program_tags());
        taken.stacks.add(samples);
        Ok(Wait::Done(Some(PassRuns { runs, values })))
    }

    /// Runs `ops` ops with the probes attached as `pass` needs, at its sampling period (the
    /// timed period back after it).
    fn attached_pass(&mut self, pass: Pass, ops: u64) -> Result<Wait<Vec<CopyRun>>> {
        let p = self
            .probes
            .as_deref_mut()
            .expect("a probed pass runs with probes");
        let timed_period_ns = p.sample_period_ns();
        if let Pass::StacksOnly { period_ns } = pass {
            p.set_sample_period_ns(period_ns);
            self.measured.taken.stack_pass_period_ns = Some(period_ns);
        }
        let attach = match pass {
            Pass::Timed { .. } => Attach::All,
            Pass::StacksOnly { .. } => {
                let children_from_exec = self.workload.children_count_from_exec();
                self.measured.taken.stack_pass_programs = p.stack_pass_programs(children_from_exec);
                Attach::ForStacks { children_from_exec }
            }
        };
        let workload = &mut self.workload;
        let ran = attached_as(Some(&mut *p), &self.pids, attach, || {
            workload.run(ops, true)
        });
        if let Some(period_ns) = timed_period_ns {
            p.set_sample_period_ns(period_ns);
        }
        ran
    }
}

/// Runs `f` with the probes attached, counting the gate calls of the runners `pids`.
pub(super) fn attached<T>(
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
