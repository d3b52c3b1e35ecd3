//! The timed pair taken apart: each program makes one of the helper calls a timed entry or exit
//! makes, and nothing else. Calibration attaches them beside an empty program and reads their
//! run times from the kernel's statistics, so it can say what each part of the pair costs.
use aya_ebpf::{
    helpers::{bpf_get_current_task_btf, bpf_ktime_get_ns},
    macros::{fentry, fexit},
    programs::{FEntryContext, FExitContext},
};
use profiler_common::HOOK_SLOTS;

use crate::{maps::HOOKS, task_state};

/// The current task (the owner task storage is looked up on).
#[fentry(function = "security_file_open")]
pub fn part_current_task(_ctx: FEntryContext) -> u32 {
    core::hint::black_box(unsafe { bpf_get_current_task_btf() });
    0
}

/// The current task and its storage: one side's state lookup.
#[fentry(function = "security_file_open")]
pub fn part_task_state(_ctx: FEntryContext) -> u32 {
    core::hint::black_box(task_state::current().is_some());
    0
}

/// One clock read.
#[fentry(function = "security_file_open")]
pub fn part_clock(_ctx: FEntryContext) -> u32 {
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

/// One clock read at exit: with `part_clock`, the cheapest pair that can time a call at all
/// (a clock read on each side), which no timed pair can undercut.
#[fexit(function = "security_file_open")]
pub fn part_clock_exit(_ctx: FExitContext) -> u32 {
    core::hint::black_box(unsafe { bpf_ktime_get_ns() });
    0
}

/// The calibration slot's per-CPU tally.
#[fentry(function = "security_file_open")]
pub fn part_tally(_ctx: FEntryContext) -> u32 {
    core::hint::black_box(HOOKS.get_ptr_mut(HOOK_SLOTS - 1).is_some());
    0
}
