//! The shape of a run, built once where its arguments are checked: one variant (the run's own
//! options), two that alternate (`--versus`), or one per swept value (`--sweep`); with the
//! variants, where `-o` writes each after the first, the formats the shape prints, what a
//! sweep made for its variants, and how each variant's results are labelled and printed.
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

use super::{CommonMeasureArgs, SessionArgs};
use crate::{
    compare::{self, Comparison},
    output::{self, Document, Format},
    policy::Policy,
    probes::injection::Injection,
    results::{Destination, PolicyRecord, Results},
    runner::Credentials,
    safety::scratch::Scratch,
    stats::Criteria,
    store::baseline,
    sweep::{report::Sweep, LoadedProfiles, SweepSpec},
    variant::{self, Variant},
};

/// What made a run's variants.
pub(super) enum Kind {
    /// The run's own options alone.
    Single,
    Versus(VersusOptions),
    Sweep(SweepSpec),
}

/// A run's variants and where their results go.
pub(super) struct RunShape {
    pub kind: Kind,
    /// What the runners run under, in the order their results are written and printed.
    pub variants: Vec<Variant>,
    /// Where `-o` writes the results of each variant after the first.
    pub more_destinations: Vec<Destination>,
    /// The AppArmor profiles a sweep loaded, unloaded when the run ends (before the
    /// directory their files are in goes).
    _profiles: LoadedProfiles,
    /// The directories a Landlock rule sweep's rules are on, removed when the run ends.
    _rule_dirs: Option<Scratch>,
}

impl RunShape {
    /// The shape `session` asks for, checked against the rest of the run: a baseline (only a
    /// run of one variant keeps one), `-o` (a file per variant), the format (what the shape
    /// prints has it), and each variant's command line against the kernel's limits.
    pub fn build(
        session: &SessionArgs,
        args: &CommonMeasureArgs,
        outputs: (&Option<Destination>, &Option<baseline::Pending>),
        user: Option<Credentials>,
    ) -> Result<RunShape> {
        let own = &session.policy.policy;
        let mut shape = RunShape {
            kind: Kind::Single,
            variants: vec![Variant::of_run(own, &args.inject)],
            more_destinations: Vec::new(),
            _profiles: LoadedProfiles::default(),
            _rule_dirs: None,
        };
        let paths = match (&session.versus, &session.sweep) {
            (Some(versus), _) => {
                shape.kind = Kind::Versus(versus.clone());
                shape.variants = variants(own, &args.inject, versus)?.to_vec();
                Vec::from_iter(session.output.as_deref().map(output_path))
            }
            (None, Some(sweep)) => {
                shape.kind = Kind::Sweep(sweep.clone());
                shape._rule_dirs = sweep
                    .makes_files()
                    .then(|| crate::safety::scratch::create("sweep-rules", user))
                    .transpose()?;
                let at = shape
                    ._rule_dirs
                    .as_ref()
                    .map_or(Path::new("/"), Scratch::path);
                shape.variants = sweep.variants(own, &args.inject, at, &mut shape._profiles)?;
                let base = session.output.as_deref();
                base.map(|base| {
                    sweep.values[1..]
                        .iter()
                        .map(|&v| sweep.output_path(base, v))
                        .collect()
                })
                .unwrap_or_default()
            }
            (None, None) => return Ok(shape),
        };
        shape.more_destinations = shape.check(session, outputs, user, &paths)?;
        Ok(shape)
    }

    /// The option that made the variants, as the errors name it, and the formats it prints.
    fn option(&self) -> (&'static str, &'static [Format]) {
        match self.kind {
            Kind::Versus(_) => ("--versus", Comparison::FORMATS),
            _ => ("--sweep", Sweep::FORMATS),
        }
    }

    /// A shape of many variants against the rest of the run; the files `-o` writes past the
    /// first, prepared.
    fn check(
        &self,
        session: &SessionArgs,
        (destination, baseline): (&Option<Destination>, &Option<baseline::Pending>),
        user: Option<Credentials>,
        paths: &[PathBuf],
    ) -> Result<Vec<Destination>> {
        let (option, printed) = self.option();
        if baseline.is_some() {
            bail!("{option} keeps no baseline: its variants are compared with each other");
        }
        // Each variant's policies travel on its runners' command lines: one the kernel would
        // refuse fails now, not when its turn comes.
        for variant in &self.variants {
            let line = crate::runner::serve::RunnerArgs::command_line(0, user, &variant.policies);
            crate::safety::limits::ensure_arguments_fit(
                &format!("{option} {}", variant.name),
                &line,
            )?;
        }
        if !printed.contains(&session.format) {
            bail!(
                "{option} prints what its variants came to, which has no {} format",
                format!("{:?}", session.format).to_lowercase()
            );
        }
        match destination {
            Some(d) if d.is_stdout() => {
                bail!("{option} writes a results file per variant: give -o FILE, not -o -")
            }
            Some(_) => paths.iter().map(|p| Destination::prepare(p)).collect(),
            None => Ok(Vec::new()),
        }
    }

    /// The options that made the variants, as given; None for a run of one.
    fn given(&self) -> Option<String> {
        match &self.kind {
            Kind::Single => None,
            Kind::Versus(versus) => Some(versus.text().to_string()),
            Kind::Sweep(sweep) => Some(format!(
                "--sweep {}={}",
                sweep.name(),
                sweep
                    .values
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )),
        }
    }

    /// Each variant's results, begun from `base`: each recording its own policies and
    /// injections and its place in run `run` (`pairing`), so `compare` pairs any two of them
    /// round by round; a run of one keeps `base` as it is.
    pub fn results_of(&self, base: Results, own: &[Policy], run: u64) -> Vec<Results> {
        let Some(given) = self.given() else {
            return vec![base];
        };
        let base_options = variant::base_options(own, &self.variants[0].inject);
        self.variants
            .iter()
            .map(|v| {
                let mut r = base.clone();
                r.options.policy = v
                    .policies
                    .iter()
                    .map(Policy::record)
                    .collect::<Vec<PolicyRecord>>();
                r.options.inject = v.inject.iter().map(ToString::to_string).collect();
                if let Some(copies) = v.copies {
                    r.options.parallel = Some(copies as u64);
                }
                r.options.scratch_depth = v.scratch_depth.map(|d| d as u64);
                r.pairing = Some(variant::pairing(
                    &format!("{run:016x}"),
                    v,
                    &base_options,
                    &given,
                ));
                match (&self.kind, v.name.as_str()) {
                    (Kind::Sweep(_), name) => r.label = format!("{} {name}", r.label),
                    (_, "versus") => r.label = format!("{} versus {given}", r.label),
                    _ => {}
                }
                r
            })
            .collect()
    }

    /// Prints what a shape of many variants came to (a sweep's fit, a versus's paired
    /// comparison, base as old); false for a run of one, whose results print themselves.
    pub fn print(&self, variants: &[Results], format: Format) -> Result<bool> {
        let text = match (&self.kind, variants) {
            (Kind::Sweep(sweep), _) => output::render(&Sweep::of(sweep, variants), format)?,
            (Kind::Versus(_), [base, versus]) => {
                let comparison = compare::compare(
                    std::slice::from_ref(base),
                    std::slice::from_ref(versus),
                    &Criteria::default(),
                )?;
                output::render(&comparison, format)?
            }
            _ => return Ok(false),
        };
        crate::stdio::print(text)?;
        Ok(true)
    }
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
fn output_path(base: &Path) -> PathBuf {
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
fn variants(
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
        let [base, other] = variants(&[], &[inject("syscall:getppid=0")], &v).unwrap();
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
            output_path(Path::new("out/run.json")),
            Path::new("out/run.versus.json")
        );
        assert_eq!(
            output_path(Path::new("results")),
            Path::new("results.versus")
        );
    }

    #[test]
    fn a_versus_that_changes_nothing_or_cannot_alternate_is_refused() {
        let same = VersusOptions::parse("--inject syscall:getppid=0").unwrap();
        let err = variants(&[], &[inject("syscall:getppid=0")], &same).unwrap_err();
        assert!(err.to_string().contains("would be the same"), "{err}");
        let err = VersusOptions::parse("--inject file_open=100").unwrap_err();
        assert!(err.contains("cannot alternate"), "{err}");
        let err = VersusOptions::parse("").unwrap_err();
        assert!(err.contains("give --policy or --inject"), "{err}");
        let err = VersusOptions::parse("--pin 1").unwrap_err();
        assert!(err.contains("--versus takes"), "{err}");
        let err = VersusOptions::parse("--inject 'syscall:getppid=1").unwrap_err();
        assert!(err.contains("unbalanced"), "{err}");
        let lsm = variants(
            &[],
            &[inject("file_open=5")],
            &VersusOptions::parse("--inject syscall:getppid=1").unwrap(),
        )
        .unwrap_err();
        assert!(lsm.to_string().contains("both variants"), "{lsm}");
    }
}
