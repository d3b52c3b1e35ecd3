//! Other BPF programs attached where hookprof measures: another hookprof, `top`, bpftrace, a
//! monitoring agent. Their programs run inside the workloads' syscalls, hooks and task paths
//! (or interrupt them, sampling), so their cost is in every time measured, the clean pass's
//! too. They are found from every process's open BPF links and perf events (/proc/PID/fd and
//! fdinfo, and the kernel's answer for a perf event with a program attached the old way,
//! BPF_TASK_FD_QUERY), hookprof's own process left out, and kept in the results' environment.
use std::{collections::BTreeSet, fmt::Write as _, os::unix::ffi::OsStrExt};

use serde::{Deserialize, Serialize};

/// One other program attached on a path hookprof measures.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct OtherProgram {
    /// The process holding it: "COMM (pid N)".
    pub holder: String,
    /// Where it is attached: "raw_tracepoint sys_enter", "fentry security_file_open",
    /// "lsm file_open", "tracepoint sys_enter_openat", "kprobe do_sys_openat2",
    /// "perf_event sampling".
    pub attach: String,
    /// The kernel's id of the program (0 where the kernel does not say).
    pub program_id: u32,
}

/// The tracepoints hookprof's probes attach to: another program there runs in the same events.
const OWN_TRACEPOINTS: &[&str] = &[
    "sys_enter",
    "sys_exit",
    "sched_process_fork",
    "sched_process_exec",
    "sched_process_exit",
    "sched_switch",
    // Where the kernel has no task storage (5.10), per-task state is freed with its task here.
    "sched_process_free",
];

/// bpf_attach_type values of tracing links (uapi/linux/bpf.h).
const TRACE_FENTRY: u32 = 24;
const TRACE_FEXIT: u32 = 25;
const MODIFY_RETURN: u32 = 26;
const LSM_MAC: u32 = 27;
const TRACE_RAW_TP: u32 = 23;

/// Every other process's program attached where hookprof's probes are, or (a BPF LSM program,
/// a sampling perf event) where it runs in every op measured. Sorted, without repeats.
pub fn find() -> Vec<OtherProgram> {
    let own = std::process::id().to_string();
    let mut found = BTreeSet::new();
    let mut names = FunctionNames::default();
    // The links some process here holds, hookprof's own too: in a nested pid namespace the
    // kernel's other links are held outside it.
    let mut held = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for entry in procs.flatten() {
        let pid = entry.file_name();
        let Some(pid) = pid
            .to_str()
            .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let mut holder = None;
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let attach = match target.as_os_str().as_bytes() {
                b"anon_inode:bpf_link" => {
                    let info =
                        std::fs::read_to_string(entry.path().join("fdinfo").join(fd.file_name()))
                            .unwrap_or_default();
                    held.extend(
                        fdinfo_field(&info, "link_id").and_then(|id| id.parse::<u32>().ok()),
                    );
                    (pid != own)
                        .then(|| link_attach(&info, &mut names))
                        .flatten()
                }
                b"anon_inode:[perf_event]" if pid != own => fd
                    .file_name()
                    .to_str()
                    .and_then(|fd| fd.parse().ok())
                    .zip(pid.parse().ok())
                    .and_then(|(fd, pid)| perf_event_attach(pid, fd)),
                _ => None,
            };
            let Some((attach, program_id)) = attach else {
                continue;
            };
            let holder = holder.get_or_insert_with(|| {
                let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
                format!("{} (pid {pid})", comm.trim())
            });
            found.insert(OtherProgram {
                holder: holder.clone(),
                attach,
                program_id,
            });
        }
    }
    if let Some(pidns) = crate::machine::namespaces::nested_pid_namespace() {
        found.extend(held_outside(&held, &mut names, &pidns));
    }
    found.into_iter().collect()
}

/// A field of a BPF object's fdinfo (`prog_id:\t7`).
fn fdinfo_field<'a>(fdinfo: &'a str, name: &str) -> Option<&'a str> {
    fdinfo
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// The links on the paths hookprof measures that no process of its pid namespace holds
/// (`held`), by the kernel's list of every link (BPF_LINK_GET_NEXT_ID, CAP_SYS_ADMIN): held
/// by a process outside the namespace `pidns`, which its /proc does not list, or pinned.
fn held_outside(held: &BTreeSet<u32>, names: &mut FunctionNames, pidns: &str) -> Vec<OtherProgram> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    // The id commands' bpf_attr: an id (start, or the link's), the next id, open flags.
    #[repr(C)]
    #[derive(Default)]
    struct IdAttr {
        id: u32,
        next_id: u32,
        open_flags: u32,
    }
    const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
    const BPF_LINK_GET_NEXT_ID: libc::c_long = 31;
    let bpf = |cmd: libc::c_long, attr: &mut IdAttr| {
        // SAFETY: bpf(cmd) with an attr of the id commands' layout and its size.
        unsafe { libc::syscall(libc::SYS_bpf, cmd, attr, size_of::<IdAttr>()) }
    };
    let holder = format!("a process outside {pidns}, or a pin");
    let mut found = Vec::new();
    let mut next = IdAttr::default();
    // Ends with ENOENT after the last link (or EPERM without CAP_SYS_ADMIN: none listed).
    while bpf(BPF_LINK_GET_NEXT_ID, &mut next) == 0 {
        next.id = next.next_id;
        if held.contains(&next.id) {
            continue;
        }
        let fd = bpf(
            BPF_LINK_GET_FD_BY_ID,
            &mut IdAttr {
                id: next.id,
                ..IdAttr::default()
            },
        );
        let Ok(fd) = i32::try_from(fd) else {
            continue;
        };
        if fd < 0 {
            continue; // gone since it was listed
        }
        // SAFETY: a descriptor the kernel just opened for this process, owned here alone.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", fd.as_raw_fd()));
        if let Some((attach, program_id)) = link_attach(&info.unwrap_or_default(), names) {
            found.push(OtherProgram {
                holder: holder.clone(),
                attach,
                program_id,
            });
        }
    }
    found
}

/// Where a BPF link (its fdinfo) attaches, and its program, when that is on a path hookprof
/// measures.
fn link_attach(fdinfo: &str, names: &mut FunctionNames) -> Option<(String, u32)> {
    let field = |name: &str| fdinfo_field(fdinfo, name);
    let number = |name: &str| field(name).and_then(|v| v.parse::<u32>().ok());
    let program = number("prog_id").unwrap_or(0);
    let attach = match field("link_type")? {
        // tp_btf links are raw tracepoint links too.
        "raw_tracepoint" => {
            let tp = field("tp_name")?;
            OWN_TRACEPOINTS
                .contains(&tp)
                .then(|| format!("raw_tracepoint {tp}"))?
        }
        "tracing" => {
            let kind = match number("attach_type")? {
                TRACE_FENTRY => "fentry",
                TRACE_FEXIT => "fexit",
                MODIFY_RETURN => "fmod_ret",
                LSM_MAC => "lsm",
                TRACE_RAW_TP => "tp_btf",
                _ => return None,
            };
            let function = names.of(number("target_obj_id")?, number("target_btf_id")?);
            measured_function(kind, &function).then(|| format!("{kind} {function}"))?
        }
        "perf" => {
            let event_type = field("event_type")?;
            match event_type {
                "event" => "perf_event sampling".to_string(),
                "tracepoint" => {
                    let tp = field("tp_name")?;
                    syscall_or_own(tp).then(|| format!("tracepoint {tp}"))?
                }
                "kprobe" | "kretprobe" => {
                    let f = field("name")?;
                    measured_function(event_type, f).then(|| format!("{event_type} {f}"))?
                }
                _ => return None,
            }
        }
        "kprobe_multi" => "kprobe_multi".to_string(),
        _ => return None,
    };
    Some((attach, program))
}

/// A tracepoint in every syscall or task event hookprof counts.
fn syscall_or_own(tp: &str) -> bool {
    OWN_TRACEPOINTS.contains(&tp) || tp.starts_with("sys_enter_") || tp.starts_with("sys_exit_")
}

/// A function hookprof times or whose LSM hooks it measures: any BPF LSM program, and probes
/// on `security_*` and the LSMs' `bpf_lsm_*` functions.
fn measured_function(kind: &str, function: &str) -> bool {
    kind == "lsm"
        || (kind == "tp_btf" && OWN_TRACEPOINTS.contains(&function))
        || function.starts_with("security_")
        || function.starts_with("bpf_lsm_")
}

/// A perf event with a program attached through the perf ioctl (no link): what the kernel
/// says it is. A sampling event's program the kernel does not describe (EOPNOTSUPP).
fn perf_event_attach(pid: u32, fd: u32) -> Option<(String, u32)> {
    #[repr(C)]
    #[derive(Default)]
    struct TaskFdQuery {
        pid: u32,
        fd: u32,
        flags: u32,
        buf_len: u32,
        buf: u64,
        prog_id: u32,
        fd_type: u32,
        probe_offset: u64,
        probe_addr: u64,
    }
    const BPF_TASK_FD_QUERY: libc::c_long = 20;
    let mut buf = [0u8; 256];
    let mut attr = TaskFdQuery {
        pid,
        fd,
        buf_len: buf.len() as u32,
        buf: buf.as_mut_ptr() as u64,
        ..TaskFdQuery::default()
    };
    // SAFETY: bpf(BPF_TASK_FD_QUERY) with an attr of its layout and a buffer of buf_len bytes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_TASK_FD_QUERY,
            &mut attr,
            std::mem::size_of::<TaskFdQuery>(),
        )
    };
    if r != 0 {
        let errno = std::io::Error::last_os_error().raw_os_error();
        return (errno == Some(libc::EOPNOTSUPP) || errno == Some(524))
            .then(|| ("perf_event sampling".to_string(), 0));
    }
    let name = std::ffi::CStr::from_bytes_until_nul(&buf)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    // BPF_FD_TYPE_*: raw tracepoint, tracepoint, kprobe, kretprobe, uprobe, uretprobe.
    let attach = match attr.fd_type {
        0 if OWN_TRACEPOINTS.contains(&name.as_str()) => format!("raw_tracepoint {name}"),
        1 if syscall_or_own(&name) => format!("tracepoint {name}"),
        2 | 3 if measured_function("kprobe", &name) => format!("kprobe {name}"),
        _ => return None,
    };
    Some((attach, attr.prog_id))
}

/// Kernel function names by BTF id, from vmlinux's BTF, parsed the first time one is asked
/// (an id in a module's BTF is named by its number).
#[derive(Default)]
struct FunctionNames {
    btf: Option<Option<btf_rs::Btf>>,
}

impl FunctionNames {
    fn of(&mut self, object: u32, id: u32) -> String {
        let btf = self
            .btf
            .get_or_insert_with(|| btf_rs::Btf::from_file("/sys/kernel/btf/vmlinux").ok());
        let named = btf.as_ref().filter(|_| object <= 1).and_then(|btf| {
            let t = btf.resolve_type_by_id(id).ok()?;
            btf.resolve_name(t.as_btf_type()?).ok()
        });
        named.unwrap_or_else(|| format!("BTF id {id} of object {object}"))
    }
}

/// Looks for other programs before a run and between its workloads, keeping all it saw.
#[derive(Default)]
pub struct Watch {
    seen: Vec<OtherProgram>,
}

impl Watch {
    /// The one line to say about programs not seen before (None: no new ones).
    pub fn look(&mut self) -> Option<String> {
        let new: Vec<OtherProgram> = find()
            .into_iter()
            .filter(|p| !self.seen.contains(p))
            .collect();
        let line = note(&new);
        self.seen.extend(new);
        line
    }

    /// What it has seen so far.
    pub fn seen_so_far(&self) -> &[OtherProgram] {
        &self.seen
    }

    /// Everything seen, sorted.
    pub fn seen(mut self) -> Vec<OtherProgram> {
        self.seen.sort();
        self.seen
    }
}

/// One line for the user, None when nothing else is attached.
pub fn note(found: &[OtherProgram]) -> Option<String> {
    if found.is_empty() {
        return None;
    }
    let mut by_holder: Vec<(&str, Vec<&str>)> = Vec::new();
    for p in found {
        match by_holder.iter_mut().find(|(h, _)| *h == p.holder) {
            Some((_, attach)) => attach.push(&p.attach),
            None => by_holder.push((&p.holder, vec![&p.attach])),
        }
    }
    let mut line = format!(
        "{} other BPF program{} run where this run measures (",
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    for (i, (holder, attach)) in by_holder.iter().enumerate() {
        let _ = write!(
            line,
            "{}{holder}: {}",
            if i > 0 { "; " } else { "" },
            attach.join(", ")
        );
    }
    line.push_str(
        "): their cost is inside every time measured, clean and probed; compare runs made alike",
    );
    Some(line)
}

/// What compare shows of them: the processes, or "none".
pub fn summary(found: &[OtherProgram]) -> String {
    let holders: BTreeSet<&str> = found
        .iter()
        .map(|p| p.holder.split(" (pid").next().unwrap_or(&p.holder))
        .collect();
    if holders.is_empty() {
        return "none".into();
    }
    let list: Vec<&str> = holders.into_iter().collect();
    format!("{} program(s) of {}", found.len(), list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_on_hookprofs_paths_are_named_and_others_are_not() {
        let mut names = FunctionNames::default();
        let raw = "link_type:\traw_tracepoint\nlink_id:\t1\nprog_id:\t7\ntp_name:\tsys_enter\n";
        assert_eq!(
            link_attach(raw, &mut names),
            Some(("raw_tracepoint sys_enter".into(), 7))
        );
        let elsewhere = raw.replace("sys_enter", "kfree_skb");
        assert_eq!(link_attach(&elsewhere, &mut names), None);
        let sampling = "link_type:\tperf\nprog_id:\t9\ntype:\t6\nconfig:\t0\nevent_type:\tevent\n";
        assert_eq!(
            link_attach(sampling, &mut names),
            Some(("perf_event sampling".into(), 9))
        );
        let cgroup = "link_type:\tcgroup\nprog_id:\t3\n";
        assert_eq!(link_attach(cgroup, &mut names), None);
    }

    #[test]
    fn the_note_groups_by_holder_and_compare_sees_the_holders() {
        let p = |holder: &str, attach: &str| OtherProgram {
            holder: holder.into(),
            attach: attach.into(),
            program_id: 1,
        };
        let found = [
            p("hookprof (pid 5)", "raw_tracepoint sys_enter"),
            p("hookprof (pid 5)", "raw_tracepoint sys_exit"),
            p("bpftrace (pid 9)", "tracepoint sys_enter_openat"),
        ];
        let note = note(&found).unwrap();
        assert!(
            note.starts_with(
                "3 other BPF programs run where this run measures (hookprof (pid 5): \
                 raw_tracepoint sys_enter, raw_tracepoint sys_exit; bpftrace (pid 9): \
                 tracepoint sys_enter_openat)"
            ),
            "{note}"
        );
        assert!(!note.contains('\n'));
        assert_eq!(summary(&found), "3 program(s) of bpftrace, hookprof");
        assert_eq!(summary(&[]), "none");
        assert_eq!(super::note(&[]), None);
    }
}
