//! `--policy apparmor:PROFILE`: an AppArmor profile already loaded in the kernel (with
//! apparmor_parser, or written to securityfs), which the measured task changes to before its
//! workload is set up: `changeprofile PROFILE` written to the task's own
//! `/proc/thread-self/attr/apparmor/current`, what libapparmor's aa_change_profile does. An
//! unconfined task may change to any loaded profile; the change holds for that thread and
//! whatever it forks or execs.
use anyhow::{bail, Context, Result};

const PROFILES: &str = "/sys/kernel/security/apparmor/profiles";

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct AppArmorProfile(String);

impl AppArmorProfile {
    pub fn new(name: &str) -> AppArmorProfile {
        AppArmorProfile(name.to_string())
    }

    pub fn name(&self) -> &str {
        &self.0
    }

    /// The profile is loaded (securityfs lists it as `NAME (MODE)`).
    pub fn check(&self) -> Result<()> {
        let listed = std::fs::read_to_string(PROFILES)
            .with_context(|| format!("cannot read {PROFILES} (needs root and securityfs)"))?;
        if loaded(&listed, &self.0) {
            return Ok(());
        }
        bail!(
            "profile '{}' is not loaded (load it with apparmor_parser -r FILE; {} profiles \
             are listed in {PROFILES})",
            self.0,
            listed.lines().count()
        )
    }

    pub fn apply(&self) -> Result<()> {
        // The per-LSM file (Linux 5.8+) is unambiguous when several LSMs use attr/current.
        let path = [
            "/proc/thread-self/attr/apparmor/current",
            "/proc/thread-self/attr/current",
        ]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .context("no /proc/thread-self/attr interface")?;
        std::fs::write(path, format!("changeprofile {}", self.0))
            .with_context(|| format!("write 'changeprofile {}' to {path}", self.0))
    }
}

/// Whether securityfs's profile list holds `name` (lines are `NAME (MODE)`).
fn loaded(listed: &str, name: &str) -> bool {
    listed
        .lines()
        .any(|l| l.rsplit_once(" (").is_some_and(|(n, _)| n == name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_is_found_by_its_whole_name() {
        let listed = "/usr/bin/man (enforce)\nhookprof test (complain)\nlsb_release (enforce)\n";
        assert!(loaded(listed, "hookprof test"));
        assert!(loaded(listed, "/usr/bin/man"));
        assert!(!loaded(listed, "hookprof"));
        assert!(!loaded(listed, "enforce"));
    }
}
