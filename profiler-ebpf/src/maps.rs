//! Every map the programs share. User space reads the per-CPU arrays between samples.
use aya_ebpf::{
    macros::map,
    maps::{HashMap, PerCpuArray},
};
use profiler_common::{
    event, HookSlot, LsmSlotConfig, SyscallStart, Tally, HOOK_SLOTS, LSM_SLOTS, MAX_SYSCALLS,
    MAX_TRACKED_TASKS,
};

/// The process whose gate calls count (its tgid, at index 0): the runner that does the measured
/// work. Writable, because a runner that failed is replaced by one with another pid; several
/// hookprof instances never track each other's threads.
#[map]
pub static GATE_OWNER: aya_ebpf::maps::Array<u32> = aya_ebpf::maps::Array::with_max_entries(1, 0);

/// Threads whose work is measured: tid -> 1.
#[map]
pub static TRACKED: HashMap<u32, u8> = HashMap::with_max_entries(MAX_TRACKED_TASKS, 0);

/// Per CPU: the thread whose latest syscall entry on this CPU was a tracked one (0 if not).
/// Hooks run mostly inside syscalls, so this per-CPU read answers "is this thread tracked?"
/// without a hash lookup; a mismatch (the thread migrated, or no syscall) falls back to it.
#[map]
pub static CPU_SCOPE: PerCpuArray<u32> = PerCpuArray::with_max_entries(1, 0);

/// Per syscall number.
#[map]
pub static SYSCALLS: PerCpuArray<Tally> = PerCpuArray::with_max_entries(MAX_SYSCALLS, 0);

/// Syscalls entered and not yet returned, per thread.
#[map]
pub static SYSCALL_STARTS: HashMap<u32, SyscallStart> =
    HashMap::with_max_entries(MAX_TRACKED_TASKS, 0);

/// Per hook slot (one timed kernel function each): its tally and its waiting entry.
#[map]
pub static HOOKS: PerCpuArray<HookSlot> = PerCpuArray::with_max_entries(HOOK_SLOTS, 0);

/// Task events and diagnostics, indexed by `profiler_common::event`.
#[map]
pub static EVENTS: PerCpuArray<u64> = PerCpuArray::with_max_entries(event::COUNT, 0);

/// BPF LSM slot settings, indexed by `args * LSM_SLOTS + slot`.
#[map]
pub static LSM_CONFIG: aya_ebpf::maps::Array<LsmSlotConfig> =
    aya_ebpf::maps::Array::with_max_entries((profiler_common::LSM_MAX_ARGS + 1) * LSM_SLOTS, 0);

#[inline(always)]
pub fn count_event(index: u32) {
    if let Some(p) = EVENTS.get_ptr_mut(index) {
        unsafe { *p += 1 }
    }
}

/// Adds one matched duration to a tally.
#[inline(always)]
pub fn add_duration(t: &mut Tally, ns: u64) {
    t.timed += 1;
    t.total_ns += ns;
    let b = profiler_common::hist_bucket(ns);
    // The explicit bound keeps the verifier sure of the index.
    if b < t.hist.len() {
        t.hist[b] += 1;
    }
}
