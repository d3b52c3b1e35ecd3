//! What of BPF the running kernel has, asked of the kernel itself (as libbpf-tools do: a map
//! created, a helper tried in a program of the type that calls it, never the release number
//! read), what hookprof does where something is missing, and what it cannot do without.
//!
//! | missing (added in)                                | instead                                  |
//! |---------------------------------------------------|------------------------------------------|
//! | task storage for tracing programs (5.12)          | per-task state in a hash map by thread id |
//! | bpf_task_pt_regs (5.15)                           | a sample's syscall from the task's record |
//! | sched_switch's prev_state argument (5.18, in BTF) | the state read from the task (BTF offset) |
//! | bpf_loop (5.17)                                   | `--inject syscall:` refused in one line   |
//! | BTF, the BPF ring buffer (5.8)                    | nothing loads: one line, exit 2           |
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use aya::{
    maps::MapType,
    programs::ProgramType,
    sys::{is_helper_supported, is_map_supported, BpfHelper},
};

/// The kernel's own BTF, which every probe is loaded against.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Tasks the hash map fallback holds at once (preallocated: about 300 bytes each). A task that
/// finds it full goes untracked and is counted (`untracked_children`).
pub const HASH_STATE_TASKS: u32 = 16384;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    /// BPF_MAP_TYPE_TASK_STORAGE with bpf_task_storage_get and bpf_get_current_task_btf from
    /// the tracing and perf_event programs (5.12; 5.11 had it for BPF LSM programs alone).
    pub task_storage: bool,
    /// bpf_task_pt_regs from perf_event programs (5.15).
    pub task_pt_regs: bool,
    /// bpf_loop (5.17).
    pub bpf_loop: bool,
}

impl Features {
    /// The running kernel's, probed once per process (a probe that fails, for want of
    /// privileges, fails this: it never passes for a missing feature).
    pub fn get() -> Result<Features> {
        static FEATURES: OnceLock<Features> = OnceLock::new();
        if let Some(f) = FEATURES.get() {
            return Ok(*f);
        }
        let probed = Features::probe().context("probe the kernel's BPF features")?;
        Ok(*FEATURES.get_or_init(|| probed))
    }

    fn probe() -> Result<Features> {
        let helper = |program, helper| is_helper_supported(program, helper);
        let from_all = |h| -> Result<bool> {
            Ok(helper(ProgramType::RawTracePoint, h)? && helper(ProgramType::PerfEvent, h)?)
        };
        Ok(Features {
            task_storage: is_map_supported(MapType::TaskStorage)?
                && from_all(BpfHelper::BPF_FUNC_task_storage_get)?
                && from_all(BpfHelper::BPF_FUNC_get_current_task_btf)?,
            task_pt_regs: helper(ProgramType::PerfEvent, BpfHelper::BPF_FUNC_task_pt_regs)?,
            bpf_loop: helper(ProgramType::RawTracePoint, BpfHelper::BPF_FUNC_loop)?,
        })
    }

    /// One line for each thing done another way on this kernel than on the newest.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.task_storage {
            notes.push(format!(
                "no task storage for tracing programs (BPF_MAP_TYPE_TASK_STORAGE, Linux 5.12): \
                 per-task state is kept in a hash map by thread id ({HASH_STATE_TASKS} tasks \
                 at once)"
            ));
        }
        if !self.task_pt_regs {
            notes.push(
                "no bpf_task_pt_regs (Linux 5.15): a stack sample's syscall is the one its \
                 task's sys_enter probe recorded"
                    .into(),
            );
        }
        notes
    }

    /// `--inject syscall:` busy-waits in a bpf_loop.
    pub fn check_syscall_injection(&self) -> Result<()> {
        if !self.bpf_loop {
            bail!(
                "--inject syscall:NAME=NS needs bpf_loop (Linux 5.17), which this kernel ({}) \
                 lacks; --inject HOOK=NS (BPF LSM) works here",
                kernel_release()
            );
        }
        Ok(())
    }
}

/// What hookprof cannot load anything without: one line naming the first thing missing.
pub fn check_kernel() -> Result<()> {
    require_btf()?;
    // aya-log's buffer, in every program that logs.
    if !is_map_supported(MapType::RingBuf).context("probe the kernel's BPF features")? {
        bail!(
            "this kernel ({}) has no BPF ring buffer (BPF_MAP_TYPE_RINGBUF, Linux 5.8): \
             hookprof's probes need Linux 5.10 or newer; use --probes none for clean timings",
            kernel_release()
        );
    }
    Ok(())
}

/// The kernel's BTF, which every probe is loaded against.
pub fn require_btf() -> Result<()> {
    if std::path::Path::new(VMLINUX_BTF).exists() {
        return Ok(());
    }
    if let Some(why) = crate::machine::namespaces::sysfs_hidden("/sys/kernel/btf") {
        bail!(
            "{VMLINUX_BTF} is missing: {why}; hookprof's probes load against the kernel's BTF: \
             mount the kernel's sysfs (mount -t sysfs sysfs /sys), or run where the host's \
             /sys is seen; use --probes none for clean timings"
        );
    }
    bail!(
        "this kernel ({}) has no BTF ({VMLINUX_BTF} is missing): hookprof's probes need a \
         kernel built with CONFIG_DEBUG_INFO_BTF=y (Debian's have it from 5.10); use \
         --probes none for clean timings",
        kernel_release()
    )
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_string())
        .unwrap_or_else(|_| "release unknown".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_missing_feature_is_one_line_naming_its_version() {
        let old = Features {
            task_storage: false,
            task_pt_regs: false,
            bpf_loop: false,
        };
        let notes = old.notes();
        assert_eq!(notes.len(), 2);
        assert!(notes[0].contains("Linux 5.12") && notes[1].contains("Linux 5.15"));
        assert!(notes.iter().all(|n| !n.contains('\n')));
        let e = old.check_syscall_injection().unwrap_err().to_string();
        assert!(
            e.contains("bpf_loop (Linux 5.17)") && !e.contains('\n'),
            "{e}"
        );
        let new = Features {
            task_storage: true,
            task_pt_regs: true,
            bpf_loop: true,
        };
        assert!(new.notes().is_empty() && new.check_syscall_injection().is_ok());
    }
}
