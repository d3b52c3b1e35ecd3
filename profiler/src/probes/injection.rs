//! `--inject`: a known cost added to the kernel for the whole run (ground truth). `HOOK=NS` or
//! `lsm:HOOK=NS` is a BPF LSM program on an LSM hook (`probes::lsm`), `syscall:NAME=NS` a
//! busy-wait on the way out of a syscall for the runners' tracked tasks only
//! (`probes::syscall_injection`), which works where the kernel refuses BPF LSM programs.
use std::fmt;

/// The longest syscall wait: it holds the CPU, so a typo of a few zeros must not stall it.
pub const MAX_SYSCALL_NS: u64 = 10_000_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injection {
    /// A BPF LSM program on `hook` (without `security_`).
    Lsm {
        hook: String,
        ns: u64,
    },
    Syscall(InjectedSyscall),
}

/// A syscall the runners' tracked tasks wait on, by its number on this architecture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InjectedSyscall {
    pub name: String,
    pub nr: u32,
    pub ns: u64,
}

impl Injection {
    /// `HOOK=NS`, `lsm:HOOK=NS` or `syscall:NAME=NS`.
    pub fn parse(s: &str) -> Result<Injection, String> {
        const FORMS: &str = "expected HOOK=NS, lsm:HOOK=NS or syscall:NAME=NS, e.g. file_open=2000";
        let (target, ns) = s.rsplit_once('=').ok_or(FORMS)?;
        let ns: u64 = ns
            .parse()
            .map_err(|_| format!("'{ns}' is not a whole number of ns"))?;
        let (kind, name) = target.split_once(':').unwrap_or(("lsm", target));
        if name.is_empty() {
            return Err(FORMS.into());
        }
        match kind {
            "lsm" => Ok(Injection::Lsm {
                hook: name.strip_prefix("security_").unwrap_or(name).to_string(),
                ns,
            }),
            "syscall" => InjectedSyscall::new(name, ns).map(Injection::Syscall),
            other => Err(format!(
                "unknown injection kind '{other}'; valid: lsm, syscall"
            )),
        }
    }
}

impl InjectedSyscall {
    fn new(name: &str, ns: u64) -> Result<InjectedSyscall, String> {
        use syscalls::Sysno;
        let sysno: Sysno = name.parse().map_err(|_| {
            format!(
                "'{name}' is not a syscall of {} (names as in syscalls(2), e.g. getppid)",
                std::env::consts::ARCH
            )
        })?;
        // The wait is on the way out: these never come back to user space.
        if matches!(sysno, Sysno::exit | Sysno::exit_group) {
            return Err(format!(
                "syscall:{name} never returns, so there is no way out to wait on; choose a \
                 syscall that returns"
            ));
        }
        if ns > MAX_SYSCALL_NS {
            return Err(format!(
                "syscall:{name}={ns}: at most {MAX_SYSCALL_NS} ns (10 ms) a call, the wait \
                 holds the CPU"
            ));
        }
        Ok(InjectedSyscall {
            name: sysno.name().to_string(),
            nr: sysno.id() as u32,
            ns,
        })
    }
}

/// The spelling that parses back into the same injection (the LSM form as it always was).
impl fmt::Display for Injection {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Injection::Lsm { hook, ns } => write!(f, "{hook}={ns}"),
            Injection::Syscall(s) => write!(f, "syscall:{}={}", s.name, s.ns),
        }
    }
}

/// The BPF LSM injections, as (hook, ns).
pub fn lsm_hooks(injections: &[Injection]) -> Vec<(String, u64)> {
    injections
        .iter()
        .filter_map(|i| match i {
            Injection::Lsm { hook, ns } => Some((hook.clone(), *ns)),
            Injection::Syscall(_) => None,
        })
        .collect()
}

/// The syscall injections.
pub fn syscalls(injections: &[Injection]) -> Vec<InjectedSyscall> {
    injections
        .iter()
        .filter_map(|i| match i {
            Injection::Syscall(s) => Some(s.clone()),
            Injection::Lsm { .. } => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syscall(name: &str, nr: u32, ns: u64) -> Injection {
        Injection::Syscall(InjectedSyscall {
            name: name.into(),
            nr,
            ns,
        })
    }

    fn lsm(hook: &str, ns: u64) -> Injection {
        Injection::Lsm {
            hook: hook.into(),
            ns,
        }
    }

    #[test]
    fn a_bare_hook_and_the_lsm_prefix_name_the_same_injection() {
        assert_eq!(
            Injection::parse("file_open=2000"),
            Ok(lsm("file_open", 2000))
        );
        assert_eq!(
            Injection::parse("lsm:file_open=2000"),
            Ok(lsm("file_open", 2000))
        );
        assert_eq!(
            Injection::parse("security_file_open=5"),
            Ok(lsm("file_open", 5))
        );
    }

    /// The numbers are the build's architecture's, which the probes read.
    #[test]
    fn a_syscall_is_named_and_numbered_as_on_this_architecture() {
        let (getppid, openat) = if cfg!(target_arch = "aarch64") {
            (173, 56)
        } else {
            (110, 257)
        };
        assert_eq!(
            Injection::parse("syscall:getppid=2000"),
            Ok(syscall("getppid", getppid, 2000))
        );
        assert_eq!(
            Injection::parse("syscall:openat=0"),
            Ok(syscall("openat", openat, 0))
        );
        // arm64 has no open(2), only openat(2).
        assert_eq!(
            Injection::parse("syscall:open=0").is_ok(),
            cfg!(target_arch = "x86_64")
        );
    }

    #[test]
    fn each_form_prints_as_it_parses() {
        for s in ["file_open=2000", "syscall:getppid=2000", "syscall:read=1"] {
            assert_eq!(Injection::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_injections_say_what_is_wrong() {
        for (bad, says) in [
            (
                "syscall:no_such_call=100",
                "'no_such_call' is not a syscall of",
            ),
            ("syscall:getppid=abc", "whole number"),
            ("syscall:=100", "expected HOOK=NS"),
            ("syscall:exit_group=100", "never returns"),
            ("syscall:getppid=20000000", "at most 10000000 ns"),
            ("kprobe:foo=1", "unknown injection kind 'kprobe'"),
            ("file_open", "expected HOOK=NS"),
        ] {
            let e = Injection::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
            assert!(!e.contains('\n'), "{bad}: {e}");
        }
    }

    #[test]
    fn injections_split_by_kind() {
        let all = [lsm("file_open", 1), syscall("getppid", 110, 2)];
        assert_eq!(lsm_hooks(&all), vec![("file_open".to_string(), 1)]);
        assert_eq!(
            syscalls(&all),
            vec![InjectedSyscall {
                name: "getppid".into(),
                nr: 110,
                ns: 2
            }]
        );
    }
}
