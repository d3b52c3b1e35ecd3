//! The shape of a run, built once where its arguments are checked: one variant (the run's own
//! options), two that alternate (`--versus`, see `variant`), or one per swept value
//! (`--sweep`); with the variants, where `-o` writes each after the first, the formats the
//! shape prints, what a sweep made for its variants, and how each variant's results are
//! labelled and printed.
use std::path::Path;

use anyhow::{bail, Result};

use super::{outputs::Outputs, CommonMeasureArgs, SessionArgs};
use crate::{
    compare::{self, Comparison},
    output::{self, Document, Format},
    policy::Policy,
    results::{Destination, PolicyRecord, Results},
    runner::Credentials,
    safety::scratch::Scratch,
    stats::Criteria,
    sweep::{report::Sweep, LoadedProfiles, SweepSpec},
    variant::{self, Variant, VersusOptions},
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
    /// The run's own `--policy`, which every variant's runners take on.
    own: Vec<Policy>,
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
        outputs: &Outputs,
        user: Option<Credentials>,
    ) -> Result<RunShape> {
        let own = &session.policy.policy;
        let base = session.output.as_deref();
        let mut shape = RunShape::of(own);
        let paths = match (&session.versus, &session.sweep) {
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
                let paths = base.map(|b| sweep.output_paths(b)).unwrap_or_default();
                shape.variants = sweep.variants(own, &args.inject, at, &mut shape._profiles)?;
                paths
            }
            (Some(versus), _) => {
                shape.kind = Kind::Versus(versus.clone());
                shape.variants = variant::versus(own, &args.inject, versus)?.to_vec();
                Vec::from_iter(base.map(variant::versus_output_path))
            }
            (None, None) => {
                shape.variants = vec![Variant::of_run(own, &args.inject)];
                return Ok(shape);
            }
        };
        // A shape of many variants, against the rest of the run.
        let (option, printed) = match shape.kind {
            Kind::Versus(_) => ("--versus", Comparison::FORMATS),
            _ => ("--sweep", Sweep::FORMATS),
        };
        if outputs.baseline.is_some() {
            bail!("{option} keeps no baseline: its variants are compared with each other");
        }
        // Each variant's policies travel on its runners' command lines: one the kernel would
        // refuse fails now, not when its turn comes.
        for variant in &shape.variants {
            let line = crate::runner::serve::RunnerArgs::command_line(0, user, &variant.policies);
            crate::safety::limits::ensure_arguments_fit(
                &format!("{option} {}", variant.name),
                &line,
            )?;
        }
        if !printed.contains(&outputs.format) {
            bail!(
                "{option} prints what its variants came to, which has no {} format",
                format!("{:?}", outputs.format).to_lowercase()
            );
        }
        shape.more_destinations = match &outputs.destination {
            Some(d) if d.is_stdout() => {
                bail!("{option} writes a results file per variant: give -o FILE, not -o -")
            }
            Some(_) => paths
                .iter()
                .map(|p| Destination::prepare(p))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        Ok(shape)
    }

    /// A run of one over the run's `own` policies, its variant not made yet.
    fn of(own: &[Policy]) -> RunShape {
        RunShape {
            kind: Kind::Single,
            own: own.to_vec(),
            variants: Vec::new(),
            more_destinations: Vec::new(),
            _profiles: LoadedProfiles::default(),
            _rule_dirs: None,
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
    pub fn results_of(&self, base: Results, run: u64) -> Vec<Results> {
        let Some(given) = self.given() else {
            return vec![base];
        };
        let base_options = variant::base_options(&self.own, &self.variants[0].inject);
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
