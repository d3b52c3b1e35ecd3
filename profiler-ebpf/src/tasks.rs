//! sched_process_fork/exec/exit/free: counts per tracked task, and the scope following children.
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

#[btf_tracepoint(function = "sched_process_free")]
pub fn free_btf(ctx: BtfTracePointContext) -> i32 {
    // (struct task_struct *p)
    on_free(ctx.arg::<*const u8>(0));
    0
}

#[raw_tracepoint(tracepoint = "sched_process_free")]
pub fn free_raw(ctx: RawTracePointContext) -> i32 {
    on_free(unsafe { *(ctx.as_ptr() as *const u64) } as *const u8);
    0
}

#[inline(always)]
fn task_pid(task: *const u8) -> Option<u32> {
    let offset = unsafe { core::ptr::read_volatile(&TASK_PID_OFFSET) } as usize;
    unsafe { bpf_probe_read_kernel(task.add(offset) as *const i32) }
        .ok()
        .map(|pid| pid as u32)
}

#[inline(always)]
fn on_fork(child: *const u8) {
    if !scope::is_tracked(scope::current_tid()) {
        return;
    }
    count_event(event::FORK);
    match task_pid(child) {
        Some(pid) if scope::track(pid) => {}
        _ => count_event(event::TRACK_FULL),
    }
}

#[inline(always)]
fn on_exec() {
    if scope::is_tracked(scope::current_tid()) {
        count_event(event::EXEC);
    }
}

/// Counts the exit; the task stays tracked until it is freed, because do_exit's later steps
/// (exit_files, exit_sem, cgroup_exit, ...) still run in its context.
#[inline(always)]
fn on_exit() {
    if scope::is_tracked(scope::current_tid()) {
        count_event(event::EXIT);
    }
}

/// The task is gone: stop following it (its pid may be reused from now on).
#[inline(always)]
fn on_free(task: *const u8) {
    if let Some(pid) = task_pid(task) {
        if scope::untrack(pid) {
            // exit_group never returns: drop its pending entry.
            let _ = SYSCALL_STARTS.remove(&pid);
        }
    }
}
