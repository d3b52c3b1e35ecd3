//! sched_process_fork/exec/exit: counts per tracked task, and the scope following children.
//! Each event has a tp_btf program and a raw_tracepoint fallback with the same logic.
use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::{btf_tracepoint, raw_tracepoint},
    programs::{BtfTracePointContext, RawTracePointContext},
    EbpfContext,
};
use profiler_common::event;

use crate::{
    maps::{count_event, SYSCALL_STARTS},
    scope,
};

/// Offset of `pid` in `struct task_struct`, read from the kernel's BTF before load.
#[unsafe(no_mangle)]
static TASK_PID_OFFSET: u32 = 0;

#[btf_tracepoint(function = "sched_process_fork")]
pub fn fork_btf(ctx: BtfTracePointContext) -> i32 {
    // (struct task_struct *parent, struct task_struct *child)
    on_fork(ctx.arg::<*const u8>(1));
    0
}

#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn fork_raw(ctx: RawTracePointContext) -> i32 {
    on_fork(unsafe { *(ctx.as_ptr() as *const u64).add(1) } as *const u8);
    0
}

#[btf_tracepoint(function = "sched_process_exec")]
pub fn exec_btf(_ctx: BtfTracePointContext) -> i32 {
    on_exec();
    0
}

#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn exec_raw(_ctx: RawTracePointContext) -> i32 {
    on_exec();
    0
}

#[btf_tracepoint(function = "sched_process_exit")]
pub fn exit_btf(_ctx: BtfTracePointContext) -> i32 {
    on_exit();
    0
}

#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn exit_raw(_ctx: RawTracePointContext) -> i32 {
    on_exit();
    0
}

#[inline(always)]
fn on_fork(child: *const u8) {
    if !scope::is_tracked(scope::current_tid()) {
        return;
    }
    count_event(event::FORK);
    let offset = unsafe { core::ptr::read_volatile(&TASK_PID_OFFSET) } as usize;
    match unsafe { bpf_probe_read_kernel(child.add(offset) as *const i32) } {
        Ok(pid) if scope::track(pid as u32) => {}
        _ => count_event(event::TRACK_FULL),
    }
}

#[inline(always)]
fn on_exec() {
    if scope::is_tracked(scope::current_tid()) {
        count_event(event::EXEC);
    }
}

#[inline(always)]
fn on_exit() {
    let tid = scope::current_tid();
    if scope::untrack(tid) {
        count_event(event::EXIT);
        // exit_group never returns: drop its pending entry.
        let _ = SYSCALL_STARTS.remove(&tid);
    }
}
