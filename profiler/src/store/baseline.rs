//! Named baselines, criterion's habit: `run --save-baseline NAME` keeps a run's results under a
//! name and `compare --baseline NAME NEW` compares against them. A baseline is a directory of
//! results files; several runs in it (`--append-baseline`) make the file the unit of
//! replication in `compare`. Only files hookprof wrote there are ever removed (its name for
//! them, this user's, a results document), and a baseline directory another user can write is
//! neither written nor read.
use std::path::{Path, PathBuf};

use anyhow::Context;

use crate::{
    results::{json_files, write_atomically, write_or_keep, Results},
    safety::owned_files::Dir,
};

/// Runs an appended baseline keeps by default: enough for a prediction test with 9 degrees of
/// freedom, few enough to follow the machine.
pub const DEFAULT_KEEP: u32 = 10;

/// Overrides where baselines live (the `--baseline-dir` flag overrides it in turn).
pub const DIR_ENV: &str = "HOOKPROF_BASELINE_DIR";

#[derive(clap::Args, Debug, Default, Clone)]
pub struct SaveArgs {
    /// Keep this run's results as baseline NAME, replacing what was saved under it.
    #[arg(long, value_name = "NAME", conflicts_with = "append_baseline")]
    pub save_baseline: Option<String>,
    /// Add this run's results to baseline NAME (several runs: each file is one observation,
    /// and a single run is tested against their spread).
    #[arg(long, value_name = "NAME")]
    pub append_baseline: Option<String>,
    /// With --append-baseline, keep only the newest N runs in the baseline: a rolling window,
    /// so it follows slow changes of the machine and its files stay few.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP,
          value_parser = clap::value_parser!(u32).range(2..))]
    pub baseline_keep: u32,
    /// Where baselines live [default: $HOOKPROF_BASELINE_DIR, else
    /// $XDG_DATA_HOME/hookprof/baselines, else ~/.local/share/hookprof/baselines].
    #[arg(long, value_name = "DIR")]
    pub baseline_dir: Option<PathBuf>,
}

/// The directory of every baseline: the flag, the environment, then the XDG data directory.
pub fn root(flag: Option<&Path>) -> anyhow::Result<PathBuf> {
    if let Some(dir) = flag {
        return Ok(dir.to_path_buf());
    }
    let env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(dir) = env(DIR_ENV) {
        return Ok(dir);
    }
    if let Some(data) = env("XDG_DATA_HOME") {
        return Ok(data.join("hookprof/baselines"));
    }
    let home = env("HOME")
        .context("no baseline directory: set --baseline-dir or HOOKPROF_BASELINE_DIR")?;
    Ok(home.join(".local/share/hookprof/baselines"))
}

/// The directory of baseline `name`; a name is letters, digits, `.`, `_` and `-`.
pub fn dir(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let valid = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    anyhow::ensure!(
        valid,
        "baseline name '{name}': use letters, digits, '.', '_' and '-' (not first '.')"
    );
    Ok(root.join(name))
}

/// A baseline to write once the run is over, checked before anything runs.
#[derive(Debug)]
pub struct Pending {
    dir: PathBuf,
    replace: bool,
    keep: usize,
}

impl SaveArgs {
    /// Checks the name and that the directory can be created, so a bad flag fails before the
    /// run, not after it.
    pub fn prepare(&self) -> anyhow::Result<Option<Pending>> {
        let (name, replace) = match (&self.save_baseline, &self.append_baseline) {
            (Some(n), _) => (n, true),
            (None, Some(n)) => (n, false),
            (None, None) => return Ok(None),
        };
        let dir = dir(&root(self.baseline_dir.as_deref())?, name)?;
        Dir::create(&dir, 0o777)
            .with_context(|| format!("baseline {name}: cannot create {}", dir.display()))?
            .refuse_shared(&format!("baseline {name}: directory"))?;
        Ok(Some(Pending {
            dir,
            replace,
            keep: self.baseline_keep as usize,
        }))
    }
}

impl Pending {
    /// Writes the results into the baseline (after removing the old files when replacing) and
    /// returns the file written.
    pub fn save(&self, results: &Results) -> anyhow::Result<PathBuf> {
        if self.replace {
            for old in own_files(&self.dir)? {
                std::fs::remove_file(&old)
                    .with_context(|| format!("cannot remove {}", old.display()))?;
            }
        }
        let stem = format!("{}-{}", results.environment.started_at, std::process::id());
        let path = self.dir.join(format!("{stem}.json"));
        let contents = results.to_json() + "\n";
        write_or_keep(
            &format!("baseline {}", path.display()),
            contents.as_bytes(),
            || write_atomically(&path, contents.as_bytes()),
        )?;
        // Names start with the run's start time: the oldest sort first.
        let files = own_files(&self.dir)?;
        for old in files.iter().take(files.len().saturating_sub(self.keep)) {
            std::fs::remove_file(old)
                .with_context(|| format!("cannot remove {}", old.display()))?;
        }
        Ok(path)
    }
}

/// The results files hookprof saved in `dir`: named as it names them (`STARTED-PID.json`),
/// regular files of this user's (not links), and results documents. Anything else there is
/// someone's own, never removed.
fn own_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let named_by_us = |p: &Path| {
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        stem.split_once('-').is_some_and(|(at, pid)| {
            !at.is_empty()
                && !pid.is_empty()
                && at.bytes().all(|b| b.is_ascii_digit())
                && pid.bytes().all(|b| b.is_ascii_digit())
        })
    };
    Ok(json_files(dir)?
        .into_iter()
        .filter(|p| named_by_us(p))
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.uid() == me))
        .filter(|p| crate::results::Results::load(p).is_ok())
        .collect())
}

/// The saved results files of baseline `name`, for `compare --baseline`.
pub fn files(root: &Path, name: &str) -> anyhow::Result<PathBuf> {
    let dir = dir(root, name)?;
    if let Ok(opened) = Dir::open(&dir) {
        opened.refuse_shared(&format!("baseline {name}: directory"))?;
    }
    anyhow::ensure!(
        dir.is_dir() && !json_files(&dir)?.is_empty(),
        "no baseline '{name}' in {} (save one with `hookprof run --save-baseline {name}`)",
        root.display()
    );
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn saving_replaces_and_appending_adds() {
        let root = tempfile::tempdir().unwrap();
        let args = |save: Option<&str>, append: Option<&str>| SaveArgs {
            save_baseline: save.map(String::from),
            append_baseline: append.map(String::from),
            baseline_keep: 2,
            baseline_dir: Some(root.path().to_path_buf()),
        };
        let mut r = sample_results();
        let count = || json_files(&root.path().join("main")).unwrap().len();
        for t in [1, 2, 3] {
            r.environment.started_at = t;
            args(None, Some("main"))
                .prepare()
                .unwrap()
                .unwrap()
                .save(&r)
                .unwrap();
        }
        // A rolling window of two: the oldest run went.
        assert_eq!(count(), 2);
        let kept = json_files(&root.path().join("main")).unwrap();
        assert!(kept[0]
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("2-"));
        r.environment.started_at = 4;
        let saved = args(Some("main"), None)
            .prepare()
            .unwrap()
            .unwrap()
            .save(&r)
            .unwrap();
        assert_eq!(count(), 1);
        assert_eq!(Results::load(&saved).unwrap(), r);
        assert_eq!(
            files(root.path(), "main").unwrap(),
            root.path().join("main")
        );
        assert!(args(None, None).prepare().unwrap().is_none());
    }

    #[test]
    fn bad_names_and_missing_baselines_say_what_to_do() {
        let root = tempfile::tempdir().unwrap();
        for bad in ["", "../x", ".hidden", "a/b", "a b"] {
            let err = dir(root.path(), bad).unwrap_err().to_string();
            assert!(err.contains("use letters, digits"), "{bad}: {err}");
        }
        let err = files(root.path(), "nightly").unwrap_err().to_string();
        assert!(err.contains("--save-baseline nightly"), "{err}");
    }
}
