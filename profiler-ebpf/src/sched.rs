//! sched_switch: where a tracked task's time goes between on-CPU and switched out, so an op's
//! parts add up to its time. Each switch closes the interval the task was in: on a CPU (CPU
//! time), or off it, runnable (preempted: waiting for a CPU) or blocked (sleeping). Time off a
//! CPU inside an open syscall is also that syscall's wait. An interval that began before the
//! probes were last attached is dropped: no probe saw its start.
use aya_ebpf::{
    bindings::task_struct, helpers::bpf_ktime_get_ns, macros::btf_tracepoint,
    programs::BtfTracePointContext,
};
use profiler_common::event;

use crate::{
    maps::{add_event, entered_in_an_earlier_window},
    task_state::{self, TaskState},
};

/// The state a task leaves a CPU in when it is preempted (or yields): still runnable.
const TASK_RUNNING: u64 = 0;

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    // (bool preempt, struct task_struct *prev, struct task_struct *next, unsigned int
    // prev_state) since 5.18.
    let prev: *mut task_struct = ctx.arg(1);
    let next: *mut task_struct = ctx.arg(2);
    let prev_state: u64 = ctx.arg(3);
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(state) = task_state::of(prev) {
        leave_cpu(
            state,
            now,
            u32::from(prev_state & 0xffff_ffff == TASK_RUNNING),
        );
    }
    if let Some(state) = task_state::of(next) {
        enter_cpu(state, now);
    }
    0
}

/// Closes the task's on-CPU interval at `now`; it is off a CPU from here, `runnable` or not.
#[inline(always)]
pub fn leave_cpu(state: &mut TaskState, now: u64, runnable: u32) {
    if state.on_cpu != 0 && fresh(state.switched_ns) {
        add_event(event::ON_CPU_NS, now.wrapping_sub(state.switched_ns));
    }
    state.on_cpu = 0;
    state.runnable = runnable;
    state.switched_ns = now;
}

/// Closes the task's off-CPU interval at `now`; it is on a CPU from here.
#[inline(always)]
fn enter_cpu(state: &mut TaskState, now: u64) {
    if state.on_cpu == 0 && fresh(state.switched_ns) {
        let off = now.wrapping_sub(state.switched_ns);
        let index = if state.runnable != 0 {
            event::OFF_CPU_RUNNABLE_NS
        } else {
            event::OFF_CPU_BLOCKED_NS
        };
        add_event(index, off);
        if state.syscall_open != 0 {
            state.syscall_off_cpu_ns += off;
        }
    }
    state.on_cpu = 1;
    state.switched_ns = now;
}

/// Whether an interval that began at `since` began in this attach window.
#[inline(always)]
fn fresh(since: u64) -> bool {
    since != 0 && !entered_in_an_earlier_window(since)
}
