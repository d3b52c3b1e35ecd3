//! Sampled kernel stacks: a program on the software cpu-clock event of every CPU. At each
//! tick that interrupts a tracked task it counts one sample under (kernel stack, syscall,
//! mode), so user space can say which hooks, LSM functions, syscalls and task paths the
//! task's CPU time went to, on kernels that refuse trampolines as well as on those that
//! allow them. Stacks are deduplicated by the kernel's stack map; user space symbolises them.
use aya_ebpf::{
    bindings::{task_struct, BPF_NOEXIST},
    helpers::{bpf_get_current_task_btf, bpf_task_pt_regs},
    macros::{map, perf_event},
    maps::{PerCpuHashMap, StackTrace},
    programs::{tracing::StackIdContext, PerfEventContext},
    EbpfContext, Global,
};
use profiler_common::{event, SampleKey, NO_STACK, NO_SYSCALL, SAMPLE_KEYS, STACK_IDS};

use crate::{
    arch,
    maps::count_event,
    scope,
    task_state::{self, TaskState},
};

/// 1 where the kernel has bpf_task_pt_regs (5.15): the syscall is read from the task's saved
/// registers. Before that, from the task's own record of the syscall it entered.
#[unsafe(no_mangle)]
static HAS_TASK_PT_REGS: Global<u32> = Global::new(1);

#[map]
pub static STACKS: StackTrace = StackTrace::with_max_entries(STACK_IDS, 0);

/// Samples per key since user space last emptied the map.
#[map]
pub static SAMPLES: PerCpuHashMap<SampleKey, u64> = PerCpuHashMap::with_max_entries(SAMPLE_KEYS, 0);

#[perf_event]
pub fn cpu_sample(ctx: PerfEventContext) -> u32 {
    on_cpu_sample(&ctx);
    0
}

#[inline(always)]
fn on_cpu_sample(ctx: &PerfEventContext) {
    let state = task_state::current();
    // A runner's thread has no state where no gate program ran (a pass for the stacks alone):
    // its window word says whether it counts.
    if state.is_none() && (scope::is_top() || !scope::window_word_open()) {
        return;
    }
    // The sample's registers begin its context (bpf_perf_event_data).
    let user = arch::sampled_user_mode(ctx.as_ptr() as *const u8);
    let mut key = SampleKey {
        stack_id: NO_STACK,
        syscall_nr: NO_SYSCALL,
        user: u32::from(user),
        _pad: 0,
    };
    if key.user == 0 {
        // A stack the map cannot keep stays NO_STACK: counted, without frames.
        if let Ok(id) = ctx.get_stackid(&STACKS, 0) {
            key.stack_id = id as i32;
        }
        key.syscall_nr = syscall_nr(state);
    }
    count(&key);
}

/// The number of the syscall the current task entered (meaningful while it is in one). Before
/// bpf_task_pt_regs only a task with state has one: user space then keeps the gate program.
#[inline(always)]
fn syscall_nr(state: Option<&mut TaskState>) -> i32 {
    if HAS_TASK_PT_REGS.load() == 0 {
        return match state {
            Some(s) if s.syscall_open != 0 => s.syscall_nr as i32,
            _ => NO_SYSCALL,
        };
    }
    let task: *mut task_struct = unsafe { bpf_get_current_task_btf() };
    let regs = unsafe { bpf_task_pt_regs(task) } as *const u8;
    if regs.is_null() {
        return NO_SYSCALL;
    }
    arch::syscall_nr(regs).map_or(NO_SYSCALL, |nr| nr as i32)
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
