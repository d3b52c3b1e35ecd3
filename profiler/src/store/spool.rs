//! The spool: a run the store could not take (a server down, a network gone) waits here as
//! one JSON file, named by its run id, until a later call reaches the same store. The id
//! makes the push idempotent: a run pushed twice (the file could not be removed) is stored
//! once. A spool directory another user can write is neither written nor read (a file forged
//! there would enter the store as a run of this user's), and a file in it that is not this
//! user's own is left out.
use std::{
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{location::Url, Recorded};
use crate::{results::write::write_privately, safety::owned_files::Dir};

/// Overrides the spool directory (default: `spool` in hookprof's XDG data directory).
pub const DIR_ENV: &str = "HOOKPROF_SPOOL";

/// A spooled run and the store it is for (without its password).
#[derive(Serialize, Deserialize)]
struct Spooled {
    store: String,
    run: Recorded,
}

fn dir() -> Result<PathBuf> {
    match std::env::var_os(DIR_ENV).filter(|v| !v.is_empty()) {
        Some(dir) => Ok(PathBuf::from(dir)),
        None => Ok(super::location::data_dir()?.join("spool")),
    }
}

/// Writes `run` into the spool and returns its file.
pub fn keep(url: &Url, run: &Recorded) -> Result<PathBuf> {
    let dir = dir()?;
    Dir::create(&dir, 0o700)
        .with_context(|| format!("spool: cannot create {}", dir.display()))?
        .refuse_shared("spool")?;
    let path = dir.join(format!("{}.json", run.run_id));
    let spooled = Spooled {
        store: url.shown(),
        run: run.clone(),
    };
    // Its meta and command line are the run's, for its owner alone.
    write_privately(&path, serde_json::to_string(&spooled)?.as_bytes())
        .with_context(|| format!("spool: cannot write {}", path.display()))?;
    Ok(path)
}

/// Checks, before any work, that a run could be spooled: the directory made, no other
/// user's to write, and a file made in it.
pub fn writable() -> Result<()> {
    let dir = dir()?;
    let opened = Dir::create(&dir, 0o700)
        .with_context(|| format!("spool: cannot create {}", dir.display()))?;
    opened.refuse_shared("spool")?;
    crate::safety::scratch::results_temp_file(&opened)
        .map(drop)
        .with_context(|| format!("spool: cannot write into {}", dir.display()))
}

/// The spooled runs for `url`, oldest first; unreadable files are left where they are, with
/// a warning.
pub fn pending(url: &Url) -> Vec<(PathBuf, Recorded)> {
    let Ok(dir) = dir() else {
        return Vec::new();
    };
    let Ok(opened) = Dir::open(&dir) else {
        return Vec::new(); // no spool yet
    };
    if let Err(e) = opened.refuse_shared("spool") {
        eprintln!("hookprof: warning: {e:#}; nothing in it is pushed");
        return Vec::new();
    }
    let Ok(files) = crate::results::json_files(&dir) else {
        return Vec::new();
    };
    let shown = url.shown();
    let mut runs: Vec<(PathBuf, Recorded)> = files
        .into_iter()
        .filter_map(|path| match read(&path) {
            Ok(s) if s.store == shown => Some((path, s.run)),
            Ok(_) => None, // for another store
            Err(e) => {
                eprintln!("hookprof: warning: spool: {e:#}; left as it is");
                None
            }
        })
        .collect();
    runs.sort_by_key(|(_, r)| r.results.environment.started_at);
    runs
}

/// A spooled run, if the file is this user's own (not another's, not a link or a device).
fn read(path: &Path) -> Result<Spooled> {
    use std::os::unix::fs::MetadataExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file.metadata()?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    anyhow::ensure!(
        meta.is_file() && meta.uid() == me,
        "{} is not a file of uid {me}'s (owner uid {}): not a run this user spooled",
        path.display(),
        meta.uid()
    );
    let mut text = String::new();
    std::io::Read::read_to_string(
        &mut std::io::Read::take(file, crate::safety::input::MAX_INPUT_BYTES),
        &mut text,
    )
    .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{}: not a spooled run", path.display()))
}

/// Removes a pushed run's file (another process may have pushed and removed it first).
pub fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            eprintln!(
                "hookprof: warning: spool: cannot remove {} ({e}); it is stored, and a second \
                 push stores nothing",
                path.display()
            );
        }
    }
}
