//! Security policies the measured work runs under (`--policy KIND:SPEC`): a Landlock ruleset, a
//! seccomp filter, or an AppArmor profile. An unconfined task barely exercises an LSM (AppArmor
//! returns early, Landlock has no domain to check, seccomp no filter to run), so what a policy
//! costs only shows when the work runs under it.
//!
//! A policy is parsed and checked against the running kernel before anything runs (bad input is
//! an error there); `apply` then puts the calling thread, and whatever it forks from then on,
//! under it: the task that does the measured work applies it before setting its workload up.
mod apparmor;
mod landlock;
mod seccomp;

use std::{fmt, os::fd::RawFd, path::Path};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::results::PolicyRecord;

pub use self::{apparmor::AppArmorProfile, landlock::LandlockRuleset, seccomp::SeccompPolicy};

/// One `--policy KIND:SPEC`, parsed (it travels to the runner as JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Policy {
    Landlock(LandlockRuleset),
    Seccomp(SeccompPolicy),
    AppArmor(AppArmorProfile),
}

impl Policy {
    /// Parses `landlock:FILE`, `seccomp:FILE` or `apparmor:PROFILE` (files are read here).
    pub fn parse(spec: &str) -> Result<Policy> {
        let (kind, arg) = spec.split_once(':').context(
            "expected KIND:SPEC, e.g. landlock:rules.json, seccomp:filter.json or apparmor:PROFILE",
        )?;
        if arg.is_empty() {
            bail!("nothing after '{kind}:'");
        }
        Policy::of_kind(kind, &Policy::text_of(kind, arg)?).with_context(|| arg.to_string())
    }

    /// What `KIND:SPEC` gives the policy: a file's text (landlock, seccomp), or the name itself
    /// (apparmor's profile).
    pub fn text_of(kind: &str, arg: &str) -> Result<String> {
        match kind {
            "landlock" | "seccomp" => crate::safety::input::read_text(Path::new(arg)),
            "apparmor" => Ok(arg.to_string()),
            other => bail!("unknown kind '{other}'; valid: landlock, seccomp, apparmor"),
        }
    }

    /// The policy of `kind` from `text_of`'s text.
    pub fn of_kind(kind: &str, text: &str) -> Result<Policy> {
        Ok(match kind {
            "landlock" => Policy::Landlock(LandlockRuleset::from_json(text)?),
            "seccomp" => Policy::Seccomp(SeccompPolicy::from_json(text)?),
            "apparmor" => Policy::AppArmor(AppArmorProfile::new(text)),
            other => bail!("unknown kind '{other}'; valid: landlock, seccomp, apparmor"),
        })
    }

    /// Fails (before anything runs) when this kernel cannot enforce the policy: its LSM is not
    /// active, an AppArmor profile is not loaded, a ruleset's path does not exist.
    pub fn check(&self, active_lsms: &[String]) -> Result<()> {
        let lsm = match self {
            Policy::Landlock(_) => Some("landlock"),
            Policy::AppArmor(_) => Some("apparmor"),
            Policy::Seccomp(_) => None, // not an LSM: the kernel says at apply time
        };
        // An unknown list (no securityfs) leaves the verdict to the kernel, at apply time.
        if let Some(lsm) = lsm.filter(|_| !active_lsms.is_empty()) {
            if !active_lsms.iter().any(|l| l == lsm) {
                bail!(
                    "--policy {self}: {lsm} is not an active LSM on this kernel (LSMs: {}); add \
                     it to the lsm= boot parameter",
                    active_lsms.join(",")
                );
            }
        }
        match self {
            Policy::Landlock(r) => r.check(),
            Policy::Seccomp(s) => s.check(),
            Policy::AppArmor(p) => p.check(),
        }
        .with_context(|| format!("--policy {self}"))
    }

    /// Puts the calling thread (and whatever it forks from now on) under the policy. Landlock
    /// and seccomp confine the calling thread only. `harness_fds` are the pipes the caller
    /// keeps talking to its supervisor over, which a seccomp allow-list lets through.
    pub fn apply(&self, harness_fds: &[RawFd]) -> Result<()> {
        match self {
            Policy::Landlock(r) => r.apply(),
            Policy::Seccomp(s) => s.apply(harness_fds),
            Policy::AppArmor(p) => p.apply(),
        }
        .with_context(|| format!("apply --policy {self}"))
    }

    /// What the results file records: the kind, what was given, and the rules themselves, so
    /// a comparison says what differed even when the file is gone.
    pub fn record(&self) -> PolicyRecord {
        let (kind, rules) = match self {
            Policy::Landlock(r) => ("landlock", r.record()),
            Policy::Seccomp(s) => ("seccomp", s.record()),
            Policy::AppArmor(p) => ("apparmor", serde_json::json!(p.name())),
        };
        PolicyRecord {
            kind: kind.into(),
            summary: self.to_string(),
            rules,
        }
    }
}

impl fmt::Display for Policy {
    /// A one-line summary for reports: `landlock (2 layers, 15 rules)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Policy::Landlock(r) => write!(f, "landlock ({})", r.summary()),
            Policy::Seccomp(s) => write!(f, "seccomp ({})", s.summary()),
            Policy::AppArmor(p) => write!(f, "apparmor ({})", p.name()),
        }
    }
}

/// Accepts `"x"` or `["x", "y"]` where a list of names is expected.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn names(&self) -> &[String] {
        match self {
            OneOrMany::One(s) => std::slice::from_ref(s),
            OneOrMany::Many(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_needs_a_known_kind_and_an_argument() {
        let err = |s: &str| format!("{:#}", Policy::parse(s).unwrap_err());
        assert!(err("landlock").contains("expected KIND:SPEC"));
        assert!(err("selinux:x").contains("unknown kind 'selinux'"));
        assert!(err("apparmor:").contains("nothing after"));
        assert!(err("landlock:/nonexistent/rules.json")
            .contains("rules.json: cannot read: No such file"));
    }

    #[test]
    fn an_apparmor_spec_names_a_profile() {
        let p = Policy::parse("apparmor:hookprof-test").unwrap();
        assert_eq!(p.to_string(), "apparmor (hookprof-test)");
        assert_eq!(p.record().kind, "apparmor");
    }

    /// The runner gets its policies as JSON: each kind must come back the same.
    #[test]
    fn policies_survive_the_trip_to_the_runner() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path.display().to_string()
        };
        let landlock = file(
            "l.json",
            r#"{"layers": [{"handled": ["read_file", "write"], "allow": [{"path": "/tmp", "access": "all"}]}]}"#,
        );
        let seccomp = file(
            "s.json",
            r#"{"default_action": "errno:38", "syscalls": ["read", "getppid"]}"#,
        );
        let policies = vec![
            Policy::parse(&format!("landlock:{landlock}")).unwrap(),
            Policy::parse(&format!("seccomp:{seccomp}")).unwrap(),
            Policy::parse("apparmor:hookprof-test").unwrap(),
        ];
        let json = serde_json::to_string(&policies).unwrap();
        let back: Vec<Policy> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, policies);
    }

    #[test]
    fn an_inactive_lsm_is_named_with_the_active_ones() {
        let p = Policy::parse("apparmor:x").unwrap();
        let lsms = ["lockdown".to_string(), "landlock".to_string()];
        let e = format!("{:#}", p.check(&lsms).unwrap_err());
        assert!(e.contains("apparmor is not an active LSM"), "{e}");
        assert!(e.contains("lockdown,landlock"), "{e}");
    }
}
