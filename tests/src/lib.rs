//! Helpers shared by hookprof's integration tests. Tests that cannot run where they are must
//! fail with a message saying why: a silently skipped test reads as a passed one.
use std::path::PathBuf;

/// The hookprof binary under test: `$HOOKPROF_BIN` (set by `cargo xtask test` and in the
/// guest), else the workspace's release build.
pub fn hookprof_bin() -> PathBuf {
    match std::env::var_os("HOOKPROF_BIN") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/release/hookprof"),
    }
}

/// Panics unless running as root: loading eBPF programs needs it.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        euid == 0,
        "this test loads eBPF programs and needs root (euid is {euid}): run it with sudo"
    );
}

/// Panics unless running in the qemu guest of `cargo xtask vm-test`, which sets
/// `HOOKPROF_IN_GUEST=1`: guest tests need a kernel that allows fentry/fexit and BPF LSM.
pub fn require_guest() {
    assert!(
        std::env::var("HOOKPROF_IN_GUEST").as_deref() == Ok("1"),
        "this test needs the test guest's kernel: run it with `cargo xtask vm-test`"
    );
}
