//! `cargo xtask vm-test`: the `guest` integration tests of hookprof-tests, built on the host and
//! run in one guest boot (they need a kernel that allows fentry/fexit and BPF LSM programs).
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use hookprof_guest::Payload;

use super::BootArgs;

#[derive(clap::Args, Default)]
pub struct VmTestArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Arguments for the test binary, e.g. a test name filter.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub test_args: Vec<String>,
}

pub fn vm_test(args: &VmTestArgs) -> Result<i32> {
    let start = Instant::now();
    crate::cargo(&["build", "--release", "--bin", "hookprof"])?;
    let tests = guest_test_binary()?;
    let mut boot = args.boot.clone();
    boot.timeout = boot.timeout.or(Some(SUITE_TIMEOUT_S));

    let mut code = boot_with_tests(&boot, &tests, &args.test_args)?;
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

/// The whole suite's boot is killed after this long. It takes about 500 s on a quiet host and
/// TCG slows down with the host's load, so the bound is for a stuck guest, not a slow one.
const SUITE_TIMEOUT_S: u64 = 2400;

/// The default LSM list less bpf.
const LSM_WITHOUT_BPF: &str = "lockdown,capability,landlock,yama,apparmor";

/// Boots once and runs the guest test binary with `test_args`; returns its exit code.
fn boot_with_tests(boot: &BootArgs, tests: &std::path::Path, test_args: &[String]) -> Result<i32> {
    let mut payload = Payload::default();
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

/// Builds the `guest` test target and returns its executable, as cargo reports it.
fn guest_test_binary() -> Result<PathBuf> {
    let args = [
        "test",
        "--release",
        "-p",
        "hookprof-tests",
        "--test",
        "guest",
        "--no-run",
        "--message-format=json",
    ];
    println!("xtask: cargo {}", args.join(" "));
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(args)
        .current_dir(crate::workspace_root())
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the guest tests failed ({})", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "guest")
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .context("cargo reported no executable for the guest tests")
}
