//! Per-task timing state in task-local storage. A task is tracked exactly when it has an entry:
//! the gate creates it for the workload thread, fork creates it for a tracked task's children,
//! and the kernel frees it with the task. One lookup on the current task (never creating)
//! answers "is this task tracked?" and hands over its open syscall and its stack of open timed
//! functions, so every exit is matched with its own task's entry at its own nesting level.
//! In `top` a task in scope gets its entry on its first probed entry (see `scope`).
use aya_ebpf::{
    bindings::{task_struct, BPF_F_NO_PREALLOC, BPF_LOCAL_STORAGE_GET_F_CREATE},
    helpers::{bpf_get_current_task_btf, bpf_task_storage_delete, bpf_task_storage_get},
};
use profiler_common::event;

use crate::{maps::count_event, scope};

/// Timed functions a task can have open at once (a syscall's hook, the LSM functions under it,
/// a task path and the hooks it calls); deeper calls are counted, never timed.
pub const MAX_DEPTH: usize = 8;

/// One open timed function.
#[derive(Copy, Clone)]
#[repr(C)]
pub struct Frame {
    pub start_ns: u64,
    /// The task's `entries` when this call was entered (itself included).
    pub entries: u64,
    pub slot: u32,
    pub _pad: u32,
}

#[repr(C)]
pub struct TaskState {
    /// Timed-function entries this task has made, ever: the difference between two readings is
    /// how many probed calls ran in between.
    pub entries: u64,
    pub syscall_start_ns: u64,
    /// `entries` when the open syscall was entered.
    pub syscall_entries: u64,
    pub syscall_nr: u32,
    /// 1 while a counted syscall is open (zero-initialised storage has none).
    pub syscall_open: u32,
    /// Frames in use.
    pub depth: u32,
    /// Entries made while the stack was full: their exits come first and are not timed.
    pub overflowed: u32,
    /// 1 while the task counts nothing: a child forked by a spawning gate owner, until its
    /// execve.
    pub dormant: u32,
    /// 1 while a gate owner spawns a command (`GATE_SPAWN`): its children are born dormant.
    pub spawning: u32,
    /// When the task last went onto or off a CPU (0: not seen since it was tracked).
    pub switched_ns: u64,
    /// Time the open syscall has spent switched out so far.
    pub syscall_off_cpu_ns: u64,
    /// 1 while the task is on a CPU (as far as the probes saw).
    pub on_cpu: u32,
    /// 1 when it went off runnable (preempted, or a fresh child waiting for its first run).
    pub runnable: u32,
    pub frames: [Frame; MAX_DEPTH],
}

/// A BTF-defined map (libbpf's `.maps` convention: each field's pointee carries a setting).
/// Task storage needs BTF for its key and value, which the legacy `maps` section cannot give.
#[repr(C)]
pub struct TaskStorageDef {
    r#type: *const [i32; 29], // BPF_MAP_TYPE_TASK_STORAGE
    map_flags: *const [i32; BPF_F_NO_PREALLOC as usize],
    key: *const i32,
    value: *const TaskState,
}
// SAFETY: never dereferenced; the pointers only carry types for BTF.
unsafe impl Sync for TaskStorageDef {}

#[unsafe(link_section = ".maps")]
#[unsafe(no_mangle)]
static TASK_STATE: TaskStorageDef = TaskStorageDef {
    r#type: core::ptr::null(),
    map_flags: core::ptr::null(),
    key: core::ptr::null(),
    value: core::ptr::null(),
};

impl TaskState {
    /// The frame at `index`, if within the stack.
    #[inline(always)]
    pub fn frame(&mut self, index: usize) -> Option<&mut Frame> {
        // Reloaded from the stack, so the compiler cannot move the bounds check onto a copy
        // of the index (the verifier would then see an unbounded access).
        let index = unsafe { core::ptr::read_volatile(&index) };
        if index < MAX_DEPTH {
            Some(&mut self.frames[index])
        } else {
            None
        }
    }
}

#[inline(always)]
fn map() -> *mut core::ffi::c_void {
    &TASK_STATE as *const TaskStorageDef as *mut core::ffi::c_void
}

#[inline(always)]
fn lookup(task: *mut task_struct, flags: u64) -> Option<&'static mut TaskState> {
    let p = unsafe { bpf_task_storage_get(map(), task, core::ptr::null_mut(), flags) };
    unsafe { (p as *mut TaskState).as_mut() }
}

/// The current task's state if it is tracked and counting: the one helper call an untracked
/// task pays.
#[inline(always)]
pub fn current() -> Option<&'static mut TaskState> {
    of(unsafe { bpf_get_current_task_btf() })
}

/// `task`'s state if it is tracked and counting (sched_switch sees two tasks, neither of which
/// need be current).
#[inline(always)]
pub fn of(task: *mut task_struct) -> Option<&'static mut TaskState> {
    lookup(task, 0).filter(|s| s.dormant == 0)
}

/// As `current`, on an entry (a syscall or a timed function): in `top`, a task in scope that
/// has no state yet is admitted here. In `run` this is `current`.
#[inline(always)]
pub fn entering() -> Option<&'static mut TaskState> {
    entering_even_dormant().filter(|s| s.dormant == 0)
}

/// The current task's state if it is tracked, dormant or not, admitting a task in `top`'s
/// scope.
#[inline(always)]
pub fn entering_even_dormant() -> Option<&'static mut TaskState> {
    let task = unsafe { bpf_get_current_task_btf() };
    if let Some(state) = lookup(task, 0) {
        return Some(state);
    }
    if !scope::admits_current() {
        return None;
    }
    let state = track(task);
    if state.is_none() {
        count_event(event::TRACK_FULL);
    }
    state
}

/// Starts tracking `task` (or restarts it with nothing open); None if storage is exhausted.
#[inline(always)]
pub fn track(task: *mut task_struct) -> Option<&'static mut TaskState> {
    let state = lookup(task, BPF_LOCAL_STORAGE_GET_F_CREATE as u64)?;
    state.syscall_open = 0;
    state.depth = 0;
    state.overflowed = 0;
    state.dormant = 0;
    state.spawning = 0;
    state.switched_ns = 0;
    state.on_cpu = 0;
    Some(state)
}

/// Tracks the current task, which is on a CPU now: its on-CPU time counts from here.
pub fn track_current() -> bool {
    let Some(state) = track(unsafe { bpf_get_current_task_btf() }) else {
        return false;
    };
    state.switched_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    state.on_cpu = 1;
    true
}

/// Stops tracking the current task, first counting its on-CPU time up to now.
pub fn untrack_current() {
    if let Some(state) = current() {
        crate::sched::leave_cpu(state, unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() }, 0);
    }
    unsafe { bpf_task_storage_delete(map(), bpf_get_current_task_btf()) };
}
