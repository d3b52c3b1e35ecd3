//! A short `cargo fuzz` run of each parser that reads outside input (results files, lmbench
//! summaries, /usr/bin/time logs) and of the statistics `compare` and `history` compute from
//! it. The fuzz crate is its own workspace under `fuzz/`; it needs the nightly toolchain and
//! cargo-fuzz, which is installed if missing.
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::workspace_root;

const TARGETS: &[&str] = &["results", "import_lmbench", "import_time", "statistics"];
/// Seconds of fuzzing per target: enough to catch shallow crashes, short enough for every test
/// run.
const SECONDS_PER_TARGET: u32 = 25;

pub fn run_all() -> Result<()> {
    ensure_cargo_fuzz()?;
    let dir = workspace_root().join("fuzz");
    for target in TARGETS {
        let corpus = format!("corpus/{target}");
        std::fs::create_dir_all(dir.join(&corpus))?;
        println!("xtask: cargo fuzz run {target} ({SECONDS_PER_TARGET} s)");
        // No sanitizer: the parsers and statistics are safe Rust, where ASan finds nothing a
        // panic would not show. With it, building every dependency took 10.6 min of the CI
        // (7.4 without) and each target ran a fifth to a third of the inputs in its 25 s.
        let status = Command::new("cargo")
            .args([
                "+nightly",
                "fuzz",
                "run",
                "--sanitizer",
                "none",
                target,
                &corpus,
            ])
            .arg(format!("seeds/{target}"))
            .args(["--", &format!("-max_total_time={SECONDS_PER_TARGET}")])
            .current_dir(&dir)
            .status()
            .context("run cargo fuzz")?;
        if !status.success() {
            bail!("fuzzing {target} found a crash ({status}); the input is in fuzz/artifacts/{target}");
        }
    }
    Ok(())
}

fn ensure_cargo_fuzz() -> Result<()> {
    let installed = Command::new("cargo")
        .args(["fuzz", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if installed {
        return Ok(());
    }
    println!("xtask: cargo install cargo-fuzz");
    let status = Command::new("cargo")
        .args(["install", "cargo-fuzz", "--locked"])
        .status()
        .context("run cargo install")?;
    if !status.success() {
        bail!("cargo install cargo-fuzz failed ({status})");
    }
    Ok(())
}
