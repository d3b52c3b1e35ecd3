//! The open-file limit (RLIMIT_NOFILE), checked before a command starts: out of descriptors,
//! tokio's signal driver panics and the probes fail half-loaded, so a limit too low for the
//! command is raised to what it needs where the hard limit allows, and refused in one line
//! where it does not.
use anyhow::{bail, Result};

/// What the commands that measure (load probes, start runners) need at least: the full suite
/// held up to 224 descriptors at once on 2 CPUs (the manual's load table), and each CPU adds
/// a sampling perf event and its link, and a per-CPU buffer or two.
const MEASURING_BASE: u64 = 256;
const MEASURING_PER_CPU: u64 = 4;
/// What any other command needs: its input files, the store's connection and the runtime that
/// waits on it (an event loop, its signal pipe); `compare` of two stored runs works with 16.
const OTHER: u64 = 16;

/// The descriptors a command needs at least: more if it `measures`.
pub fn open_files_needed(measures: bool) -> u64 {
    if !measures {
        return OTHER;
    }
    // SAFETY: sysconf has no preconditions.
    let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as u64;
    MEASURING_BASE + MEASURING_PER_CPU * cpus
}

/// Raises the soft open-file limit to `needed` if it is lower and the hard limit allows;
/// refuses `command` in one line naming the limit if it does not.
pub fn ensure_open_files(command: &str, needed: u64) -> Result<()> {
    let (soft, hard) = open_files_limit();
    if soft >= needed {
        return Ok(());
    }
    if hard >= needed {
        let raised = libc::rlimit {
            rlim_cur: needed,
            rlim_max: hard,
        };
        // SAFETY: setrlimit with a valid rlimit; a soft limit up to the hard one is allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            return Ok(());
        }
    }
    bail!(
        "the open-file limit (RLIMIT_NOFILE) is {soft} (hard {hard}): hookprof {command} needs \
         at least {needed} open files; raise it (ulimit -n {needed})"
    )
}

/// The soft and hard open-file limits.
pub fn open_files_limit() -> (u64, u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) };
    (limit.rlim_cur, limit.rlim_max)
}

/// If `error` comes from running out of descriptors (EMFILE), the limit to name beside it.
pub fn explain_emfile(error: &anyhow::Error) -> Option<String> {
    let emfile = error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.raw_os_error() == Some(libc::EMFILE))
    });
    emfile.then(|| {
        let (soft, _) = open_files_limit();
        format!("the open-file limit (ulimit -n) is {soft}: raise it")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measuring_needs_more_than_reading_and_a_limit_in_reach_is_raised() {
        assert!(open_files_needed(true) > open_files_needed(false));
        let (soft, _) = open_files_limit();
        ensure_open_files("report", soft).unwrap();
        let e = ensure_open_files("run", u64::MAX).unwrap_err().to_string();
        assert!(
            e.contains("RLIMIT_NOFILE") && e.contains("ulimit -n"),
            "{e}"
        );
        let emfile = anyhow::Error::new(std::io::Error::from_raw_os_error(libc::EMFILE));
        assert!(explain_emfile(&emfile).is_some_and(|m| m.contains("ulimit -n")));
        assert!(explain_emfile(&anyhow::anyhow!("other")).is_none());
    }
}
