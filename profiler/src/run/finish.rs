//! The run's results, begun before the rounds (label, environment, options, probes) and
//! finished after them: written to `-o`, printed, kept as a baseline when complete, recorded
//! in the results store, and turned into the exit code (130 interrupted, 2 a workload failed
//! or nothing measured). A `--versus` run finishes two results, one per variant, and prints
//! their paired comparison.
use std::{collections::BTreeMap, process::ExitCode};

use anyhow::{bail, Result};
use serde_json::json;

use super::{
    measure::{Engine, Overhead},
    rounds::Rounds,
    CommonMeasureArgs, Plan, SessionArgs,
};
use crate::{
    baseline, compare,
    output::{self, Format},
    peak_rss,
    policy::Policy,
    probes::{calibration::Calibration, Probes},
    results::{write::print_or_keep, Destination, Environment, Results, SCHEMA_VERSION},
    stats::Criteria,
    versus::{self, Variant, VersusOptions},
};

/// The results before any workload is measured.
pub(super) fn begin(
    session: &SessionArgs,
    args: &CommonMeasureArgs,
    plan: &Plan,
    environment: Environment,
    (probes, calibration): (Option<&Probes>, Option<Calibration>),
    engine: &Engine,
    rounds: Rounds,
) -> Results {
    Results {
        schema_version: SCHEMA_VERSION,
        label: session
            .label
            .clone()
            .unwrap_or_else(|| environment.kernel_release.clone()),
        complete: true,
        source: crate::results::Source::Hookprof,
        environment,
        options: recorded_options(args, plan, &session.policy.policy, engine, rounds.seed),
        probes: probes.map(Probes::report).unwrap_or_default(),
        lsm_programs: Vec::new(),
        syscall_injections: Vec::new(),
        pairing: None,
        calibration,
        workloads: Vec::new(),
    }
}

/// Each variant's results: the run's own alone, or with `--versus` the base and the versus
/// variant, each recording its own policies and injections and the pairing of the two.
pub(super) fn variants_of(
    base: Results,
    variants: &[Variant],
    versus: Option<&VersusOptions>,
    run: u64,
) -> Vec<Results> {
    let Some(versus) = versus else {
        return vec![base];
    };
    let base_options = versus::base_options(&variants[0].policies, &variants[0].inject);
    variants
        .iter()
        .map(|v| {
            let mut r = base.clone();
            r.options
                .insert("policy".into(), json!(policy_records(&v.policies)));
            r.options.insert(
                "inject".into(),
                json!(v.inject.iter().map(ToString::to_string).collect::<Vec<_>>()),
            );
            r.pairing = Some(versus::pairing(
                &format!("{run:016x}"),
                v,
                &base_options,
                versus,
            ));
            if v.name == "versus" {
                r.label = format!("{} versus {}", r.label, versus.text());
            }
            r
        })
        .collect()
}

/// Where the finished results go.
pub(super) struct Outputs {
    pub destination: Option<Destination>,
    /// `--versus`'s second file.
    pub versus_destination: Option<Destination>,
    pub baseline: Option<baseline::Pending>,
    pub store: Option<crate::store::Pending>,
    pub format: Format,
}

/// Writes, prints and keeps the results of each variant (with the profiler's peak memory),
/// and says how the run ended: `interrupted`, or with workloads of the `asked` that failed.
pub(super) fn finish(
    mut variants: Vec<Results>,
    outputs: Outputs,
    interrupted: bool,
    asked: usize,
) -> Result<ExitCode> {
    for results in &mut variants {
        // The store keeps each row's share as the reports print it.
        results.derive_shares();
        results.environment.profiler_peak_rss_kib = peak_rss::peak_rss_kib();
        results.environment.profiler_peak_rss_by_phase = peak_rss::phase_peaks();
    }
    let in_file = outputs.destination.is_some();
    // With `-o -` the results file is stdout, and the report goes to stderr.
    let report_to_stderr = outputs
        .destination
        .as_ref()
        .is_some_and(Destination::is_stdout);
    // Everything that keeps the run comes before anything is printed, so a print that fails
    // (a full disk, a reader gone, a hung-up terminal) loses nothing. A file that cannot be
    // written is kept elsewhere, and its error waits for the store.
    let mut written = Ok(());
    for (results, destination) in variants
        .iter()
        .zip([outputs.destination, outputs.versus_destination])
    {
        if let Some(destination) = destination {
            let w = destination.write((results.to_json() + "\n").as_bytes());
            written = written.and(w);
        }
    }
    // A store that fails spools the run (README, "Many runners"); an error only for a run now
    // in neither store, spool nor file.
    let in_store = outputs.store.is_some();
    let recorded = outputs
        .store
        .map_or(Ok(()), |store| store.record(&variants, in_file));
    written?;
    let results = &variants[0];
    if let Some(baseline) = outputs
        .baseline
        .filter(|_| results.complete && !results.workloads.is_empty())
    {
        let path = baseline.save(results)?;
        eprintln!("hookprof: baseline saved in {}", path.display());
    }
    // With no file and no store, what is printed is the run's only copy.
    let only_copy = !in_file && !in_store;
    match &variants[..] {
        [base, versus] => print_comparison(base, versus, outputs.format)?,
        _ => print_results(&variants[0], outputs.format, report_to_stderr, only_copy)?,
    }
    if interrupted {
        eprintln!("hookprof: interrupted; results hold the samples taken so far");
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    }
    // Interrupted while recording: the run is spooled (its warning said where).
    if recorded
        .as_ref()
        .is_err_and(|e| e.is::<crate::store::Interrupted>())
    {
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    }
    let mut failed: Vec<&str> = variants
        .iter()
        .flat_map(Results::failed_workloads)
        .collect();
    failed.sort();
    failed.dedup();
    if !failed.is_empty() {
        eprintln!(
            "hookprof: error: {} of {asked} workloads failed ({}); results hold the others",
            failed.len(),
            failed.join(", ")
        );
        return Ok(ExitCode::from(crate::exit::ERROR));
    }
    if results.workloads.is_empty() {
        bail!("nothing could be measured");
    }
    recorded?;
    Ok(ExitCode::SUCCESS)
}

/// The paired comparison of a `--versus` run's variants (base as old, versus as new).
fn print_comparison(base: &Results, versus: &Results, format: Format) -> Result<()> {
    let comparison = compare::compare(
        std::slice::from_ref(base),
        std::slice::from_ref(versus),
        &Criteria::default(),
    )?;
    crate::stdio::print(output::render(&comparison, format)?)?;
    Ok(())
}

fn policy_records(policies: &[Policy]) -> Vec<serde_json::Value> {
    policies.iter().map(Policy::record).collect()
}

/// Prints the report; if it was the results' `only_copy` and cannot be printed, the results
/// are kept in a file the error names.
fn print_results(
    results: &Results,
    format: Format,
    to_stderr: bool,
    only_copy: bool,
) -> Result<()> {
    let report = output::render(std::slice::from_ref(results), format)?;
    if to_stderr {
        crate::stdio::eprint(&report);
        return Ok(());
    }
    let json = only_copy.then(|| results.to_json() + "\n");
    Ok(print_or_keep(
        report.as_bytes(),
        json.as_deref().map(str::as_bytes),
    )?)
}

fn recorded_options(
    args: &CommonMeasureArgs,
    plan: &Plan,
    policies: &[Policy],
    engine: &Engine,
    round_seed: u64,
) -> BTreeMap<String, serde_json::Value> {
    let Overhead { clock, loop_ns } = engine.overhead;
    [
        ("rounds", json!(args.rounds)),
        // The random workload order of each round follows from it.
        ("round_seed", json!(round_seed)),
        ("hooks", json!(args.hooks)),
        ("probes", json!(args.probes)),
        ("samples", json!(plan.sampling.samples)),
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
        ("sample_hz", json!(args.sample_hz)),
        // Where the workloads' files are made: its depth is in every path walk they time.
        ("tmpdir", json!(std::env::temp_dir())),
        ("timeout_per_workload", json!(args.timeout_per_workload)),
        ("policy", json!(policy_records(policies))),
        ("clock_overhead_ns", json!(clock.as_nanos() as u64)),
        ("loop_overhead_ns", json!(loop_ns)),
    ]
    .into_iter()
    .chain(plan.recorded.iter().cloned())
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}
