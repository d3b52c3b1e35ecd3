//! `hookprof run`: select workloads, load probes, sample clean and probed, write results.
//! Also `hookprof hooks` (what can be probed here) and `hookprof calibrate`.
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
    environment,
    measure::{self, Overhead, SamplingOptions},
    probes::{KernelBtf, ProbePlan, Probes, DEFAULT_HOOKS},
    results::{Refusal, Results, SCHEMA_VERSION},
    workloads::{self, Suite},
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
    /// Kernel functions to time with fentry/fexit: `default` or a comma-separated list.
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
}

#[derive(clap::Args, Debug)]
pub struct HooksArgs {
    /// Kernel functions to try: `default` or a comma-separated list.
    #[arg(long, value_delimiter = ',', default_value = "default")]
    pub hooks: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {}

pub fn run(args: &RunArgs) -> Result<ExitCode> {
    if args.list {
        print_list();
        return Ok(ExitCode::SUCCESS);
    }
    let specs = workloads::select(args.workloads.as_deref(), args.suite)?;
    if let Some(out) = &args.output {
        check_writable(out)?;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(&cpu) = args.pin.iter().find(|&&c| c >= cpus) {
        bail!("--pin {cpu}: this machine has CPUs 0-{}", cpus - 1);
    }
    let plan = probe_plan(&args.probes, &args.hooks)?;
    let mut probes = match &plan {
        Some(plan) => Some(load_probes(plan)?),
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop)).context("install signal handler")?;
    }
    environment::ensure_securityfs();
    let environment = environment::detect();
    let options = SamplingOptions {
        samples: args.samples as usize,
        min_sample: Duration::from_millis(args.min_sample_ms),
        pin: args.pin.clone(),
        jobs: args.jobs,
    };
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
        workloads: Vec::new(),
    };

    let bar = progress_bar(args.quiet, specs.len());
    for (i, spec) in specs.iter().enumerate() {
        bar.set_message(format!("{} ({}/{})", spec.name, i + 1, specs.len()));
        let progress = |done: usize, total: usize| {
            bar.set_length((specs.len() * total) as u64);
            bar.set_position((i * total + done) as u64);
        };
        let outcome = measure::measure(spec, &options, overhead, probes.as_mut(), &stop, &progress)
            .with_context(|| format!("workload {}", spec.name))?;
        let interrupted = outcome.interrupted;
        if !outcome.result.clean.is_empty() {
            results.workloads.push(outcome.result);
        }
        if interrupted {
            results.complete = false;
            break;
        }
    }
    bar.finish_and_clear();
    drop(probes); // unloads every program before anything else is printed

    if let Some(out) = &args.output {
        crate::results::write_atomically(out, results.to_json().as_bytes())
            .with_context(|| format!("write {}", out.display()))?;
    }
    print_results(&results, args.format);
    if !results.complete {
        eprintln!("hookprof: interrupted; results hold the samples taken so far");
        return Ok(ExitCode::from(130));
    }
    if results.workloads.is_empty() {
        bail!("nothing could be measured");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_results(results: &Results, format: OutputFormat) {
    match format {
        OutputFormat::Json => println!("{}", results.to_json()),
        OutputFormat::Text | OutputFormat::Markdown => println!("{}", results.to_json()),
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

/// `--probes` and `--hooks` into a plan; None means clean only.
fn probe_plan(kinds: &[String], hooks: &[String]) -> Result<Option<ProbePlan>> {
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
    let functions = if kinds.contains(&"hooks") {
        hook_list(hooks)
    } else {
        Vec::new()
    };
    // The syscall programs carry the scope gate: whatever else is probed needs them.
    Ok(Some(ProbePlan {
        syscalls: true,
        tasks: kinds.contains(&"tasks"),
        functions,
    }))
}

fn hook_list(hooks: &[String]) -> Vec<String> {
    if hooks.iter().any(|h| h == "default") {
        DEFAULT_HOOKS.iter().map(|s| s.to_string()).collect()
    } else {
        hooks.to_vec()
    }
}

fn load_probes(plan: &ProbePlan) -> Result<Probes> {
    require_bpf_privileges()?;
    let kernel = KernelBtf::load()?;
    if let Some(missing) = plan.functions.iter().find(|f| !kernel.has_function(f)) {
        bail!(
            "hook '{missing}' does not exist on this kernel (not in its BTF); see `hookprof hooks`"
        );
    }
    let probes = Probes::load(plan, &kernel)?;
    for line in refusal_lines(&probes.report().refused) {
        eprintln!("hookprof: {line}");
    }
    if !probes.scoping_works() {
        bail!(
            "the kernel refused the raw_syscalls tracepoints, which hookprof needs to scope \
               every probe to the workload; use --probes none to measure without probes"
        );
    }
    Ok(probes)
}

/// One line per distinct refusal reason, naming what was refused.
pub fn refusal_lines(refused: &[Refusal]) -> Vec<String> {
    let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
    for r in refused {
        match groups
            .iter_mut()
            .find(|(k, why, _)| *k == r.kind && *why == r.reason)
        {
            Some((_, _, targets)) => targets.push(&r.target),
            None => groups.push((r.kind.clone(), r.reason.clone(), vec![&r.target])),
        }
    }
    groups
        .into_iter()
        .map(|(kind, why, targets)| format!("{kind} refused on {}: {why}", targets.join(", ")))
        .collect()
}

fn require_bpf_privileges() -> Result<()> {
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
    tempfile::NamedTempFile::new_in(dir)
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
        ("clock_overhead_ns", json!(overhead.clock.as_nanos() as u64)),
        ("loop_overhead_ns", json!(overhead.loop_ns)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

pub fn hooks(args: &HooksArgs) -> Result<ExitCode> {
    require_bpf_privileges()?;
    let kernel = KernelBtf::load()?;
    let plan = ProbePlan {
        syscalls: true,
        tasks: true,
        functions: hook_list(&args.hooks),
    };
    let probes = Probes::load(&plan, &kernel)?;
    let report = probes.report();
    drop(probes);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = comfy_table::Table::new();
    table
        .load_preset(comfy_table::presets::NOTHING)
        .set_header(["probe", "target", "status"]);
    for a in &report.attached {
        table.add_row([a.kind.as_str(), &a.target, "available"]);
    }
    for r in &report.refused {
        table.add_row([
            r.kind.as_str(),
            &r.target,
            &format!("refused: {}", r.reason),
        ]);
    }
    println!("{table}");
    Ok(ExitCode::SUCCESS)
}

pub fn calibrate(_args: &CalibrateArgs) -> Result<ExitCode> {
    bail!("calibrate is not built yet")
}
