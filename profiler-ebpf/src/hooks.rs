//! Timed kernel functions: `HOOK_SLOTS` fentry/fexit pairs, each bound to one function at load
//! time (a `security_*` hook, an LSM's own hook function, or a task path). Entry stamps a per-CPU
//! slot; exit adds the duration if the same thread is still there (if the task was preempted by
//! another tracked task or migrated, the call is counted but not timed).
use aya_ebpf::{
    helpers::bpf_ktime_get_ns,
    macros::{fentry, fexit},
    programs::{FEntryContext, FExitContext},
};
use profiler_common::HookStart;

use crate::{
    maps::{add_duration, HOOKS, HOOK_STARTS},
    scope,
};

#[inline(always)]
fn hook_enter(slot: u32) {
    let tid = scope::current_tid();
    if !scope::is_tracked_fast(tid) {
        return;
    }
    if let Some(t) = HOOKS.get_ptr_mut(slot) {
        unsafe { (*t).calls += 1 }
    }
    if let Some(s) = HOOK_STARTS.get_ptr_mut(slot) {
        unsafe {
            *s = HookStart {
                start_ns: bpf_ktime_get_ns(),
                tid,
                _pad: 0,
            }
        }
    }
}

#[inline(always)]
fn hook_exit(slot: u32) {
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = scope::current_tid();
    let Some(s) = HOOK_STARTS.get_ptr_mut(slot) else {
        return;
    };
    let s = unsafe { &mut *s };
    if s.tid != tid || tid == 0 {
        return;
    }
    s.tid = 0;
    if let Some(t) = HOOKS.get_ptr_mut(slot) {
        add_duration(unsafe { &mut *t }, now.wrapping_sub(s.start_ns));
    }
}

/// Empty pair: the floor that calibration compares a timed pair against.
#[fentry(function = "security_file_open")]
pub fn empty_enter(_ctx: FEntryContext) -> u32 {
    0
}

#[fexit(function = "security_file_open")]
pub fn empty_exit(_ctx: FExitContext) -> u32 {
    0
}

macro_rules! hook_slots {
    ($($slot:literal)*) => { paste::paste! { $(
        #[fentry(function = "security_file_open")]
        pub fn [<hook_enter_ $slot>](_ctx: FEntryContext) -> u32 {
            hook_enter($slot);
            0
        }
        #[fexit(function = "security_file_open")]
        pub fn [<hook_exit_ $slot>](_ctx: FExitContext) -> u32 {
            hook_exit($slot);
            0
        }
    )* } };
}

hook_slots!(
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19
    20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39
    40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59
    60 61 62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79
    80 81 82 83 84 85 86 87 88 89 90 91 92 93 94 95 96 97 98 99
    100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 118 119
    120 121 122 123 124 125 126 127
);
