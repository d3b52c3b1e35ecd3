//! Types shared by the eBPF programs and the user-space loader. Every type is `#[repr(C)]` with
//! explicit padding and a pinned size, so both sides agree on the layout byte for byte.
#![no_std]

use core::mem::size_of;

/// Syscall numbers below this are counted per number (x86_64 has ~460).
pub const MAX_SYSCALLS: u32 = 512;
/// fentry/fexit program pairs compiled into the object; each timed kernel function takes one.
pub const HOOK_SLOTS: u32 = 384;
/// Log2 latency buckets: bucket `b` counts durations `d` with `2^(b-1) <= d < 2^b` ns
/// (bucket 0 is `d == 0`); the last bucket also takes everything longer.
pub const HIST_BUCKETS: usize = 32;
/// BPF LSM program slots per argument count (ground-truth injection and no-op stacking).
pub const LSM_SLOTS: u32 = 8;
/// LSM hooks take at most this many arguments (the verdict so far is the next one).
pub const LSM_MAX_ARGS: u32 = 6;

/// Scope gate: the workload thread opens and closes its tracking window with
/// `ioctl(GATE_FD, GATE_OPEN | GATE_CLOSE)`. The fd is invalid, so the call fails with EBADF and
/// costs the kernel nothing else; the sys_enter program recognises it and never counts it.
pub const GATE_FD: i64 = -0x686b70; // "hkp"
pub const GATE_OPEN: u64 = 0x686b_0001;
pub const GATE_CLOSE: u64 = 0x686b_0000;
/// `ioctl(GATE_FD, GATE_SPAWN)` inside the window: until the next GATE_OPEN each child the
/// owner forks counts from its execve on, not before (`stat`'s command: what posix_spawn does
/// in the child before the exec is the launcher's set-up, not the command's).
pub const GATE_SPAWN: u64 = 0x686b_0002;
/// Where each runner keeps its window word, in a page of its own mapped there at start: the
/// thread id whose tracking window is open, 0 while none is. The sampler and the fork program
/// read it (bpf_probe_read_user) for a gate owner's task that has no state, so a pass for the
/// stacks alone scopes its samples with no syscall tracepoint attached: one of those puts
/// every syscall on the machine on the kernel's slow path, which is then what the samples
/// see. The address lies below 2^39, inside the smallest user address space of both
/// architectures (arm64 with 39-bit virtual addresses), and far from where the loader, the heap
/// and mmap place things.
pub const WINDOW_WORD_ADDR: u64 = 0x68_6b70_0000;
/// At most this many processes own the gate at once: the runners of `--parallel N`.
pub const MAX_GATE_OWNERS: u32 = 64;

/// The numbers of the syscalls the probes single out, in each architecture's table.
pub mod syscall_numbers {
    pub mod x86_64 {
        pub const SYS_IOCTL: i64 = 16;
        pub const SYS_EXECVE: i64 = 59;
        pub const SYS_EXECVEAT: i64 = 322;
    }
    /// arm64 has the generic table (include/uapi/asm-generic/unistd.h).
    pub mod aarch64 {
        pub const SYS_IOCTL: i64 = 29;
        pub const SYS_EXECVE: i64 = 221;
        pub const SYS_EXECVEAT: i64 = 281;
    }
}
// The table of the architecture built for: the eBPF object's (`bpf_target_arch`, set by
// aya-build from the profiler's target), or the user side's own.
#[cfg(any(bpf_target_arch = "aarch64", target_arch = "aarch64"))]
pub use syscall_numbers::aarch64::*;
#[cfg(any(bpf_target_arch = "x86_64", target_arch = "x86_64"))]
pub use syscall_numbers::x86_64::*;
#[cfg(not(any(
    bpf_target_arch = "x86_64",
    bpf_target_arch = "aarch64",
    target_arch = "x86_64",
    target_arch = "aarch64"
)))]
compile_error!("hookprof knows the syscall tables of x86_64 and aarch64 only");

/// Indexes into the per-CPU `EVENTS` counter array.
pub mod event {
    /// A tracked task forked (process or thread).
    pub const FORK: u32 = 0;
    /// A tracked task called execve successfully.
    pub const EXEC: u32 = 1;
    /// A tracked task exited.
    pub const EXIT: u32 = 2;
    /// The kernel could not give a task tracking storage (gate or fork): it goes untracked.
    pub const TRACK_FULL: u32 = 3;
    /// A timed function's exit that did not match its task's innermost open entry (or open
    /// entries a task still had when it next entered a syscall): counted, never timed.
    pub const UNMATCHED_EXIT: u32 = 4;
    /// BPF LSM program runs (injection and no-op stacking).
    pub const LSM_RUNS: u32 = 5;
    /// A timed function entered with the task's stack of open entries full: not timed.
    pub const STACK_FULL: u32 = 6;
    /// The owning process called the gate with an unknown command.
    pub const GATE_MISUSE: u32 = 7;
    /// A syscall or timed function that returned while the probes were attached but was
    /// entered before they were last attached (a peer blocked across samples): its entry's
    /// time belongs to an earlier window, so it is not timed.
    pub const STALE_EXIT: u32 = 8;
    /// `top`: a tally had no room in the aggregate map (too many groups and paths at once).
    pub const AGGREGATE_FULL: u32 = 9;
    /// Not counts but nanoseconds, summed over the tracked tasks (sched_switch): time on a
    /// CPU, and time switched out while runnable (preempted, waiting for a CPU) or blocked
    /// (sleeping on a pipe, a lock, a child).
    pub const ON_CPU_NS: u32 = 10;
    pub const OFF_CPU_RUNNABLE_NS: u32 = 11;
    pub const OFF_CPU_BLOCKED_NS: u32 = 12;
    /// A stack sample that found the sample counts full: not counted at all (a stack the
    /// stack map could not keep is counted, without frames: `lost_stacks` in the profile).
    pub const SAMPLES_FULL: u32 = 13;
    pub const COUNT: u32 = 14;
}

/// Which tasks the probes count: the `SCOPE` global of the eBPF object, set at load.
pub mod scope {
    /// `run` and `stat`: the runners' tracking windows (the gate) and what they fork.
    pub const GATE: u32 = 0;
    /// `top`: every task on the machine but hookprof's own.
    pub const SYSTEM: u32 = 1;
    /// `top --cgroup`: the tasks in one cgroup and its descendants.
    pub const CGROUP: u32 = 2;
    /// `top --pid`: one process's threads and what it forks from then on.
    pub const PID: u32 = 3;
    /// `top --comm`: tasks with one command name.
    pub const COMM: u32 = 4;
}

/// How `top` groups its tallies: the `GROUP_BY` global of the eBPF object.
pub mod group_by {
    pub const CGROUP: u32 = 0;
    pub const COMM: u32 = 1;
}

/// The kernel's TASK_COMM_LEN: a command name and its NUL.
pub const COMM_LEN: usize = 16;
/// `top`'s aggregate map holds at most this many (group, path) tallies at once.
pub const AGGREGATE_KEYS: u32 = 16384;
/// `AggregateKey::path` of hook slot `s` is `HOOK_PATHS + s`: after the syscall numbers.
pub const HOOK_PATHS: u32 = MAX_SYSCALLS;

/// Where `top` adds a tally: one group (a cgroup, or a command name) and one timed path.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct AggregateKey {
    /// The task's cgroup (v2) id when grouping by cgroup, else 0.
    pub cgroup_id: u64,
    /// The task's command name when grouping by command, else zeros.
    pub comm: [u8; COMM_LEN],
    /// A syscall number, or `HOOK_PATHS` plus a hook slot.
    pub path: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<AggregateKey>() == 32);

/// Per-CPU statistics of one timed path (a syscall number or a hook slot).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Tally {
    /// Entries seen from tracked tasks.
    pub calls: u64,
    /// Entries whose exit was matched, so their duration is known.
    pub timed: u64,
    /// Sum of the matched durations, in ns.
    pub total_ns: u64,
    /// Probed calls (timed functions) the same task made inside the matched durations: each
    /// added its pair's cost to them, which the corrected figures take out.
    pub nested: u64,
    /// The part of the matched durations the task spent switched out (sched_switch): a
    /// blocking syscall's wait, which is not its cost.
    pub off_cpu_ns: u64,
    /// Log2 histogram of the matched durations.
    pub hist: [u64; HIST_BUCKETS],
}
const _: () = assert!(size_of::<Tally>() == 8 * (5 + HIST_BUCKETS));

impl Tally {
    pub const ZERO: Tally = Tally {
        calls: 0,
        timed: 0,
        total_ns: 0,
        nested: 0,
        off_cpu_ns: 0,
        hist: [0; HIST_BUCKETS],
    };
}

/// The histogram bucket of a duration: its bit length, clamped to the last bucket.
#[inline(always)]
pub fn hist_bucket(ns: u64) -> usize {
    let b = (64 - ns.leading_zeros()) as usize;
    if b >= HIST_BUCKETS {
        HIST_BUCKETS - 1
    } else {
        b
    }
}

/// Distinct kernel stacks the stack map holds between two reads (user space empties it after
/// every probed sample).
pub const STACK_IDS: u32 = 8192;
/// Distinct (stack, syscall, mode) keys counted between two reads.
pub const SAMPLE_KEYS: u32 = 16384;
/// `SampleKey::stack_id` of a sample without kernel frames (user mode, or a lost stack).
pub const NO_STACK: i32 = -1;
/// `SampleKey::syscall_nr` outside a syscall.
pub const NO_SYSCALL: i32 = -1;

/// One kind of cpu-clock sample of a tracked task: where it was (user or kernel mode, which
/// kernel stack) and the syscall its task was in (the task's `orig_ax`, which user space
/// trusts only for stacks that entered through the syscall path).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[repr(C)]
pub struct SampleKey {
    pub stack_id: i32,
    pub syscall_nr: i32,
    /// 1 when the sample interrupted user mode.
    pub user: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<SampleKey>() == 16);

/// Per LSM program slot: how long to busy-wait (ground-truth injection; 0 = no-op).
#[derive(Copy, Clone, Debug)]
#[repr(C)]
pub struct LsmSlotConfig {
    pub busy_ns: u64,
}
const _: () = assert!(size_of::<LsmSlotConfig>() == 8);

/// Per syscall number: whether a tracked task busy-waits on its way out of it, and how long
/// (ground-truth injection on kernels that refuse BPF LSM programs).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct SyscallInjectConfig {
    pub busy_ns: u64,
    /// 1 if the syscall is injected (with `busy_ns` 0 it still takes the injection's path, so
    /// a baseline injecting 0 differs from a run injecting NS by the wait alone).
    pub injected: u32,
    pub _pad: u32,
}
const _: () = assert!(size_of::<SyscallInjectConfig>() == 16);

#[cfg(feature = "user")]
mod pod {
    // SAFETY: plain-old-data, repr(C), no implicit padding (sizes pinned above).
    unsafe impl aya::Pod for super::Tally {}
    unsafe impl aya::Pod for super::LsmSlotConfig {}
    unsafe impl aya::Pod for super::SyscallInjectConfig {}
    unsafe impl aya::Pod for super::AggregateKey {}
    unsafe impl aya::Pod for super::SampleKey {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_architectures_numbers_are_its_tables() {
        use syscall_numbers::{aarch64, x86_64};
        use syscalls::{aarch64::Sysno as Arm64, x86_64::Sysno as X86};
        assert_eq!(x86_64::SYS_IOCTL, X86::ioctl.id() as i64);
        assert_eq!(x86_64::SYS_EXECVE, X86::execve.id() as i64);
        assert_eq!(x86_64::SYS_EXECVEAT, X86::execveat.id() as i64);
        assert_eq!(aarch64::SYS_IOCTL, Arm64::ioctl.id() as i64);
        assert_eq!(aarch64::SYS_EXECVE, Arm64::execve.id() as i64);
        assert_eq!(aarch64::SYS_EXECVEAT, Arm64::execveat.id() as i64);
    }

    #[test]
    fn buckets_are_bit_lengths() {
        assert_eq!(hist_bucket(0), 0);
        assert_eq!(hist_bucket(1), 1);
        assert_eq!(hist_bucket(2), 2);
        assert_eq!(hist_bucket(3), 2);
        assert_eq!(hist_bucket(1024), 11);
        assert_eq!(hist_bucket(u64::MAX), HIST_BUCKETS - 1);
    }
}
