//! Why the kernel refused a probe, in words a kernel developer recognises, and the one line per
//! reason that says so (on stderr in `run` and `top`, in `hookprof hooks`' list), each naming
//! how many functions and a few of those a user would look for first.
use aya::programs::ProgramError;

use crate::results::{ProbeKind, Refusal};

/// The errno behind an aya error, if the kernel gave one.
pub fn errno_of(err: &ProgramError) -> Option<i32> {
    if let ProgramError::LoadError { io_error, .. } = err {
        return io_error.raw_os_error();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        source = e.source();
    }
    None
}

/// A plain reason for a refusal of `kind`.
pub fn reason(kind: ProbeKind, errno: Option<i32>) -> String {
    match (kind, errno) {
        (ProbeKind::FEntry | ProbeKind::FExit | ProbeKind::Lsm, Some(libc::EPERM)) => {
            "EPERM: the kernel refuses BPF trampolines here (dynamic ftrace locked or disabled; \
             lockdown or a hardened config)"
                .into()
        }
        (ProbeKind::Lsm, Some(libc::EINVAL)) => {
            "EINVAL: BPF LSM is not active (add bpf to the lsm= boot parameter)".into()
        }
        (_, Some(libc::ENOENT)) => "ENOENT: the attach point does not exist on this kernel".into(),
        (_, Some(libc::ENOTSUPP_LINUX)) | (_, Some(libc::EOPNOTSUPP)) => {
            "not supported by this kernel".into()
        }
        (_, Some(libc::E2BIG)) => "E2BIG: the kernel's verifier limits were exceeded".into(),
        (_, Some(libc::EACCES)) => "EACCES: the verifier rejected the program".into(),
        (_, Some(n)) => std::io::Error::from_raw_os_error(n).to_string(),
        (_, None) => "refused".into(),
    }
}

pub fn refusal(kind: ProbeKind, target: &str, err: &ProgramError) -> Refusal {
    let errno = errno_of(err);
    Refusal {
        kind,
        target: target.into(),
        errno,
        reason: reason(kind, errno),
    }
}

/// The hooks the lmbench workloads' paths run through, which a user looks for first: named
/// before the rest when a refusal line gives examples (alphabetical order put
/// `security_add_hooks`, the LSM framework's set-up, first).
const WANTED: &[&str] = &[
    "security_file_open",
    "security_inode_permission",
    "security_file_permission",
    "security_inode_getattr",
    "security_mmap_file",
    "security_task_alloc",
    "security_bprm_check",
    "security_socket_connect",
    "security_file_ioctl",
    "security_task_kill",
];

/// Examples a refusal line names.
const SHOWN: usize = 5;

/// One line per distinct refusal reason, naming how many functions (each once, an fentry and
/// its fexit together) and a few of them, the wanted hooks first:
/// `fentry/fexit refused on 667 functions (security_file_open, ...): EPERM: ...`.
pub fn lines(refused: &[Refusal]) -> Vec<String> {
    // Group by reason, then kinds refused on the same targets for the same reason (an fentry
    // and its fexit) share a line.
    let mut groups: Vec<(Vec<&str>, &str, Vec<&str>)> = Vec::new();
    for r in refused {
        match groups
            .iter_mut()
            .find(|(kinds, why, _)| kinds.contains(&r.kind.name()) && *why == r.reason)
        {
            Some((_, _, targets)) => targets.push(&r.target),
            None => groups.push((vec![r.kind.name()], &r.reason, vec![&r.target])),
        }
    }
    let mut merged: Vec<(Vec<&str>, &str, Vec<&str>)> = Vec::new();
    for (kinds, why, targets) in groups {
        match merged
            .iter_mut()
            .find(|(_, w, t)| *w == why && *t == targets)
        {
            Some((k, _, _)) => k.extend(kinds),
            None => merged.push((kinds, why, targets)),
        }
    }
    merged
        .into_iter()
        .map(|(kinds, why, targets)| {
            format!(
                "{} refused on {}: {why}",
                kinds.join("/"),
                name_some(targets)
            )
        })
        .collect()
}

/// "a, b, c" or, for long lists, "93 functions (a, b, c, d, e, ...)", the wanted hooks first.
fn name_some(mut targets: Vec<&str>) -> String {
    targets.sort_unstable();
    targets.dedup();
    let rank = |t: &&str| WANTED.iter().position(|w| w == t).unwrap_or(WANTED.len());
    targets.sort_by_key(rank);
    if targets.len() <= SHOWN {
        targets.join(", ")
    } else {
        format!(
            "{} functions ({}, ...)",
            targets.len(),
            targets[..SHOWN].join(", ")
        )
    }
}

/// The kernel's ENOTSUPP (524), which libc does not name.
mod libc {
    pub use ::libc::*;
    pub const ENOTSUPP_LINUX: i32 = 524;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(kind: ProbeKind, target: &str) -> Refusal {
        Refusal {
            kind,
            target: target.into(),
            errno: Some(1),
            reason: reason(kind, Some(1)),
        }
    }

    #[test]
    fn a_refusal_line_counts_each_function_once_and_names_the_wanted_hooks_first() {
        let mut all = Vec::new();
        for f in [
            "security_add_hooks",
            "security_audit_rule_free",
            "security_file_open",
            "security_bprm_check",
            "security_audit_rule_init",
            "security_inode_permission",
        ] {
            all.push(refused(ProbeKind::FEntry, f));
            all.push(refused(ProbeKind::FExit, f));
        }
        let said = lines(&all);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(
            said[0].starts_with(
                "fentry/fexit refused on 6 functions (security_file_open, \
                 security_inode_permission, security_bprm_check, security_add_hooks, \
                 security_audit_rule_free, ...): EPERM"
            ),
            "{}",
            said[0]
        );
        // A few: all of them, by name.
        let few = lines(&[refused(ProbeKind::Lsm, "file_open")]);
        assert_eq!(
            few,
            ["lsm refused on file_open: EPERM: the kernel refuses BPF trampolines here (dynamic \
              ftrace locked or disabled; lockdown or a hardened config)"]
        );
    }
}
