//! Which tasks count: the workload thread while its gate is open, and every task it forks.
use aya_ebpf::helpers::bpf_get_current_pid_tgid;

use crate::maps::TRACKED;

/// The calling thread's id (the kernel's `pid`).
#[inline(always)]
pub fn current_tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

#[inline(always)]
pub fn is_tracked(tid: u32) -> bool {
    unsafe { TRACKED.get(&tid).is_some() }
}

#[inline(always)]
pub fn track(tid: u32) -> bool {
    TRACKED.insert(&tid, &1, 0).is_ok()
}

#[inline(always)]
pub fn untrack(tid: u32) -> bool {
    TRACKED.remove(&tid).is_ok()
}
