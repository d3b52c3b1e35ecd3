//! raw_syscalls sys_enter/sys_exit: calls and enter-to-exit time per syscall number, and the
//! scope gate through which the workload thread opens and closes its tracking window.
use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::raw_tracepoint,
    programs::RawTracePointContext,
    EbpfContext,
};
use profiler_common::{SyscallStart, GATE_CLOSE, GATE_FD, GATE_OPEN, MAX_SYSCALLS, SYS_IOCTL};

use crate::{
    maps::{add_duration, GATE_OWNER, SYSCALLS, SYSCALL_STARTS},
    scope,
};

// x86_64 struct pt_regs: the first two syscall arguments.
const PT_REGS_DI: usize = 112;
const PT_REGS_SI: usize = 104;

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> i32 {
    on_sys_enter(&ctx);
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(_ctx: RawTracePointContext) -> i32 {
    on_sys_exit();
    0
}

/// sys_enter's raw arguments: (struct pt_regs *regs, long id).
#[inline(always)]
fn raw_args(ctx: &RawTracePointContext) -> (*const u8, i64) {
    let args = ctx.as_ptr() as *const u64;
    unsafe { (*args as *const u8, *args.add(1) as i64) }
}

#[inline(always)]
fn on_sys_enter(ctx: &RawTracePointContext) {
    let (regs, nr) = raw_args(ctx);
    let tid = scope::current_tid();
    if nr == SYS_IOCTL && handle_gate(regs, tid) {
        return;
    }
    let tracked = scope::is_tracked(tid);
    scope::note_syscall_entry(tid, tracked);
    if nr < 0 || nr >= MAX_SYSCALLS as i64 || !tracked {
        return;
    }
    if let Some(t) = SYSCALLS.get_ptr_mut(nr as u32) {
        unsafe { (*t).calls += 1 }
    }
    let start = SyscallStart {
        start_ns: unsafe { bpf_ktime_get_ns() },
        nr: nr as u32,
        _pad: 0,
    };
    let _ = SYSCALL_STARTS.insert(&tid, &start, 0);
}

/// Opens or closes the calling thread's window if this ioctl is our gate; true if it was.
#[inline(always)]
fn handle_gate(regs: *const u8, tid: u32) -> bool {
    let owner = GATE_OWNER.get(0).copied().unwrap_or(0);
    if owner == 0 || (aya_ebpf::helpers::bpf_get_current_pid_tgid() >> 32) as u32 != owner {
        return false;
    }
    // The fd is an int: compare its low 32 bits, however the caller extended it.
    let fd = unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_DI) as *const u64) };
    if fd.map(|v| v as u32) != Ok(GATE_FD as u32) {
        return false;
    }
    match unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_SI) as *const u64) } {
        Ok(GATE_OPEN) => {
            scope::track(tid);
            scope::note_syscall_entry(tid, true);
        }
        Ok(GATE_CLOSE) => {
            scope::untrack(tid);
            scope::note_syscall_entry(tid, false);
        }
        _ => {}
    }
    true
}

#[inline(always)]
fn on_sys_exit() {
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = scope::current_tid();
    let Some(start) = (unsafe { SYSCALL_STARTS.get(&tid) }).copied() else {
        return;
    };
    let _ = SYSCALL_STARTS.remove(&tid);
    if let Some(t) = SYSCALLS.get_ptr_mut(start.nr) {
        add_duration(unsafe { &mut *t }, now.wrapping_sub(start.start_ns));
    }
}
