//! The results store: every `run`, `stat` and `ab` boot recorded in a database, an embedded
//! SQLite file by default or a PostgreSQL server for many runners, so `compare`, `history`
//! and baselines can select runs (`label:nightly,last:5`) instead of naming files. `location`
//! says which store, `db` reads and writes it (one schema, versioned migrations), `spool`
//! keeps a run the store could not take until the next call, `select` turns selectors into
//! runs, and `runs` is the `hookprof runs` command.
use std::{collections::BTreeMap, path::Path, time::Instant};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::{results::Results, store::baseline::SaveArgs};

pub mod baseline;
mod db;
pub mod location;
pub mod runs;
pub mod select;
mod spool;

pub use location::StoreArgs;
pub use select::load;

/// `run`, `stat` and `ab`: where their runs are recorded, or not, and what is recorded with
/// them.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct RecordArgs {
    #[command(flatten)]
    pub location: StoreArgs,
    /// Record nothing in the results store (the -o file and the report are as always).
    #[arg(long, conflicts_with = "store")]
    pub no_store: bool,
    /// Recorded with the run and selectable as meta:KEY=VALUE (e.g. --meta commit=abc123).
    /// Repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = parse_meta)]
    pub meta: Vec<(String, String)>,
}

fn parse_meta(s: &str) -> Result<(String, String), String> {
    crate::text::no_controls("--meta", s)?;
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !k.contains(',') => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("'{s}': give KEY=VALUE, e.g. commit=abc123")),
    }
}

/// A run on its way into the store: the results and what the store keeps beside them. A run
/// the store could not take is spooled as this, whole, and pushed later under the same id.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recorded {
    /// Unique per run: the key that makes a second push of the same run a no-op.
    pub run_id: String,
    /// run, stat, ab or add.
    pub command: String,
    pub machine_id: String,
    pub command_line: Vec<String>,
    pub meta: BTreeMap<String, String>,
    /// The baseline this run joins (`--save-baseline`, `--append-baseline`).
    pub baseline: Option<BaselineEntry>,
    pub results: Results,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineEntry {
    pub name: String,
    /// Replace the baseline's runs (save) rather than add to them (append).
    pub replace: bool,
    /// With append: how many of the newest runs the baseline keeps.
    pub keep: u32,
}

impl Recorded {
    /// A run just made on this machine by this command line, under a fresh random id.
    pub fn new(command: &str, args: &RecordArgs, mut results: Results) -> Recorded {
        // A file made elsewhere (`add`, an older hookprof) may hold a command's secrets plain:
        // the store keeps none.
        let options = &mut results.options;
        options.command = crate::safety::secrets::masked_argv(&options.command);
        options.prepare = options
            .prepare
            .as_deref()
            .map(crate::safety::secrets::masked_text);
        Recorded {
            run_id: format!("{:032x}", rand::random::<u128>()),
            command: command.to_string(),
            machine_id: machine_id(),
            // No secret (`--store postgres://u:PW@h/d`, `stat -- cmd --password PW`) is recorded.
            command_line: crate::safety::secrets::masked_argv(
                &std::env::args().collect::<Vec<_>>(),
            ),
            meta: args.meta.iter().cloned().collect(),
            baseline: None,
            results,
        }
    }

    /// The baseline `save` names, when the run is complete (as the baseline files are kept).
    fn joining(mut self, save: &SaveArgs) -> Recorded {
        let complete = self.results.complete && !self.results.workloads.is_empty();
        let entry = match (&save.save_baseline, &save.append_baseline) {
            (Some(name), _) => Some((name, true)),
            (None, Some(name)) => Some((name, false)),
            (None, None) => None,
        };
        self.baseline = entry
            .filter(|_| complete)
            .map(|(name, replace)| BaselineEntry {
                name: name.clone(),
                replace,
                keep: save.baseline_keep,
            });
        self
    }
}

/// A `run` or `stat` to record once it is finished, its store checked before it starts.
#[derive(Debug)]
pub struct Pending {
    url: location::Url,
    args: RecordArgs,
    command: &'static str,
    save: SaveArgs,
}

impl RecordArgs {
    /// The record `command` will make (joining the baseline `save` names), or None with
    /// `--no-store`; a bad `--store` fails here, before the run.
    pub fn prepare(&self, command: &'static str, save: &SaveArgs) -> Result<Option<Pending>> {
        Ok(self.location.resolve(self.no_store)?.map(|url| Pending {
            url,
            args: self.clone(),
            command,
            save: save.clone(),
        }))
    }
}

impl Pending {
    /// True for a store that is gone when hookprof exits (an in-memory SQLite database).
    pub fn keeps_nothing(&self) -> bool {
        self.url.is_in_memory()
    }

    /// Checks, before any work, that the finished run can be kept: a SQLite store's file
    /// (or else the spool). A server is only reached at the end (the spool takes the run if
    /// it is down then).
    pub fn writable(&self) -> Result<()> {
        let Some(file) = self.url.sqlite_file().filter(|_| !self.url.is_in_memory()) else {
            return Ok(());
        };
        db::prepare_file(&file).or_else(|e| {
            spool::writable().map_err(|s| anyhow::anyhow!("{e:#}; nor can it be spooled: {s:#}"))
        })
    }

    /// The store as messages show it (without its password).
    pub fn shown(&self) -> String {
        self.url.shown()
    }

    /// Records the finished run, after its results files and report are written: first any
    /// runs spooled earlier, then each variant's results (one for a run, two for `--versus`,
    /// whose base alone joins a baseline, as with the files). A store that cannot take one
    /// leaves it in the spool with a warning; the error is only for results that are now
    /// nowhere (neither stored, spooled nor in an `-o` file), so the caller exits 2.
    /// Interrupted, it spools what is left and returns [`Interrupted`].
    pub fn record(self, variants: &[Results], in_file: bool) -> Result<()> {
        let mut interrupted = None;
        for (i, results) in variants.iter().enumerate() {
            let run = Recorded::new(self.command, &self.args, results.clone());
            let run = if i == 0 { run.joining(&self.save) } else { run };
            let stored = match interrupted {
                Some(_) => Err(Interrupted.into()),
                None => store_one(&self.url, &run),
            };
            if let Err(e) = stored {
                spool_after_failure(&self.url, &run, &e, in_file)?;
                if e.is::<Interrupted>() {
                    interrupted = Some(e);
                }
            }
        }
        interrupted.map_or(Ok(()), Err)
    }
}

/// Records a results file that is already written (an `ab` boot's, `runs --add`).
pub fn record_file(args: &RecordArgs, command: &str, path: &Path) -> Result<()> {
    let Some(url) = args.location.resolve(args.no_store)? else {
        return Ok(());
    };
    let results = Results::load(path)?;
    let run = Recorded::new(command, args, results);
    match store_one(&url, &run) {
        Ok(()) => Ok(()),
        Err(e) => spool_after_failure(&url, &run, &e, true),
    }
}

fn spool_after_failure(
    url: &location::Url,
    run: &Recorded,
    error: &anyhow::Error,
    in_file: bool,
) -> Result<()> {
    match spool::keep(url, run) {
        Ok(path) => {
            eprintln!(
                "hookprof: warning: results store {}: {error:#}; the run is spooled in {} and \
                 goes in with the next call that reaches the store",
                url.shown(),
                path.display()
            );
            Ok(())
        }
        Err(spool_error) if in_file => {
            eprintln!(
                "hookprof: warning: results store {}: {error:#}, and the spool failed too \
                 ({spool_error:#}): the run is only in the -o file",
                url.shown()
            );
            Ok(())
        }
        Err(spool_error) => Err(spool_error.context(format!(
            "results store {}: {error:#}; the run is in no store, spool or file (give -o FILE)",
            url.shown()
        ))),
    }
}

/// Pushes what the spool holds for this store, then stores `run`.
fn store_one(url: &location::Url, run: &Recorded) -> Result<()> {
    block_on(async {
        let started = Instant::now();
        let mut store = db::Store::open(url).await?;
        push_spool(url, &mut store).await;
        store.insert(run).await?;
        timing("stored", started, 1);
        Ok(())
    })
}

/// `HOOKPROF_STORE_TIMING=1` prints how long a store write or read took, connecting
/// included (the README's figures).
fn timing(done: &str, started: Instant, runs: usize) {
    if std::env::var_os("HOOKPROF_STORE_TIMING").is_some_and(|v| v == "1") {
        eprintln!(
            "hookprof: {done} {runs} run(s) in {:.1} ms",
            started.elapsed().as_secs_f64() * 1e3
        );
    }
}

/// Pushes the spooled runs of `url` into `store`, each removed once stored (a run stored
/// before under its id is not stored again). A failure leaves the rest for the next call.
async fn push_spool(url: &location::Url, store: &mut db::Store) {
    for (path, run) in spool::pending(url) {
        match store.insert(&run).await {
            Ok(()) => {
                spool::remove(&path);
                eprintln!(
                    "hookprof: spooled run {} ({}) is now in the store",
                    run.run_id, run.results.label
                );
            }
            Err(e) => {
                eprintln!(
                    "hookprof: warning: spooled run {}: {e:#}; left in {}",
                    run.run_id,
                    path.display()
                );
                return;
            }
        }
    }
}

/// Opens the store for reading, after pushing what its spool holds.
async fn open_for_reading(url: &location::Url) -> Result<db::Store> {
    let mut store = db::Store::open(url).await?;
    push_spool(url, &mut store).await;
    Ok(store)
}

/// Runs a store operation on a runtime of its own (the store is used between the other
/// stages, never inside the supervisor's). SIGINT, SIGTERM or SIGHUP ends it at once with
/// [`Interrupted`]: a server that does not answer or a lock another process holds is
/// waited for with a bound, and never past an interrupt.
fn block_on<T>(f: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    use tokio::signal::unix::{signal, SignalKind};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("start the store's runtime")?;
    rt.block_on(async {
        let handler = |kind| signal(kind).context("install signal handler");
        let mut int = handler(SignalKind::interrupt())?;
        let mut term = handler(SignalKind::terminate())?;
        let mut hup = handler(SignalKind::hangup())?;
        tokio::select! {
            biased;
            _ = int.recv() => Err(Interrupted.into()),
            _ = term.recv() => Err(Interrupted.into()),
            _ = hup.recv() => Err(Interrupted.into()),
            result = f => result,
        }
    })
}

/// A store operation ended by SIGINT, SIGTERM or SIGHUP (exit code 130).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// This machine's id (systemd's /etc/machine-id, D-Bus's older copy), else its hostname.
fn machine_id() -> String {
    ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .map(|s| s.trim().to_string())
        .find(|s| !s.is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_key_equals_value() {
        assert_eq!(
            parse_meta("commit=abc=1").unwrap(),
            ("commit".into(), "abc=1".into())
        );
        assert_eq!(parse_meta("k=").unwrap(), ("k".into(), String::new()));
        for bad in ["commit", "=x", "a,b=c"] {
            assert!(parse_meta(bad).unwrap_err().contains("KEY=VALUE"), "{bad}");
        }
    }

    #[test]
    fn runs_get_distinct_ids_and_join_a_baseline_only_when_complete() {
        let results = crate::results::fixtures::sample_results();
        let args = RecordArgs::default();
        let a = Recorded::new("run", &args, results.clone());
        let b = Recorded::new("run", &args, results.clone());
        assert_ne!(a.run_id, b.run_id);
        assert_eq!(a.run_id.len(), 32);
        let save = SaveArgs {
            append_baseline: Some("main".into()),
            baseline_keep: 5,
            ..SaveArgs::default()
        };
        let joined = a.joining(&save).baseline.unwrap();
        assert_eq!(
            (joined.name.as_str(), joined.replace, joined.keep),
            ("main", false, 5)
        );
        let mut partial = results;
        partial.complete = false;
        assert!(Recorded::new("run", &args, partial)
            .joining(&save)
            .baseline
            .is_none());
    }
}
