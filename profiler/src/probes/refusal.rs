//! Why the kernel refused a probe, in words a kernel developer recognises.
use aya::programs::ProgramError;

use crate::results::Refusal;

/// The errno behind an aya error, if the kernel gave one.
pub fn errno_of(err: &ProgramError) -> Option<i32> {
    if let ProgramError::LoadError { io_error, .. } = err {
        return io_error.raw_os_error();
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return io.raw_os_error();
        }
        source = e.source();
    }
    None
}

/// A plain reason for a refusal of `kind`.
pub fn reason(kind: &str, errno: Option<i32>) -> String {
    match (kind, errno) {
        ("fentry" | "fexit" | "lsm", Some(libc::EPERM)) => {
            "EPERM: the kernel refuses BPF trampolines here (dynamic ftrace locked or disabled; \
             lockdown or a hardened config)"
                .into()
        }
        ("lsm", Some(libc::EINVAL)) => {
            "EINVAL: BPF LSM is not active (add bpf to the lsm= boot parameter)".into()
        }
        (_, Some(libc::ENOENT)) => "ENOENT: the attach point does not exist on this kernel".into(),
        (_, Some(libc::ENOTSUPP_LINUX)) | (_, Some(libc::EOPNOTSUPP)) => {
            "not supported by this kernel".into()
        }
        (_, Some(libc::E2BIG)) => "E2BIG: the kernel's verifier limits were exceeded".into(),
        (_, Some(libc::EACCES)) => "EACCES: the verifier rejected the program".into(),
        (_, Some(n)) => std::io::Error::from_raw_os_error(n).to_string(),
        (_, None) => "refused".into(),
    }
}

pub fn refusal(kind: &str, target: &str, err: &ProgramError) -> Refusal {
    let errno = errno_of(err);
    Refusal {
        kind: kind.into(),
        target: target.into(),
        errno,
        reason: reason(kind, errno),
    }
}

/// The kernel's ENOTSUPP (524), which libc does not name.
mod libc {
    pub use ::libc::*;
    pub const ENOTSUPP_LINUX: i32 = 524;
}
