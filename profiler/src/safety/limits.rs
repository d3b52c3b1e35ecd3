//! The process limits a command needs, checked before it starts: the open-file limit
//! (RLIMIT_NOFILE: out of descriptors, tokio's signal driver panics and the probes fail
//! half-loaded), the file-size limit (RLIMIT_FSIZE: past it a write ends the process with
//! SIGXFSZ, no message and nothing kept) and the kernel's bound on one argument (a runner's
//! policies travel on its command line). A limit too low is raised to what is needed where
//! the hard limit allows, and refused in one line where it does not.
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

/// The least file-size limit a command that writes results (a file, the store, the spool)
/// runs under: a full suite's results with every hook probe are about 2 MB, and the store's
/// database grows by that much a run.
pub const FILE_SIZE_NEEDED: u64 = 16 << 20;

/// Raises a soft file-size limit below [`FILE_SIZE_NEEDED`] to the hard one where that is
/// enough; refuses `command` in one line naming the limit where it is not. A write past the
/// limit later is an error (EFBIG), not SIGXFSZ: see [`survive_file_size_limit`].
pub fn ensure_file_size(command: &str) -> Result<()> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit with a valid out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut limit) };
    if limit.rlim_cur >= FILE_SIZE_NEEDED {
        return Ok(());
    }
    if limit.rlim_max >= FILE_SIZE_NEEDED {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit with a valid rlimit; a soft limit up to the hard one is allowed.
        if unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &raised) } == 0 {
            return Ok(());
        }
    }
    bail!(
        "the file-size limit (RLIMIT_FSIZE) is {} KiB (hard {} KiB): hookprof {command} writes \
         results files and a store that need at least {} MiB; raise it (ulimit -f unlimited)",
        limit.rlim_cur / 1024,
        limit.rlim_max / 1024,
        FILE_SIZE_NEEDED >> 20
    )
}

/// Makes a write past the file-size limit fail with EFBIG instead of ending the process
/// (SIGXFSZ's default): the write's error keeps the results elsewhere and says where. A
/// handler that does nothing, not SIG_IGN, so the processes hookprof starts get the default
/// again (exec resets a handler, but keeps an ignored signal ignored).
pub fn survive_file_size_limit() {
    extern "C" fn nothing(_: libc::c_int) {}
    // SAFETY: a plain sigaction with a handler that does nothing (async-signal-safe).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = nothing as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGXFSZ, &action, std::ptr::null_mut());
    }
}

/// The most one argument of a command line may hold (the kernel's MAX_ARG_STRLEN: 32 pages,
/// its terminating NUL included).
pub const MAX_ARGUMENT: usize = 32 * 4096;

/// Refuses a command line the kernel would refuse (E2BIG) with one line naming `what` it is
/// for: an argument past [`MAX_ARGUMENT`], or all of them past half of ARG_MAX (the other half
/// left to the environment).
pub fn ensure_arguments_fit(what: &str, args: &[String]) -> Result<()> {
    let longest = args.iter().map(|a| a.len() + 1).max().unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let arg_max = usize::try_from(unsafe { libc::sysconf(libc::_SC_ARG_MAX) }).unwrap_or(0);
    let total: usize = args.iter().map(|a| a.len() + 1 + size_of::<usize>()).sum();
    if longest > MAX_ARGUMENT {
        bail!(
            "{what}: its runner's command line would hold a {} KiB argument, past the kernel's \
             {} KiB for one (E2BIG): use a smaller value",
            longest / 1024,
            MAX_ARGUMENT / 1024
        );
    }
    if arg_max > 0 && total > arg_max / 2 {
        bail!(
            "{what}: its runner's command line would be {} KiB, past half of the kernel's \
             ARG_MAX ({} KiB; E2BIG): use a smaller value",
            total / 1024,
            arg_max / 1024
        );
    }
    Ok(())
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

    #[test]
    fn a_command_line_the_kernel_would_refuse_is_refused_first() {
        let fits = vec!["__runner".to_string(), "x".repeat(MAX_ARGUMENT - 1)];
        ensure_arguments_fit("--sweep landlock-rules=10", &fits).unwrap();
        let long = vec!["x".repeat(MAX_ARGUMENT)];
        let e = ensure_arguments_fit("--sweep landlock-rules=10000", &long)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("--sweep landlock-rules=10000: its runner's command line")
                && e.contains("E2BIG"),
            "{e}"
        );
        // Many arguments, each short enough, can be too many together.
        let many = vec!["y".repeat(MAX_ARGUMENT / 2); 64];
        assert!(ensure_arguments_fit("many", &many).is_err());
    }

    #[test]
    fn a_write_past_the_file_size_limit_is_an_error_and_the_temp_file_is_gone() {
        // In a child: the limit and the handler are the whole process's.
        // SAFETY: the child only makes syscalls and exits.
        let temp = tempfile::tempdir().unwrap();
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            survive_file_size_limit();
            let small = libc::rlimit {
                rlim_cur: 4096,
                rlim_max: libc::RLIM_INFINITY,
            };
            // SAFETY: setrlimit with a valid rlimit.
            unsafe { libc::setrlimit(libc::RLIMIT_FSIZE, &small) };
            let path = temp.path().join("r.json");
            let code = match crate::results::write_atomically(&path, &[b'x'; 8192]) {
                Err(e) if e.raw_os_error() == Some(libc::EFBIG) => 0,
                Err(_) => 1,
                Ok(()) => 2,
            };
            // SAFETY: ends the child without running the parent's destructors.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child ended with status {status:#x} (SIGXFSZ is {})",
            libc::SIGXFSZ
        );
        assert_eq!(std::fs::read_dir(temp.path()).unwrap().count(), 0);
    }
}
