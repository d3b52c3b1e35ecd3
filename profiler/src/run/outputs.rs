//! Where a run's results go (`-o`, the baseline, the results store) and how they are printed,
//! prepared before anything is measured: a store that would keep nothing, or cannot be
//! written, is refused unless a file keeps the run.
use anyhow::{bail, Result};

use super::SessionArgs;
use crate::{output::Format, results::Destination, store::baseline};

/// Where the finished results go.
pub(super) struct Outputs {
    /// Where `-o` writes the results.
    pub destination: Option<Destination>,
    /// Where `--save-baseline`/`--append-baseline` keeps them.
    pub baseline: Option<baseline::Pending>,
    /// The results store that records the run (None: `--no-store`).
    pub store: Option<crate::store::Pending>,
    pub format: Format,
}

impl Outputs {
    /// `session`'s outputs for a run of `command` ("run" or "stat"), prepared.
    pub fn prepare(session: &SessionArgs, command: &'static str) -> Result<Outputs> {
        let destination = session
            .output
            .as_deref()
            .map(Destination::prepare)
            .transpose()?;
        let baseline = session.baseline.prepare()?;
        let store = session.store.prepare(command, &session.baseline)?;
        let kept_in_a_file = !destination.as_ref().is_none_or(Destination::discards);
        if let Some(store) = store.as_ref().filter(|s| s.keeps_nothing()) {
            if !kept_in_a_file {
                bail!(
                    "results store {}: an in-memory database keeps nothing once hookprof exits, \
                     and no -o file keeps the run: give -o FILE, or a database file",
                    store.shown()
                );
            }
        }
        if let Some(store) = &store {
            if let Err(e) = store.writable() {
                if !kept_in_a_file {
                    bail!(
                        "results store {}: {e:#}; and no -o file would keep the run: give -o \
                         FILE, --no-store, or a store that can be written",
                        store.shown()
                    );
                }
            }
        }
        Ok(Outputs {
            destination,
            baseline,
            store,
            format: session.format,
        })
    }
}
