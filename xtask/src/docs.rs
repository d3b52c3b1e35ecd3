//! `cargo xtask docs`: the manual (docs/, an mdBook) built into target/book, after writing the
//! results schema it publishes from the binary's own (`hookprof __schema`). mdBook is installed
//! on demand, pinned, without its server and search (a few minutes on 2 cores, once); `cargo
//! xtask test` does not need it: the docs test reads the markdown itself.
use std::process::Command;

use anyhow::{bail, Context, Result};

const MDBOOK_VERSION: &str = "0.5.4";

pub fn build() -> Result<()> {
    crate::cargo(&["build", "--release", "--bin", "hookprof"])?;
    write_schema()?;
    ensure_mdbook()?;
    let book = crate::workspace_root().join("docs");
    println!("xtask: mdbook build {}", book.display());
    let status = Command::new("mdbook")
        .arg("build")
        .arg(&book)
        .status()
        .context("run mdbook")?;
    if !status.success() {
        bail!("mdbook build failed ({status})");
    }
    println!(
        "xtask: the manual is in {}",
        crate::target_dir().join("book/index.html").display()
    );
    Ok(())
}

/// docs/src/results-schema.json, as the binary prints it (the schema test compares the two).
fn write_schema() -> Result<()> {
    let out = Command::new(crate::hookprof_bin())
        .arg("__schema")
        .output()
        .context("run hookprof __schema")?;
    if !out.status.success() {
        bail!(
            "hookprof __schema failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let path = crate::workspace_root().join("docs/src/results-schema.json");
    std::fs::write(&path, &out.stdout).with_context(|| format!("write {}", path.display()))
}

fn ensure_mdbook() -> Result<()> {
    let installed = Command::new("mdbook")
        .arg("--version")
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout).trim() == format!("mdbook v{MDBOOK_VERSION}")
        });
    if installed {
        return Ok(());
    }
    println!("xtask docs: cargo install mdbook {MDBOOK_VERSION} (a few minutes, once)");
    let status = Command::new("cargo")
        .args(["+stable", "install", "mdbook", "--version", MDBOOK_VERSION])
        .args(["--locked", "--no-default-features"])
        .status()
        .context("run cargo install mdbook")?;
    if !status.success() {
        bail!("cargo install mdbook {MDBOOK_VERSION} failed ({status})");
    }
    Ok(())
}
