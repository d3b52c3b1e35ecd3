//! The options a run was made with that change what it ran, typed: read from the results'
//! `options` map, where a run writes them (files from before an option was recorded, and
//! imports, read as not saying). `compare` lists those that differ before any verdict.
use serde::Deserialize;

use super::Results;

/// What `run` (or `stat`) was told that changes the work measured or the probes around it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct RunOptions {
    /// `--inject` as given: `syscall:NAME=NS` or `HOOK=NS`.
    #[serde(default)]
    pub inject: Vec<String>,
    /// `--stack-noop`: a no-op BPF LSM program on every hook.
    #[serde(default)]
    pub stack_noop: bool,
    /// `--user`: the credentials the workloads ran with (None: the caller's).
    #[serde(default)]
    pub user: Option<String>,
    /// `--parallel`: copies of each workload at once.
    #[serde(default)]
    pub parallel: Option<u64>,
    /// `--probes` and `--hooks` as given.
    #[serde(default)]
    pub probes: Vec<String>,
    #[serde(default)]
    pub hooks: Vec<String>,
    /// Stack samples per second of CPU time in the timed probed passes, and in the passes
    /// taken for the stacks alone.
    #[serde(default)]
    pub sample_hz: Option<u64>,
    #[serde(default)]
    pub stack_sample_hz: Option<u64>,
    /// The directory the workloads' files were made in (the temp dir): its depth is in every
    /// path lookup of the file workloads, its filesystem in their every call.
    #[serde(default)]
    pub tmpdir: Option<String>,
}

impl Results {
    /// The run options, typed (the defaults where the file does not record one).
    pub fn run_options(&self) -> RunOptions {
        let map = serde_json::Map::from_iter(self.options.clone());
        serde_json::from_value(serde_json::Value::Object(map)).unwrap_or_default()
    }

    /// Whether the file was made by a hookprof run, so an option it does not record was not
    /// given (an import says nothing about them).
    pub fn records_run_options(&self) -> bool {
        self.source == super::Source::Hookprof
    }
}

impl RunOptions {
    /// What each `--inject` delays: a syscall's name, or the hook's `security_` function.
    pub fn injected_paths(&self) -> Vec<String> {
        self.inject
            .iter()
            .filter_map(|i| {
                let (target, _) = i.split_once('=')?;
                Some(match target.strip_prefix("syscall:") {
                    Some(syscall) => syscall.to_string(),
                    None => format!("security_{target}"),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::fixtures::sample_results;

    #[test]
    fn run_options_read_the_map_and_default_what_it_lacks() {
        let mut r = sample_results();
        r.options.insert(
            "inject".into(),
            serde_json::json!(["syscall:getppid=2000", "file_open=300"]),
        );
        r.options.insert("parallel".into(), serde_json::json!(2));
        r.options.insert("user".into(), serde_json::Value::Null);
        let o = r.run_options();
        assert_eq!(o.parallel, Some(2));
        assert_eq!(o.user, None);
        assert!(!o.stack_noop);
        assert_eq!(o.injected_paths(), ["getppid", "security_file_open"]);
        r.options.clear();
        assert_eq!(r.run_options(), RunOptions::default());
    }
}
