//! `cargo xtask vm-test`: the `guest` integration tests of hookprof-tests, built on the host and
//! run in one guest boot (they need a kernel that allows fentry/fexit and BPF LSM programs);
//! with `--smoke`, or for a guest of the other architecture, the short `guest_smoke` tests
//! instead (`smoke`).
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};

use hookprof_guest::Payload;

use super::BootArgs;

/// The guest tests of the kernel matrix's smoke (`tests/guest_kernels.rs`).
pub const SMOKE_FILTER: &str = "kernels::";

#[derive(clap::Args, Default)]
pub struct VmTestArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Only the short smoke tests (a run of three workloads, `stat`), against the package of
    /// the guest's architecture installed in the guest: all that runs for a guest of the other
    /// architecture (the full suite also needs that architecture's bpftool and apparmor_parser).
    #[arg(long)]
    pub smoke: bool,
    /// With the smoke: build what it needs, boot nothing (`cargo xtask test` builds the other
    /// architecture's beside the guest suite).
    #[arg(long, hide = true)]
    pub build_only: bool,
    /// Arguments for the test binary, e.g. a test name filter.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub test_args: Vec<String>,
}

impl VmTestArgs {
    /// The defaults, for a guest of `arch`.
    pub fn of_arch(arch: hookprof_guest::Arch) -> VmTestArgs {
        let mut args = VmTestArgs::default();
        args.boot.arch = Some(arch);
        args
    }
}

pub fn vm_test(args: &VmTestArgs) -> Result<i32> {
    let arch = args.boot.arch()?;
    if args.smoke || Some(arch) != hookprof_guest::Arch::host() {
        return super::smoke::run(&args.boot, arch, &args.test_args, args.build_only);
    }
    let start = Instant::now();
    let tests = build_guest_tests()?;
    let mut boot = args.boot.clone();
    boot.timeout = boot.timeout.or(Some(SUITE_TIMEOUT_S));

    // The whole suite checks all the kernel matrix's smoke does, and more: the smoke is for the
    // matrix's own boots (`cargo xtask vm-matrix`, or `vm-test -- kernels::` by hand).
    let suite_args = if args.test_args.is_empty() {
        vec!["--skip".to_string(), SMOKE_FILTER.to_string()]
    } else {
        args.test_args.clone()
    };
    let mut code = boot_with_tests(&boot, &tests, &suite_args)?;
    if code == 0 && args.test_args.is_empty() {
        // The tests marked `#[ignore]` need a kernel whose active LSMs leave bpf out: a second,
        // short boot runs just those.
        let mut without_bpf = boot.clone();
        without_bpf.guest.lsm = Some(LSM_WITHOUT_BPF.to_string());
        code = boot_with_tests(&without_bpf, &tests, &["--ignored".to_string()])?;
    }
    println!(
        "xtask vm-test: exit code {code}, {:.0} s in all",
        start.elapsed().as_secs_f64()
    );
    Ok(code)
}

/// Builds hookprof and the guest tests; returns the test binary.
pub fn build_guest_tests() -> Result<PathBuf> {
    crate::cargo(&["build", "--release", "--bin", "hookprof"])?;
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo.current_dir(crate::workspace_root());
    super::test_binary::test_binary(cargo, "guest", &[])
}

/// The whole suite's boot is killed after this long. It takes about 500 s on a quiet host and
/// TCG slows down with the host's load, so the bound is for a stuck guest, not a slow one.
const SUITE_TIMEOUT_S: u64 = 2400;

/// The default LSM list less bpf.
const LSM_WITHOUT_BPF: &str = "lockdown,capability,landlock,yama,apparmor";

/// Boots once and runs the guest test binary with `test_args`; returns its exit code.
pub(super) fn boot_with_tests(
    boot: &BootArgs,
    tests: &std::path::Path,
    test_args: &[String],
) -> Result<i32> {
    let mut payload = Payload::for_arch(boot.arch()?);
    let hookprof = payload.add_file(&crate::hookprof_bin())?;
    // The safety tests count BPF objects with bpftool, as on the host.
    let bpftool = hookprof_guest::which("bpftool")
        .context("bpftool not found (package bpftool): run cargo xtask setup")?;
    payload.add_file(&bpftool)?;
    // The policy tests load an AppArmor profile in the guest.
    let apparmor_parser = hookprof_guest::which("apparmor_parser")
        .context("apparmor_parser not found (package apparmor): run cargo xtask setup")?;
    payload.add_file(&apparmor_parser)?;
    let mut command = vec![payload.add_file(tests)?, "--test-threads=1".to_string()];
    command.extend(test_args.iter().cloned());
    let env = [
        ("HOOKPROF_BIN".to_string(), hookprof),
        // the guest tests refuse to run anywhere else
        ("HOOKPROF_IN_GUEST".to_string(), "1".to_string()),
    ];
    super::boot(boot, payload, &command, &env)
}
