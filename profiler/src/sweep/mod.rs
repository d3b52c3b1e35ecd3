//! `run --sweep PARAMETER=V1,V2,...`: one variant of the measured kernel per value, all
//! measured in the same rounds as `--versus` measures its two (each workload in every variant
//! back to back, in a random order, a fresh runner each), and a line fitted through them per
//! workload and per path: what each rule, filter, layer or injected ns adds.
//!
//! hookprof makes each value's policy itself (`policies`), so a sweep is reproducible from
//! its command line; the policies are recorded in each value's results.
pub mod compare;
pub mod fit;
mod policies;

pub use policies::LoadedProfiles;
mod render;
pub mod report;
pub mod split;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::{
    policy::Policy,
    probes::injection::{Injection, MAX_SYSCALL_NS},
    variant::Variant,
};

/// `hookprof report --sweep FILES`: the sweep the files are the values of, as the run printed it.
pub fn report_files(args: &crate::report::ReportArgs) -> Result<std::process::ExitCode> {
    let files = args
        .files
        .iter()
        .map(|f| crate::results::Results::load(f))
        .collect::<Result<Vec<_>, _>>()?;
    let sweep = report::Sweep::of_files(files)?;
    crate::stdio::print(crate::output::render(&sweep, args.format)?)?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// The most values a sweep takes: each is a variant measured in every round.
pub const MAX_VALUES: usize = 12;

/// What a sweep varies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parameter {
    /// Rules of one Landlock layer (beside the one that allows everything beneath /).
    LandlockRules,
    /// Stacked Landlock layers, each allowing everything beneath /.
    LandlockLayers,
    /// File rules in an AppArmor profile that allows what the workloads do (loaded by
    /// hookprof, unloaded when the run ends).
    AppArmorRules,
    /// Directories between the workloads' scratch directory and their files, under one
    /// Landlock layer allowing everything beneath / (which checks each step of a path walk).
    LandlockDepth,
    /// Stacked seccomp filters, each denying one syscall the workloads never make, and deciding
    /// `checked` (if any) by its argument, so the kernel's action cache cannot skip them.
    SeccompFilters { checked: Option<String> },
    /// Where `syscall` sits in one seccomp filter: after N rules the filter checks first (each
    /// for another syscall, decided by an argument no caller passes, so none is denied).
    SeccompPosition { syscall: String },
    /// ns busy-waited on the way out of a syscall (`--inject syscall:NAME=NS`).
    Inject { syscall: String },
    /// Copies of each workload at once (`--parallel`), up to the CPUs this process may use.
    Copies,
    /// The user's policy of `kind`, its text (a file's, or an AppArmor profile's name) with
    /// each `{N}` replaced by the value.
    Template {
        kind: String,
        spec: String,
        text: String,
    },
}

/// The slot a template's value goes in.
const SLOT: &str = "{N}";

/// `--sweep` as given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepSpec {
    pub parameter: Parameter,
    pub values: Vec<u64>,
}

const FORMS: &str = "landlock-rules=N,..., landlock-layers=N,..., landlock-depth=N,..., \
                     apparmor-rules=N,..., \
                     seccomp-filters[:SYSCALL]=N,..., seccomp-position:SYSCALL=N,..., \
                     inject:SYSCALL=NS,..., copies=N,... or \
                     template:KIND:SPEC=N,... (SPEC's text with {N} in it)";

impl SweepSpec {
    /// Parses `landlock-rules=0,1,10`, `landlock-layers=1,2,4`, `seccomp-filters=0,1,2,4,8`
    /// or `inject:getppid=0,100,200`.
    pub fn parse(text: &str) -> Result<SweepSpec, String> {
        let (name, values) = text
            .split_once('=')
            .ok_or_else(|| format!("expected {FORMS}"))?;
        let parameter = match name {
            "landlock-rules" => Parameter::LandlockRules,
            "landlock-layers" => Parameter::LandlockLayers,
            "landlock-depth" => Parameter::LandlockDepth,
            "apparmor-rules" => Parameter::AppArmorRules,
            "seccomp-filters" => Parameter::SeccompFilters { checked: None },
            "copies" => Parameter::Copies,
            _ if name.starts_with("template:") => template(name)?,
            _ => match (name.split_once(':'), name.strip_prefix("inject:")) {
                (_, Some(syscall)) if !syscall.is_empty() => Parameter::Inject {
                    syscall: syscall.strip_prefix("syscall:").unwrap_or(syscall).into(),
                },
                (Some(("seccomp-position", syscall)), _) if !syscall.is_empty() => {
                    Parameter::SeccompPosition {
                        syscall: syscall.into(),
                    }
                }
                (Some(("seccomp-filters", syscall)), _) if !syscall.is_empty() => {
                    Parameter::SeccompFilters {
                        checked: Some(syscall.into()),
                    }
                }
                _ => return Err(format!("unknown parameter '{name}'; expected {FORMS}")),
            },
        };
        let checked = match &parameter {
            Parameter::Inject { syscall } => Some(syscall),
            Parameter::SeccompFilters { checked } => checked.as_ref(),
            Parameter::SeccompPosition { syscall } => Some(syscall),
            _ => None,
        };
        if let Some(syscall) = checked {
            Injection::parse(&format!("syscall:{syscall}=0"))?;
        }
        let values: Vec<u64> = values
            .split(',')
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("'{v}' is not a whole number"))
            })
            .collect::<Result<_, _>>()?;
        let mut distinct = values.clone();
        distinct.sort_unstable();
        distinct.dedup();
        if distinct.len() != values.len() || values.len() < 2 {
            return Err(format!(
                "--sweep {name}: give two or more different values (given: {})",
                values.len()
            ));
        }
        if values.len() > MAX_VALUES {
            return Err(format!(
                "--sweep {name}: {} values, at most {MAX_VALUES} (each is measured in every round)",
                values.len()
            ));
        }
        let spec = SweepSpec { parameter, values };
        let limit = spec.limit();
        if let Some(v) = spec.values.iter().find(|&&v| v > limit) {
            let cpus = match spec.parameter {
                Parameter::Copies => " (the CPUs this process may run on: a copy each)",
                _ => "",
            };
            return Err(format!("--sweep {name}: {v} is more than {limit}{cpus}"));
        }
        if spec.parameter == Parameter::Copies && spec.values.contains(&0) {
            return Err("--sweep copies: a value of 0 copies runs nothing".into());
        }
        Ok(spec)
    }

    /// The parameter's name as `--sweep` takes it.
    pub fn name(&self) -> String {
        match &self.parameter {
            Parameter::LandlockRules => "landlock-rules".into(),
            Parameter::LandlockLayers => "landlock-layers".into(),
            Parameter::LandlockDepth => "landlock-depth".into(),
            Parameter::AppArmorRules => "apparmor-rules".into(),
            Parameter::SeccompFilters { checked: None } => "seccomp-filters".into(),
            Parameter::SeccompFilters {
                checked: Some(syscall),
            } => format!("seccomp-filters:{syscall}"),
            Parameter::Inject { syscall } => format!("inject:{syscall}"),
            Parameter::Copies => "copies".into(),
            Parameter::SeccompPosition { syscall } => format!("seccomp-position:{syscall}"),
            Parameter::Template { kind, spec, .. } => format!("template:{kind}:{spec}"),
        }
    }

    /// What one step of the parameter is, for "ns per ...".
    pub fn unit(&self) -> &'static str {
        match self.parameter {
            Parameter::LandlockRules => "rule",
            Parameter::LandlockLayers => "layer",
            Parameter::LandlockDepth => "directory deeper",
            Parameter::AppArmorRules => "rule",
            Parameter::SeccompFilters { .. } => "filter",
            Parameter::Inject { .. } => "ns injected",
            Parameter::Copies => "copy",
            Parameter::SeccompPosition { .. } => "rule before it",
            Parameter::Template { .. } => "step",
        }
    }

    /// The largest value that makes sense: the kernel's limits, or a wait that would stall.
    fn limit(&self) -> u64 {
        match &self.parameter {
            // Each rule is a directory made for it.
            Parameter::LandlockRules => 10_000,
            // LANDLOCK_MAX_NUM_LAYERS.
            Parameter::LandlockLayers => 16,
            // Two bytes a step, under PATH_MAX (4,096) with the temp dir's own path.
            Parameter::LandlockDepth => 1_500,
            Parameter::AppArmorRules => 10_000,
            // Each filter is 4 instructions and the kernel's 4-instruction penalty, under
            // MAX_INSNS_PER_PATH (32,768) for the whole stack.
            Parameter::SeccompFilters { .. } => 1_000,
            Parameter::Inject { .. } => MAX_SYSCALL_NS,
            // One CPU a copy: past that the copies queue for CPUs, which is not contention
            // inside the kernel's paths.
            Parameter::Copies => crate::environment::allowed_cpus().map_or(1, |c| c.len()) as u64,
            Parameter::Template { .. } => u64::MAX,
            // The rules before it are for syscalls numbered below it (the filter's chain runs
            // in ascending number).
            Parameter::SeccompPosition { syscall } => {
                policies::syscalls_below(syscall).len() as u64
            }
        }
    }

    /// The name of the variant at `value` (`seccomp-filters=4`).
    pub fn variant_name(&self, value: u64) -> String {
        format!("{}={value}", self.name())
    }

    /// Where `-o FILE` puts value `value`'s results: FILE's name with the parameter and
    /// value before its extension (`run.json` -> `run.seccomp-filters-4.json`).
    fn output_path(&self, base: &Path, value: u64) -> PathBuf {
        let parameter = match &self.parameter {
            // A template's SPEC may be a path: its file name alone.
            Parameter::Template { kind, spec, .. } => format!(
                "template-{kind}-{}",
                Path::new(spec)
                    .file_stem()
                    .unwrap_or_default()
                    .to_string_lossy()
            ),
            _ => self.name().replace(':', "-"),
        };
        let tag = format!("{parameter}-{value}");
        let stem = base.file_stem().unwrap_or_default().to_string_lossy();
        let name = match base.extension() {
            Some(ext) => format!("{stem}.{tag}.{}", ext.to_string_lossy()),
            None => format!("{stem}.{tag}"),
        };
        base.with_file_name(name)
    }

    /// Where `-o FILE` puts the results of each value after the first (`output_path`).
    pub fn output_paths(&self, base: &Path) -> Vec<PathBuf> {
        self.values[1..]
            .iter()
            .map(|&v| self.output_path(base, v))
            .collect()
    }

    /// Whether the values' policies need a directory of their own that outlives the run
    /// (Landlock rule directories, AppArmor profile files).
    pub fn makes_files(&self) -> bool {
        matches!(
            self.parameter,
            Parameter::LandlockRules | Parameter::AppArmorRules
        )
    }

    /// One variant per value: the run's own policies and injections, and the value's.
    /// `rule_dirs` is where Landlock rule directories and AppArmor profiles are made (they must
    /// outlive the run), `loaded` keeps the profiles loaded until it is dropped.
    pub fn variants(
        &self,
        run_policies: &[Policy],
        run_inject: &[Injection],
        rule_dirs: &Path,
        loaded: &mut LoadedProfiles,
    ) -> Result<Vec<Variant>> {
        if let Some(i) = run_inject
            .iter()
            .find(|i| !matches!(i, Injection::Syscall(_)))
        {
            bail!(
                "--inject {i} with --sweep: a BPF LSM injection is loaded for the whole run, in \
                 every value; use syscall:NAME=NS injections or policies"
            );
        }
        self.values
            .iter()
            .map(|&value| {
                let name = self.variant_name(value);
                let added = self.added_at(value, rule_dirs, loaded)?;
                let mut variant = Variant::of_run(run_policies, run_inject);
                variant.name = name;
                variant.policies.extend(added.policies);
                variant.inject.extend(added.inject);
                variant.copies = added.copies;
                variant.scratch_depth = added.scratch_depth;
                Ok(variant)
            })
            .collect()
    }

    /// What value `value` adds to the run's own options (see `variants`).
    fn added_at(&self, value: u64, rule_dirs: &Path, loaded: &mut LoadedProfiles) -> Result<Added> {
        let mut added = Added::default();
        match &self.parameter {
            Parameter::LandlockRules => added
                .policies
                .push(policies::landlock_rules(value, rule_dirs)?),
            Parameter::LandlockLayers => added.policies.extend(policies::landlock_layers(value)?),
            Parameter::AppArmorRules => added
                .policies
                .push(policies::apparmor_rules(value, rule_dirs, loaded)?),
            Parameter::LandlockDepth => {
                added.policies.extend(policies::landlock_layers(1)?);
                added.scratch_depth = Some(value as usize);
            }
            Parameter::SeccompFilters { checked } => added
                .policies
                .extend(policies::seccomp_filters(value, checked.as_deref())?),
            Parameter::Inject { syscall } => {
                let i = Injection::parse(&format!("syscall:{syscall}={value}"))
                    .map_err(anyhow::Error::msg)?;
                added.inject = Some(i);
            }
            Parameter::Copies => added.copies = Some(value as usize),
            Parameter::SeccompPosition { syscall } => added
                .policies
                .push(policies::seccomp_position(value as usize, syscall)?),
            Parameter::Template { kind, text, .. } => {
                let filled = text.replace(SLOT, &value.to_string());
                let policy = Policy::of_kind(kind, &filled)
                    .with_context(|| format!("{} at {value}", self.name()))?;
                added.policies.push(policy);
            }
        }
        Ok(added)
    }
}

/// What one swept value adds to the run's own options.
#[derive(Default)]
struct Added {
    policies: Vec<Policy>,
    inject: Option<Injection>,
    copies: Option<usize>,
    scratch_depth: Option<usize>,
}

/// `template:KIND:SPEC`: SPEC's text (read now, as `--policy` reads its file) must hold `{N}`.
fn template(name: &str) -> Result<Parameter, String> {
    let Some((kind, spec)) = name
        .strip_prefix("template:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(_, spec)| !spec.is_empty())
    else {
        return Err(format!(
            "'{name}': expected template:KIND:SPEC, e.g. template:landlock:rules.json"
        ));
    };
    let text = Policy::text_of(kind, spec).map_err(|e| format!("{e:#}"))?;
    if !text.contains(SLOT) {
        return Err(format!("{spec}: no {SLOT} in it for the sweep's values"));
    }
    Ok(Parameter::Template {
        kind: kind.into(),
        spec: spec.into(),
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_parameter_parses_and_bad_input_says_what_is_expected() {
        let s = SweepSpec::parse("seccomp-filters=0,1,2,4,8").unwrap();
        assert_eq!(
            (s.parameter.clone(), s.values.clone()),
            (
                Parameter::SeccompFilters { checked: None },
                vec![0, 1, 2, 4, 8]
            )
        );
        assert_eq!(s.variant_name(4), "seccomp-filters=4");
        let s = SweepSpec::parse("seccomp-filters:getppid=0,2").unwrap();
        let v = s
            .variants(&[], &[], Path::new("/"), &mut LoadedProfiles::default())
            .unwrap();
        assert_eq!(
            v[1].policies[1].to_string(),
            "seccomp (errno for 1 syscall, allow otherwise; getppid decided by an argument)"
        );
        assert_eq!(s.variant_name(2), "seccomp-filters:getppid=2");
        let s = SweepSpec::parse("inject:syscall:getppid=0,100").unwrap();
        assert_eq!(s.name(), "inject:getppid");
        assert_eq!(
            s.output_path(Path::new("d/run.json"), 100),
            Path::new("d/run.inject-getppid-100.json")
        );
        for (bad, says) in [
            ("landlock-rules", "expected"),
            ("rules=1,2", "unknown parameter"),
            ("landlock-rules=1", "two or more"),
            ("landlock-rules=1,1", "two or more"),
            ("landlock-rules=1,x", "not a whole number"),
            ("landlock-layers=1,17", "more than 16"),
            ("inject:nosuchcall=0,1", "not a syscall"),
            ("seccomp-filters:nosuchcall=0,1", "not a syscall"),
            ("copies=0,1", "0 copies"),
            ("seccomp-position:getppid=0,100000", "more than"),
        ] {
            let err = SweepSpec::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn each_value_adds_its_policy_to_the_runs_own() {
        let dir = tempfile::tempdir().unwrap();
        let own = Policy::parse(&format!(
            "seccomp:{}",
            write(
                dir.path(),
                "own.json",
                r#"{"default_action":"allow","action":"errno","syscalls":["acct"]}"#
            )
        ))
        .unwrap();
        let s = SweepSpec::parse("seccomp-filters=0,3").unwrap();
        let v = s
            .variants(
                std::slice::from_ref(&own),
                &[],
                dir.path(),
                &mut LoadedProfiles::default(),
            )
            .unwrap();
        assert_eq!(v[0].policies.len(), 1);
        assert_eq!(v[1].policies.len(), 4);
        assert_eq!(v[1].name, "seccomp-filters=3");
        let s = SweepSpec::parse("landlock-rules=0,5").unwrap();
        let v = s
            .variants(&[], &[], dir.path(), &mut LoadedProfiles::default())
            .unwrap();
        assert_eq!(v[1].policies[0].to_string(), "landlock (1 layer, 6 rules)");
        let s = SweepSpec::parse("inject:getppid=0,250").unwrap();
        let v = s
            .variants(&[], &[], dir.path(), &mut LoadedProfiles::default())
            .unwrap();
        assert_eq!(v[1].inject[0].to_string(), "syscall:getppid=250");
        let lsm = Injection::parse("file_open=5").unwrap();
        let err = s
            .variants(&[], &[lsm], dir.path(), &mut LoadedProfiles::default())
            .unwrap_err();
        assert!(err.to_string().contains("every value"), "{err}");
    }

    #[test]
    fn a_template_takes_each_value_in_its_slot() {
        let dir = tempfile::tempdir().unwrap();
        let none = write(dir.path(), "none.json", r#"{"default_action": "allow"}"#);
        let err = SweepSpec::parse(&format!("template:seccomp:{none}=1,2")).unwrap_err();
        assert!(err.contains("no {N}"), "{err}");
        let errno = write(
            dir.path(),
            "errno.json",
            r#"{"default_action": "allow", "action": "errno:{N}", "syscalls": ["acct"]}"#,
        );
        let s = SweepSpec::parse(&format!("template:seccomp:{errno}=1,7")).unwrap();
        let v = s
            .variants(&[], &[], dir.path(), &mut LoadedProfiles::default())
            .unwrap();
        assert_eq!(
            v[1].policies[0].to_string(),
            "seccomp (errno:7 for 1 syscall, allow otherwise)"
        );
        assert_eq!(
            s.output_path(Path::new("r.json"), 7),
            Path::new("r.template-seccomp-errno-7.json")
        );
        // A value that makes the policy invalid is named.
        let s = SweepSpec::parse(&format!("template:seccomp:{errno}=1,5000")).unwrap();
        let err = s
            .variants(&[], &[], dir.path(), &mut LoadedProfiles::default())
            .unwrap_err();
        assert!(format!("{err:#}").contains("at 5000"), "{err:#}");
        let s = SweepSpec::parse("template:apparmor:rules-{N}=1,10").unwrap();
        let v = s
            .variants(&[], &[], dir.path(), &mut LoadedProfiles::default())
            .unwrap();
        assert_eq!(
            v[1].policies[0],
            Policy::AppArmor(crate::policy::AppArmorProfile::new("rules-10"))
        );
    }

    fn write(dir: &Path, name: &str, text: &str) -> String {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}
