//! BPF LSM programs for ground truth: on a chosen hook, busy-wait a known number of ns
//! (`--inject HOOK=NS`) or do nothing (`--stack-noop`). Either way the program returns the
//! verdict it was given (the return value of the BPF LSM programs before it, 0 if none), so it
//! never changes a security decision.
//!
//! The verdict is the hook's argument after its last one; the verifier needs that index to be a
//! constant, so there is a program family per argument count, `lsm_a{ARGS}_{SLOT}`.
use aya_ebpf::{helpers::bpf_ktime_get_ns, macros::lsm, programs::LsmContext};
use profiler_common::{event, LSM_SLOTS};

use crate::maps::{count_event, LSM_CONFIG};

/// Upper bound on clock reads while busy-waiting; the verifier needs a bounded loop.
const MAX_SPIN: u32 = 16384;

#[inline(always)]
fn on_hook(ctx: &LsmContext, args: usize, slot: u32) -> i32 {
    let verdict: i32 = ctx.arg(args);
    count_event(event::LSM_RUNS);
    let busy_ns = LSM_CONFIG
        .get(args as u32 * LSM_SLOTS + slot)
        .map_or(0, |c| c.busy_ns);
    if busy_ns > 0 {
        let start = unsafe { bpf_ktime_get_ns() };
        for _ in 0..MAX_SPIN {
            if unsafe { bpf_ktime_get_ns() }.wrapping_sub(start) >= busy_ns {
                break;
            }
        }
    }
    // Keep the verdict within what the verifier accepts from an LSM program; a previous
    // program's verdict is always in this range, so this never alters it.
    verdict.clamp(-4095, 0)
}

macro_rules! lsm_slots {
    ($args:literal: $($slot:literal)*) => { paste::paste! { $(
        #[lsm(hook = "file_open")]
        pub fn [<lsm_a $args _ $slot>](ctx: LsmContext) -> i32 {
            on_hook(&ctx, $args, $slot)
        }
    )* } };
}

lsm_slots!(0: 0 1 2 3 4 5 6 7);
lsm_slots!(1: 0 1 2 3 4 5 6 7);
lsm_slots!(2: 0 1 2 3 4 5 6 7);
lsm_slots!(3: 0 1 2 3 4 5 6 7);
lsm_slots!(4: 0 1 2 3 4 5 6 7);
lsm_slots!(5: 0 1 2 3 4 5 6 7);
lsm_slots!(6: 0 1 2 3 4 5 6 7);
