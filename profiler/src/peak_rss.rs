//! The process's own memory: its peak resident set (VmHWM), that peak noted at each phase of a
//! run (so growth is pinned on the phase that caused it), and freed heap handed back.
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Mutex,
};

use crate::results::PhasePeak;

/// The peaks noted so far, in order. Process-wide, like the VmHWM they read.
static PHASES: Mutex<Vec<PhasePeak>> = Mutex::new(Vec::new());

/// The highest peak read so far.
static HIGHEST: AtomicU64 = AtomicU64::new(0);

/// The peak resident set of this process so far, KiB: VmHWM, or the highest read before where
/// it reads lower. The kernel brings its high-water mark up to date only at some frees, not
/// all (VmHWM is that mark or the resident set now, whichever is higher): once the run frees
/// aya's BTF after its set-up, a later read can miss the peak an earlier read saw.
pub fn peak_rss_kib() -> Option<u64> {
    let now = crate::environment::status_kib("VmHWM")?;
    Some(HIGHEST.fetch_max(now, Ordering::Relaxed).max(now))
}

/// Notes the peak so far as that of the phase just ended.
pub fn note_phase(phase: &str) {
    if let Some(peak_rss_kib) = peak_rss_kib() {
        let mut phases = PHASES.lock().unwrap_or_else(|e| e.into_inner());
        phases.push(PhasePeak {
            phase: phase.into(),
            peak_rss_kib,
        });
    }
}

/// The peaks noted so far, oldest first.
pub fn phase_peaks() -> Vec<PhasePeak> {
    PHASES.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// One heap for every thread of the profiler. The slow loads (the probes) run on the event
/// loop's blocking thread and the discovery pass on the main one; with glibc's arena per
/// thread, what one thread frees the other cannot reuse, and a run kept both arenas' peaks
/// resident (10 MB more at the "hooks chosen" phase). The runners start afresh (exec).
///
/// Blocks of 1 MiB and more get mappings of their own, at a threshold glibc keeps: by default
/// it raises the threshold to each such block freed, after which the kernel BTF's vectors
/// (9 MB of types, 5.5 MB of file read) grow on the heap, each doubling copies its old half
/// beside the new, and what they free stays resident until trimmed (4.4 MB of the peak).
/// In a mapping of its own a vector grows by mremap, and a free returns it at once.
pub fn one_heap() {
    // SAFETY: mallopt only sets allocator parameters.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Returns the heap's free pages to the kernel, so a large structure just dropped (a parsed
/// eBPF object) stops counting in the resident set.
pub fn release_free_heap() {
    // SAFETY: malloc_trim only walks the allocator's own free lists.
    unsafe { libc::malloc_trim(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_is_read_and_phases_keep_their_order() {
        let peak = peak_rss_kib().expect("VmHWM in /proc/self/status");
        assert!(peak > 0);
        note_phase("first");
        note_phase("second");
        let phases = phase_peaks();
        let first = phases.iter().position(|p| p.phase == "first").unwrap();
        assert_eq!(phases[first + 1].phase, "second");
        assert!(phases[first + 1].peak_rss_kib >= phases[first].peak_rss_kib);
    }
}
