//! What differs between the architectures the object is built for (`bpf_target_arch`, which
//! aya-build sets from the profiler's target): where the kernel's `struct pt_regs` keeps a
//! syscall's number and first arguments, and how a sampled register set tells user mode from
//! kernel mode. The syscall numbers themselves are profiler-common's (user space needs them
//! too).
use aya_ebpf::helpers::bpf_probe_read_kernel;

#[cfg(bpf_target_arch = "x86_64")]
mod regs {
    use aya_ebpf::bindings::pt_regs;
    use core::mem::offset_of;

    /// The first two syscall arguments (the syscall ABI's rdi, rsi).
    pub const ARG0: usize = offset_of!(pt_regs, rdi);
    pub const ARG1: usize = offset_of!(pt_regs, rsi);
    /// The syscall number saved at entry (a long; -1 outside a syscall).
    pub const SYSCALL_NR: usize = offset_of!(pt_regs, orig_rax);

    /// A sample interrupted user mode: the code segment's privilege level is 3.
    #[inline(always)]
    pub fn user_mode(sampled: *const u8) -> bool {
        // SAFETY: `sampled` is the perf_event context, whose registers are a pt_regs.
        let cs = unsafe { *(sampled.add(offset_of!(pt_regs, cs)) as *const u64) };
        cs & 3 == 3
    }

    #[inline(always)]
    pub fn widen_syscall_nr(raw: u64) -> i64 {
        raw as i64
    }
}

#[cfg(bpf_target_arch = "aarch64")]
mod regs {
    use aya_ebpf::bindings::user_pt_regs;
    use core::mem::{offset_of, size_of};

    /// The kernel's pt_regs begins with user_pt_regs (x0-x30, sp, pc, pstate); orig_x0 and
    /// the syscall number follow it (arch/arm64/include/asm/ptrace.h). The first argument is
    /// read from orig_x0, which keeps it when x0 becomes the return value.
    pub const ARG0: usize = size_of::<user_pt_regs>();
    pub const ARG1: usize = offset_of!(user_pt_regs, regs) + 8;
    /// `s32 syscallno` after orig_x0 (NO_SYSCALL, -1, outside a syscall).
    pub const SYSCALL_NR: usize = ARG0 + 8;

    /// PSTATE's mode field (M[3:0]) is EL0t for user mode, AArch64 or AArch32 alike.
    const PSR_MODE_MASK: u64 = 0xf;
    const PSR_MODE_EL0T: u64 = 0;

    #[inline(always)]
    pub fn user_mode(sampled: *const u8) -> bool {
        // SAFETY: `sampled` is the perf_event context, whose registers are a user_pt_regs.
        let pstate = unsafe { *(sampled.add(offset_of!(user_pt_regs, pstate)) as *const u64) };
        pstate & PSR_MODE_MASK == PSR_MODE_EL0T
    }

    /// syscallno is 32 bits wide: the other half of the word read is the next field's.
    #[inline(always)]
    pub fn widen_syscall_nr(raw: u64) -> i64 {
        i64::from(raw as u32 as i32)
    }
}

#[cfg(not(any(bpf_target_arch = "x86_64", bpf_target_arch = "aarch64")))]
compile_error!("hookprof's probes know the registers of x86_64 and aarch64 only");

/// The syscall's first argument, from the `struct pt_regs *` of sys_enter.
#[inline(always)]
pub fn syscall_arg0(regs: *const u8) -> Result<u64, i32> {
    unsafe { bpf_probe_read_kernel(regs.add(regs::ARG0) as *const u64) }
}

/// The syscall's second argument.
#[inline(always)]
pub fn syscall_arg1(regs: *const u8) -> Result<u64, i32> {
    unsafe { bpf_probe_read_kernel(regs.add(regs::ARG1) as *const u64) }
}

/// The number of the syscall a task's `struct pt_regs` was saved for.
#[inline(always)]
pub fn syscall_nr(regs: *const u8) -> Result<i64, i32> {
    unsafe { bpf_probe_read_kernel(regs.add(regs::SYSCALL_NR) as *const u64) }
        .map(regs::widen_syscall_nr)
}

/// Whether a perf_event sample (its context: the sampled registers) interrupted user mode.
#[inline(always)]
pub fn sampled_user_mode(sampled: *const u8) -> bool {
    regs::user_mode(sampled)
}
