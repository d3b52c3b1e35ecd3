//! A variant of a run: what its runners run under. A run has one (its own options); `--versus`
//! two that alternate (made here); `--sweep` one per value (made by `sweep`). Each variant's
//! results record it (`pairing`), so `compare` pairs any two of them round by round.
//!
//! `run --versus OPTIONS`: the base variant is the run's own `--policy` and `--inject`; the
//! versus variant replaces the kinds OPTIONS gives. Both are measured in every round, back to
//! back for each workload in a random order, each with a fresh runner, so round i of one and
//! round i of the other share the machine's state and `compare` pairs them
//! (`replication::paired_test`): the cost of a policy or an injected delay is measured against
//! the noise inside one run, not between runs. Only what can change between two runners of one
//! run alternates: the policies a runner takes on, and syscall injections (a map value the
//! injection program reads). Probes, BPF LSM injections and `--stack-noop` are loaded once.
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Parser;

use crate::{policy::Policy, probes::injection::Injection, results::Pairing};

/// One variant of a paired run: what its runners run under.
#[derive(Debug, Clone)]
pub struct Variant {
    /// "base" or "versus", or a sweep value's `PARAMETER=VALUE` (the name in
    /// `Pairing::variant`).
    pub name: String,
    pub policies: Vec<Policy>,
    pub inject: Vec<Injection>,
    /// Copies of each workload at once, where the variant sets its own (`--sweep copies`);
    /// None: the run's `--parallel`.
    pub copies: Option<usize>,
    /// Directories between the scratch directory and the workloads' files, where the variant
    /// sets them (`--sweep landlock-depth`).
    pub scratch_depth: Option<usize>,
}

impl Variant {
    /// A run's one variant (no `--versus`).
    pub fn of_run(policies: &[Policy], inject: &[Injection]) -> Variant {
        Variant {
            name: "base".into(),
            policies: policies.to_vec(),
            inject: inject.to_vec(),
            copies: None,
            scratch_depth: None,
        }
    }
}

/// The pairing record of each variant's results.
pub fn pairing(run: &str, variant: &Variant, base: &[String], given: &str) -> Pairing {
    Pairing {
        run: run.to_string(),
        variant: variant.name.clone(),
        base_options: base.join(" "),
        versus_options: given.to_string(),
    }
}

/// The base options as they would be given on the command line, for the record.
pub fn base_options(policies: &[Policy], inject: &[Injection]) -> Vec<String> {
    policies
        .iter()
        .map(|p| format!("--policy {p}"))
        .chain(inject.iter().map(|i| format!("--inject {i}")))
        .collect()
}

/// What `--versus` may set.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(no_binary_name = true, disable_help_flag = true)]
pub struct VersusOptions {
    #[arg(long, value_name = "KIND:SPEC", value_parser = parse_policy)]
    policy: Vec<Policy>,
    #[arg(long, value_name = "syscall:NAME=NS", value_parser = Injection::parse)]
    inject: Vec<Injection>,
    /// The options as given, for the record.
    #[arg(skip)]
    text: String,
}

fn parse_policy(s: &str) -> Result<Policy, String> {
    Policy::parse(s).map_err(|e| format!("{e:#}"))
}

impl VersusOptions {
    /// The options as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Parses `--versus`'s value, shell-quoted like a command line: `'--policy landlock:r.json'`.
    pub fn parse(text: &str) -> Result<VersusOptions, String> {
        let words = shlex::split(text).ok_or_else(|| format!("unbalanced quotes in '{text}'"))?;
        let mut options = VersusOptions::try_parse_from(&words).map_err(|e| {
            let rendered = e.render().to_string();
            let first = rendered.lines().next().unwrap_or("").trim();
            format!(
                "{}; --versus takes --policy KIND:SPEC and --inject syscall:NAME=NS",
                first.trim_start_matches("error: ")
            )
        })?;
        if options.policy.is_empty() && options.inject.is_empty() {
            return Err("give --policy or --inject (or both) for the versus variant".into());
        }
        if let Some(i) = options
            .inject
            .iter()
            .find(|i| !matches!(i, Injection::Syscall(_)))
        {
            return Err(format!(
                "{i}: a BPF LSM injection is loaded for the whole run and cannot alternate; \
                 --versus alternates syscall:NAME=NS injections and policies"
            ));
        }
        options.text = text.to_string();
        Ok(options)
    }
}

/// Where `-o FILE` puts the versus variant: FILE's name with `.versus` before its extension
/// (`run.json` -> `run.versus.json`).
pub fn versus_output_path(base: &Path) -> PathBuf {
    let stem = base.file_stem().unwrap_or_default().to_string_lossy();
    let name = match base.extension() {
        Some(ext) => format!("{stem}.versus.{}", ext.to_string_lossy()),
        None => format!("{stem}.versus"),
    };
    base.with_file_name(name)
}

/// The base variant (the run's own options) and the versus variant (the same, with the kinds
/// `versus` gives replaced). Refuses a versus that changes nothing, and base LSM injections
/// that would be in force in both.
pub fn versus(
    policies: &[Policy],
    inject: &[Injection],
    versus: &VersusOptions,
) -> Result<[Variant; 2]> {
    let base = Variant::of_run(policies, inject);
    let other = Variant {
        name: "versus".into(),
        policies: if versus.policy.is_empty() {
            policies.to_vec()
        } else {
            versus.policy.clone()
        },
        inject: if versus.inject.is_empty() {
            inject.to_vec()
        } else {
            versus.inject.clone()
        },
        copies: None,
        scratch_depth: None,
    };
    if base.policies == other.policies && base.inject == other.inject {
        bail!(
            "--versus '{}' is the run's own options: the two variants would be the same",
            versus.text
        );
    }
    if let Some(i) = inject.iter().find(|i| !matches!(i, Injection::Syscall(_))) {
        bail!(
            "--inject {i} with --versus: a BPF LSM injection is loaded for the whole run, in \
             both variants; use syscall:NAME=NS injections or policies to alternate"
        );
    }
    Ok([base, other])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inject(s: &str) -> Injection {
        Injection::parse(s).unwrap()
    }

    #[test]
    fn versus_replaces_the_kinds_it_gives_and_keeps_the_rest() {
        let v = VersusOptions::parse("--inject syscall:getppid=300").unwrap();
        let [base, other] = versus(&[], &[inject("syscall:getppid=0")], &v).unwrap();
        assert_eq!(base.inject, vec![inject("syscall:getppid=0")]);
        assert_eq!(other.inject, vec![inject("syscall:getppid=300")]);
        assert!(base.policies.is_empty() && other.policies.is_empty());
        assert_eq!(
            (base.name.as_str(), other.name.as_str()),
            ("base", "versus")
        );
    }

    #[test]
    fn the_versus_file_sits_beside_the_base_file() {
        assert_eq!(
            versus_output_path(Path::new("out/run.json")),
            Path::new("out/run.versus.json")
        );
        assert_eq!(
            versus_output_path(Path::new("results")),
            Path::new("results.versus")
        );
    }

    #[test]
    fn a_versus_that_changes_nothing_or_cannot_alternate_is_refused() {
        let same = VersusOptions::parse("--inject syscall:getppid=0").unwrap();
        let err = versus(&[], &[inject("syscall:getppid=0")], &same).unwrap_err();
        assert!(err.to_string().contains("would be the same"), "{err}");
        let err = VersusOptions::parse("--inject file_open=100").unwrap_err();
        assert!(err.contains("cannot alternate"), "{err}");
        let err = VersusOptions::parse("").unwrap_err();
        assert!(err.contains("give --policy or --inject"), "{err}");
        let err = VersusOptions::parse("--pin 1").unwrap_err();
        assert!(err.contains("--versus takes"), "{err}");
        let err = VersusOptions::parse("--inject 'syscall:getppid=1").unwrap_err();
        assert!(err.contains("unbalanced"), "{err}");
        let lsm = versus(
            &[],
            &[inject("file_open=5")],
            &VersusOptions::parse("--inject syscall:getppid=1").unwrap(),
        )
        .unwrap_err();
        assert!(lsm.to_string().contains("both variants"), "{lsm}");
    }
}
