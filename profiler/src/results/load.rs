//! Reading results files: validated loading with errors that name the file and line, and the
//! listing of a directory's results files (compare's sides, history's series, baselines).
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::{Results, SCHEMA_VERSION};

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: not a hookprof results file: {message}")]
    Parse {
        path: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "{path}: schema_version {found} is not supported (this hookprof reads {SCHEMA_VERSION})"
    )]
    Schema { path: String, found: u64 },
}

impl Results {
    /// Reads and validates a results file; every failure names the file (and line, for JSON).
    pub fn load(path: &Path) -> Result<Results, ResultsError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    pub fn parse(text: &str, shown: &str) -> Result<Results, ResultsError> {
        let parse_error = |e: serde_json::Error| ResultsError::Parse {
            path: shown.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        };
        let value: serde_json::Value = serde_json::from_str(text).map_err(parse_error)?;
        match value.get("schema_version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(SCHEMA_VERSION) => {}
            Some(found) => {
                return Err(ResultsError::Schema {
                    path: shown.to_string(),
                    found,
                })
            }
            None => {
                return Err(ResultsError::Parse {
                    path: shown.to_string(),
                    line: 1,
                    column: 1,
                    message: "no schema_version".into(),
                })
            }
        }
        serde_json::from_value(value).map_err(parse_error)
    }
}

/// The results files in `dir` (every `*.json` that is a file), sorted by name; none is no error.
pub fn json_files(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("{}: cannot read directory", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json") && p.is_file())
        .collect();
    files.sort();
    Ok(files)
}

/// A path given for results: the file itself, or the results files in the directory (at least
/// one).
pub fn files_named(path: &Path) -> anyhow::Result<Vec<PathBuf>> {
    if !path.is_dir() {
        return Ok(vec![path.to_path_buf()]);
    }
    let files = json_files(path)?;
    anyhow::ensure!(
        !files.is_empty(),
        "{}: no results files (*.json)",
        path.display()
    );
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_environment(environment: serde_json::Value) -> Results {
        let text = serde_json::json!({
            "schema_version": SCHEMA_VERSION,
            "label": "l",
            "complete": true,
            "source": "hookprof",
            "environment": environment,
            "workloads": [],
        })
        .to_string();
        Results::parse(&text, "r.json").unwrap()
    }

    #[test]
    fn cpus_online_and_allowed_are_recorded_and_old_files_cpus_is_the_allowed_count() {
        let e = with_environment(serde_json::json!({
            "kernel_release": "6.1.0", "hookprof_version": "0.1.0",
            "cpus_online": 4, "cpus_allowed": 1,
        }))
        .environment;
        assert_eq!((e.cpus_online, e.cpus_allowed), (4, 1));
        // Before cpus_online, `cpus` was the count of CPUs the process could use.
        let old = with_environment(serde_json::json!({
            "kernel_release": "6.1.0", "hookprof_version": "0.1.0", "cpus": 2,
        }))
        .environment;
        assert_eq!((old.cpus_online, old.cpus_allowed), (0, 2));
        // Written back, the old file's count keeps its new name.
        let json: serde_json::Value = serde_json::to_value(&old).unwrap();
        assert_eq!(json["cpus_allowed"], 2);
        assert!(json.get("cpus").is_none(), "{json}");
    }
}
