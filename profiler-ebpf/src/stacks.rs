//! Sampled kernel stacks: a program on the software cpu-clock event of every CPU. At each
//! tick that interrupts a tracked task it counts one sample under (kernel stack, syscall,
//! mode), so user space can say which hooks, LSM functions, syscalls and task paths the
//! task's CPU time went to, on kernels that refuse trampolines as well as on those that
//! allow them. Stacks are deduplicated by the kernel's stack map; user space symbolises them.
use aya_ebpf::{
    bindings::{task_struct, BPF_NOEXIST},
    helpers::{bpf_get_current_task_btf, bpf_probe_read_kernel, bpf_task_pt_regs},
    macros::{map, perf_event},
    maps::{PerCpuHashMap, StackTrace},
    programs::{tracing::StackIdContext, PerfEventContext},
    EbpfContext,
};
use profiler_common::{event, SampleKey, NO_STACK, NO_SYSCALL, SAMPLE_KEYS, STACK_IDS};

use crate::{maps::count_event, task_state};

#[map]
pub static STACKS: StackTrace = StackTrace::with_max_entries(STACK_IDS, 0);

/// Samples per key since user space last emptied the map.
#[map]
pub static SAMPLES: PerCpuHashMap<SampleKey, u64> = PerCpuHashMap::with_max_entries(SAMPLE_KEYS, 0);

// x86_64 struct pt_regs (the sample's registers begin bpf_perf_event_data): the code segment,
// whose low bits are the privilege level, and the syscall number saved at entry.
const PT_REGS_CS: usize = 136;
const PT_REGS_ORIG_AX: usize = 120;

#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    on_cpu_sample(&ctx);
    0
}

#[inline(always)]
fn on_cpu_sample(ctx: &PerfEventContext) {
    if task_state::current().is_none() {
        return;
    }
    let regs = ctx.as_ptr() as *const u8;
    let cs = unsafe { *(regs.add(PT_REGS_CS) as *const u64) };
    let mut key = SampleKey {
        stack_id: NO_STACK,
        syscall_nr: NO_SYSCALL,
        user: u32::from(cs & 3 == 3),
        _pad: 0,
    };
    if key.user == 0 {
        // A stack the map cannot keep stays NO_STACK: counted, without frames.
        if let Ok(id) = ctx.get_stackid(&STACKS, 0) {
            key.stack_id = id as i32;
        }
        key.syscall_nr = syscall_nr();
    }
    count(&key);
}

/// The number of the syscall the current task entered (meaningful while it is in one).
#[inline(always)]
fn syscall_nr() -> i32 {
    let task: *mut task_struct = unsafe { bpf_get_current_task_btf() };
    let regs = unsafe { bpf_task_pt_regs(task) } as *const u8;
    if regs.is_null() {
        return NO_SYSCALL;
    }
    unsafe { bpf_probe_read_kernel(regs.add(PT_REGS_ORIG_AX) as *const i64) }
        .map_or(NO_SYSCALL, |nr| nr as i32)
}

#[inline(always)]
fn count(key: &SampleKey) {
    if let Some(n) = SAMPLES.get_ptr_mut(key) {
        unsafe { *n += 1 };
        return;
    }
    // Another sample on this CPU cannot race this one; a full map drops the sample.
    if SAMPLES.insert(key, &1, BPF_NOEXIST as u64).is_err() {
        count_event(event::SAMPLES_FULL);
    }
}
