//! The run's finishing stage: the results of each variant written to `-o`, printed, kept as
//! a baseline when complete, recorded in the results store, and turned into the exit code
//! (130 interrupted, 2 a workload failed or nothing measured). A run of many variants
//! (`shape`) finishes a results a variant.
use std::process::ExitCode;

use anyhow::{bail, Result};

use super::{measuring::Ran, plan::RunPlan};
use crate::{
    output::{self, Format},
    peak_rss,
    results::{write::print_or_keep, Destination, Results},
    runner::Wait,
};

/// Writes, prints and keeps the results of each variant (with the profiler's peak memory),
/// and says how the run ended: interrupted, or with workloads of those `plan` asked for that
/// failed.
pub(super) fn finish(ran: Wait<Ran>, mut plan: RunPlan) -> Result<ExitCode> {
    let Wait::Done(Ran {
        mut variants,
        interrupted,
    }) = ran
    else {
        return Ok(ExitCode::from(crate::exit::INTERRUPTED));
    };
    let outputs = plan.outputs;
    let asked = plan.work.specs.len();
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
    let more = std::mem::take(&mut plan.shape.more_destinations);
    let destinations = std::iter::once(outputs.destination).chain(more.into_iter().map(Some));
    for (results, destination) in variants.iter().zip(destinations) {
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
    if !plan.shape.print(&variants, outputs.format)? {
        print_results(&variants[0], outputs.format, report_to_stderr, only_copy)?;
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
