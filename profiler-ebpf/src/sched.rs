//! sched_switch: where a tracked task's time goes between on-CPU and switched out, so an op's
//! parts add up to its time. Each switch closes the interval the task was in: on a CPU (CPU
//! time), or off it, runnable (preempted: waiting for a CPU) or blocked (sleeping). Time off a
//! CPU inside an open syscall is also that syscall's wait. An interval that began before the
//! probes were last attached is dropped: no probe saw its start.
use aya_ebpf::{
    bindings::task_struct,
    helpers::{bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::btf_tracepoint,
    programs::BtfTracePointContext,
    Global,
};

use crate::task_state;

/// The state of a task that is still runnable when it leaves a CPU (it yielded).
const TASK_RUNNING: u32 = 0;

/// 1 where the tracepoint passes `prev_state` (5.18); before that the state is read from the
/// task, at `TASK_STATE_FIELD_OFFSET` (`__state` from 5.14, `state` before), from its BTF.
#[unsafe(no_mangle)]
static SWITCH_HAS_PREV_STATE: Global<u32> = Global::new(1);
#[unsafe(no_mangle)]
static TASK_STATE_FIELD_OFFSET: Global<u32> = Global::new(0);

#[btf_tracepoint(function = "sched_switch")]
pub fn sched_switch(ctx: BtfTracePointContext) -> i32 {
    // (bool preempt, struct task_struct *prev, struct task_struct *next[, unsigned int
    // prev_state since 5.18])
    let preempt: u64 = ctx.arg(0);
    let prev: *mut task_struct = ctx.arg(1);
    let next: *mut task_struct = ctx.arg(2);
    let now = unsafe { bpf_ktime_get_ns() };
    if let Some(state) = task_state::of(prev) {
        // Preempted, it stays on the run queue whatever its state says; otherwise it is
        // runnable only in TASK_RUNNING (it yielded), else it went to sleep.
        let runnable = preempt & 0xff != 0 || prev_state(&ctx, prev) == TASK_RUNNING;
        state.leave_cpu(now, u32::from(runnable));
    }
    if let Some(state) = task_state::of(next) {
        state.enter_cpu(now);
    }
    0
}

/// The state `prev` left its CPU in (its low 32 bits: `state` was a long before 5.14).
#[inline(always)]
fn prev_state(ctx: &BtfTracePointContext, prev: *mut task_struct) -> u32 {
    if SWITCH_HAS_PREV_STATE.load() != 0 {
        let state: u64 = ctx.arg(3);
        return state as u32;
    }
    let field = unsafe { (prev as *const u8).add(TASK_STATE_FIELD_OFFSET.load() as usize) };
    // Unreadable: taken as asleep, the common case of a switch that is no preemption.
    unsafe { bpf_probe_read_kernel(field as *const u32) }.unwrap_or(1)
}
