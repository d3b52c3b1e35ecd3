//! lmbench's "Mmap Latency", "Prot Fault" and "Page Fault" columns.
use std::{
    fs::File,
    os::fd::{AsRawFd, OwnedFd},
    path::Path,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{
    signal::{signal_delivery_time, HandlerGuard},
    Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec,
};
use crate::probes::untracked;

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "mmap_latency",
        family: Family::FileVm,
        metric: Metric::LatencyUs,
        description: "mmap() an 8 MB file, read a byte every 16 KB of its first tenth, munmap()",
        suite: Suite::Default,
        create: |o| Ok(Box::new(MmapLatency::new(o, 8 << 20)?)),
    },
    WorkloadSpec {
        name: "prot_fault",
        family: Family::FileVm,
        metric: Metric::LatencyUs,
        description: "write to a read-only shared mapping caught by SIGSEGV, minus handler cost",
        suite: Suite::Default,
        create: |o| Ok(Box::new(ProtFault::new(o)?)),
    },
    WorkloadSpec {
        name: "page_fault",
        family: Family::FileVm,
        metric: Metric::LatencyUs,
        description:
            "read fault on a cached file page of a fresh mapping (one per fault-around window)",
        suite: Suite::Quick,
        create: |o| Ok(Box::new(PageFault::new(o, 16 << 20)?)),
    },
];

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// A file in the scratch dir holding `data`, written (so it is in the page cache) and already
/// unlinked: the open fd keeps it alive and nothing is left behind, even after a crash.
pub fn unlinked_file(dir: &Path, name: &str, data: &[u8]) -> anyhow::Result<OwnedFd> {
    let path = dir.join(name);
    let written = std::fs::write(&path, data);
    let opened = written.and_then(|()| File::options().read(true).write(true).open(&path));
    let _ = std::fs::remove_file(&path);
    Ok(opened
        .with_context(|| format!("create {}", path.display()))?
        .into())
}

fn scratch_file(dir: &Path, name: &str, len: usize) -> anyhow::Result<OwnedFd> {
    let data: Vec<u8> = (0..len).map(|i| i as u8).collect();
    unlinked_file(dir, name, &data)
}

/// A shared mapping of a whole file, unmapped on drop.
struct Mapping {
    addr: *mut u8,
    len: usize,
}

impl Mapping {
    fn new(fd: &OwnedFd, len: usize, prot: libc::c_int) -> anyhow::Result<Self> {
        // SAFETY: a new mapping of our own file; the kernel picks the address.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        anyhow::ensure!(
            addr != libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        Ok(Mapping {
            addr: addr.cast(),
            len,
        })
    }

    /// Reads one byte at `offset`; volatile so the touch is not optimised away.
    fn touch(&self, offset: usize) -> u8 {
        assert!(offset < self.len);
        // SAFETY: within the mapping, which is readable.
        unsafe { self.addr.add(offset).read_volatile() }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

struct MmapLatency {
    file: OwnedFd,
    len: usize,
}

impl MmapLatency {
    fn new(options: &WorkloadOptions, len: usize) -> anyhow::Result<Self> {
        let file = scratch_file(&options.scratch_dir, "mmap_latency", len)?;
        Ok(MmapLatency { file, len })
    }
}

impl Workload for MmapLatency {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            let map = Mapping::new(&self.file, self.len, libc::PROT_READ)?;
            for offset in (0..self.len / 10).step_by(16 << 10) {
                std::hint::black_box(map.touch(offset));
            }
        }
        Ok(start.elapsed())
    }
}

/// The faulting page and how many more faults to take before letting the write through.
static FAULT_PAGE: AtomicUsize = AtomicUsize::new(0);
static FAULTS_LEFT: AtomicU64 = AtomicU64::new(0);

/// Returns to the faulting write, which faults again, until FAULTS_LEFT runs out; then makes
/// the page writable so the write completes (lmbench's handler loop). A fault anywhere else
/// gets the default action back, so a real crash still crashes.
extern "C" fn on_write_fault(_: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = FAULT_PAGE.load(Ordering::Relaxed);
    if page == 0 || addr < page || addr >= page + page_size() {
        // SAFETY: async-signal-safe; the re-executed access then takes the default action.
        unsafe { libc::signal(libc::SIGSEGV, libc::SIG_DFL) };
        return;
    }
    if FAULTS_LEFT.fetch_sub(1, Ordering::Relaxed) <= 1 {
        // SAFETY: our own mapped page.
        unsafe {
            libc::mprotect(
                page as *mut _,
                page_size(),
                libc::PROT_READ | libc::PROT_WRITE,
            )
        };
    }
}

struct ProtFault {
    _file: OwnedFd,
    map: Mapping,
}

impl ProtFault {
    fn new(options: &WorkloadOptions) -> anyhow::Result<Self> {
        let file = scratch_file(&options.scratch_dir, "prot_fault", page_size())?;
        let map = Mapping::new(&file, page_size(), libc::PROT_READ | libc::PROT_WRITE)?;
        // SAFETY: our own mapping; faults the page in so the timed loop only takes prot faults.
        unsafe { map.addr.write_volatile(1) };
        Ok(ProtFault { _file: file, map })
    }
}

impl Workload for ProtFault {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let handler_cost = untracked(|| signal_delivery_time(ops))?;
        let _guard = HandlerGuard::install(libc::SIGSEGV, on_write_fault)?;
        FAULTS_LEFT.store(ops, Ordering::Relaxed);
        FAULT_PAGE.store(self.map.addr as usize, Ordering::Relaxed);
        // SAFETY: our own page.
        if unsafe { libc::mprotect(self.map.addr.cast(), self.map.len, libc::PROT_READ) } != 0 {
            anyhow::bail!("mprotect: {}", std::io::Error::last_os_error());
        }
        let start = Instant::now();
        // SAFETY: faults `ops` times into on_write_fault, which then makes the page writable.
        unsafe { self.map.addr.write_volatile(2) };
        let elapsed = start.elapsed();
        FAULT_PAGE.store(0, Ordering::Relaxed);
        let left = FAULTS_LEFT.load(Ordering::Relaxed);
        anyhow::ensure!(left == 0, "{} of {ops} protection faults taken", ops - left);
        Ok(elapsed.saturating_sub(handler_cost))
    }
}

/// Minor faults of the calling thread so far.
fn minor_faults() -> u64 {
    // SAFETY: all-zero is a valid rusage out-buffer.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    usage.ru_minflt as u64
}

/// Read faults on a file whose pages are in the page cache, in a fresh mapping each pass. A
/// read fault maps the whole fault-around window (64 KB by default) of cached pages at once, so
/// the workload touches one page per window: every touch is one fault, as lmbench's per-page
/// touches were before fault-around. The window is measured, not assumed.
struct PageFault {
    file: OwnedFd,
    len: usize,
    /// Bytes between touches: one fault-around window.
    stride: usize,
}

impl PageFault {
    fn new(options: &WorkloadOptions, len: usize) -> anyhow::Result<Self> {
        let file = scratch_file(&options.scratch_dir, "page_fault", len)?;
        let page = page_size();
        // Touch every page of a fresh mapping and count the faults it took.
        let probe = Mapping::new(&file, len, libc::PROT_READ)?;
        let before = minor_faults();
        for offset in (0..len).step_by(page) {
            std::hint::black_box(probe.touch(offset));
        }
        let faults = (minor_faults() - before).max(1) as usize;
        let pages_per_fault = (len / page / faults).max(1).next_power_of_two();
        Ok(PageFault {
            file,
            len,
            stride: pages_per_fault * page,
        })
    }

    fn faults_per_mapping(&self) -> u64 {
        (self.len / self.stride) as u64
    }
}

impl Workload for PageFault {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let mut elapsed = Duration::ZERO;
        let mut done = 0;
        while done < ops {
            let map = untracked(|| -> anyhow::Result<Mapping> {
                let map = Mapping::new(&self.file, self.len, libc::PROT_READ)?;
                // SAFETY: our own mapping; as lmbench, drop any cached translations of it.
                unsafe { libc::msync(map.addr.cast(), map.len, libc::MS_INVALIDATE) };
                Ok(map)
            })?;
            let n = self.faults_per_mapping().min(ops - done);
            let start = Instant::now();
            for i in 0..n as usize {
                std::hint::black_box(map.touch(i * self.stride));
            }
            elapsed += start.elapsed();
            done += n;
        }
        Ok(elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{options, run_and_drop};

    #[test]
    fn every_page_fault_touch_faults() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = PageFault::new(&options(dir.path()), 4 << 20).unwrap();
        let ops = 3 * w.faults_per_mapping() / 2;
        let before = minor_faults();
        w.run(ops).unwrap();
        let faults = minor_faults() - before;
        assert!(faults >= ops, "{faults} minor faults for {ops} touches");
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn protection_faults_are_taken_and_the_old_handler_is_back() {
        let segv_handler = || {
            // SAFETY: queries only.
            let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
            unsafe { libc::sigaction(libc::SIGSEGV, std::ptr::null(), &mut act) };
            act.sa_sigaction
        };
        let before = segv_handler();
        // run() fails unless exactly `ops` faults reached the handler.
        run_and_drop("prot_fault", 200);
        assert_eq!(segv_handler(), before);
        run_and_drop("mmap_latency", 3);
    }
}
