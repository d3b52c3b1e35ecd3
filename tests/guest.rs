//! Kernel-level tests that need fentry/fexit and the BPF LSM: run in the qemu guest by
//! `cargo xtask vm-test` (this target has `test = false`, so host test runs leave it out).
use aya::programs::{FEntry, FExit};
use aya::{Btf, Ebpf};
use hookprof_tests::{require_guest, require_root};

/// The BPF LSM is active, so `lsm/*` programs can attach.
#[test]
fn bpf_lsm_is_active() {
    require_guest();
    let lsms = std::fs::read_to_string("/sys/kernel/security/lsm")
        .expect("read /sys/kernel/security/lsm (is securityfs mounted?)");
    assert!(
        lsms.trim().split(',').any(|l| l == "bpf"),
        "bpf is not among the active LSMs: {lsms}"
    );
}

/// A timing slot's fentry/fexit pair loads and attaches on a security hook.
#[test]
fn hook_slot_attaches_to_security_file_open() {
    require_guest();
    require_root();
    let btf = Btf::from_sys_fs().expect("kernel BTF (/sys/kernel/btf/vmlinux)");
    let mut ebpf = Ebpf::load(hookprof::ebpf_object()).expect("load hookprof's eBPF object");

    let enter: &mut FEntry = ebpf
        .program_mut("hook_enter_0")
        .expect("program hook_enter_0")
        .try_into()
        .expect("hook_enter_0 is an fentry program");
    enter
        .load("security_file_open", &btf)
        .expect("load fentry hook_enter_0 on security_file_open");
    enter.attach().expect("attach fentry hook_enter_0");

    let exit: &mut FExit = ebpf
        .program_mut("hook_exit_0")
        .expect("program hook_exit_0")
        .try_into()
        .expect("hook_exit_0 is an fexit program");
    exit.load("security_file_open", &btf)
        .expect("load fexit hook_exit_0 on security_file_open");
    exit.attach().expect("attach fexit hook_exit_0");

    // the hook fires while attached: opening a file must not break
    std::fs::read_to_string("/proc/self/status").expect("open a file with the probes attached");
}

/// Safety guarantees that need the guest's kernel (BPF LSM programs on the decision path).
#[path = "guest_safety.rs"]
mod safety;
