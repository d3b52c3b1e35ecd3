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
        description: "fork() + execve() of a small dynamically linked program (ld.so maps \
                      libc.so.6) that writes a line + waitpid()",
        suite: Suite::Quick,
        create: |o| Exec::create(o, Helper::Hello, false),
    },
    WorkloadSpec {
        name: "sh_proc",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "fork() + /bin/sh -c running exec_proc's program + waitpid()",
        suite: Suite::Default,
        create: |o| Exec::create(o, Helper::Hello, true),
    },
    WorkloadSpec {
        name: "exec_proc_static",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "fork() + execve() of a tiny static program that only exits + waitpid(): \
                      exec_proc without the dynamic loader",
        suite: Suite::Full,
        create: |o| Exec::create(o, Helper::ExitOnly, false),
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

/// What a hand-made helper program does.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Helper {
    /// A static program that only exits: the kernel's exec path and little else.
    ExitOnly,
    /// lmbench's hello: a dynamically linked program (the ABI's ld.so, which maps libc.so.6) that
    /// writes "Hello world\n" to fd 1 and exits.
    Hello,
}

const GREETING: &[u8] = b"Hello world\n";

/// The machine code of a helper that exits with `code`, after writing GREETING to fd 1 if
/// `greet`, with the message right after the code; and the ELF machine and dynamic loader.
#[cfg(target_arch = "x86_64")]
fn helper_code(code: u8, greet: bool) -> (u16, &'static str, Vec<u8>) {
    let mut text: Vec<u8> = Vec::new();
    if greet {
        text.extend_from_slice(&[0xbf, 1, 0, 0, 0]); // mov edi, 1
        text.extend_from_slice(&[0x48, 0x8d, 0x35, 24, 0, 0, 0]); // lea rsi, [rip + 24]: the message
        text.extend_from_slice(&[0xba, GREETING.len() as u8, 0, 0, 0]); // mov edx, len
        text.extend_from_slice(&[0xb8, 1, 0, 0, 0, 0x0f, 0x05]); // mov eax, 1 (write); syscall
    }
    text.extend_from_slice(&[0xbf, code, 0, 0, 0]); // mov edi, code
    text.extend_from_slice(&[0xb8, 231, 0, 0, 0, 0x0f, 0x05]); // mov eax, 231 (exit_group); syscall
    (62, "/lib64/ld-linux-x86-64.so.2", text) // EM_X86_64
}

#[cfg(target_arch = "aarch64")]
fn helper_code(code: u8, greet: bool) -> (u16, &'static str, Vec<u8>) {
    let mut words: Vec<u32> = Vec::new();
    if greet {
        // movz x0, #1; adr x1, message (28 bytes on); movz x2, #len; movz x8, #64 (write); svc #0
        words.extend([
            0xd280_0020,
            0x1000_00e1,
            0xd280_0002 | (GREETING.len() as u32) << 5,
        ]);
        words.extend([0xd280_0808, 0xd400_0001]);
    }
    // movz x0, #code; movz x8, #94 (exit_group); svc #0
    words.extend([
        0xd280_0000 | (u32::from(code) << 5),
        0xd280_0bc8,
        0xd400_0001,
    ]);
    let text = words.iter().flat_map(|i| i.to_le_bytes()).collect();
    (183, "/lib/ld-linux-aarch64.so.1", text) // EM_AARCH64
}

/// Writes a minimal ELF executable (no compiler, libc or linker needed to make it) that does
/// what `helper` says and exits with `code`. The dynamic one names libc.so.6 in its dynamic
/// section, so the kernel starts the ABI's dynamic loader, which maps and initialises libc
/// before jumping to the program, as for a C hello world; the program itself calls no libc
/// function (it needs no relocations) and makes its two syscalls directly.
pub(crate) fn write_helper(path: &Path, helper: Helper, code: u8) -> anyhow::Result<()> {
    const BASE: u64 = 0x40_0000;
    const EHDR: u64 = 64;
    const PHDR: u64 = 56;
    let dynamic = helper == Helper::Hello;
    let (machine, interp, mut text) = helper_code(code, dynamic);
    if dynamic {
        text.extend_from_slice(GREETING);
    }
    let phnum: u64 = if dynamic { 4 } else { 1 };
    // After the headers: (dynamic only) the loader's path, the string table, a symbol table
    // with the null symbol, an empty hash table and the dynamic section; then the code.
    let mut data: Vec<u8> = Vec::new();
    let at = |data: &Vec<u8>| EHDR + phnum * PHDR + data.len() as u64;
    let mut program_headers: Vec<[u64; 7]> = Vec::new(); // type|flags, offset, vaddr, filesz, align
    if dynamic {
        let interp_at = at(&data);
        data.extend_from_slice(interp.as_bytes());
        data.push(0);
        let strtab_at = at(&data);
        let strtab = b"\0libc.so.6\0";
        data.extend_from_slice(strtab);
        while at(&data) % 8 != 0 {
            data.push(0);
        }
        let symtab_at = at(&data);
        data.extend_from_slice(&[0; 24]); // Elf64_Sym: the null symbol
        let hash_at = at(&data);
        for word in [1u32, 1, 0, 0] {
            // nbucket, nchain, bucket[0], chain[0]: no symbols to find here
            data.extend_from_slice(&word.to_le_bytes());
        }
        let dynamic_at = at(&data);
        let entries: [(u64, u64); 7] = [
            (1, 1), // DT_NEEDED: "libc.so.6" at strtab offset 1
            (4, BASE + hash_at),
            (5, BASE + strtab_at),
            (6, BASE + symtab_at),
            (10, strtab.len() as u64), // DT_STRSZ
            (11, 24),                  // DT_SYMENT
            (0, 0),                    // DT_NULL
        ];
        for (tag, value) in entries {
            data.extend_from_slice(&tag.to_le_bytes());
            data.extend_from_slice(&value.to_le_bytes());
        }
        let interp_len = interp.len() as u64 + 1;
        // PT_INTERP, PT_DYNAMIC (read-only), PT_GNU_STACK (RW, as a C compiler emits).
        program_headers.push([
            3 | 4 << 32,
            interp_at,
            BASE + interp_at,
            interp_len,
            1,
            0,
            0,
        ]);
        program_headers.push([2 | 4 << 32, dynamic_at, BASE + dynamic_at, 7 * 16, 8, 0, 0]);
        program_headers.push([0x6474_e551 | 6 << 32, 0, 0, 0, 16, 0, 0]);
        while at(&data) % 8 != 0 {
            data.push(0);
        }
    }
    let entry = BASE + at(&data);
    let size = at(&data) + text.len() as u64;
    // PT_LOAD (R + X): the whole file at BASE.
    program_headers.insert(0, [1 | 5 << 32, 0, BASE, size, 0x1000, 0, 0]);

    let mut elf = Vec::with_capacity(size as usize);
    elf.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0"); // 64-bit, LE, v1
    elf.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    elf.extend_from_slice(&machine.to_le_bytes());
    elf.extend_from_slice(&1u32.to_le_bytes()); // EV_CURRENT
    elf.extend_from_slice(&entry.to_le_bytes());
    elf.extend_from_slice(&EHDR.to_le_bytes()); // program headers right after this header
    elf.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    elf.extend_from_slice(&0u32.to_le_bytes()); // flags
    for half in [EHDR as u16, PHDR as u16, phnum as u16, 0, 0, 0] {
        // header size, phdr size, phdr count, shdr size, shdr count, shstrndx
        elf.extend_from_slice(&half.to_le_bytes());
    }
    for [type_flags, offset, vaddr, filesz, align, ..] in program_headers {
        elf.extend_from_slice(&type_flags.to_le_bytes()); // p_type, p_flags
                                                          // offset, vaddr, paddr, filesz, memsz, align
        for word in [offset, vaddr, vaddr, filesz, filesz, align] {
            elf.extend_from_slice(&word.to_le_bytes());
        }
    }
    elf.extend_from_slice(&data);
    elf.extend_from_slice(&text);
    debug_assert_eq!(elf.len() as u64, size);
    std::fs::write(path, &elf).with_context(|| format!("write {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    Ok(())
}

/// lmbench's lat_proc exec and shell: fork; the child closes its stdout (the helper's write
/// then fails with EBADF, as lmbench's) and execs the helper, or /bin/sh -c helper with the
/// runner's environment; the parent waits. The exit code is checked.
struct Exec {
    helper: PathBuf,
    program: CString,
    argv: Vec<CString>,
    via_shell: bool,
}

impl Exec {
    fn create(
        options: &WorkloadOptions,
        helper: Helper,
        via_shell: bool,
    ) -> anyhow::Result<Box<dyn Workload>> {
        let path = options.scratch_dir.join("hello");
        let path_c = CString::new(path.as_os_str().as_encoded_bytes())?;
        let (program, argv) = if via_shell {
            let sh = CString::new("/bin/sh")?;
            let argv = vec![CString::new("sh")?, CString::new("-c")?, path_c];
            (sh, argv)
        } else {
            (path_c.clone(), vec![path_c])
        };
        let exec = Exec {
            helper: path,
            program,
            argv,
            via_shell,
        };
        // Written once `exec` exists, so its Drop removes even a half-written helper.
        write_helper(&exec.helper, helper, HELPER_EXIT as u8)?;
        Ok(Box::new(exec))
    }
}

impl Workload for Exec {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        // Built before forking: the child may not allocate.
        let mut argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).collect();
        argv.push(std::ptr::null());
        let no_env = [std::ptr::null::<libc::c_char>()];
        let (program, argv, via_shell) = (self.program.as_ptr(), argv.as_ptr(), self.via_shell);
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: pointers to NUL-terminated strings and NULL-terminated arrays that
            // outlive the call; close, execv and execve are async-signal-safe here (no
            // allocation) and only return on failure.
            let code = fork_and_reap(|| unsafe {
                libc::close(1);
                if via_shell {
                    libc::execv(program, argv);
                } else {
                    libc::execve(program, argv, no_env.as_ptr());
                }
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
    fn the_hand_built_programs_really_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exit7");
        write_helper(&path, Helper::ExitOnly, 7).unwrap();
        let status = std::process::Command::new(&path).status().unwrap();
        assert_eq!(status.code(), Some(7));

        let hello = dir.path().join("hello");
        write_helper(&hello, Helper::Hello, 9).unwrap();
        let out = std::process::Command::new(&hello).output().unwrap();
        assert_eq!(out.status.code(), Some(9));
        assert_eq!(out.stdout, GREETING);
        // The dynamic loader mapped libc: ldd lists it for the helper.
        let ldd = std::process::Command::new("ldd")
            .arg(&hello)
            .output()
            .unwrap();
        let libs = String::from_utf8_lossy(&ldd.stdout);
        assert!(libs.contains("libc.so.6 =>"), "ldd: {libs}");
    }

    #[test]
    fn exec_and_sh_run_the_helper() {
        // run() fails unless every child exited with the helper's code.
        for name in ["fork_proc", "exec_proc", "sh_proc", "exec_proc_static"] {
            run_and_drop(name, 3);
        }
    }
}
