//! sched_process_fork/exec/exit: counts per tracked task, and the scope following children.
//! exec and exit have a tp_btf program and a raw_tracepoint fallback with the same logic; fork
//! needs the child as a BTF pointer to give it storage, so it is tp_btf only. A freed task's
//! task storage goes with it; where the state is a hash map by thread id instead (before
//! 5.11), `free_raw` deletes its entry.
use aya_ebpf::{
    bindings::task_struct,
    macros::{btf_tracepoint, raw_tracepoint},
    programs::{BtfTracePointContext, RawTracePointContext},
    EbpfContext,
};
use aya_log_ebpf::warn;
use profiler_common::event;

use crate::{maps::count_event, scope, task_state};

#[btf_tracepoint(function = "sched_process_fork")]
pub fn fork_btf(ctx: BtfTracePointContext) -> i32 {
    // (struct task_struct *parent, struct task_struct *child)
    on_fork(&ctx, ctx.arg::<*mut task_struct>(1));
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

/// Counts the exit; the task stays tracked until it is freed, because do_exit's later steps
/// (exit_files, exit_sem, cgroup_exit, ...) still run in its context.
#[btf_tracepoint(function = "sched_process_exit")]
pub fn exit_btf(_ctx: BtfTracePointContext) -> i32 {
    count_if_tracked(event::EXIT);
    0
}

#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn exit_raw(_ctx: RawTracePointContext) -> i32 {
    count_if_tracked(event::EXIT);
    0
}

/// (struct task_struct *p): the task is being freed, long after its exit.
#[raw_tracepoint(tracepoint = "sched_process_free")]
pub fn free_raw(ctx: RawTracePointContext) -> i32 {
    let task = unsafe { *(ctx.as_ptr() as *const *mut task_struct) };
    task_state::forget_freed(task);
    0
}

/// A tracked task's child is tracked too, and so is the child of a runner's thread whose
/// window word is open (no gate program ran); a spawning gate owner's child is born dormant
/// (it counts from its execve on).
#[inline(always)]
fn on_fork(ctx: &BtfTracePointContext, child: *mut task_struct) {
    let dormant = match task_state::current() {
        Some(parent) => parent.spawning,
        None if !scope::is_top() && scope::window_word_open() => 0,
        None => return,
    };
    count_event(event::FORK);
    if !scope::follows_forks() {
        return;
    }
    match task_state::track(child) {
        Some(state) => {
            state.dormant = dormant;
            // Born runnable: from here it waits for its first CPU.
            state.switched_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
            state.runnable = 1;
        }
        None => {
            count_event(event::TRACK_FULL);
            warn!(
                ctx,
                "no tracking storage for a forked child: it goes untracked"
            );
        }
    }
}

/// Counts the exec; in `top --comm` a task whose new name is another leaves the scope.
#[inline(always)]
fn on_exec() {
    count_if_tracked(event::EXEC);
    if !scope::keeps_after_exec() {
        task_state::untrack_current();
    }
}

#[inline(always)]
fn count_if_tracked(index: u32) {
    if task_state::current().is_some() {
        count_event(index);
    }
}
