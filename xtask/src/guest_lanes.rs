//! `cargo xtask test`'s guests after the full suite: the other architecture's smoke, the kernel
//! matrix's smokes and `hookprof ab` are independent boots, so they run side by side, one TCG
//! guest per CPU (each lane takes the next boot when its last is done), longest first. Run one
//! after another they took 9-10 min here; in two lanes about the longest lane.
use std::time::Instant;

use anyhow::{bail, Result};
use hookprof_guest::Arch;

use crate::lanes::{self, Part};
use crate::phases::Phases;
use crate::vm::{self, matrix};

/// The other architecture's smoke: its build, started beside the guest suite.
pub struct OtherSmoke {
    pub arch: Arch,
    pub build: vm::Prebuild,
    pub started: Instant,
}

/// Runs the boots that follow the suite; prints the kernel matrix's table, then fails with the
/// first part that failed.
pub fn after_the_suite(phases: &Phases, other: Option<OtherSmoke>) -> Result<()> {
    let tests = vm::build_guest_tests()?;
    let smokes = matrix::Smokes::new(matrix::MATRIX, true);
    // Longest first: ab (~280 s here), the other architecture's smoke, then the matrix.
    let mut parts: Vec<Part> = vec![("ab".into(), Box::new(test_ab))];
    if let Some(other) = other {
        parts.push(other_smoke(phases, other));
    }
    parts.extend(smokes.parts(&tests));
    let failures = lanes::in_lanes(phases, parts, lanes::cpus());
    matrix::print_table(&smokes.done());
    match failures.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// The other architecture's smoke as a part: waits for its build, then boots.
fn other_smoke(phases: &Phases, other: OtherSmoke) -> Part<'_> {
    let OtherSmoke {
        arch,
        build,
        started,
    } = other;
    let part = move || {
        let built = build.wait();
        let name = format!("{arch} smoke's build (beside the guest suite)");
        phases.record(&name, started, built.is_ok());
        built?;
        match vm::vm_test(&vm::VmTestArgs::of_arch(arch))? {
            0 => Ok(()),
            code => bail!("the {arch} guest's smoke failed (exit code {code})"),
        }
    };
    (format!("{arch} smoke"), Box::new(part))
}

/// `hookprof ab` end to end: each of its tests boots guests in turn, so one at a time.
fn test_ab() -> Result<()> {
    crate::cargo(&[
        "test",
        "--release",
        "-p",
        "hookprof-tests",
        "--test",
        "ab",
        "--",
        "--test-threads=1",
    ])
}
