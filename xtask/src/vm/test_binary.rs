//! Building one of hookprof-tests' test targets for a guest: what the guest suite and the
//! other architecture's smoke both boot with.
use std::path::PathBuf;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};

/// Builds the test target `name` of hookprof-tests with `cargo` (plus `extra` arguments) and
/// returns its executable, as cargo reports it.
pub(super) fn test_binary(mut cargo: Command, name: &str, extra: &[&str]) -> Result<PathBuf> {
    let mut args = vec![
        "test",
        "--release",
        "-p",
        "hookprof-tests",
        "--test",
        name,
        "--no-run",
        "--message-format=json",
    ];
    args.extend_from_slice(extra);
    println!("xtask: cargo {}", args.join(" "));
    let out = cargo
        .args(&args)
        .stderr(Stdio::inherit())
        .output()
        .context("run cargo test --no-run")?;
    if !out.status.success() {
        bail!("building the {name} tests failed ({})", out.status);
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name)
        .find_map(|m| m["executable"].as_str().map(PathBuf::from))
        .with_context(|| format!("cargo reported no executable for the {name} tests"))
}
