//! The per-CPU tallies and settings the programs share (the per-task state lives in
//! `task_state`). User space reads the per-CPU arrays between samples; in `top` the tallies go
//! to a per-CPU hash per (group, path) instead, which user space reads per interval.
use aya_ebpf::{
    bindings::{BPF_F_NO_PREALLOC, BPF_NOEXIST},
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_comm},
    macros::map,
    maps::{Array, PerCpuArray, PerCpuHashMap},
    Global,
};
use profiler_common::{
    event, group_by, AggregateKey, LsmSlotConfig, Tally, AGGREGATE_KEYS, COMM_LEN, HOOK_PATHS,
    HOOK_SLOTS, LSM_SLOTS, MAX_SYSCALLS,
};

use crate::scope;

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

/// `top`: tallies per (group, path). Allocated as keys appear, so a machine with many CPUs pays
/// for the groups and paths it has, not for the map's capacity.
#[map]
pub static AGGREGATE: PerCpuHashMap<AggregateKey, Tally> =
    PerCpuHashMap::with_max_entries(AGGREGATE_KEYS, BPF_F_NO_PREALLOC);

/// A zero tally to insert from: a `Tally` is too big for the BPF stack beside the rest.
#[map]
static ZERO_TALLY: Array<Tally> = Array::with_max_entries(1, 0);

/// `top`: what the aggregate's groups are (`profiler_common::group_by`), set at load.
#[unsafe(no_mangle)]
static GROUP_BY: Global<u32> = Global::new(group_by::CGROUP);

/// A timed path: a syscall number or a hook slot.
#[derive(Copy, Clone)]
pub enum Path {
    Syscall(u32),
    Hook(u32),
}

/// The path's tally for the current task: in `run` its slot of the per-CPU array, in `top` its
/// group's entry in the aggregate (created on first use).
#[inline(always)]
fn tally(path: Path) -> Option<*mut Tally> {
    if !scope::is_top() {
        return match path {
            Path::Syscall(nr) => SYSCALLS.get_ptr_mut(nr),
            Path::Hook(slot) => HOOKS.get_ptr_mut(slot),
        };
    }
    let mut key = AggregateKey {
        cgroup_id: 0,
        comm: [0; COMM_LEN],
        path: match path {
            Path::Syscall(nr) => nr,
            Path::Hook(slot) => HOOK_PATHS + slot,
        },
        _pad: 0,
    };
    if GROUP_BY.load() == group_by::COMM {
        key.comm = bpf_get_current_comm().unwrap_or_default();
    } else {
        key.cgroup_id = unsafe { bpf_get_current_cgroup_id() };
    }
    if let Some(t) = AGGREGATE.get_ptr_mut(&key) {
        return Some(t);
    }
    let zero = ZERO_TALLY.get(0)?;
    // Another CPU may have added the key meanwhile (EEXIST): either way it is there now.
    let _ = AGGREGATE.insert(&key, zero, BPF_NOEXIST as u64);
    let t = AGGREGATE.get_ptr_mut(&key);
    if t.is_none() {
        count_event(event::AGGREGATE_FULL);
    }
    t
}

/// Whether a call entered at `start_ns` was entered before the probes were last attached.
#[inline(always)]
pub fn entered_in_an_earlier_window(start_ns: u64) -> bool {
    WINDOW_START.get(0).is_some_and(|&window| start_ns < window)
}

#[inline(always)]
pub fn count_event(index: u32) {
    add_event(index, 1);
}

/// Adds `n` to an `EVENTS` entry (a count, or nanoseconds for the on/off-CPU entries).
#[inline(always)]
pub fn add_event(index: u32, n: u64) {
    if let Some(p) = EVENTS.get_ptr_mut(index) {
        unsafe { *p += n }
    }
}

/// Counts one entry of a timed path.
#[inline(always)]
pub fn count_call(path: Path) {
    if let Some(t) = tally(path) {
        unsafe { (*t).calls += 1 }
    }
}

/// Adds one matched duration, with the probed calls nested inside it, to a path's tally, and
/// `calls` entries (0 where the entry counted itself, 1 where the exit counts its call).
#[inline(always)]
pub fn add_duration(path: Path, calls: u64, ns: u64, nested: u64, off_cpu_ns: u64) {
    let Some(t) = tally(path) else {
        return;
    };
    let t = unsafe { &mut *t };
    t.calls += calls;
    t.timed += 1;
    t.total_ns += ns;
    t.nested += nested;
    t.off_cpu_ns += off_cpu_ns;
    let b = profiler_common::hist_bucket(ns);
    // The explicit bound keeps the verifier sure of the index.
    if b < t.hist.len() {
        t.hist[b] += 1;
    }
}
