//! lmbench's process-creation columns: fork, exec and sh proc.
use std::{
    ffi::CString,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "fork_proc",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "fork() + child _exit() + waitpid()",
        suite: Suite::Quick,
        create: |_| Ok(Box::new(ForkProc)),
    },
    WorkloadSpec {
        name: "exec_proc",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "fork() + execve() of a tiny static program + waitpid()",
        suite: Suite::Quick,
        create: Exec::create_direct,
    },
    WorkloadSpec {
        name: "sh_proc",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "fork() + /bin/sh -c running a tiny static program + waitpid()",
        suite: Suite::Default,
        create: Exec::create_via_shell,
    },
];

/// Forks a child that exits at once and reaps it; the child's exit status proves it ran.
pub(crate) fn fork_and_reap(child: impl FnOnce() -> i32) -> anyhow::Result<i32> {
    // SAFETY: the child only calls async-signal-safe code (the closure must keep to that) and
    // leaves with _exit, never returning into the parent's Rust state.
    let pid = unsafe { libc::fork() };
    match pid {
        -1 => anyhow::bail!("fork: {}", std::io::Error::last_os_error()),
        0 => unsafe { libc::_exit(child()) },
        pid => wait_for(pid),
    }
}

/// Waits for `pid` and returns its exit code (an error if it was killed by a signal).
pub(crate) fn wait_for(pid: libc::pid_t) -> anyhow::Result<i32> {
    let mut status = 0;
    loop {
        // SAFETY: `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            break;
        }
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            anyhow::bail!("waitpid({pid}): {err}");
        }
    }
    if libc::WIFEXITED(status) {
        Ok(libc::WEXITSTATUS(status))
    } else {
        anyhow::bail!("child {pid} ended by signal {}", libc::WTERMSIG(status))
    }
}

struct ForkProc;

impl Workload for ForkProc {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            let code = fork_and_reap(|| 7)?;
            anyhow::ensure!(code == 7, "fork_proc child exited with {code}, expected 7");
        }
        Ok(start.elapsed())
    }
}

/// The exit code of the exec helper: proves the helper itself ran, not a failed exec (127).
const HELPER_EXIT: i32 = 42;

/// Writes a minimal static ELF executable that only calls exit(`code`): no compiler, libc or
/// dynamic loader needed, so exec_proc measures the kernel's exec path and little else.
pub(crate) fn write_exit_program(path: &Path, code: u8) -> anyhow::Result<()> {
    const BASE: u64 = 0x40_0000;
    const HEADERS: u64 = 64 + 56; // ELF header + one program header
    #[cfg(target_arch = "x86_64")]
    let (machine, text): (u16, Vec<u8>) = (
        62, // EM_X86_64
        // mov edi, code; mov eax, 60 (exit); syscall
        [
            &[0xbf, code, 0, 0, 0][..],
            &[0xb8, 60, 0, 0, 0],
            &[0x0f, 0x05],
        ]
        .concat(),
    );
    #[cfg(target_arch = "aarch64")]
    let (machine, text): (u16, Vec<u8>) = (
        183, // EM_AARCH64
        // movz x0, #code; movz x8, #93 (exit); svc #0
        [
            0xd280_0000 | (u32::from(code) << 5),
            0xd280_0ba8,
            0xd400_0001,
        ]
        .iter()
        .flat_map(|i| i.to_le_bytes())
        .collect(),
    );
    let size = HEADERS + text.len() as u64;
    let mut elf = Vec::with_capacity(size as usize);
    elf.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"); // 64-bit, LE, v1
    elf.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf.extend_from_slice(&machine.to_le_bytes());
    elf.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    elf.extend_from_slice(&(BASE + HEADERS).to_le_bytes()); // entry: the code after the headers
    elf.extend_from_slice(&64u64.to_le_bytes()); // program headers right after this header
    elf.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    elf.extend_from_slice(&0u32.to_le_bytes()); // flags
    for half in [64u16, 56, 1, 0, 0, 0] {
        // header size, phdr size, phdr count, shdr size, shdr count, shstrndx
        elf.extend_from_slice(&half.to_le_bytes());
    }
    elf.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    elf.extend_from_slice(&5u32.to_le_bytes()); // R + X
    for word in [0, BASE, BASE, size, size, 0x1000] {
        // offset, vaddr, paddr, filesz, memsz, align: the whole file mapped at BASE
        elf.extend_from_slice(&word.to_le_bytes());
    }
    elf.extend_from_slice(&text);
    std::fs::write(path, &elf).with_context(|| format!("write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// fork + execve (of the helper, or of /bin/sh -c helper) + wait; the exit code is checked.
struct Exec {
    helper: PathBuf,
    program: CString,
    argv: Vec<CString>,
}

impl Exec {
    fn create(options: &WorkloadOptions, via_shell: bool) -> anyhow::Result<Box<dyn Workload>> {
        let helper = options.scratch_dir.join("exit42");
        let helper_c = CString::new(helper.as_os_str().as_encoded_bytes())?;
        let (program, argv) = if via_shell {
            let sh = CString::new("/bin/sh")?;
            let argv = vec![CString::new("sh")?, CString::new("-c")?, helper_c];
            (sh, argv)
        } else {
            (helper_c.clone(), vec![helper_c])
        };
        let exec = Exec {
            helper,
            program,
            argv,
        };
        // Written once `exec` exists, so its Drop removes even a half-written helper.
        write_exit_program(&exec.helper, HELPER_EXIT as u8)?;
        Ok(Box::new(exec))
    }

    fn create_direct(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        Self::create(options, false)
    }

    fn create_via_shell(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        Self::create(options, true)
    }
}

impl Workload for Exec {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        // Built before forking: the child may not allocate.
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let envp = [std::ptr::null::<libc::c_char>()];
        let (program, argv) = (self.program.as_ptr(), argv.as_ptr());
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: pointers to NUL-terminated strings and NULL-terminated arrays that
            // outlive the call; execve only returns on failure.
            let code = fork_and_reap(|| unsafe {
                libc::execve(program, argv, envp.as_ptr());
                127
            })?;
            anyhow::ensure!(
                code == HELPER_EXIT,
                "{:?} exited with {code}, expected {HELPER_EXIT} (127: exec failed)",
                self.program
            );
        }
        Ok(start.elapsed())
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.helper);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::run_and_drop;

    #[test]
    fn the_hand_built_program_really_runs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit7");
        write_exit_program(&path, 7).unwrap();
        let status = std::process::Command::new(&path).status().unwrap();
        assert_eq!(status.code(), Some(7));
    }

    #[test]
    fn exec_and_sh_run_the_helper() {
        // run() fails unless every child exited with the helper's code.
        run_and_drop("fork_proc", 3);
        run_and_drop("exec_proc", 3);
        run_and_drop("sh_proc", 3);
    }
}
