//! lmbench's "Mmap Latency", "Prot Fault" and "Page Fault" columns.
use std::{
    fs::File,
    io::Write,
    os::fd::{AsRawFd, OwnedFd},
    path::Path,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{
    net_time,
    signal::{signal_delivery_time, HandlerGuard},
    Family, FixedRng, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec,
};
use crate::workloads::tracking_window::untracked;

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "mmap_latency",
        family: Family::FileVm,
        metric: Metric::LatencyUs,
        description: "mmap() an 8 MB file read-write and shared, store a byte every 16 KB of its \
                      first tenth, munmap()",
        suite: Suite::Default,
        create: |o| Ok(Box::new(MmapLatency::new(o, FILE_LEN)?)),
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
        description: "per page: read every page of a fresh mapping of a cached 8 MB file in \
                      random order, then remap it, minus the remap alone",
        suite: Suite::Quick,
        create: |o| Ok(Box::new(PageFault::new(o, FILE_LEN)?)),
    },
];

/// lmbench's file size for mmap latency and page faults when MB is not configured.
const FILE_LEN: usize = 8 << 20;

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// A file in the scratch dir holding `data`, in the page cache and already unlinked: the open
/// fd keeps it alive and nothing is left behind, even after a crash. It is written as lmbench's
/// script makes its test file (`lmdd of=FILE move=SIZE fsync=1`): 8 KB writes, then fsync. How
/// a file was written decides the size of its page-cache folios, and whether its pages are
/// clean, and both change what faulting them in costs several-fold.
pub fn unlinked_file(dir: &Path, name: &str, data: &[u8]) -> anyhow::Result<OwnedFd> {
    let path = dir.join(name);
    let created = File::options()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path);
    let _ = std::fs::remove_file(&path);
    let mut file = created.with_context(|| format!("create {}", path.display()))?;
    for block in data.chunks(8 << 10) {
        file.write_all(block)
            .with_context(|| format!("write {}", path.display()))?;
    }
    file.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    Ok(file.into())
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

    /// Stores `byte` at `offset` of a writable mapping.
    fn store(&self, offset: usize, byte: u8) {
        assert!(offset < self.len);
        // SAFETY: within the mapping, which callers made writable.
        unsafe { self.addr.add(offset).write_volatile(byte) }
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
            // As lmbench: write faults on a shared file mapping, the byte being the size's low one.
            let map = Mapping::new(&self.file, self.len, libc::PROT_READ | libc::PROT_WRITE)?;
            for offset in (0..self.len / 10).step_by(16 << 10) {
                map.store(offset, self.len as u8);
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

/// 0..n in a random order (Fisher-Yates), as lmbench's permutation().
fn shuffled(n: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    let mut rng = FixedRng::new();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

/// lmbench's lat_pagefault: read one byte of every page of a shared mapping of a cached file, in
/// a random order, then unmap and map it again (with msync(MS_INVALIDATE), as lmbench), and take
/// away the time of the unmap and map alone; the rest, per page, is the page-fault cost. Fault-
/// around maps a window of cached pages per fault, so this is per page, not per fault, as lmbench.
struct PageFault {
    file: OwnedFd,
    len: usize,
    /// Byte offsets of every page, in the order they are read.
    pages: Vec<usize>,
    /// None only for a moment in `remap`, between the unmap and the map.
    map: Option<Mapping>,
}

impl PageFault {
    fn new(options: &WorkloadOptions, len: usize) -> anyhow::Result<Self> {
        let file = scratch_file(&options.scratch_dir, "page_fault", len)?;
        let pages = shuffled(len / page_size())
            .into_iter()
            .map(|p| p * page_size())
            .collect();
        let map = Some(Self::fresh_mapping(&file, len)?);
        Ok(PageFault {
            file,
            len,
            pages,
            map,
        })
    }

    fn fresh_mapping(file: &OwnedFd, len: usize) -> anyhow::Result<Mapping> {
        let map = Mapping::new(file, len, libc::PROT_READ)?;
        // SAFETY: our own mapping; drops any cached translations of it, as lmbench.
        if unsafe { libc::msync(map.addr.cast(), map.len, libc::MS_INVALIDATE) } != 0 {
            anyhow::bail!("msync: {}", std::io::Error::last_os_error());
        }
        Ok(map)
    }

    /// Unmaps the mapping, then maps the file afresh.
    fn remap(&mut self) -> anyhow::Result<()> {
        self.map = None;
        self.map = Some(Self::fresh_mapping(&self.file, self.len)?);
        Ok(())
    }

    /// Reads every page once, then remaps.
    fn read_all_and_remap(&mut self) -> anyhow::Result<()> {
        let map = self.map.as_ref().expect("mapped between runs");
        let mut sum = 0u8;
        for &offset in &self.pages {
            sum = sum.wrapping_add(map.touch(offset));
        }
        std::hint::black_box(sum);
        self.remap()
    }
}

impl Workload for PageFault {
    /// One round reads every page of the mapping.
    fn ops_per_round(&self) -> u64 {
        self.pages.len() as u64
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let rounds = ops.div_ceil(self.ops_per_round()).max(1);
        let start = Instant::now();
        for _ in 0..rounds {
            self.read_all_and_remap()?;
        }
        let with_reads = start.elapsed();
        // lmbench's reference: the same remaps without the reads.
        let remaps_only = untracked(|| -> anyhow::Result<Duration> {
            let start = Instant::now();
            for _ in 0..rounds {
                self.remap()?;
            }
            Ok(start.elapsed())
        })?;
        Ok(net_time(
            with_reads,
            remaps_only,
            rounds * self.ops_per_round(),
            ops,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::{options, run_and_drop};

    /// Minor faults of the calling thread so far.
    fn minor_faults() -> u64 {
        // SAFETY: all-zero is a valid rusage out-buffer.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
        usage.ru_minflt as u64
    }

    #[test]
    fn page_fault_reads_every_page_in_a_shuffled_order_and_faults_afresh_each_round() {
        let order = shuffled(1000);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        assert_ne!(order, sorted, "not shuffled");

        let dir = tempfile::tempdir().unwrap();
        let mut w = PageFault::new(&options(dir.path()), 4 << 20).unwrap();
        let pages = w.ops_per_round();
        assert_eq!(pages as usize, (4 << 20) / page_size());
        let faults_of = |w: &mut PageFault, rounds: u64| {
            let before = minor_faults();
            w.run(rounds * pages).unwrap();
            minor_faults() - before
        };
        let one = faults_of(&mut w, 1);
        let three = faults_of(&mut w, 3);
        // Fault-around and large folios map many pages per fault, but every round maps the
        // file afresh, so every round faults again.
        assert!(one >= 1, "a round took no fault");
        assert!(three >= 2 * one, "{three} faults in 3 rounds, {one} in one");
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn mmap_latency_stores_through_a_shared_mapping() {
        let dir = tempfile::tempdir().unwrap();
        // The stored byte is the size's low byte: 3 here, where the file holds 0 at 16 KB.
        let len = FILE_LEN + 3;
        let mut w = MmapLatency::new(&options(dir.path()), len).unwrap();
        assert_eq!(
            (len / 10).div_ceil(16 << 10),
            52,
            "lmbench's 8 MB run stores 52 bytes"
        );
        let before = minor_faults();
        w.run(4).unwrap();
        assert!(minor_faults() - before >= 4, "each fresh mapping faults");
        let mut byte = [0u8; 1];
        // SAFETY: reads one byte into `byte` from our own file.
        let n = unsafe { libc::pread(w.file.as_raw_fd(), byte.as_mut_ptr().cast(), 1, 16 << 10) };
        assert_eq!((n, byte[0]), (1, 3), "the store reached the file");
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
