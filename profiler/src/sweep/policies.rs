//! The policy each sweep value runs under, made by hookprof so the sweep is reproducible from
//! its command line. Each is written in the `--policy` file format and read by its parser, so
//! a made policy is checked as a user's would be.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::json;

use crate::policy::{LandlockRuleset, Policy, SeccompPolicy};

/// The syscall each made seccomp filter denies: one no workload makes (switching process
/// accounting on), so every filter runs for every syscall and lets it through.
const DENIED_SYSCALL: &str = "acct";

/// One Landlock layer that handles every right and allows all of them beneath `/` (the
/// workloads run as without it), plus `rules` rules, each on a directory of its own made
/// under `dirs` (Landlock keeps a rule on the directory's inode: a path walk meets the rules
/// of the directories it passes through).
pub fn landlock_rules(rules: u64, dirs: &Path) -> Result<Policy> {
    // The rules travel on the runner's command line (one argument): a count that cannot is
    // refused before its directories are made, not after (crate::safety::limits checks the line).
    let per_rule = dirs.as_os_str().len() + r#"{"path":"/rule-00000","access":"read"},"#.len();
    let most = crate::safety::limits::MAX_ARGUMENT / per_rule;
    if usize::try_from(rules).map_or(true, |r| r > most) {
        bail!(
            "--sweep landlock-rules={rules}: its rules would not fit on the runner's command \
             line (the kernel's {} KiB for one argument, E2BIG): sweep at most {most} rules",
            crate::safety::limits::MAX_ARGUMENT / 1024
        );
    }
    let mut allow = vec![json!({ "path": "/", "access": "all" })];
    for i in 0..rules {
        let dir = dirs.join(format!("rule-{i}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("make the rule directory {}", dir.display()))?;
        allow.push(json!({ "path": dir, "access": "read" }));
    }
    landlock(vec![json!({ "handled": "all", "allow": allow })])
}

/// `layers` Landlock layers, each handling every right and allowing all beneath `/`: each
/// is a domain of its own that every access checks. None for 0.
pub fn landlock_layers(layers: u64) -> Result<Option<Policy>> {
    if layers == 0 {
        return Ok(None);
    }
    let layer = json!({ "handled": "all", "allow": [{ "path": "/", "access": "all" }] });
    landlock(vec![layer; layers as usize]).map(Some)
}

/// `filters` seccomp filters, each denying one syscall no workload makes and allowing the
/// rest. Since Linux 5.11 the kernel's action cache answers for a syscall every filter always
/// allows without running them; `checked` syscalls each filter decides by an argument (no
/// caller passes the one it denies), so every filter runs on their every call.
pub fn seccomp_filters(filters: u64, checked: Option<&str>) -> Result<Vec<Policy>> {
    let text = json!({
        "default_action": "allow",
        "action": "errno",
        "syscalls": [DENIED_SYSCALL],
        "arg_checked": Vec::from_iter(checked),
    })
    .to_string();
    let filter = SeccompPolicy::from_json(&text).context("the sweep's seccomp filter")?;
    Ok((0..filters)
        .map(|_| Policy::Seccomp(filter.clone()))
        .collect())
}

/// One seccomp filter that checks `before` rules ahead of `syscall`'s: seccompiler lays a
/// filter's rules out as one chain in ascending syscall number, so the rules are for the
/// syscalls numbered lowest. Each rule, and `syscall`'s, denies only a first argument no
/// caller passes (so nothing is denied, and the kernel's action cache cannot skip them).
pub fn seccomp_position(before: usize, syscall: &str) -> Result<Policy> {
    let mut checked: Vec<String> = syscalls_below(syscall).into_iter().take(before).collect();
    checked.push(syscall.to_string());
    let text = json!({
        "default_action": "allow",
        "action": "errno",
        "syscalls": [DENIED_SYSCALL],
        "arg_checked": checked,
    })
    .to_string();
    Ok(Policy::Seccomp(
        SeccompPolicy::from_json(&text).context("the sweep's seccomp filter")?,
    ))
}

/// This architecture's syscalls numbered below `syscall`, lowest first (none if it is not a
/// syscall here), but the denied one, which has a rule of its own.
pub fn syscalls_below(syscall: &str) -> Vec<String> {
    let Ok(limit) = syscall.parse::<syscalls::Sysno>() else {
        return Vec::new();
    };
    syscalls::Sysno::iter()
        .filter(|s| s.id() < limit.id() && s.name() != DENIED_SYSCALL)
        .map(|s| s.name().to_string())
        .collect()
}

/// Where AppArmor takes profiles: present only where it is an active LSM.
const APPARMOR_LOAD: &str = "/sys/kernel/security/apparmor/.load";

/// The AppArmor profiles a sweep loaded, unloaded when it is dropped (the run's end, however
/// it ends short of SIGKILL).
#[derive(Default)]
pub struct LoadedProfiles(Vec<PathBuf>);

impl Drop for LoadedProfiles {
    fn drop(&mut self) {
        for file in &self.0 {
            // Best effort: a profile left loaded confines nothing until a task enters it.
            let _ = std::process::Command::new("apparmor_parser")
                .arg("-R")
                .arg(file)
                .output();
        }
    }
}

/// An AppArmor profile that allows what the workloads do (every file access, capability,
/// signal, socket) and has `rules` more file rules, each on a path of its own, written in
/// `dir` and loaded with apparmor_parser (kept in `loaded` until the run ends). AppArmor
/// compiles a profile's file rules into one automaton, walked once per path looked up.
pub fn apparmor_rules(rules: u64, dir: &Path, loaded: &mut LoadedProfiles) -> Result<Policy> {
    crate::environment::ensure_securityfs();
    if !Path::new(APPARMOR_LOAD).exists() {
        bail!(
            "--sweep apparmor-rules: AppArmor is not an active LSM on this kernel (no \
             {APPARMOR_LOAD}): boot with it (lsm=...,apparmor) or sweep another parameter"
        );
    }
    let name = format!("hookprof-sweep-rules-{rules}");
    let mut text = format!(
        "profile {name} {{\n  /** rwlkmix,\n  capability,\n  signal,\n  unix,\n  network,\n  \
         ptrace,\n"
    );
    for i in 0..rules {
        text.push_str(&format!("  /hookprof-sweep/rule-{i}/** rw,\n"));
    }
    text.push_str("}\n");
    let file = dir.join(&name);
    std::fs::write(&file, text).with_context(|| format!("write {}", file.display()))?;
    let out = std::process::Command::new("apparmor_parser")
        .args(["-r", "-K"])
        .arg(&file)
        .output()
        .context("run apparmor_parser (package apparmor) to load the sweep's profiles")?;
    if !out.status.success() {
        bail!(
            "apparmor_parser could not load {name}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    loaded.0.push(file);
    Policy::parse(&format!("apparmor:{name}"))
}

fn landlock(layers: Vec<serde_json::Value>) -> Result<Policy> {
    let text = json!({ "layers": layers }).to_string();
    Ok(Policy::Landlock(
        LandlockRuleset::from_json(&text).context("the sweep's Landlock ruleset")?,
    ))
}
