//! The options a run was made with, typed: what `run` and `stat` were told, as the results
//! record them. A key this hookprof does not know (a newer file's) is kept as it was read.
//! Files from before an option was recorded, and imports, leave it out: read as not saying.
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Results, Source};

/// What `run` (or `stat`) was told. Options a run does not record are left out of the file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RunOptions {
    /// `--suite` and `--workloads` as given (run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workloads: Option<Vec<String>>,
    /// `--rounds`, and the seed the random workload order of each round follows from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rounds: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round_seed: Option<u64>,
    /// `--samples` of each workload a round (run, and stat before `--runs` counted all runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u64>,
    /// stat's `--runs`: runs of the command over all the rounds; and its `--warmup`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warmup: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_sample_ms: Option<u64>,
    /// `--hooks` and `--probes` as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hooks: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<String>,
    /// Stack samples per second of CPU time in the timed probed passes, in the passes taken
    /// for the stacks alone, and the own samples those passes run to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_hz: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_sample_hz: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_samples: Option<u64>,
    /// `--pin`: the CPUs the workloads ran on (empty: any).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pin: Vec<usize>,
    /// `--parallel`: copies of each workload at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u64>,
    /// `--user`: the credentials the workloads ran with (None: the caller's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `--inject` as given: `syscall:NAME=NS` or `HOOK=NS`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inject: Vec<String>,
    /// `--stack-noop`: a no-op BPF LSM program on every hook.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stack_noop: bool,
    /// `--policy`: each policy the workloads ran under.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policy: Vec<PolicyRecord>,
    /// `--jobs` and `--build-units` of the `build` workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jobs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_units: Option<u64>,
    /// stat's command and `--prepare`, their secrets masked (`crate::safety::secrets`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_per_workload: Option<u64>,
    /// Directories between each workload's scratch directory and its files
    /// (`--sweep landlock-depth`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scratch_depth: Option<u64>,
    /// The directory the workloads' files were made in (the temp dir): its depth is in every
    /// path lookup of the file workloads, its filesystem in their every call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tmpdir: Option<String>,
    /// The clock read's and the empty loop's cost, measured at the start of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_overhead_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loop_overhead_ns: Option<f64>,
    /// An imported lmbench summary's OS and MHz columns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lmbench_os: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lmbench_mhz: Option<f64>,
    /// Keys this hookprof does not know, kept as read.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// One `--policy` as the run applied it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PolicyRecord {
    /// "landlock", "seccomp" or "apparmor".
    pub kind: String,
    /// One line for reports: `landlock (2 layers, 15 rules)`.
    pub summary: String,
    /// The rules themselves, in the policy kind's own shape (for the record).
    pub rules: serde_json::Value,
}

impl Results {
    /// Whether the file was made by a hookprof run, so an option it does not record was not
    /// given (an import says nothing about them).
    pub fn records_run_options(&self) -> bool {
        self.source == Source::Hookprof
    }

    /// How many copies of each workload ran at once (`--parallel`; 1 for older files and
    /// imports).
    pub fn parallel(&self) -> u64 {
        self.options.parallel.unwrap_or(1)
    }

    /// The `--policy` the workloads ran under, one summary per policy joined by "; ": "none"
    /// for a hookprof run without one, "" when the source cannot say (imports).
    pub fn policy_summary(&self) -> String {
        let summaries: Vec<&str> = self
            .options
            .policy
            .iter()
            .map(|p| p.summary.as_str())
            .collect();
        match (summaries.is_empty(), self.records_run_options()) {
            (false, _) => summaries.join("; "),
            (true, true) => "none".into(),
            (true, false) => String::new(),
        }
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

    #[test]
    fn a_run_file_s_options_read_typed_and_keep_what_this_hookprof_does_not_know() {
        let o: RunOptions = serde_json::from_value(serde_json::json!({
            "inject": ["syscall:getppid=2000", "file_open=300"],
            "parallel": 2,
            "user": null,
            "jobs": null,
            "pin": [],
            "hooks": ["default"],
            "policy": [{"kind": "seccomp", "summary": "seccomp (1 filter)", "rules": []}],
            "a_newer_option": {"x": 1},
        }))
        .unwrap();
        assert_eq!(o.parallel, Some(2));
        assert_eq!(o.user, None);
        assert!(!o.stack_noop);
        assert_eq!(o.injected_paths(), ["getppid", "security_file_open"]);
        assert_eq!(o.policy[0].summary, "seccomp (1 filter)");
        assert_eq!(o.other["a_newer_option"], serde_json::json!({"x": 1}));
        let written = serde_json::to_value(&o).unwrap();
        assert_eq!(written["a_newer_option"], serde_json::json!({"x": 1}));
        assert_eq!(written["hooks"], serde_json::json!(["default"]));
        assert!(
            written.get("user").is_none(),
            "what was not given is left out"
        );
        assert_eq!(
            serde_json::from_value::<RunOptions>(serde_json::json!({})).unwrap(),
            RunOptions::default()
        );
    }
}
