//! lmbench's "Processor, Processes" syscall columns: null call, null I/O, stat, open/close.
use std::{
    ffi::CString,
    fs::File,
    os::fd::{AsRawFd, OwnedFd},
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{Family, Metric, Suite, Workload, WorkloadOptions, WorkloadSpec};

pub static SPECS: &[WorkloadSpec] = &[
    WorkloadSpec {
        name: "null_call",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "null syscall: getppid()",
        suite: Suite::Quick,
        create: |_| Ok(Box::new(NullCall)),
    },
    WorkloadSpec {
        name: "null_io",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "null I/O: mean of a 1-byte read of /dev/zero and a 1-byte write to /dev/null",
        suite: Suite::Quick,
        create: NullIo::create,
    },
    WorkloadSpec {
        name: "stat",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "stat() of an existing file (the newfstatat syscall: arm64 has no stat)",
        suite: Suite::Quick,
        create: PathOp::create_stat,
    },
    WorkloadSpec {
        name: "open_close",
        family: Family::Processes,
        metric: Metric::LatencyUs,
        description: "open() and close() of an existing file (openat: arm64 has no open)",
        suite: Suite::Quick,
        create: PathOp::create_open_close,
    },
];

struct NullCall;

impl Workload for NullCall {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: getppid has no preconditions.
            std::hint::black_box(unsafe { libc::getppid() });
        }
        Ok(start.elapsed())
    }
}

/// Alternates a 1-byte read and a 1-byte write, so the time per op is their mean.
struct NullIo {
    zero: OwnedFd,
    null: OwnedFd,
}

impl NullIo {
    fn create(_: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        let zero = File::open("/dev/zero").context("open /dev/zero")?;
        let null = File::options()
            .write(true)
            .open("/dev/null")
            .context("open /dev/null")?;
        Ok(Box::new(NullIo {
            zero: zero.into(),
            null: null.into(),
        }))
    }
}

impl Workload for NullIo {
    /// A read and a write: an odd count would weigh one of them more.
    fn ops_per_round(&self) -> u64 {
        2
    }

    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let mut byte = [0u8; 1];
        let (zero, null) = (self.zero.as_raw_fd(), self.null.as_raw_fd());
        let start = Instant::now();
        for i in 0..ops {
            // SAFETY: one-byte buffer, valid fds owned by self.
            let n = unsafe {
                if i % 2 == 0 {
                    libc::read(zero, byte.as_mut_ptr().cast(), 1)
                } else {
                    libc::write(null, byte.as_ptr().cast(), 1)
                }
            };
            if n != 1 {
                anyhow::bail!("null I/O: {}", std::io::Error::last_os_error());
            }
        }
        Ok(start.elapsed())
    }
}

/// stat() or open()+close() of a file that exists for the workload's lifetime.
struct PathOp {
    path: CString,
    open_close: bool,
}

impl PathOp {
    fn create(options: &WorkloadOptions, open_close: bool) -> anyhow::Result<Box<dyn Workload>> {
        let file = options.scratch_dir.join("target");
        std::fs::write(&file, b"hookprof\n")
            .with_context(|| format!("create {}", file.display()))?;
        let path = CString::new(file.as_os_str().as_encoded_bytes())?;
        Ok(Box::new(PathOp { path, open_close }))
    }

    fn create_stat(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        Self::create(options, false)
    }

    fn create_open_close(options: &WorkloadOptions) -> anyhow::Result<Box<dyn Workload>> {
        Self::create(options, true)
    }
}

impl Workload for PathOp {
    fn run(&mut self, ops: u64) -> anyhow::Result<Duration> {
        let path = self.path.as_ptr();
        // SAFETY: all-zero is a valid `struct stat`.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: `path` is a valid C string, `st` a valid out-buffer.
            let ok = unsafe {
                if self.open_close {
                    let fd = libc::open(path, libc::O_RDONLY);
                    fd >= 0 && libc::close(fd) == 0
                } else {
                    libc::stat(path, &mut st) == 0
                }
            };
            if !ok {
                anyhow::bail!("{:?}: {}", self.path, std::io::Error::last_os_error());
            }
        }
        Ok(start.elapsed())
    }
}
