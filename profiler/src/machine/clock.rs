//! The clocks the profiler, its runners and `top` read alike, in nanoseconds.

/// CLOCK_MONOTONIC in ns: the clock every process reads alike, so the runs of parallel copies
/// can be started together and laid side by side.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// The time of `clock` in ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec; the clocks used here exist on every Linux hookprof runs on.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
