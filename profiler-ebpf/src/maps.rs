//! The per-CPU tallies and settings the programs share (the per-task state lives in
//! `task_state`). User space reads the per-CPU arrays between samples.
use aya_ebpf::{
    macros::map,
    maps::{Array, PerCpuArray},
};
use profiler_common::{event, LsmSlotConfig, Tally, HOOK_SLOTS, LSM_SLOTS, MAX_SYSCALLS};

/// The processes whose gate calls count (tgid -> unused value): the runners that do the
/// measured work, one per parallel copy. Writable, because a runner that failed is replaced by
/// one with another pid; several hookprof instances never track each other's threads.
#[map]
pub static GATE_OWNERS: aya_ebpf::maps::HashMap<u32, u8> =
    aya_ebpf::maps::HashMap::with_max_entries(profiler_common::MAX_GATE_OWNERS, 0);

/// The clock (CLOCK_MONOTONIC, as bpf_ktime_get_ns) when user space last began attaching the
/// probes. An exit whose entry is older was entered in an earlier window: between the two the
/// probes were detached, so its duration would include time no probe saw.
#[map]
pub static WINDOW_START: Array<u64> = Array::with_max_entries(1, 0);

/// Per syscall number.
#[map]
pub static SYSCALLS: PerCpuArray<Tally> = PerCpuArray::with_max_entries(MAX_SYSCALLS, 0);

/// Per hook slot (one timed kernel function each).
#[map]
pub static HOOKS: PerCpuArray<Tally> = PerCpuArray::with_max_entries(HOOK_SLOTS, 0);

/// Task events and diagnostics, indexed by `profiler_common::event`.
#[map]
pub static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(event::COUNT, 0);

/// BPF LSM slot settings, indexed by `args * LSM_SLOTS + slot`.
#[map]
pub static LSM_CONFIG: aya_ebpf::maps::Array<LsmSlotConfig> =
    aya_ebpf::maps::Array::with_max_entries((profiler_common::LSM_MAX_ARGS + 1) * LSM_SLOTS, 0);

/// Whether a call entered at `start_ns` was entered before the probes were last attached.
#[inline(always)]
pub fn entered_in_an_earlier_window(start_ns: u64) -> bool {
    WINDOW_START.get(0).is_some_and(|&window| start_ns < window)
}

#[inline(always)]
pub fn count_event(index: u32) {
    if let Some(p) = EVENTS.get_ptr_mut(index) {
        unsafe { *p += 1 }
    }
}

/// Counts one entry of a timed path.
#[inline(always)]
pub fn count_call(map: &PerCpuArray<Tally>, index: u32) {
    if let Some(t) = map.get_ptr_mut(index) {
        unsafe { (*t).calls += 1 }
    }
}

/// Adds one matched duration, with the probed calls nested inside it, to a path's tally, and
/// `calls` entries (0 where the entry counted itself, 1 where the exit counts its call).
#[inline(always)]
pub fn add_duration(map: &PerCpuArray<Tally>, index: u32, calls: u64, ns: u64, nested: u64) {
    let Some(t) = map.get_ptr_mut(index) else {
        return;
    };
    let t = unsafe { &mut *t };
    t.calls += calls;
    t.timed += 1;
    t.total_ns += ns;
    t.nested += nested;
    let b = profiler_common::hist_bucket(ns);
    // The explicit bound keeps the verifier sure of the index.
    if b < t.hist.len() {
        t.hist[b] += 1;
    }
}
