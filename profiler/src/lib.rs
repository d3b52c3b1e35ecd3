//! hookprof: what a security or task hook costs. lmbench-equivalent workloads run clean and
//! probed; eBPF programs on syscalls, task tracepoints, `security_*` hooks and each LSM's
//! functions attribute every operation's time to the paths it takes.
// First, so that its `eprintln!` (which never panics) replaces std's in every module below.
#[macro_use]
pub mod stdio;
pub mod attribution;
pub mod cli;
pub mod commands;
pub mod compare;
pub mod environment;
pub mod exit;
pub mod export;
pub mod history;
pub mod import;
pub mod lmbench;
pub mod machine;
pub mod output;
pub mod peak_rss;
pub mod policy;
pub mod probes;
pub mod report;
pub mod results;
pub mod run;
pub mod runner;
pub mod safety;
pub mod stats;
pub mod store;
pub mod sweep;
pub mod text;
pub mod top;
pub mod variant;
pub mod workloads;

/// The eBPF object built by build.rs, aligned for aya's ELF parser.
pub fn ebpf_object() -> &'static [u8] {
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf"))
}

/// Where each object's `TASK_STATE` is declared task storage, and what makes it a hash map by
/// thread id instead (kernels without task storage for tracing programs; see build.rs).
mod ebpf_patches {
    include!(concat!(env!("OUT_DIR"), "/ebpf_patches.rs"));
}

/// The same object with one hook slot, the calibration's, for probes that time no other
/// function: a twentieth of its size, and of the memory its load takes.
pub fn ebpf_object_with_calibration_slot_only() -> &'static [u8] {
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/profiler-ebpf-calibration-slot"))
}
