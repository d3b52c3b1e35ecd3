//! The timed pairs taken apart: each program makes one of the helper calls a timed entry or exit
//! makes, and nothing else. Calibration attaches them beside an empty program and reads their
//! run times from the kernel's statistics, so it can say what each part of a pair costs. Each
//! part comes as an fentry (the hook pair's kind) and as a raw_tracepoint on sys_enter (the
//! syscall pair's kind, which also loads on kernels that refuse trampolines).
use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::{fentry, fexit, raw_tracepoint},
    programs::{FEntryContext, FExitContext, RawTracePointContext},
};
use profiler_common::HOOK_SLOTS;

use crate::{maps::HOOKS, task_state};

/// The current task (the owner task storage is looked up on, or the hash map's key).
#[inline(always)]
fn current_task() {
    core::hint::black_box(task_state::identify_current());
}

/// The current task and its storage: one side's state lookup.
#[inline(always)]
fn task_state() {
    core::hint::black_box(task_state::current().is_some());
}

/// One clock read.
#[inline(always)]
fn clock() {
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
}

/// The calibration slot's per-CPU tally.
#[inline(always)]
fn tally() {
    core::hint::black_box(HOOKS.get_ptr_mut(HOOK_SLOTS - 1).is_some());
}

#[fentry(function = "security_file_open")]
pub fn part_current_task(_ctx: FEntryContext) -> u32 {
    current_task();
    0
}

#[fentry(function = "security_file_open")]
pub fn part_task_state(_ctx: FEntryContext) -> u32 {
    task_state();
    0
}

#[fentry(function = "security_file_open")]
pub fn part_clock(_ctx: FEntryContext) -> u32 {
    clock();
    0
}

#[fentry(function = "security_file_open")]
pub fn part_tally(_ctx: FEntryContext) -> u32 {
    tally();
    0
}

/// With `part_clock`, the cheapest pair that can time a call at all (a clock read on each
/// side), which no timed pair can undercut.
#[fexit(function = "security_file_open")]
pub fn part_clock_exit(_ctx: FExitContext) -> u32 {
    clock();
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_part_current_task(_ctx: RawTracePointContext) -> i32 {
    current_task();
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_part_task_state(_ctx: RawTracePointContext) -> i32 {
    task_state();
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_part_clock(_ctx: RawTracePointContext) -> i32 {
    clock();
    0
}

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_part_tally(_ctx: RawTracePointContext) -> i32 {
    tally();
    0
}

/// With `sys_part_clock`, the cheapest syscall pair that can time a call at all.
#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_part_clock_exit(_ctx: RawTracePointContext) -> i32 {
    clock();
    0
}
