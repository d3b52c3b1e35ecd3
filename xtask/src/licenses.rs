//! The licence check of `cargo xtask test`: every crate the workspace builds carries a licence
//! expression someone has read and found compatible with distributing hookprof's binary (user
//! space MIT OR Apache-2.0, the eBPF object MIT OR GPL-2.0-only). A new expression fails the
//! check until it is reviewed and added here, so a dependency cannot change the terms unseen.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::process::Command;

/// Reviewed expressions, exactly as crates declare them. Each can be satisfied by
/// distributing the binary with the crate's notice (permissive), or, for the weak copyleft
/// ones, with the crate's own source available unchanged (CDDL-1.0: inferno, file-level;
/// LGPL-2.1-or-later: btf-rs, whose source ships on crates.io and hookprof's with the project).
const REVIEWED: &[&str] = &[
    "MIT OR Apache-2.0",
    "Apache-2.0 OR MIT",
    "MIT/Apache-2.0",
    "Apache-2.0/MIT",
    "MIT / Apache-2.0",
    "Apache-2.0 / MIT",
    "MIT",
    "Apache-2.0",
    "Unicode-3.0",
    "(MIT OR Apache-2.0) AND Unicode-3.0",
    "Apache-2.0 WITH LLVM-exception OR Apache-2.0 OR MIT",
    "Zlib OR Apache-2.0 OR MIT",
    "MIT OR Zlib OR Apache-2.0",
    "Zlib",
    "Unlicense OR MIT",
    "BSD-3-Clause OR MIT OR Apache-2.0",
    "BSD-2-Clause OR Apache-2.0 OR MIT",
    "MIT OR Apache-2.0 OR LGPL-2.1-or-later",
    "0BSD OR MIT OR Apache-2.0",
    "Apache-2.0 OR BSL-1.0",
    "Apache-2.0 OR BSL-1.0 OR MIT",
    "Apache-2.0 OR BSD-3-Clause",
    // self_cell: taken under Apache-2.0
    "Apache-2.0 OR GPL-2.0-only",
    "BSD-2-Clause",
    "BSD-3-Clause",
    "ISC",
    "CDDL-1.0",
    "LGPL-2.1-or-later",
    // hookprof's own eBPF object and the types it shares with user space
    "MIT OR GPL-2.0-only",
];

pub fn check() -> Result<()> {
    let output = Command::new("cargo")
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(crate::workspace_root())
        .output()
        .context("run cargo metadata")?;
    if !output.status.success() {
        bail!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).context("parse cargo metadata")?;
    let packages = metadata["packages"]
        .as_array()
        .context("cargo metadata without packages")?;
    let unreviewed = unreviewed(packages.iter().map(|p| {
        (
            p["name"].as_str().unwrap_or("?").to_string(),
            p["license"].as_str().map(str::to_string),
        )
    }));
    if !unreviewed.is_empty() {
        let list: Vec<String> = unreviewed
            .iter()
            .map(|(licence, names)| format!("{licence}: {}", names.join(", ")))
            .collect();
        bail!(
            "licences nobody has reviewed (xtask/src/licenses.rs): {}",
            list.join("; ")
        );
    }
    println!(
        "xtask: licences of {} crates are all reviewed",
        packages.len()
    );
    Ok(())
}

/// Crates by licence expression, for every expression outside the reviewed list (a crate
/// without one counts as unreviewed: its terms are unknown).
fn unreviewed(
    packages: impl Iterator<Item = (String, Option<String>)>,
) -> BTreeMap<String, Vec<String>> {
    let mut found: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, licence) in packages {
        let licence = licence.unwrap_or_else(|| "(none declared)".to_string());
        if !REVIEWED.contains(&licence.as_str()) {
            found.entry(licence).or_default().push(name);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_copyleft_or_missing_licence_is_reported_and_a_reviewed_one_is_not() {
        let found = unreviewed(
            [
                ("serde".to_string(), Some("MIT OR Apache-2.0".to_string())),
                ("gpl3-crate".to_string(), Some("GPL-3.0-only".to_string())),
                ("anonymous".to_string(), None),
            ]
            .into_iter(),
        );
        assert_eq!(found.len(), 2);
        assert_eq!(found["GPL-3.0-only"], ["gpl3-crate"]);
        assert_eq!(found["(none declared)"], ["anonymous"]);
    }
}
