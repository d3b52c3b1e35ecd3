//! `--inject syscall:NAME=NS`, attached after the probes' discovery and calibration: the
//! injection is part of the measured kernel only.
use anyhow::Result;

use crate::{
    probes::{
        injection::{self, Injection},
        KernelBtf, SyscallInjection, TaskLayout,
    },
    runner::{Supervisor, Wait},
};

/// `--inject syscall:NAME=NS`: the injection attached for the rest of the run, with the
/// supervisor keeping its gate owners naming the runners (None without such an injection).
pub(super) fn inject_syscalls(
    variants: &[Vec<Injection>],
    layout: Option<TaskLayout>,
    supervisor: &mut Supervisor,
) -> Result<Wait<Option<SyscallInjection>>> {
    let syscalls: Vec<_> = variants.iter().map(|v| injection::syscalls(v)).collect();
    // Privileges and the kernel's support were checked before the probes loaded.
    if syscalls.iter().all(Vec::is_empty) {
        return Ok(Wait::Done(None));
    }
    let attach = move || -> Result<_> {
        // With --probes none, the layout has not been read yet.
        let layout = match layout {
            Some(l) => l,
            None => KernelBtf::load_in_child()?.layout(),
        };
        SyscallInjection::attach(&syscalls, &layout)
    };
    let Wait::Done(attached) = supervisor.blocking(attach)? else {
        return Ok(Wait::Interrupted);
    };
    let (injection, owners) = attached?;
    supervisor.keep_windows_open(owners)?;
    Ok(Wait::Done(Some(injection)))
}
