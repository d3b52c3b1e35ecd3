//! A variant of a run: what its runners run under. A run has one (its own options); `--versus`
//! two that alternate; `--sweep` one per value. Each variant's results record it (`pairing`),
//! so `compare` pairs any two of them round by round.
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
