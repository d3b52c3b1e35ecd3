//! Ground truth on kernels that refuse BPF LSM programs (`--inject syscall:NAME=NS`): on its
//! way out of a chosen syscall, a tracked task busy-waits a known number of ns.
//!
//! User space loads these programs in an instance of the object of their own, attached for the
//! whole run: their gate owners and task storage are their own, so the injection slows clean
//! and probed samples alike and never depends on the timing probes being attached. The same
//! gate ioctl opens the window (seen here on its way out) and children join at fork (`fork_btf`
//! in that instance). Attached before the timing probes' sys_exit, this program runs before
//! that one reads the clock, so the wait lands inside the syscall's timed span. Untracked tasks
//! pay one task-storage lookup, as they do for the timing probes.
use aya_ebpf::{
    helpers::{bpf_ktime_get_ns, bpf_loop},
    macros::{map, raw_tracepoint},
    maps::Array,
    programs::RawTracePointContext,
};
use profiler_common::{SyscallInjectConfig, MAX_SYSCALLS, SYS_IOCTL};

use crate::{
    arch,
    maps::{add_duration, Path},
    syscalls::{handle_gate, raw_args},
    task_state,
};

/// Per syscall number: how long a tracked task waits on its way out. In the injection's
/// instance, `SYSCALLS` counts the waits and their measured length.
#[map]
pub static SYSCALL_INJECT: Array<SyscallInjectConfig> = Array::with_max_entries(MAX_SYSCALLS, 0);

/// Every gate call fails with EBADF (its fd is invalid).
const EBADF: i64 = 9;
/// bpf_loop's own limit: at a clock read per step, far more than user space's longest wait.
const MAX_STEPS: u32 = 1 << 23;

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn inject_sys_exit(ctx: RawTracePointContext) -> i32 {
    match try_inject_sys_exit(&ctx) {
        Ok(v) | Err(v) => v,
    }
}

fn try_inject_sys_exit(ctx: &RawTracePointContext) -> Result<i32, i32> {
    let (regs, ret) = raw_args(ctx);
    // Only a failed call can be the gate: the number is read for those (and tracked tasks).
    if ret == -EBADF && syscall_nr(regs)? == SYS_IOCTL && handle_gate(ctx, regs) {
        return Ok(0);
    }
    if task_state::current().is_none() {
        return Ok(0);
    }
    let nr = syscall_nr(regs)?;
    if nr < 0 || nr >= i64::from(MAX_SYSCALLS) {
        return Ok(0);
    }
    let nr = nr as u32;
    let config = SYSCALL_INJECT.get(nr).ok_or(0)?;
    if config.injected == 0 {
        return Ok(0);
    }
    let start = unsafe { bpf_ktime_get_ns() };
    let deadline = start + config.busy_ns;
    // SAFETY: `spin_until` reads the deadline, a u64 on this stack, and nothing else.
    unsafe {
        bpf_loop(
            MAX_STEPS,
            spin_until as *mut core::ffi::c_void,
            &deadline as *const u64 as *mut core::ffi::c_void,
            0,
        )
    };
    let waited = unsafe { bpf_ktime_get_ns() }.wrapping_sub(start);
    add_duration(Path::Syscall(nr), 1, waited, 0, 0);
    Ok(0)
}

#[inline(always)]
fn syscall_nr(regs: *const u8) -> Result<i64, i32> {
    arch::syscall_nr(regs).map_err(|_| 0)
}

/// One step of the busy-wait: stop (1) once the clock passes the deadline `ctx` points to.
extern "C" fn spin_until(_index: u64, ctx: *mut core::ffi::c_void) -> i64 {
    let deadline = unsafe { *(ctx as *const u64) };
    i64::from(unsafe { bpf_ktime_get_ns() } >= deadline)
}
