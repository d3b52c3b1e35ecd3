//! Writing results files: atomic writes that never leave an existing file truncated, and the
//! check, before a run, that its results could be written afterwards.
use std::{io::Write, path::Path};

use anyhow::Context;

use super::Results;

impl Results {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("results serialize")
    }
}

/// The directory a file named by `path` goes into (`.` for a bare name).
fn parent_dir(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Writes `contents` to `path` atomically: a temp file in the same directory, then rename, so an
/// existing file is never left truncated by a failed run.
pub fn write_atomically(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let mut tmp = crate::scratch::results_temp_file(parent_dir(path))?;
    tmp.write_all(contents)?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Fails before the run if the results could not be written to `path` afterwards.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    let dir = parent_dir(path);
    crate::scratch::remove_stale_results(dir);
    crate::scratch::results_temp_file(dir)
        .map(drop)
        .with_context(|| format!("-o {}: cannot write into {}", path.display(), dir.display()))
}
