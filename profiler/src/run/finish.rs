//! The run's results, begun before the rounds (label, environment, options, probes) and
//! finished after them: written to `-o`, printed, kept as a baseline when complete, and
//! turned into the exit code (130 interrupted, 2 a workload failed or nothing measured).
use std::{collections::BTreeMap, process::ExitCode};

use anyhow::{bail, Result};
use serde_json::json;

use super::{measure::Overhead, rounds::Rounds, CommonMeasureArgs, Plan, SessionArgs};
use crate::{
    baseline, memory,
    output::{self, Format},
    policy::Policy,
    probes::{calibration::Calibration, Probes},
    results::{Destination, Environment, Results, SCHEMA_VERSION},
};

/// The results before any workload is measured.
pub(super) fn begin(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
    environment: Environment,
    (probes, calibration): (Option<&Probes>, Option<Calibration>),
    overhead: Overhead,
    rounds: Rounds,
) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        label: session
            .label
            .clone()
            .unwrap_or_else(|| environment.kernel_release.clone()),
        complete: true,
        source: "hookprof".into(),
        environment,
        options: recorded_options(args, plan, &session.policy.policy, overhead, rounds.seed),
        probes: probes.map(Probes::report).unwrap_or_default(),
        lsm_programs: Vec::new(),
        syscall_injections: Vec::new(),
        pairing: None,
        calibration,
        workloads: Vec::new(),
    }
}

/// Where the finished results go.
pub(super) struct Outputs {
    pub destination: Option<Destination>,
    pub baseline: Option<baseline::Pending>,
    pub format: Format,
}

/// Writes, prints and keeps `results` (with the profiler's peak memory), and says how the run
/// ended: `interrupted`, or with workloads of the `asked` that failed.
pub(super) fn finish(
    mut results: Results,
    outputs: Outputs,
    interrupted: bool,
    asked: usize,
) -> Result<ExitCode> {
    results.environment.profiler_peak_rss_kib = memory::peak_rss_kib();
    results.environment.profiler_peak_rss_by_phase = memory::phase_peaks();
    // With `-o -` the results file is stdout, and the report goes to stderr.
    let report_to_stderr = outputs
        .destination
        .as_ref()
        .is_some_and(Destination::is_stdout);
    if let Some(destination) = outputs.destination {
        destination.write((results.to_json() + "\n").as_bytes())?;
    }
    print_results(&results, outputs.format, report_to_stderr)?;
    if let Some(baseline) = outputs
        .baseline
        .filter(|_| results.complete && !results.workloads.is_empty())
    {
        let path = baseline.save(&results)?;
        eprintln!("hookprof: baseline saved in {}", path.display());
    }
    if interrupted {
        eprintln!("hookprof: interrupted; results hold the samples taken so far");
        return Ok(ExitCode::from(130));
    }
    let failed = results.failed_workloads();
    if !failed.is_empty() {
        eprintln!(
            "hookprof: error: {} of {asked} workloads failed ({}); results hold the others",
            failed.len(),
            failed.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    if results.workloads.is_empty() {
        bail!("nothing could be measured");
    }
    Ok(ExitCode::SUCCESS)
}

fn print_results(results: &Results, format: Format, to_stderr: bool) -> Result<()> {
    let report = output::render(std::slice::from_ref(results), format)?;
    if to_stderr {
        eprint!("{report}");
    } else {
        print!("{report}");
    }
    Ok(())
}

fn recorded_options(
    args: &CommonMeasureArgs,
    plan: &Plan,
    policies: &[Policy],
    overhead: Overhead,
    round_seed: u64,
) -> BTreeMap<String, serde_json::Value> {
    [
        ("rounds", json!(args.rounds)),
        // The random workload order of each round follows from it.
        ("round_seed", json!(round_seed)),
        ("hooks", json!(args.hooks)),
        ("probes", json!(args.probes)),
        ("samples", json!(plan.samples)),
        ("pin", json!(args.pin)),
        ("parallel", json!(args.parallel)),
        ("user", json!(args.user)),
        (
            "inject",
            json!(args
                .inject
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()),
        ),
        ("stack_noop", json!(args.stack_noop)),
        ("timeout_per_workload", json!(args.timeout_per_workload)),
        (
            "policy",
            json!(policies.iter().map(Policy::record).collect::<Vec<_>>()),
        ),
        ("clock_overhead_ns", json!(overhead.clock.as_nanos() as u64)),
        ("loop_overhead_ns", json!(overhead.loop_ns)),
    ]
    .into_iter()
    .chain(plan.recorded.iter().cloned())
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
