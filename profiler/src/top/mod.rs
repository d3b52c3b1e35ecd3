//! `hookprof top`: what the security stack costs the machine now. The probes `run` uses, loaded
//! with a scope (the whole system, a cgroup, a process, a command name) instead of the runners'
//! gate, add each syscall's, hook's, LSM function's and task path's time per group (cgroup or
//! command) in a BPF hash map; every interval user space reads it and prints the difference.
//! Stages: scope and output checked -> probes loaded -> their own cost calibrated -> probes
//! attached -> intervals until a count, Ctrl-C or SIGTERM -> probes detached -> the recording
//! written.
mod aggregate;
mod cells;
mod endpoint;
mod interval;
mod metrics;
mod probe_cost;
mod sampled;
mod scope;
mod tui;
mod view;

use std::{
    io::{IsTerminal, Write},
    net::SocketAddr,
    path::PathBuf,
    process::ExitCode,
    time::{Duration, SystemTime},
};

use anyhow::{bail, Context, Result};

use self::{
    endpoint::Endpoint,
    interval::{Interval, Reading},
    metrics::Totals,
    probe_cost::{Loop, ProbeCost},
    scope::GroupNames,
    view::View,
};
use crate::{
    environment,
    output::Format,
    probes::{
        catalog::Target,
        selection::{self, Selection},
        AyaKernel, GroupBy, KernelBtf, ProbePlan, Probes, USER_SLOTS,
    },
    results::destination::Destination,
    run::probe_setup::require_bpf_privileges,
    runner::{protocol::UNASSIGNED_SYSCALL, Supervisor, Wait},
};

#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("scope").multiple(false), after_help = COLUMNS_HELP)]
pub struct TopArgs {
    /// Count only the tasks of this cgroup (v2) and its descendants: a path from the
    /// hierarchy's root (`/system.slice`) or under its mount.
    #[arg(long, value_name = "PATH", group = "scope")]
    pub cgroup: Option<PathBuf>,
    /// Count only this process's threads and the processes it forks from now on.
    #[arg(long, value_name = "PID", group = "scope")]
    pub pid: Option<u32>,
    /// Count only tasks with this command name (as `ps -o comm` shows it).
    #[arg(long, value_name = "NAME", group = "scope")]
    pub comm: Option<String>,
    /// Seconds per interval.
    #[arg(long, default_value = "1", value_name = "S")]
    pub interval: f64,
    /// Stop after N intervals (default: until Ctrl-C, SIGTERM, or q in the terminal view).
    #[arg(short = 'n', long, value_name = "N")]
    pub count: Option<u64>,
    /// Functions to time: `default` (every security_* hook with the active LSMs' functions
    /// under it, and the task paths, as many as there are probe slots), `none` (syscalls and
    /// task events only), `all` (every security_* hook), or a comma-separated list.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub hooks: Vec<String>,
    /// Group the tallies by cgroup or by command name.
    #[arg(long, value_enum, default_value = "cgroup")]
    pub by: GroupBy,
    /// How to print each interval (default: a terminal view on a terminal, JSON lines
    /// otherwise); text prints a table per interval.
    #[arg(long, value_parser = Format::parser(&[Format::Text, Format::Json]))]
    pub format: Option<Format>,
    /// Rows per interval in the terminal view and the text tables.
    #[arg(long, default_value = "20", value_name = "N")]
    pub rows: usize,
    /// Also record every interval, as JSON lines, in FILE (written when top ends).
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Kernel stack samples per second of a task's CPU time, on every CPU (each hook's and LSM
    /// function's share of the scope's CPU, where the kernel refuses fentry too); 0 samples
    /// nothing.
    #[arg(long, value_name = "HZ", default_value_t = DEFAULT_SAMPLE_HZ,
          value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub sample_hz: u64,
    /// Serve the totals as OpenMetrics at http://ADDR:PORT/metrics for Prometheus.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
}

/// What each column and counter of the tables is (`--help`; the manual's top page says the
/// same).
const COLUMNS_HELP: &str = "\
Columns (text tables and the terminal view; rows ranked by CPU %):
  GROUP      the cgroup (--by cgroup; a long path keeps its end) or the command name (--by comm)
  PATH       the syscall, security_* hook, LSM function or task path
  CALLS/S    calls into the path a second
  CPU/CALL   time on a CPU a call, less the probes' own cost (the line above says how much)
  CPU %      that time over the interval, of one CPU: 100 is one CPU busy in the path the
             whole interval (only a group's tasks on several CPUs at once pass it)
  WAIT/CALL  time a syscall's task spent switched out inside it (blocked, or waiting for a
             CPU), a call: wait4, futex and poll wait here, not in CPU %; - for a function
  UNDER      the hook an LSM function runs under (its LSM), or the task path a step is in
Counters on the line above each table (task events always, the others when they happened):
  fork, exec, exit   task events of the tasks in scope
  untracked_tasks    tasks the kernel had no timing storage for: counted, never timed
  unmatched_exits    a timed function's exit that matched no open entry: counted, not timed
  stale_exits        calls entered before top attached (or last re-attached) that returned
                     after: their time began before anything watched, so it is not timed
  stack_full         timed functions entered with the task's stack of open entries full
  aggregate_full     (group, path) pairs the map had no room for (16384 at once)
Sampled table (--sample-hz): SAMPLED PATH, CPU % (of one CPU, inclusive), SHARE % of the
scope's kernel samples with its 95% interval, SELF % (innermost frame), UNDER.
JSON lines (--format json, -o) carry every figure, raw and corrected: see the manual.";

/// How `top` ended.
enum Ending {
    /// The intervals asked for, or q in the terminal view.
    Done,
    /// Ctrl-C or SIGTERM.
    Interrupted,
}

pub fn top(args: &TopArgs) -> Result<ExitCode> {
    // Bad input fails before anything is loaded.
    let chosen = scope::choose(args.cgroup.as_deref(), args.pid, args.comm.as_deref())?;
    check_numbers(args)?;
    let view = View::choose(args.format, std::io::stdout().is_terminal(), args.rows);
    let destination = args
        .output
        .as_deref()
        .map(Destination::prepare)
        .transpose()?;
    if destination.as_ref().is_some_and(Destination::is_stdout) {
        bail!("-o names stdout, where top already prints: name a file");
    }
    require_bpf_privileges()?;
    environment::ensure_securityfs();
    let active_lsms = environment::active_lsms();
    // aya's BTF first (its parse is the set-up's peak), held over the set-up's loads, then
    // let go with the last of them.
    let aya = AyaKernel::hold()?;
    let kernel = KernelBtf::load_in_child()?;
    let mut probes = load_probes(args, &kernel, &chosen, &active_lsms)?;
    let Wait::Done(cost) = calibrate(&mut probes, &kernel)? else {
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    };
    drop(aya);
    probes.release_kernel_btf();
    let mut totals = Totals::new(args.by, cost);
    let endpoint = match args.listen {
        Some(addr) => Some(Endpoint::listen(addr, totals.render()?)?),
        None => None,
    };
    // Symbols are read before counting starts: read in the first interval, under load they
    // took seconds and pushed every interval after it back.
    let sampler = probes
        .sample_period_ns()
        .map(sampled::Sampler::start)
        .transpose()?;
    probes.attach().context("attach the probes")?;
    // The first reading is the baseline: what is counted from the line below on is shown.
    let baseline = reading(&probes)?;
    probes.take_samples()?;
    eprintln!(
        "hookprof: top: counting {} every {} s{}",
        crate::text::escaped(&chosen.label),
        args.interval,
        endpoint.as_ref().map_or_else(String::new, |e| format!(
            ", metrics at http://{}/metrics",
            e.address()
        ))
    );
    // Spooled to an unnamed temp file as it is made: kept in memory, every interval (~8 KB
    // of JSON) stayed until top ended, and a long top grew without bound.
    let mut recording = match &destination {
        Some(_) => Some(std::io::BufWriter::new(
            tempfile::tempfile().context("a temp file for the -o recording")?,
        )),
        None => None,
    };
    let watcher = Watcher {
        args,
        label: &chosen.label,
        cost,
        names: GroupNames::new(args.by),
    };
    let watched = watcher.watch(
        &mut probes,
        Counting { baseline, sampler },
        view,
        |interval| {
            totals.add(&interval.rows);
            if let Some(sampled) = &interval.sampled {
                totals.add_sampled(sampled);
            }
            if let Some(e) = &endpoint {
                e.publish(totals.render()?);
            }
            if let Some(recording) = &mut recording {
                serde_json::to_writer(&mut *recording, interval)?;
                recording.write_all(b"\n")?;
            }
            Ok(())
        },
    );
    // Everything is detached before anything else can fail.
    probes.detach();
    drop(probes);
    drop(endpoint);
    if let (Some(d), Some(recording)) = (destination, recording) {
        let mut spool = recording
            .into_inner()
            .map_err(|e| e.into_error())
            .context("spool the -o recording")?;
        d.write_spooled(&mut spool)?;
    }
    match watched? {
        Ending::Done => Ok(ExitCode::SUCCESS),
        Ending::Interrupted => Ok(ExitCode::from(crate::exit::INTERRUPTED)),
    }
}

/// The numbers top is given: an interval it can keep, at least one of them, a sampling rate
/// its stacks can use.
fn check_numbers(args: &TopArgs) -> Result<()> {
    if !(args.interval.is_finite() && (0.01..=3600.0).contains(&args.interval)) {
        bail!(
            "--interval {}: give seconds from 0.01 to 3600",
            args.interval
        );
    }
    if args.count == Some(0) {
        bail!("--count 0: give at least one interval");
    }
    if (1..10).contains(&args.sample_hz) {
        bail!(
            "--sample-hz {}: give 10 to 100000 samples a second, or 0 for none",
            args.sample_hz
        );
    }
    Ok(())
}

/// Loads top's probes, scoped to `chosen`: the syscall and task programs, the hooks asked
/// for, the sampler, and sched_switch; what the kernel refused is said.
fn load_probes(
    args: &TopArgs,
    kernel: &KernelBtf,
    chosen: &scope::ChosenScope,
    active_lsms: &[String],
) -> Result<Probes> {
    let functions = functions(kernel, &args.hooks, active_lsms)?;
    let plan = ProbePlan {
        syscalls: true,
        tasks: true,
        // Where the kernel refuses every trampoline, the functions are recorded refused and the
        // probes carry no hook slots.
        trampolines_refused: match functions.is_empty() {
            true => None,
            false => Probes::kernel_refuses_trampolines(kernel)?,
        },
        functions,
        stacks: (args.sample_hz > 0).then(|| 1_000_000_000 / args.sample_hz),
        // A syscall's time switched out is its wait, shown apart from its time on a CPU.
        switches: true,
        ..ProbePlan::default()
    };
    let probes = Probes::load_scoped(&plan, kernel, &chosen.scope, args.by)?;
    if !probes.scoping_works() {
        bail!("the kernel refused the raw_syscalls tracepoints, which top needs to count anything");
    }
    say_refusals(&probes, plan.functions.len());
    if plan.stacks.is_some() && probes.sample_period_ns().is_none() {
        eprintln!(
            "hookprof: top: the kernel refused the cpu-clock sampling program: no sampled stacks"
        );
    }
    Ok(probes)
}

/// top's sampling rate: a live view wants a profile within one interval, so it samples at
/// 4x `run`'s timed rate (each sample a ~20 us interrupt here: ~2% of a busy CPU).
const DEFAULT_SAMPLE_HZ: u64 = 999;

/// Generous: the calibration's loops last well under a second in all, even under emulation.
const CALIBRATION_TIMEOUT: Duration = Duration::from_secs(600);

/// The probes' own cost, measured in a runner of its own before anything is counted; None,
/// said in one line, where it cannot be measured (the figures are then raw).
fn calibrate(probes: &mut Probes, kernel: &KernelBtf) -> Result<Wait<Option<ProbeCost>>> {
    let mut supervisor =
        Supervisor::new(None, CALIBRATION_TIMEOUT, indicatif::ProgressBar::hidden())?;
    probes.set_gate_owners(&[supervisor.runner_pid()?])?;
    supervisor.start_clock();
    let measured = probe_cost::measure(
        probes,
        kernel,
        UNASSIGNED_SYSCALL as u32,
        &mut |run, calls, tracked| match run {
            Loop::Getppid => supervisor.getppid_loop(calls, tracked),
            Loop::Unassigned => supervisor.unassigned_syscall_loop(calls, tracked),
        },
    );
    supervisor.stop_runners();
    probes.set_gate_owners(&[])?;
    if supervisor.interrupted() {
        return Ok(Wait::Interrupted);
    }
    Ok(Wait::Done(match measured {
        Ok(cost) => Some(cost),
        Err(e) => {
            eprintln!(
                "hookprof: top: could not measure the probes' own cost ({e:#}): figures are raw"
            );
            None
        }
    }))
}

/// `--hooks` for top: `default` fills the probe slots with the hooks, the active LSMs'
/// functions under them and the task paths; `none` times no function.
fn functions(kernel: &KernelBtf, hooks: &[String], active_lsms: &[String]) -> Result<Vec<Target>> {
    match hooks {
        [one] if one == "none" => Ok(Vec::new()),
        [one] if one == "default" => {
            let mut all = selection::catalog(kernel, active_lsms);
            // The BPF LSM's functions are empty stubs unless a BPF LSM program is attached.
            all.retain(|t| t.lsm.as_deref() != Some("bpf"));
            all.truncate(USER_SLOTS);
            Ok(all)
        }
        names => match selection::from_hooks_option(kernel, names, active_lsms)? {
            Selection::Listed(functions) => Ok(functions),
            Selection::Discover => unreachable!("default is handled above"),
        },
    }
}

/// One line where the kernel refused every timed function (fentry refused, as where dynamic
/// ftrace is locked); the refusals grouped by reason where it refused some.
fn say_refusals(probes: &Probes, asked: usize) {
    if asked == 0 {
        return;
    }
    let timed = probes.hook_functions().iter().flatten().count();
    let report = probes.report();
    if timed == 0 {
        let why = report
            .refused
            .iter()
            .find(|r| r.kind == crate::results::ProbeKind::FEntry)
            .map_or("no reason given", |r| r.reason.as_str());
        eprintln!(
            "hookprof: top: the kernel refused fentry/fexit ({why}): timing syscalls and task \
             events only"
        );
        return;
    }
    for line in crate::probes::refusal::lines(&report.refused) {
        eprintln!("hookprof: top: {line}");
    }
}

/// The aggregate and the task events now.
fn reading(probes: &Probes) -> Result<Reading> {
    let at_ns = crate::machine::clock::monotonic_ns();
    let at_unix_s = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Ok(Reading {
        at_ns,
        at_unix_s,
        tallies: aggregate::aggregate(probes)?.into_iter().collect(),
        events: probes.snapshot()?.events,
    })
}

/// What the intervals are counted from: the baseline reading, and the sampler with its
/// symbols read.
struct Counting {
    baseline: Reading,
    sampler: Option<sampled::Sampler>,
}

/// What each interval is shown with: the options, the scope's label, the probes' own cost and
/// the groups' names.
struct Watcher<'a> {
    args: &'a TopArgs,
    label: &'a str,
    cost: Option<ProbeCost>,
    names: GroupNames,
}

/// When interval `n` ends: `n` intervals after the baseline reading (`start`), on the
/// monotonic clock. A late wake-up or a slow interval shortens the next one instead of
/// pushing every later one back, so N intervals end N intervals after the start.
fn deadline(start: tokio::time::Instant, every_s: f64, n: u64) -> tokio::time::Instant {
    start + Duration::from_secs_f64(every_s * n as f64)
}

impl Watcher<'_> {
    /// The interval loop: from the baseline, a reading at each deadline and an interval
    /// printed per pair of readings, until the count, Ctrl-C, SIGTERM or the view's quit key.
    fn watch(
        &self,
        probes: &mut Probes,
        counting: Counting,
        mut view: View,
        mut each: impl FnMut(&Interval) -> Result<()>,
    ) -> Result<Ending> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("start the event loop")?;
        rt.block_on(async {
            use tokio::signal::unix::{signal, SignalKind};
            let mut interrupt =
                signal(SignalKind::interrupt()).context("install signal handler")?;
            let mut terminate =
                signal(SignalKind::terminate()).context("install signal handler")?;
            // A dropped SSH session ends top as Ctrl-C does: the recording is finished and
            // kept.
            let mut hangup = signal(SignalKind::hangup()).context("install signal handler")?;
            let mut quit = view.start()?;
            let Counting {
                baseline: mut earlier,
                mut sampler,
            } = counting;
            let since_baseline =
                crate::machine::clock::monotonic_ns().saturating_sub(earlier.at_ns);
            let start = tokio::time::Instant::now() - Duration::from_nanos(since_baseline);
            for n in 1.. {
                // An interrupt ends the loop after one last, shorter interval: what the probes
                // counted since the last reading is printed and recorded too.
                let ending = tokio::select! {
                    _ = tokio::time::sleep_until(deadline(start, self.args.interval, n)) => None,
                    _ = interrupt.recv() => Some(Ending::Interrupted),
                    _ = terminate.recv() => Some(Ending::Interrupted),
                    _ = hangup.recv() => Some(Ending::Interrupted),
                    _ = quit.recv() => Some(Ending::Done),
                };
                let mut now = reading(probes)?;
                let interval = self.interval(n, &earlier, &now, probes, sampler.as_mut())?;
                view.show(&interval)?;
                each(&interval)?;
                if let Some(ending) = ending {
                    return Ok(ending);
                }
                // Keys idle for a whole interval are dropped from the map (it keeps room for
                // new groups) and from the reading (a key the programs re-create starts from
                // zero).
                let idle = interval::idle(&earlier, &now);
                aggregate::forget(probes, &idle)?;
                for key in idle {
                    now.tallies.remove(&key);
                }
                earlier = now;
                if self.args.count.is_some_and(|c| n >= c) {
                    break;
                }
            }
            Ok(Ending::Done)
        })
    }

    /// Interval `n`, from the readings that open and close it and the samples since the last.
    fn interval(
        &self,
        n: u64,
        earlier: &Reading,
        now: &Reading,
        probes: &mut Probes,
        sampler: Option<&mut sampled::Sampler>,
    ) -> Result<Interval> {
        let seconds = now.at_ns.saturating_sub(earlier.at_ns) as f64 / 1e9;
        let sampled = match sampler {
            Some(s) => Some(s.interval(probes.take_samples()?, seconds)?),
            None => None,
        };
        Ok(Interval {
            interval: n,
            end_unix_s: now.at_unix_s,
            seconds,
            scope: self.label.to_string(),
            by: self.args.by,
            probe_cost: self.cost,
            rows: interval::rows(
                earlier,
                now,
                probes.hook_functions(),
                &self.names,
                self.cost.as_ref(),
            ),
            events: interval::events(earlier, now),
            sampled,
        })
    }
}
