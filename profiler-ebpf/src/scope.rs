//! Which tasks count: the workload thread while its gate is open, and every task it forks.
use aya_ebpf::helpers::bpf_get_current_pid_tgid;

use crate::maps::{CPU_SCOPE, TRACKED};

/// The calling thread's id (the kernel's `pid`).
#[inline(always)]
pub fn current_tid() -> u32 {
    bpf_get_current_pid_tgid() as u32
}

#[inline(always)]
pub fn is_tracked(tid: u32) -> bool {
    unsafe { TRACKED.get(&tid).is_some() }
}

/// Remembers on this CPU whether the thread entering a syscall is tracked.
#[inline(always)]
pub fn note_syscall_entry(tid: u32, tracked: bool) {
    if let Some(p) = CPU_SCOPE.get_ptr_mut(0) {
        unsafe { *p = if tracked { tid } else { 0 } }
    }
}

/// Like `is_tracked`, with the per-CPU fast path for code running inside a syscall.
#[inline(always)]
pub fn is_tracked_fast(tid: u32) -> bool {
    let on_cpu = CPU_SCOPE.get(0).copied().unwrap_or(0);
    (on_cpu != 0 && on_cpu == tid) || is_tracked(tid)
}

#[inline(always)]
pub fn track(tid: u32) -> bool {
    TRACKED.insert(&tid, &1, 0).is_ok()
}

#[inline(always)]
pub fn untrack(tid: u32) -> bool {
    TRACKED.remove(&tid).is_ok()
}
