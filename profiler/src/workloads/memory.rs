//! lmbench's "Memory latencies" table (lat_mem_rd): dependent loads chasing a pointer chain
//! through a buffer sized for L1, for L2 and for main memory, from this CPU's cache sizes. As
//! lmbench's L1, L2 and "Main mem" columns (`lat_mem_rd SIZE 128`), each load is 128 bytes on
//! from the last, so hardware prefetchers see the pattern; lmbench 3's "Rand mem" column
//! (`lat_mem_rd -t`) visits the lines in a random order instead.
use std::time::{Duration, Instant};

use super::{net_time, Family, FixedRng, Metric, Suite, Workload, WorkloadSpec};

const LINE: usize = 64;
/// lmbench's stride for its summary's memory latencies.
const STRIDE: usize = 128;

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "mem_l1",
        family: Family::MemoryLatency,
        metric: Metric::LatencyNs,
        description: "dependent load 128 bytes on from the last, in half of the L1 data cache",
        suite: Suite::Quick,
        create: |_| chase(CacheSizes::read().l1_chain(), Order::Stride),
    },
    WorkloadSpec {
        name: "mem_l2",
        family: Family::MemoryLatency,
        metric: Metric::LatencyNs,
        description: "dependent load 128 bytes on from the last, in half of the L2 cache",
        suite: Suite::Default,
        create: |_| chase(CacheSizes::read().l2_chain(), Order::Stride),
    },
    WorkloadSpec {
        name: "mem_main",
        family: Family::MemoryLatency,
        metric: Metric::LatencyNs,
        description: "dependent load 128 bytes on from the last, in 4x the last-level cache \
                      (64 MB - 1 GB)",
        suite: Suite::Default,
        create: |_| chase(CacheSizes::read().main_chain(), Order::Stride),
    },
    WorkloadSpec {
        name: "mem_rand",
        family: Family::MemoryLatency,
        metric: Metric::LatencyNs,
        description: "dependent load of a random cache line of 4x the last-level cache \
                      (64 MB - 1 GB)",
        suite: Suite::Default,
        create: |_| chase(CacheSizes::read().main_chain(), Order::Random),
    },
];

fn chase(bytes: usize, order: Order) -> anyhow::Result<Box<dyn Workload>> {
    Ok(Box::new(PointerChase::new(bytes, order)?))
}

/// The order a chain visits its buffer in.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Order {
    /// Every STRIDE bytes, front to back, then round again (lmbench's stride_initialize).
    Stride,
    /// Every cache line once, in a random single cycle.
    Random,
}

/// Cache sizes of CPU 0 in bytes, from sysfs, with common values where sysfs says nothing.
#[derive(Debug, Clone, Copy)]
pub struct CacheSizes {
    pub l1d: usize,
    pub l2: usize,
    pub last_level: usize,
}

impl CacheSizes {
    pub fn read() -> Self {
        let mut sizes = CacheSizes {
            l1d: 0,
            l2: 0,
            last_level: 0,
        };
        let mut deepest = 0;
        for index in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{index}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
            else {
                continue;
            };
            let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_size(&size)) else {
                continue;
            };
            match (level, kind.trim()) {
                (1, "Data") => sizes.l1d = size,
                (2, "Unified" | "Data") => sizes.l2 = size,
                _ => {}
            }
            if kind.trim() != "Instruction" && level >= deepest {
                deepest = level;
                sizes.last_level = size;
            }
        }
        sizes.with_fallbacks()
    }

    fn with_fallbacks(mut self) -> Self {
        if self.l1d == 0 {
            self.l1d = 32 << 10;
        }
        if self.l2 <= self.l1d {
            self.l2 = (1 << 20).max(self.l1d * 8);
        }
        if self.last_level < self.l2 {
            self.last_level = (32 << 20).max(self.l2);
        }
        self
    }

    pub fn l1_chain(self) -> usize {
        self.l1d / 2
    }

    /// Half of L2, but well past L1 so the loads miss it.
    pub fn l2_chain(self) -> usize {
        (self.l2 / 2).max(self.l1d * 4)
    }

    pub fn main_chain(self) -> usize {
        (self.last_level * 4).clamp(64 << 20, 1 << 30)
    }
}

/// "48K", "2048K", "32M" -> bytes.
fn parse_size(s: &str) -> Option<usize> {
    let s = s.trim();
    let (digits, shift) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 10),
        b'M' => (&s[..s.len() - 1], 20),
        b'G' => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    Some(digits.parse::<usize>().ok()? << shift)
}

/// Anonymous memory in base pages, as lmbench's valloc() buffers get where transparent huge
/// pages are given on madvise only (the default), every page faulted in at once (as lmbench
/// touches or zeroes its buffers), so no fault lands in a timed loop; unmapped on drop.
pub struct AnonBuffer {
    addr: *mut u8,
    len: usize,
}

impl AnonBuffer {
    pub fn new(len: usize) -> anyhow::Result<Self> {
        // SAFETY: a fresh private anonymous mapping.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        anyhow::ensure!(
            addr != libc::MAP_FAILED,
            "mmap {len} bytes: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: the whole mapping is ours and writable.
        unsafe { std::ptr::write_bytes(addr.cast::<u8>(), 0, len) };
        Ok(AnonBuffer {
            addr: addr.cast(),
            len,
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.addr
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for AnonBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what mmap returned.
        unsafe { libc::munmap(self.addr.cast(), self.len) };
    }
}

/// A chain through a buffer, each visited slot's first word pointing at the next: every STRIDE
/// bytes in order, or every cache line in a random single cycle (Sattolo's shuffle), so that
/// hardware prefetchers cannot guess the next line.
struct PointerChase {
    /// Owns the memory `cursor` points into.
    #[cfg_attr(not(test), expect(dead_code, reason = "kept for its Drop"))]
    buffer: AnonBuffer,
    cursor: *const usize,
}

impl PointerChase {
    fn new(bytes: usize, order: Order) -> anyhow::Result<Self> {
        let slot = match order {
            Order::Stride => STRIDE,
            Order::Random => LINE,
        };
        let slots = (bytes / slot).max(2);
        let buffer = AnonBuffer::new(slots * slot)?;
        let mut visits: Vec<u32> = (0..slots as u32).collect();
        if order == Order::Random {
            let mut rng = FixedRng::new(); // the same chain every run
            for i in (1..slots).rev() {
                visits.swap(i, rng.below(i));
            }
        }
        let base = buffer.as_ptr();
        for (i, &at) in visits.iter().enumerate() {
            let next = visits[(i + 1) % slots] as usize;
            // SAFETY: both slots are inside the buffer; slots are word-aligned.
            unsafe {
                *base.add(at as usize * slot).cast::<usize>() = base.add(next * slot) as usize
            };
        }
        let cursor = base.cast_const().cast();
        Ok(PointerChase { buffer, cursor })
    }

    #[cfg(test)]
    fn chain_len(&self) -> usize {
        let start = self.cursor;
        let mut p = start;
        let mut n = 0;
        loop {
            // SAFETY: the chain only holds addresses of lines in the buffer.
            p = unsafe { *p } as *const usize;
            n += 1;
            if p == start || n > self.buffer.len() {
                return n;
            }
        }
    }
}

/// Loads a round of the chain makes back to back, as lmbench's HUNDRED macro: the compiler
/// unrolls them, so no loop work comes between loads and the hardware sees lmbench's pattern
/// of load instructions.
const LOADS_PER_ROUND: u64 = 100;

impl Workload for PointerChase {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let rounds = ops.div_ceil(LOADS_PER_ROUND);
        let mut p = self.cursor;
        let start = Instant::now();
        for _ in 0..rounds {
            for _ in 0..LOADS_PER_ROUND {
                // SAFETY: the chain only holds addresses of lines in the buffer.
                p = unsafe { *p } as *const usize;
            }
        }
        let elapsed = start.elapsed();
        self.cursor = std::hint::black_box(p);
        Ok(net_time(
            elapsed,
            Duration::ZERO,
            rounds * LOADS_PER_ROUND,
            ops,
        ))
    }

    fn ops_per_round(&self) -> u64 {
        LOADS_PER_ROUND
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_come_from_sysfs_or_sane_fallbacks() {
        let sizes = CacheSizes::read();
        assert!(sizes.l1d >= 4 << 10 && sizes.l2 > sizes.l1d && sizes.last_level >= sizes.l2);
        assert!(sizes.l1_chain() < sizes.l1d && sizes.l2_chain() > sizes.l1d);
        assert!(sizes.main_chain() >= 4 * sizes.last_level.min(256 << 20));
        assert_eq!(parse_size("2048K"), Some(2 << 20));
        assert_eq!(parse_size("32M\n"), Some(32 << 20));
        assert_eq!(parse_size("x"), None);
    }

    #[test]
    fn the_chain_visits_every_line_once() {
        let mut chase = PointerChase::new(64 << 10, Order::Random).unwrap();
        assert_eq!(chase.chain_len(), 1024);
        assert_eq!(
            PointerChase::new(64 << 10, Order::Stride)
                .unwrap()
                .chain_len(),
            512
        );
        assert!(chase.run(10_000).unwrap() > Duration::ZERO);
        // L1 chases are faster than a chain far beyond L2.
        let mut far = PointerChase::new(64 << 20, Order::Random).unwrap();
        let ns = |c: &mut PointerChase| c.run(1_000_000).unwrap().as_nanos();
        assert!(ns(&mut chase) < ns(&mut far));
    }
}
