//! `--policy seccomp:FILE`: a seccomp filter given as a list of syscalls and two actions, as
//! JSON:
//!
//! ```json
//! { "default_action": "errno", "action": "allow",
//!   "syscalls": ["read", "write", "openat", "close", "newfstatat", "exit_group"] }
//! ```
//!
//! The listed syscalls get `action` (default `allow`), every other one `default_action`: an
//! allow-list with `"default_action": "errno"`, a deny-list with `"default_action": "allow",
//! "action": "errno"`. Actions: `allow`, `errno` (EPERM), `errno:N`, `log`, `trap`,
//! `kill_thread`, `kill_process`. Names are this architecture's syscall names.
//!
//! `"arg_checked": ["getppid"]` (optional) makes the filter decide those syscalls by their
//! first argument: `action` only when it is 0xfeedfacedeadbeef, which no caller passes, else
//! `default_action`. The kernel's per-syscall action cache (Linux 5.11) answers a syscall whose
//! verdict is always "allow" without running the filter; a syscall decided by an argument it
//! cannot answer for, so the filter runs on its every call (as for the argument checks of
//! container profiles).
//!
//! The filter is built with seccompiler. The measuring harness (the runner) needs a few calls
//! of its own between samples: reads and writes on its pipes to the profiler and on its peak
//! RSS files (only on those fds), the tracking window's gate ioctl (only on its invalid fd), the calibration's getppid,
//! pinning, the parallel copies' common start, memory management and exit. An allow-list allows those too, and says so in its
//! summary; without them the runner could not take a second sample.
use std::{
    collections::{btree_map::Entry, BTreeMap},
    os::fd::RawFd,
};

use anyhow::{bail, Context, Result};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use serde::{Deserialize, Serialize};
use syscalls::Sysno;

/// What the harness itself calls while the filter is in force (besides its pipes and the
/// gate).
const HARNESS_SYSCALLS: &[Sysno] = &[
    Sysno::getppid,
    Sysno::sched_setaffinity,
    Sysno::futex,
    Sysno::exit,
    Sysno::exit_group,
    Sysno::mmap,
    Sysno::munmap,
    Sysno::mremap,
    Sysno::madvise,
    Sysno::brk,
    Sysno::rt_sigprocmask,
    Sysno::sched_yield,
    Sysno::clock_gettime,
    // Parallel copies wait for their common start time.
    Sysno::clock_nanosleep,
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeccompPolicy {
    default_action: String,
    #[serde(default = "allow")]
    action: String,
    syscalls: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    arg_checked: Vec<String>,
}

/// The first argument an `arg_checked` syscall's rule matches: no caller passes it.
const NEVER_PASSED: u64 = 0xfeed_face_dead_beef;

fn allow() -> String {
    "allow".into()
}

impl SeccompPolicy {
    pub fn from_json(text: &str) -> Result<SeccompPolicy> {
        let policy: SeccompPolicy = serde_json::from_str(text).context("not a seccomp filter")?;
        let default = action(&policy.default_action).context("default_action")?;
        let listed = action(&policy.action).context("action")?;
        if default == listed {
            bail!(
                "default_action and action are both '{}': the filter would do nothing",
                policy.action
            );
        }
        policy.numbers()?;
        numbers(&policy.arg_checked)?;
        Ok(policy)
    }

    /// `allow for 4 syscalls, errno otherwise; +18 allowed for the harness`.
    pub fn summary(&self) -> String {
        let harness = if self.adds_harness_rules() {
            format!("; +{} allowed for the harness", HARNESS_SYSCALLS.len() + 4)
        } else {
            String::new()
        };
        format!(
            "{} for {} syscall{}, {} otherwise{harness}",
            self.action,
            self.syscalls.len(),
            if self.syscalls.len() == 1 { "" } else { "s" },
            self.default_action
        ) + &match self.arg_checked.as_slice() {
            [] => String::new(),
            names @ [_, _, _, _, ..] => format!(
                "; {} syscalls ({} ... {}) decided by an argument",
                names.len(),
                names[0],
                names[names.len() - 1]
            ),
            names => format!("; {} decided by an argument", names.join(", ")),
        }
    }

    pub fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "default_action": self.default_action,
            "action": self.action,
            "syscalls": self.syscalls,
            "arg_checked": self.arg_checked,
        })
    }

    /// The filter compiles for this architecture.
    pub fn check(&self) -> Result<()> {
        self.program(&[]).map(drop)
    }

    /// Installs the filter on the calling thread (seccompiler sets no_new_privs first); an
    /// allow-list lets the harness read and write `harness_fds`.
    pub fn apply(&self, harness_fds: &[RawFd]) -> Result<()> {
        seccompiler::apply_filter(&self.program(harness_fds)?).context("seccomp(SET_MODE_FILTER)")
    }

    /// An allow-list must let the harness work; a deny-list leaves it alone anyway.
    fn adds_harness_rules(&self) -> bool {
        action(&self.action).ok() == Some(SeccompAction::Allow)
    }

    fn numbers(&self) -> Result<Vec<i64>> {
        numbers(&self.syscalls)
    }

    fn program(&self, harness_fds: &[RawFd]) -> Result<BpfProgram> {
        let mut rules: BTreeMap<i64, Vec<SeccompRule>> = self
            .numbers()?
            .into_iter()
            .map(|n| (n, Vec::new()))
            .collect();
        for n in numbers(&self.arg_checked)? {
            let never =
                SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Eq, NEVER_PASSED)?;
            rules.insert(n, vec![SeccompRule::new(vec![never])?]);
        }
        if self.adds_harness_rules() {
            for s in HARNESS_SYSCALLS {
                rules.entry(s.id() as i64).or_default();
            }
            let gate_fd = [profiler_common::GATE_FD as RawFd];
            allow_on_fds(&mut rules, Sysno::ioctl, &gate_fd)?;
            allow_on_fds(&mut rules, Sysno::read, harness_fds)?;
            allow_on_fds(&mut rules, Sysno::write, harness_fds)?;
            allow_on_fds(&mut rules, Sysno::pread64, harness_fds)?;
        }
        let filter = SeccompFilter::new(
            rules,
            action(&self.default_action)?,
            action(&self.action)?,
            target_arch()?,
        )
        .context("build the filter")?;
        filter.try_into().context("compile the filter")
    }
}

fn numbers(names: &[String]) -> Result<Vec<i64>> {
    names
        .iter()
        .map(|name| {
            name.parse::<Sysno>()
                .map(|s| s.id() as i64)
                .map_err(|_| anyhow::anyhow!("unknown syscall '{name}' on this architecture"))
        })
        .collect()
}

/// Allows `call` when its first argument is one of `fds`; a call the user listed stays
/// allowed on every fd.
fn allow_on_fds(
    rules: &mut BTreeMap<i64, Vec<SeccompRule>>,
    call: Sysno,
    fds: &[RawFd],
) -> Result<()> {
    let Entry::Vacant(entry) = rules.entry(call.id() as i64) else {
        return Ok(());
    };
    if fds.is_empty() {
        return Ok(());
    }
    let on_fd = |fd: RawFd| {
        let arg0 = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Eq,
            fd as u32 as u64,
        )?;
        SeccompRule::new(vec![arg0])
    };
    entry.insert(fds.iter().map(|&fd| on_fd(fd)).collect::<Result<_, _>>()?);
    Ok(())
}

fn action(name: &str) -> Result<SeccompAction> {
    Ok(match name {
        "allow" => SeccompAction::Allow,
        "errno" => SeccompAction::Errno(libc::EPERM as u32),
        "log" => SeccompAction::Log,
        "trap" => SeccompAction::Trap,
        "kill_thread" => SeccompAction::KillThread,
        "kill_process" => SeccompAction::KillProcess,
        other => match other.strip_prefix("errno:").map(str::parse::<u32>) {
            Some(Ok(n)) if n > 0 && n < 4096 => SeccompAction::Errno(n),
            _ => bail!(
                "unknown action '{other}'; valid: allow, errno, errno:N (1-4095), log, trap, \
                 kill_thread, kill_process"
            ),
        },
    })
}

fn target_arch() -> Result<TargetArch> {
    std::env::consts::ARCH.try_into().map_err(|_| {
        anyhow::anyhow!(
            "seccomp filters are not supported on {}",
            std::env::consts::ARCH
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allow_list_parses_and_compiles_with_the_harness_rules() {
        let p = SeccompPolicy::from_json(
            r#"{"default_action": "errno", "syscalls": ["read", "write", "openat", "close"]}"#,
        )
        .unwrap();
        assert_eq!(
            p.summary(),
            format!(
                "allow for 4 syscalls, errno otherwise; +{} allowed for the harness",
                HARNESS_SYSCALLS.len() + 4
            )
        );
        p.check().unwrap();
        let without_pipes = p.program(&[]).unwrap().len();
        assert!(without_pipes > 10);
        assert!(p.program(&[3, 4]).unwrap().len() > without_pipes);
    }

    #[test]
    fn a_deny_list_adds_nothing() {
        let p = SeccompPolicy::from_json(
            r#"{"default_action": "allow", "action": "errno:38", "syscalls": ["getppid"]}"#,
        )
        .unwrap();
        assert_eq!(p.summary(), "errno:38 for 1 syscall, allow otherwise");
        assert_eq!(action(&p.action).unwrap(), SeccompAction::Errno(38));
    }

    #[test]
    fn malformed_filters_say_what_is_wrong() {
        let err = |s: &str| format!("{:#}", SeccompPolicy::from_json(s).unwrap_err());
        assert!(err("[]").contains("not a seccomp filter"));
        assert!(
            err(r#"{"default_action": "deny", "syscalls": []}"#).contains("unknown action 'deny'")
        );
        assert!(err(r#"{"default_action": "errno:0", "syscalls": []}"#).contains("errno:N"));
        assert!(err(r#"{"default_action": "errno", "syscalls": ["opne"]}"#)
            .contains("unknown syscall 'opne'"));
        assert!(err(r#"{"default_action": "allow", "syscalls": []}"#).contains("would do nothing"));
    }
}
