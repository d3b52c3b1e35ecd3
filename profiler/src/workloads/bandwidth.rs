//! lmbench's "*Local* Communication bandwidths" table: pipe, AF_UNIX and TCP transfers between
//! two processes, rereading a cached file with read() and through a mapping, and memory copy,
//! read and write bandwidth. MB = 10^6 bytes, as lmbench (lib_timing.c).
use std::{
    os::fd::OwnedFd,
    time::{Duration, Instant},
};

use super::{
    channel::{write_all, Channel, End},
    memory::{AnonBuffer, CacheSizes},
    net_time,
    peer::{second_cpu, Peer},
    sum_words,
    vm::unlinked_file,
    Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec,
};

/// lmbench's transfer size for pipes, sockets and file reads.
const XFER: usize = 64 << 10;
/// Memory workloads count 1 MB an op, and move whole buffers: one round is one pass over the
/// buffer, as each iteration of lmbench's bw_mem (one bcopy() of the whole buffer: libc picks
/// its copy strategy, e.g. non-temporal stores, by the size of the call).
const CHUNK: usize = 1 << 20;

const fn bandwidth(
    name: &'static str,
    description: &'static str,
    bytes_per_op: usize,
    suite: Suite,
    create: fn(&WorkloadOptions) -> anyhow::Result<Box<dyn Workload>>,
) -> WorkloadSpec {
    WorkloadSpec {
        name,
        family: Family::Bandwidth,
        metric: Metric::Bandwidth {
            bytes_per_op: bytes_per_op as u64,
        },
        description,
        suite,
        create,
    }
}

pub static SPECS: &[WorkloadSpec] = &[
    bandwidth(
        "bw_pipe",
        "64 KB transfers over a pipe from a forked writer",
        XFER,
        Suite::Quick,
        |o| Transfer::create(o, Channel::pipes()),
    ),
    bandwidth(
        "bw_unix",
        "64 KB transfers over an AF_UNIX socketpair",
        XFER,
        Suite::Default,
        |o| Transfer::create(o, Channel::unix()),
    ),
    bandwidth(
        "bw_tcp",
        "64 KB transfers over TCP on 127.0.0.1, 1 MB socket buffers",
        XFER,
        Suite::Default,
        // lmbench's SOCKBUF: bw_tcp sets it on both ends.
        |o| Transfer::create(o, Channel::tcp_with_buffers(1 << 20)),
    ),
    bandwidth(
        "bw_file_reread",
        "read() + sum of a cached 8 MB file, 64 KB a call",
        XFER,
        Suite::Default,
        |o| Ok(Box::new(FileReread::new(o, false)?)),
    ),
    bandwidth(
        "bw_mmap_reread",
        "sum of a mapped, cached 8 MB file, 64 KB an op",
        XFER,
        Suite::Default,
        |o| Ok(Box::new(FileReread::new(o, true)?)),
    ),
    bandwidth(
        "bw_bcopy_libc",
        "memcpy() between two buffers of 2x the last-level cache",
        CHUNK,
        Suite::Default,
        |_| {
            Ok(Box::new(MemoryPass::new(
                Pass::CopyLibc,
                memory_buffer_len(),
            )?))
        },
    ),
    bandwidth(
        "bw_bcopy_hand",
        "word-by-word copy loop between the same buffers",
        CHUNK,
        Suite::Default,
        |_| {
            Ok(Box::new(MemoryPass::new(
                Pass::CopyHand,
                memory_buffer_len(),
            )?))
        },
    ),
    bandwidth(
        "bw_mem_read",
        "word-by-word read and sum of a buffer",
        CHUNK,
        Suite::Quick,
        |_| Ok(Box::new(MemoryPass::new(Pass::Read, memory_buffer_len())?)),
    ),
    bandwidth(
        "bw_mem_write",
        "int-by-int write of a buffer, each 512-byte block from its end down",
        CHUNK,
        Suite::Default,
        |_| Ok(Box::new(MemoryPass::new(Pass::Write, memory_buffer_len())?)),
    ),
];

/// A forked server writes 64 KB chunks without pause, as lmbench's bw_pipe, bw_unix and bw_tcp
/// writers do; a sample reads N chunks. Between samples the server sleeps in a write on full
/// buffers, so each sample starts from full buffers and a writer in its steady state (asking
/// for N chunks per sample instead left both ends idle at each start, and bw_tcp's samples
/// swung 2.4-6.4 GB/s). The write it sleeps in returns in the next sample: the probes count
/// it as a stale exit, never timed across the gap.
struct Transfer {
    client: End,
    buf: AnonBuffer,
    server: Peer,
}

/// The server's loop (in the forked peer): `chunk` is its 64 KB, allocated before the fork.
/// It ends when the client's end closes.
fn stream_chunks(end: &End, chunk: &[u8]) -> i32 {
    while write_all(end.tx(), chunk).is_ok() {}
    0
}

impl Transfer {
    fn create(
        options: &WorkloadOptions,
        channel: anyhow::Result<Channel>,
    ) -> anyhow::Result<Box<dyn Workload>> {
        let Channel { client, server } = channel?;
        let second = second_cpu(&options.setup.pin);
        let chunk: Vec<u8> = (0..XFER).map(|i| i as u8).collect();
        let peer = Peer::spawn(second, || stream_chunks(&server, &chunk))?;
        drop(server);
        Ok(Box::new(Transfer {
            client,
            // Page-aligned, as lmbench's valloc()ed buffer.
            buf: AnonBuffer::new(XFER)?,
            server: peer,
        }))
    }
}

impl Workload for Transfer {
    fn settle(&mut self) -> anyhow::Result<()> {
        self.server.wait_until_idle()
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut left = ops as usize * XFER;
        while left > 0 {
            let want = left.min(XFER);
            // SAFETY: reads into `buf`, within its length.
            let n = unsafe { libc::read(self.client.rx(), self.buf.as_ptr().cast(), want) };
            if n <= 0 {
                anyhow::bail!(
                    "transfer ended {left} bytes short: {}",
                    std::io::Error::last_os_error()
                );
            }
            left -= n as usize;
        }
        Ok(start.elapsed())
    }
}

const FILE_LEN: usize = 8 << 20;

/// Rereads a cached file 64 KB at a time, with pread() into a buffer or from a mapping made
/// once; either way the data is summed.
struct FileReread {
    file: OwnedFd,
    map: Option<(*const u8, usize)>,
    /// Page-aligned, as lmbench's valloc()ed buffer: the kernel's copy into it runs at the
    /// speed of an aligned destination.
    buf: AnonBuffer,
    offset: usize,
}

impl FileReread {
    fn new(options: &WorkloadOptions, mapped: bool) -> anyhow::Result<Self> {
        let data: Vec<u8> = (0..FILE_LEN).map(|i| (i * 7) as u8).collect();
        let file = unlinked_file(&options.scratch_dir, "reread", &data)?;
        let map = if mapped {
            use std::os::fd::AsRawFd;
            // SAFETY: a read-only shared mapping of our own file, unmapped in Drop.
            let addr = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    FILE_LEN,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            anyhow::ensure!(
                addr != libc::MAP_FAILED,
                "mmap: {}",
                std::io::Error::last_os_error()
            );
            Some((addr.cast_const().cast(), FILE_LEN))
        } else {
            None
        };
        Ok(FileReread {
            file,
            map,
            buf: AnonBuffer::new(XFER)?,
            offset: 0,
        })
    }
}

impl Workload for FileReread {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        use std::os::fd::AsRawFd;
        let mut sum = 0u64;
        let start = Instant::now();
        for _ in 0..ops {
            let data = match self.map {
                // SAFETY: offset + XFER <= FILE_LEN, inside the mapping.
                Some((addr, _)) => unsafe {
                    std::slice::from_raw_parts(addr.add(self.offset), XFER)
                },
                None => {
                    // SAFETY: reads into `buf`, within its length.
                    let n = unsafe {
                        libc::pread(
                            self.file.as_raw_fd(),
                            self.buf.as_ptr().cast(),
                            XFER,
                            self.offset as i64,
                        )
                    };
                    anyhow::ensure!(
                        n == XFER as isize,
                        "pread: {n}: {}",
                        std::io::Error::last_os_error()
                    );
                    // SAFETY: the whole buffer, as bytes.
                    unsafe { std::slice::from_raw_parts(self.buf.as_ptr(), XFER) }
                }
            };
            sum = sum.wrapping_add(sum_words(data.as_ptr().cast(), XFER / 8));
            self.offset = (self.offset + XFER) % FILE_LEN;
        }
        let elapsed = start.elapsed();
        std::hint::black_box(sum);
        Ok(elapsed)
    }
}

impl Drop for FileReread {
    fn drop(&mut self) {
        if let Some((addr, len)) = self.map {
            // SAFETY: unmaps exactly what mmap returned.
            unsafe { libc::munmap(addr.cast_mut().cast(), len) };
        }
    }
}

/// Buffers twice the last-level cache (8 MB - 512 MB), so passes stream from memory.
fn memory_buffer_len() -> usize {
    (CacheSizes::read().last_level * 2).clamp(8 << 20, 512 << 20) / CHUNK * CHUNK
}

#[derive(Clone, Copy, PartialEq, Debug)]
enum Pass {
    CopyLibc,
    CopyHand,
    Read,
    Write,
}

/// One pass over the whole buffer(s) per round of `len / CHUNK` ops.
struct MemoryPass {
    pass: Pass,
    src: AnonBuffer,
    dst: Option<AnonBuffer>,
}

impl MemoryPass {
    fn new(pass: Pass, len: usize) -> anyhow::Result<Self> {
        let src = AnonBuffer::new(len)?;
        let dst = matches!(pass, Pass::CopyLibc | Pass::CopyHand)
            .then(|| AnonBuffer::new(len))
            .transpose()?;
        Ok(MemoryPass { pass, src, dst })
    }

    fn one_pass(&mut self) -> u64 {
        let words = self.src.len() / 8;
        let src = self.src.as_ptr().cast::<u64>();
        let dst = self.dst.as_ref().map(|d| d.as_ptr().cast::<u64>());
        let mut sum = 0u64;
        // SAFETY: both buffers are `words` words long and ours. Volatile word accesses: the
        // compiler may neither drop them nor turn the loops into memcpy/memset, so "hand", read
        // and write move one word at a time, as lmbench's C.
        unsafe {
            match (self.pass, dst) {
                (Pass::CopyLibc, Some(dst)) => std::ptr::copy_nonoverlapping(src, dst, words),
                (Pass::CopyHand, Some(dst)) => {
                    for i in 0..words {
                        dst.add(i).write_volatile(src.add(i).read_volatile());
                    }
                }
                (Pass::Read, _) => {
                    for i in 0..words {
                        sum = sum.wrapping_add(src.add(i).read_volatile());
                    }
                }
                (Pass::Write, _) => {
                    // As lmbench's fwr: ints, a 512-byte block at a time, each block from its
                    // last int down to its first (the order its chained assignment stores in).
                    // Here that runs ~10% slower than one ascending sweep of 8-byte words.
                    let ints = src.cast::<u32>();
                    let len = self.src.len() / 4;
                    let whole = len - len % 128;
                    for block in (0..whole).step_by(128) {
                        fwr_block(ints.add(block));
                    }
                    for i in (whole..len).rev() {
                        ints.add(i).write_volatile(1);
                    }
                }
                (_, None) => unreachable!("copies have a destination"),
            }
        }
        sum
    }
}

/// One 512-byte block of lmbench's fwr: 128 ints, each stored with the constant 1, from the last
/// down to the first, unrolled: its `p[0]=p[1]=...=p[127]=1` compiles to 128 back-to-back
/// `movl $1` stores. A loop of one store and its index arithmetic an iteration let this AMD
/// EPYC (Zen 4) write 64 MB 1.4x as fast as fwr's unrolled stores; on the Xeon the two agreed.
///
/// # Safety
/// `p` points to 128 writable, aligned ints.
#[inline(always)]
unsafe fn fwr_block(p: *mut u32) {
    macro_rules! stores {
        ($($i:literal)*) => {
            // SAFETY: every offset is below 128, inside the caller's block.
            $(unsafe { p.add($i).write_volatile(1) };)*
        };
    }
    stores!(
        127 126 125 124 123 122 121 120 119 118 117 116 115 114 113 112 111 110 109 108
        107 106 105 104 103 102 101 100 99 98 97 96 95 94 93 92 91 90 89 88 87 86 85 84
        83 82 81 80 79 78 77 76 75 74 73 72 71 70 69 68 67 66 65 64 63 62 61 60 59 58 57
        56 55 54 53 52 51 50 49 48 47 46 45 44 43 42 41 40 39 38 37 36 35 34 33 32 31 30
        29 28 27 26 25 24 23 22 21 20 19 18 17 16 15 14 13 12 11 10 9 8 7 6 5 4 3 2 1 0
    );
}

impl Workload for MemoryPass {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let passes = ops.div_ceil(self.ops_per_round());
        let mut sum = 0u64;
        let start = Instant::now();
        for _ in 0..passes {
            sum = sum.wrapping_add(self.one_pass());
        }
        let elapsed = start.elapsed();
        std::hint::black_box(sum);
        Ok(net_time(
            elapsed,
            Duration::ZERO,
            passes * self.ops_per_round(),
            ops,
        ))
    }

    fn ops_per_round(&self) -> u64 {
        (self.src.len() / CHUNK) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::tests::run_and_drop;

    fn assert_sane(spec_name: &str, elapsed: Duration, ops: u64) {
        let spec = crate::workloads::find(spec_name).unwrap();
        let mbs = spec.metric.value(elapsed, ops);
        assert!(mbs.is_finite() && mbs > 0.0, "{spec_name}: {mbs} MB/s");
    }

    #[test]
    fn transfers_and_rereads_move_data() {
        // Transfer::run fails unless all requested bytes arrive.
        for name in [
            "bw_pipe",
            "bw_unix",
            "bw_tcp",
            "bw_file_reread",
            "bw_mmap_reread",
        ] {
            assert_sane(name, run_and_drop(name, 20), 20);
        }
    }

    #[test]
    fn memory_passes_copy_read_and_write() {
        for (name, pass) in [
            ("bw_bcopy_libc", Pass::CopyLibc),
            ("bw_bcopy_hand", Pass::CopyHand),
            ("bw_mem_read", Pass::Read),
            ("bw_mem_write", Pass::Write),
        ] {
            let mut w = MemoryPass::new(pass, 4 * CHUNK).unwrap();
            // SAFETY: the source buffer is ours; mark it so a copy is visible.
            unsafe { w.src.as_ptr().cast::<u64>().write(0xabcd) };
            assert_eq!(
                w.ops_per_round(),
                4,
                "{name}: a round is a pass over the buffer"
            );
            assert_sane(name, w.run(8).unwrap(), 8);
            if let Some(dst) = &w.dst {
                // SAFETY: reads our own destination buffer.
                assert_eq!(
                    unsafe { dst.as_ptr().cast::<u64>().read() },
                    0xabcd,
                    "{name}"
                );
            }
            if pass == Pass::Write {
                // SAFETY: reads our own buffer: every int was written as 1, as fwr's.
                let ints = w.src.as_ptr().cast::<u32>();
                for i in [0, 3, 127, 128, 1000, 4 * CHUNK / 4 - 1] {
                    assert_eq!(unsafe { ints.add(i).read() }, 1, "int {i}");
                }
            }
        }
    }
}
