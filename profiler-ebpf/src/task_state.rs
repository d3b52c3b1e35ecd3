//! Per-task timing state, one entry per tracked task. A task is tracked exactly when it has an
//! entry: the gate creates it for the workload thread, fork creates it for a tracked task's
//! children. One lookup on the current task (never creating) answers "is this task tracked?"
//! and hands over its open syscall and its stack of open timed functions, so every exit is
//! matched with its own task's entry at its own nesting level. In `top` a task in scope gets
//! its entry on its first probed entry (see `scope`).
//!
//! The entries live in task-local storage where the kernel has it (5.11): the kernel frees an
//! entry with its task. Before that, user space loads the object with `TASK_STATE` turned into
//! a preallocated hash map keyed by thread id and sets `TASK_STORAGE` to 0: each entry then
//! records its task (`owner`), an entry whose owner is another task (its thread id was reused)
//! counts as absent, and `sched_process_free` deletes a freed task's entry. The global is
//! read-only, so the verifier walks only one of the two ways and never sees the other's
//! helpers, which the older kernel does not know.
use aya_ebpf::{
    bindings::{task_struct, BPF_ANY, BPF_F_NO_PREALLOC, BPF_LOCAL_STORAGE_GET_F_CREATE},
    helpers::{
        bpf_get_current_pid_tgid, bpf_get_current_task, bpf_get_current_task_btf,
        bpf_map_delete_elem, bpf_map_lookup_elem, bpf_map_update_elem, bpf_probe_read_kernel,
        bpf_task_storage_delete, bpf_task_storage_get,
    },
    macros::map,
    maps::Array,
    Global,
};
use profiler_common::event;

use crate::{
    maps::{add_event, count_event, entered_in_an_earlier_window},
    scope,
};

/// 1: `TASK_STATE` is task storage; 0: a hash map keyed by thread id (set at load).
#[unsafe(no_mangle)]
static TASK_STORAGE: Global<u32> = Global::new(1);
/// Where `struct task_struct` keeps the thread id (`pid`) on this kernel, from its BTF: the
/// hash map's key for a task other than the current one.
#[unsafe(no_mangle)]
static TASK_PID_OFFSET: Global<u32> = Global::new(0);

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
    /// The task this entry is for (its task_struct's address), in the hash map by thread id.
    pub owner: u64,
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
    /// Closes the task's on-CPU interval at `now`; it is off a CPU from here, `runnable` or
    /// not (sched_switch, and a task untracked while it runs).
    #[inline(always)]
    pub fn leave_cpu(&mut self, now: u64, runnable: u32) {
        if self.on_cpu != 0 && fresh(self.switched_ns) {
            add_event(event::ON_CPU_NS, now.wrapping_sub(self.switched_ns));
        }
        self.on_cpu = 0;
        self.runnable = runnable;
        self.switched_ns = now;
    }

    /// Closes the task's off-CPU interval at `now`; it is on a CPU from here. Time off a CPU
    /// inside an open syscall is also that syscall's wait.
    #[inline(always)]
    pub fn enter_cpu(&mut self, now: u64) {
        if self.on_cpu == 0 && fresh(self.switched_ns) {
            let off = now.wrapping_sub(self.switched_ns);
            let index = if self.runnable != 0 {
                event::OFF_CPU_RUNNABLE_NS
            } else {
                event::OFF_CPU_BLOCKED_NS
            };
            add_event(index, off);
            if self.syscall_open != 0 {
                self.syscall_off_cpu_ns += off;
            }
        }
        self.on_cpu = 1;
        self.switched_ns = now;
    }

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

/// A zero entry to insert from: a `TaskState` is too big for the BPF stack beside the rest.
#[map]
static ZERO_STATE: Array<TaskState> = Array::with_max_entries(1, 0);

/// A task, as the probes see it.
#[derive(Clone, Copy)]
enum Task {
    Current,
    /// A BTF pointer (tp_btf) or a raw one (raw_tracepoint, for the hash map only).
    Other(*mut task_struct),
}

#[inline(always)]
fn uses_task_storage() -> bool {
    TASK_STORAGE.load() != 0
}

/// `task`'s entry, created (zeroed) if `create` and absent.
#[inline(always)]
fn lookup(task: Task, create: bool) -> Option<&'static mut TaskState> {
    if uses_task_storage() {
        let task = match task {
            Task::Current => unsafe { bpf_get_current_task_btf() },
            Task::Other(t) => t,
        };
        let flags = if create {
            BPF_LOCAL_STORAGE_GET_F_CREATE as u64
        } else {
            0
        };
        let p = unsafe { bpf_task_storage_get(map(), task, core::ptr::null_mut(), flags) };
        return unsafe { (p as *mut TaskState).as_mut() };
    }
    let (tid, owner) = identify(task)?;
    let key = &tid as *const u32 as *mut core::ffi::c_void;
    let found = unsafe { (bpf_map_lookup_elem(map(), key) as *mut TaskState).as_mut() };
    if let Some(state) = found {
        if state.owner == owner {
            return Some(state);
        }
    }
    if !create {
        return None;
    }
    // Absent, or left by a task with this thread id that was freed unseen: a fresh entry.
    let zero = ZERO_STATE.get_ptr_mut(0)? as *mut core::ffi::c_void;
    if unsafe { bpf_map_update_elem(map(), key, zero, BPF_ANY as u64) } != 0 {
        return None;
    }
    let state = unsafe { (bpf_map_lookup_elem(map(), key) as *mut TaskState).as_mut() }?;
    state.owner = owner;
    Some(state)
}

/// The hash map's key and owner for `task`: its thread id and task_struct address.
#[inline(always)]
fn identify(task: Task) -> Option<(u32, u64)> {
    match task {
        Task::Current => Some((bpf_get_current_pid_tgid() as u32, unsafe {
            bpf_get_current_task()
        })),
        Task::Other(t) => {
            let pid = unsafe { (t as *const u8).add(TASK_PID_OFFSET.load() as usize) };
            let tid = unsafe { bpf_probe_read_kernel(pid as *const u32) }.ok()?;
            Some((tid, t as u64))
        }
    }
}

/// What a probe pays to know which task it runs for, and nothing else (calibration's part).
#[inline(always)]
pub fn identify_current() -> u64 {
    if uses_task_storage() {
        unsafe { bpf_get_current_task_btf() as u64 }
    } else {
        identify(Task::Current).map_or(0, |(tid, owner)| owner ^ u64::from(tid))
    }
}

/// The current task's state if it is tracked and counting: the one lookup an untracked task
/// pays.
#[inline(always)]
pub fn current() -> Option<&'static mut TaskState> {
    lookup(Task::Current, false).filter(|s| s.dormant == 0)
}

/// `task`'s state if it is tracked and counting (sched_switch sees two tasks, neither of which
/// need be current).
#[inline(always)]
pub fn of(task: *mut task_struct) -> Option<&'static mut TaskState> {
    lookup(Task::Other(task), false).filter(|s| s.dormant == 0)
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
    if let Some(state) = lookup(Task::Current, false) {
        return Some(state);
    }
    if !scope::admits_current() {
        return None;
    }
    let state = track_task(Task::Current);
    if state.is_none() {
        count_event(event::TRACK_FULL);
    }
    state
}

/// Starts tracking `task` (or restarts it with nothing open); None if storage is exhausted.
#[inline(always)]
pub fn track(task: *mut task_struct) -> Option<&'static mut TaskState> {
    track_task(Task::Other(task))
}

#[inline(always)]
fn track_task(task: Task) -> Option<&'static mut TaskState> {
    let state = lookup(task, true)?;
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
    let Some(state) = track_task(Task::Current) else {
        return false;
    };
    state.switched_ns = unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() };
    state.on_cpu = 1;
    true
}

/// Stops tracking the current task, first counting its on-CPU time up to now.
pub fn untrack_current() {
    if let Some(state) = current() {
        state.leave_cpu(unsafe { aya_ebpf::helpers::bpf_ktime_get_ns() }, 0);
    }
    forget(Task::Current);
}

/// Drops the entry of a task being freed (the hash map's cleanup; task storage needs none).
#[inline(always)]
pub fn forget_freed(task: *mut task_struct) {
    if !uses_task_storage() {
        forget(Task::Other(task));
    }
}

#[inline(always)]
fn forget(task: Task) {
    if uses_task_storage() {
        let task = match task {
            Task::Current => unsafe { bpf_get_current_task_btf() },
            Task::Other(t) => t,
        };
        unsafe { bpf_task_storage_delete(map(), task) };
        return;
    }
    // Only its own entry: the thread id may already name another task's.
    if lookup(task, false).is_none() {
        return;
    }
    if let Some((tid, _)) = identify(task) {
        unsafe { bpf_map_delete_elem(map(), &tid as *const u32 as *mut core::ffi::c_void) };
    }
}

/// Whether an on- or off-CPU interval that began at `since` began in this attach window (no
/// probe saw the start of one from before).
#[inline(always)]
fn fresh(since: u64) -> bool {
    since != 0 && !entered_in_an_earlier_window(since)
}
