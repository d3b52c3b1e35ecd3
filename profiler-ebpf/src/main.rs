//! hookprof's kernel side. Entry points are thin; each probe family lives in its own module.
//! Everything is scoped to tracked tasks (those with `task_state` storage), which the workload
//! thread becomes through the gate syscall (see `syscalls`) and which children join at fork;
//! in `top`, tasks in its scope (see `scope`) become tracked on their first probed entry.
#![no_std]
#![no_main]

mod arch;
mod hooks;
mod inject;
mod lsm;
mod maps;
mod pair_costs;
mod sched;
mod scope;
mod stacks;
mod syscalls;
mod task_state;
mod tasks;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
