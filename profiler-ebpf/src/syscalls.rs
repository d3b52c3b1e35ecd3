//! raw_syscalls sys_enter/sys_exit: calls and enter-to-exit time per syscall number, and the
//! scope gate through which the workload thread opens and closes its tracking window.
use aya_ebpf::{
    helpers::bpf_ktime_get_ns, macros::raw_tracepoint, programs::RawTracePointContext, EbpfContext,
};
use aya_log_ebpf::warn;
use profiler_common::{
    event, GATE_CLOSE, GATE_FD, GATE_OPEN, GATE_SPAWN, MAX_SYSCALLS, SYS_EXECVE, SYS_EXECVEAT,
    SYS_IOCTL,
};

use crate::{
    arch,
    maps::{add_duration, count_call, count_event, entered_in_an_earlier_window, Path},
    scope,
    task_state::{self, MAX_DEPTH},
};

#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn sys_enter(ctx: RawTracePointContext) -> i32 {
    on_sys_enter(&ctx);
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn sys_exit(_ctx: RawTracePointContext) -> i32 {
    on_sys_exit();
    0
}

/// The scope gate alone, for passes that sample stacks and time nothing: the workload's tasks
/// are tracked as in a timed pass, and every other syscall costs one comparison, so the
/// sampled stacks are the kernel's, not the probes'.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn scope_sys_enter(ctx: RawTracePointContext) -> i32 {
    let (regs, nr) = raw_args(&ctx);
    if nr == SYS_IOCTL {
        handle_gate(&ctx, regs);
    } else if nr == SYS_EXECVE || nr == SYS_EXECVEAT {
        // A spawned child counts from its execve on, as in a timed pass.
        if let Some(state) = task_state::entering_even_dormant() {
            state.dormant = 0;
        }
    }
    0
}

/// Empty programs on the same tracepoints: the floor calibration compares the pair above with.
#[raw_tracepoint(tracepoint = "sys_enter")]
pub fn empty_sys_enter(_ctx: RawTracePointContext) -> i32 {
    0
}

#[raw_tracepoint(tracepoint = "sys_exit")]
pub fn empty_sys_exit(_ctx: RawTracePointContext) -> i32 {
    0
}

/// sys_enter's raw arguments: (struct pt_regs *regs, long id); sys_exit's are
/// (struct pt_regs *regs, long ret).
#[inline(always)]
pub fn raw_args(ctx: &RawTracePointContext) -> (*const u8, i64) {
    let args = ctx.as_ptr() as *const u64;
    unsafe { (*args as *const u8, *args.add(1) as i64) }
}

#[inline(always)]
fn on_sys_enter(ctx: &RawTracePointContext) {
    let (regs, nr) = raw_args(ctx);
    if nr == SYS_IOCTL && handle_gate(ctx, regs) {
        return;
    }
    let Some(state) = task_state::entering_even_dormant() else {
        return;
    };
    // A spawned child counts from its execve on: what precedes it is the launcher's set-up.
    if state.dormant != 0 {
        if nr != SYS_EXECVE && nr != SYS_EXECVEAT {
            return;
        }
        state.dormant = 0;
    }
    // No timed function is open when a task enters a syscall from user space: frames left
    // over lost their exit (a probe attached or detached mid-call), so they are dropped, their
    // calls counted (exits count them) and never timed.
    if state.depth != 0 || state.overflowed != 0 {
        count_event(event::UNMATCHED_EXIT);
        let depth = state.depth;
        for i in 0..MAX_DEPTH {
            if i < depth as usize {
                if let Some(frame) = state.frame(i) {
                    count_call(Path::Hook(frame.slot));
                }
            }
        }
        warn!(
            ctx,
            "a task entered syscall {} with {} timed calls still open (their exits were lost): \
             counted, not timed",
            nr,
            depth
        );
        state.depth = 0;
        state.overflowed = 0;
    }
    if nr < 0 || nr >= MAX_SYSCALLS as i64 {
        state.syscall_open = 0;
        return;
    }
    count_call(Path::Syscall(nr as u32));
    state.syscall_nr = nr as u32;
    state.syscall_open = 1;
    state.syscall_entries = state.entries;
    state.syscall_off_cpu_ns = 0;
    // Last, so the time this program spent before it is not the syscall's.
    state.syscall_start_ns = unsafe { bpf_ktime_get_ns() };
}

#[inline(always)]
fn on_sys_exit() {
    let Some(state) = task_state::current() else {
        return;
    };
    if state.syscall_open == 0 {
        return;
    }
    let now = unsafe { bpf_ktime_get_ns() };
    state.syscall_open = 0;
    if entered_in_an_earlier_window(state.syscall_start_ns) {
        count_event(event::STALE_EXIT);
        return;
    }
    let elapsed = now.wrapping_sub(state.syscall_start_ns);
    let nested = state.entries.wrapping_sub(state.syscall_entries);
    // Time switched out inside the call is its wait, kept apart from its CPU time.
    let off_cpu = state.syscall_off_cpu_ns.min(elapsed);
    add_duration(Path::Syscall(state.syscall_nr), 0, elapsed, nested, off_cpu);
}

/// Opens or closes the calling thread's window if this ioctl is our gate; true if it was.
#[inline(always)]
pub fn handle_gate(ctx: &RawTracePointContext, regs: *const u8) -> bool {
    if !scope::current_owns_gate() {
        return false;
    }
    // The fd is an int: compare its low 32 bits, however the caller extended it.
    let fd = arch::syscall_arg0(regs);
    if fd.map(|v| v as u32) != Ok(GATE_FD as u32) {
        return false;
    }
    match arch::syscall_arg1(regs) {
        Ok(GATE_OPEN) => {
            if !task_state::track_current() {
                count_event(event::TRACK_FULL);
                warn!(
                    ctx,
                    "no tracking storage for the workload thread: it goes untracked"
                );
            }
        }
        Ok(GATE_CLOSE) => task_state::untrack_current(),
        Ok(GATE_SPAWN) => {
            if let Some(state) = task_state::current() {
                state.spawning = 1;
            }
        }
        // The owner called the gate with a command it does not have.
        Ok(command) => {
            count_event(event::GATE_MISUSE);
            warn!(ctx, "gate called with unknown command {:x}", command);
        }
        Err(_) => {
            count_event(event::GATE_MISUSE);
            warn!(ctx, "gate called with an unreadable command");
        }
    }
    true
}
