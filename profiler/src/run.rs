//! `hookprof run`: select workloads, load probes (with the discovery pass for `--hooks
//! default`), sample clean and probed, write results.
use std::{
    io::IsTerminal,
    path::{Path, PathBuf},
    process::ExitCode,
    sync::{atomic::AtomicBool, Arc},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use crate::{
    discovery::{self, Found},
    environment, hook_costs,
    measure::{self, Overhead, SamplingOptions},
    probes::{
        calibration::{self, Calibration},
        lsm_hook_of,
        selection::{self, Selection},
        KernelBtf, ProbePlan, Probes, Target,
    },
    results::{LsmProgramRecord, Results, SCHEMA_VERSION},
    workload_thread::{Credentials, Wait},
    workloads::{self, Suite, WorkloadSpec},
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    Text,
    Json,
    Markdown,
}

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// Which workloads to run when --workloads is not given.
    #[arg(long, value_enum, default_value = "default")]
    pub suite: Suite,
    /// Workloads by name, comma-separated (see --list).
    #[arg(long, value_delimiter = ',')]
    pub workloads: Option<Vec<String>>,
    /// Print the workloads with a one-line description and exit.
    #[arg(long)]
    pub list: bool,
    /// Kernel functions to time with fentry/fexit: `default` (what each workload calls, found
    /// by a short discovery pass over every security_* hook, task path and active LSM
    /// function; each workload attaches only its own), `all` (every security_* hook, up to
    /// 383), or a comma-separated list (each hook with its LSM functions).
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub hooks: Vec<String>,
    /// Probe kinds: `auto` (all), `none` (clean only, no root needed), or a comma-separated list
    /// of syscalls, tasks, hooks.
    #[arg(long, value_delimiter = ',', default_value = "auto")]
    pub probes: Vec<String>,
    /// Samples per pass (clean and probed each).
    #[arg(long, default_value_t = 11, value_parser = clap::value_parser!(u32).range(2..))]
    pub samples: u32,
    /// The least time one sample lasts (lmbench's ENOUGH), in milliseconds.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub min_sample_ms: u64,
    /// Pin the workload to CPU (a second CPU pins the other end of two-process workloads).
    #[arg(long, value_delimiter = ',', num_args = 1..=2)]
    pub pin: Vec<usize>,
    /// Parallel jobs for the `build` workload (default: 4 x CPUs, as kernbench's "optimal").
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Label for this run in reports and comparisons (default: the kernel release).
    #[arg(long)]
    pub label: Option<String>,
    /// Write the results JSON to FILE (atomically).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// What to print on stdout.
    #[arg(long, value_enum, default_value = "text")]
    pub format: OutputFormat,
    /// No progress display.
    #[arg(short, long)]
    pub quiet: bool,
    /// Ground truth: a BPF LSM program on HOOK busy-waits NS per call for the whole run
    /// (e.g. file_open=2000). Repeatable. It returns the verdict it was given.
    #[arg(long, value_name = "HOOK=NS", value_parser = parse_inject)]
    pub inject: Vec<(String, u64)>,
    /// Attach a no-op BPF LSM program on every hook the workloads use (LSM stacking on one
    /// boot). It returns the verdict it was given.
    #[arg(long)]
    pub stack_noop: bool,
    /// Run the workloads as this user (name or uid); the profiler keeps root's privileges for
    /// its probes. Scratch files are owned by that user.
    #[arg(long, value_name = "NAME|UID")]
    pub user: Option<String>,
    #[command(flatten)]
    pub baseline: crate::baseline::SaveArgs,
}

fn parse_inject(s: &str) -> Result<(String, u64), String> {
    let (hook, ns) = s
        .split_once('=')
        .ok_or("expected HOOK=NS, e.g. file_open=2000")?;
    let ns: u64 = ns
        .parse()
        .map_err(|_| format!("'{ns}' is not a whole number of ns"))?;
    if hook.is_empty() {
        return Err("expected HOOK=NS, e.g. file_open=2000".into());
    }
    Ok((
        hook.strip_prefix("security_").unwrap_or(hook).to_string(),
        ns,
    ))
}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    if args.list {
        print_list();
        return Ok(ExitCode::SUCCESS);
    }
    let specs = workloads::select(args.workloads.as_deref(), args.suite)?;
    if let Some(out) = &args.output {
        check_writable(out)?;
    }
    let baseline = args.baseline.prepare()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(&cpu) = args.pin.iter().find(|&&c| c >= cpus) {
        bail!("--pin {cpu}: this machine has CPUs 0-{}", cpus - 1);
    }
    let kinds = probe_kinds(&args.probes)?;
    if kinds.is_none() && (args.stack_noop || !args.inject.is_empty()) {
        bail!("--inject and --stack-noop need probes: they cannot be combined with --probes none");
    }
    let user = args.user.as_deref().map(Credentials::lookup).transpose()?;
    // Set before loading, so an interrupt at any point ends the run the same way.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("install signal handler")?;
    }
    crate::scratch::remove_stale();
    environment::ensure_securityfs();
    let environment = environment::detect();
    let options = SamplingOptions {
        samples: args.samples as usize,
        min_sample: Duration::from_millis(args.min_sample_ms),
        pin: args.pin.clone(),
        jobs: args.jobs,
        user,
    };
    let bar = progress_bar(args.quiet, specs.len());
    let (mut probes, calibration, focus) = match kinds {
        Some(kinds) => {
            let setup = ProbeSetup {
                kinds,
                args,
                specs: &specs,
                options: &options,
                active_lsms: &environment.active_lsms,
                stop: &stop,
                bar: &bar,
            };
            let Wait::Done(loaded) = load_probes(&setup)? else {
                bar.finish_and_clear();
                eprintln!("hookprof: interrupted before measuring");
                return Ok(ExitCode::from(130));
            };
            (Some(loaded.probes), loaded.calibration, loaded.focus)
        }
        None => (None, None, None),
    };

    // The kernel's run-time statistics cross-check the ground-truth programs' cost; they are
    // only switched on when such programs are attached (they cost every program a little).
    let _run_stats = (args.stack_noop || !args.inject.is_empty())
        .then(|| aya::sys::enable_stats(aya::sys::Stats::RunTime).ok());
    let overhead = Overhead::measure();
    let mut results = Results {
        schema_version: SCHEMA_VERSION,
        label: args
            .label
            .clone()
            .unwrap_or_else(|| environment.kernel_release.clone()),
        complete: true,
        source: "hookprof".into(),
        environment,
        options: recorded_options(args, overhead),
        probes: probes.as_ref().map(Probes::report).unwrap_or_default(),
        lsm_programs: Vec::new(),
        calibration,
        workloads: Vec::new(),
    };

    for (i, &spec) in specs.iter().enumerate() {
        bar.set_message(format!("{} ({}/{})", spec.name, i + 1, specs.len()));
        if let (Some(p), Some(focus)) = (probes.as_mut(), &focus) {
            p.focus(Some(focus.functions_of(spec.name)));
        }
        let progress = |done: usize, total: usize| {
            bar.set_length((specs.len() * total) as u64);
            bar.set_position((i * total + done) as u64);
        };
        let outcome = measure::measure(spec, &options, overhead, probes.as_mut(), &stop, &progress)
            .with_context(|| format!("workload {}", spec.name))?;
        let interrupted = outcome.interrupted;
        let mut result = outcome.result;
        // A noisy calibration can come out negative; a probe never costs less than nothing.
        if let Some(pair) = results.calibration.as_ref().and_then(|c| c.timed_pair_ns) {
            let pair = pair.max(0.0);
            hook_costs::correct_nesting(&mut result.attribution, pair);
        }
        if !result.clean.is_empty() {
            results.workloads.push(result);
        }
        if interrupted {
            results.complete = false;
            break;
        }
    }
    bar.finish_and_clear();
    if let Some(p) = &probes {
        results.lsm_programs = lsm_program_records(p);
    }
    drop(probes); // unloads every program before anything else is printed

    if let Some(out) = &args.output {
        crate::results::write_atomically(out, results.to_json().as_bytes())
            .with_context(|| format!("write {}", out.display()))?;
    }
    print_results(&results, args.format);
    if let Some(baseline) = baseline.filter(|_| results.complete && !results.workloads.is_empty()) {
        let path = baseline.save(&results)?;
        eprintln!("hookprof: baseline saved in {}", path.display());
    }
    if !results.complete {
        eprintln!("hookprof: interrupted; results hold the samples taken so far");
        return Ok(ExitCode::from(130));
    }
    if results.workloads.is_empty() {
        bail!("nothing could be measured");
    }
    Ok(ExitCode::SUCCESS)
}

fn lsm_program_records(probes: &Probes) -> Vec<LsmProgramRecord> {
    probes
        .lsm_programs()
        .iter()
        .map(|l| {
            let (runs, mean_run_ns) = probes.lsm_run_stats(l).unwrap_or((0, 0.0));
            LsmProgramRecord {
                hook: l.hook.clone(),
                busy_ns: l.busy_ns,
                runs,
                mean_run_ns,
            }
        })
        .collect()
}

fn print_results(results: &Results, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!("{}", results.to_json()),
        OutputFormat::Text => print!("{}", crate::report::text::render(results)),
        OutputFormat::Markdown => print!(
            "{}",
            crate::report::markdown::render(std::slice::from_ref(results))
        ),
    }
}

fn print_list() {
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["workload", "family", "unit", "suite", "what it measures"]);
    for spec in workloads::registry() {
        table.add_row([
            spec.name,
            spec.family.key(),
            spec.metric.unit().symbol(),
            &format!("{:?}", spec.suite).to_lowercase(),
            spec.description,
        ]);
    }
    println!("{table}");
}

/// Which probe kinds `--probes` asks for.
#[derive(Debug, Clone, Copy)]
struct Kinds {
    tasks: bool,
    hooks: bool,
}

/// `--probes` into kinds; None means clean only.
fn probe_kinds(kinds: &[String]) -> Result<Option<Kinds>> {
    let all = ["syscalls", "tasks", "hooks"];
    let kinds: Vec<&str> = match kinds
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["none"] => return Ok(None),
        ["auto"] => all.to_vec(),
        list => list.to_vec(),
    };
    if let Some(bad) = kinds.iter().find(|k| !all.contains(k)) {
        bail!(
            "unknown probe kind '{bad}'; valid: auto, none, {}",
            all.join(", ")
        );
    }
    Ok(Some(Kinds {
        tasks: kinds.contains(&"tasks"),
        hooks: kinds.contains(&"hooks"),
    }))
}

/// What loading the probes needs from the run.
struct ProbeSetup<'a> {
    kinds: Kinds,
    args: &'a RunArgs,
    specs: &'a [&'static WorkloadSpec],
    options: &'a SamplingOptions,
    active_lsms: &'a [String],
    stop: &'a AtomicBool,
    bar: &'a ProgressBar,
}

struct LoadedProbes {
    probes: Probes,
    calibration: Option<Calibration>,
    /// Which timed functions each workload attaches (None: all of them, for every workload).
    focus: Option<Found>,
}

/// Loads the probes and the ground-truth LSM programs, chooses the functions to time (by the
/// discovery pass for `--hooks default`), and calibrates their cost when fentry/fexit pairs
/// could be loaded.
fn load_probes(setup: &ProbeSetup) -> Result<Wait<LoadedProbes>> {
    let args = setup.args;
    require_bpf_privileges()?;
    let kernel = KernelBtf::load()?;
    let selection = if setup.kinds.hooks {
        selection::select(&kernel, &args.hooks, setup.active_lsms)?
    } else {
        Selection::Listed(Vec::new())
    };
    // Bad input fails before anything is loaded.
    if let Some((hook, _)) = args
        .inject
        .iter()
        .find(|(hook, _)| !kernel.has_function(&format!("bpf_lsm_{hook}")))
    {
        bail!("--inject {hook}: not an LSM hook on this kernel (no bpf_lsm_{hook} in its BTF); see `hookprof hooks`");
    }
    let active_lsms = setup.active_lsms;
    if (args.stack_noop || !args.inject.is_empty()) && !active_lsms.iter().any(|l| l == "bpf") {
        bail!(
            "--inject and --stack-noop need the BPF LSM, which is not active (LSMs: {}); add \
             bpf to the kernel's lsm= boot parameter, e.g. lsm={},bpf",
            active_lsms.join(","),
            active_lsms.join(",")
        );
    }
    // The syscall programs carry the scope gate: whatever else is probed needs them.
    let plan = ProbePlan {
        syscalls: true,
        tasks: setup.kinds.tasks,
        functions: Vec::new(),
        entries_only: false,
    };
    let mut probes = Probes::load(&plan, &kernel)?;
    if !probes.scoping_works() {
        bail!(
            "the kernel refused the raw_syscalls tracepoints, which hookprof needs to scope \
             every probe to the workload; use --probes none to measure without probes"
        );
    }
    for (hook, ns) in &args.inject {
        probes.attach_lsm(&kernel, hook, *ns)?;
    }
    let (functions, focus) = match selection {
        Selection::Listed(functions) => {
            if args.stack_noop {
                stack_noop(&mut probes, &kernel, &functions, &args.inject);
            }
            (functions, None)
        }
        Selection::Discover => {
            let Wait::Done(found) = discover_functions(setup, &kernel, &mut probes)? else {
                return Ok(Wait::Interrupted);
            };
            (found.union(), Some(found))
        }
    };
    probes.load_functions(&functions, false, &kernel)?;
    for line in probes.report().refusal_lines() {
        eprintln!("hookprof: {line}");
    }
    let calibration = if probes.hook_functions().iter().any(Option::is_some) {
        Some(calibration::calibrate(&mut probes, &kernel).context("calibrate the probes")?)
    } else {
        None
    };
    Ok(Wait::Done(LoadedProbes {
        probes,
        calibration,
        focus,
    }))
}

/// The discovery pass in two rounds: the hooks and task paths each workload calls, then the
/// active LSMs' functions under those hooks. `--stack-noop`'s programs go on between the
/// rounds, so the second round finds the BPF LSM functions they make the kernel call.
fn discover_functions(
    setup: &ProbeSetup,
    kernel: &KernelBtf,
    probes: &mut Probes,
) -> Result<Wait<Found>> {
    let progress = |name: &str| setup.bar.set_message(format!("discovering hooks: {name}"));
    let discover = |candidates: &[Target]| {
        discovery::discover(
            kernel,
            candidates,
            setup.kinds.tasks,
            setup.specs,
            setup.options,
            setup.stop,
            &progress,
        )
    };
    let Wait::Done(mut found) = discover(&selection::hook_candidates(kernel))? else {
        return Ok(Wait::Interrupted);
    };
    let hooks = found.union();
    if setup.args.stack_noop {
        stack_noop(probes, kernel, &hooks, &setup.args.inject);
    }
    let Wait::Done(lsms) = discover(&selection::lsm_candidates(
        kernel,
        &hooks,
        setup.active_lsms,
    ))?
    else {
        return Ok(Wait::Interrupted);
    };
    found.merge(lsms);
    probes.add_refusals(std::mem::take(&mut found.refused));
    Ok(Wait::Done(found))
}

/// `--stack-noop`: a no-op BPF LSM program on the LSM hook behind each of `functions`.
fn stack_noop(
    probes: &mut Probes,
    kernel: &KernelBtf,
    functions: &[Target],
    inject: &[(String, u64)],
) {
    // Helpers such as security_file_free call no LSM hook of their own: nothing to stack.
    let hooks = functions
        .iter()
        .filter_map(|t| lsm_hook_of(kernel, &t.function));
    for hook in hooks {
        if inject.iter().all(|(h, _)| *h != hook) {
            // Some hooks take no BPF LSM program (void hooks the verifier rejects): the
            // rest still stack, and the refusal is said, not hidden.
            if let Err(e) = probes.attach_lsm(kernel, &hook, 0) {
                eprintln!("hookprof: --stack-noop: no program on {hook}: {e:#}");
            }
        }
    }
}

pub(crate) fn require_bpf_privileges() -> Result<()> {
    // CAP_SYS_ADMIN covers loading and attaching everything hookprof uses; root has it.
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    const CAP_PERFMON: u32 = 38;
    let effective = effective_capabilities();
    let has = |cap: u32| effective & (1u64 << cap) != 0;
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!(
        "loading eBPF probes needs root (CAP_SYS_ADMIN, or CAP_BPF and CAP_PERFMON; this process \
         has {}); run with sudo, or use --probes none for clean timings only",
        if has(CAP_BPF) {
            "CAP_BPF only"
        } else {
            "neither"
        }
    )
}

/// The CapEff mask from /proc/self/status.
fn effective_capabilities() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .unwrap_or(0)
}

/// Fails before the run if the results could not be written afterwards.
fn check_writable(path: &Path) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    crate::scratch::remove_stale_results(dir);
    crate::scratch::results_temp_file(dir)
        .map(drop)
        .with_context(|| format!("-o {}: cannot write into {}", path.display(), dir.display()))
}

fn progress_bar(quiet: bool, workloads: usize) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(workloads as u64);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg:30} [{bar:30}] {pos}/{len} samples, {elapsed} elapsed, ETA {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar
}

fn recorded_options(
    args: &RunArgs,
    overhead: Overhead,
) -> std::collections::BTreeMap<String, serde_json::Value> {
    use serde_json::json;
    [
        ("suite", json!(format!("{:?}", args.suite).to_lowercase())),
        ("workloads", json!(args.workloads)),
        ("hooks", json!(args.hooks)),
        ("probes", json!(args.probes)),
        ("samples", json!(args.samples)),
        ("min_sample_ms", json!(args.min_sample_ms)),
        ("pin", json!(args.pin)),
        ("jobs", json!(args.jobs)),
        ("user", json!(args.user)),
        ("inject", json!(args.inject)),
        ("stack_noop", json!(args.stack_noop)),
        ("clock_overhead_ns", json!(overhead.clock.as_nanos() as u64)),
        ("loop_overhead_ns", json!(overhead.loop_ns)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
