//! `cargo xtask test`'s guests after the full suite: the other architecture's smoke, the kernel
//! matrix's smokes and `hookprof ab` are independent boots, so they run side by side, one TCG
//! guest per CPU (each lane takes the next boot when its last is done), longest first. Run one
//! after another they took 9-10 min here; in two lanes about the longest lane.
use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Result};
use hookprof_guest::Arch;

use crate::phases::Phases;
use crate::vm::{self, matrix};

/// The other architecture's smoke: its build, started beside the guest suite.
pub struct OtherSmoke {
    pub arch: Arch,
    pub build: vm::Prebuild,
    pub started: Instant,
}

type Part<'a> = Box<dyn FnOnce() -> Result<()> + Send + 'a>;

/// Runs the boots that follow the suite; prints the kernel matrix's table, then fails with the
/// first part that failed.
pub fn after_the_suite(phases: &Phases, other: Option<OtherSmoke>) -> Result<()> {
    let tests = vm::build_guest_tests()?;
    let smokes: Mutex<Vec<Option<matrix::Smoke>>> =
        Mutex::new(matrix::MATRIX.iter().map(|_| None).collect());
    // Longest first: ab (~280 s here), the other architecture's smoke, then the matrix.
    let mut parts: Vec<(String, Part)> = vec![("ab".into(), Box::new(test_ab))];
    if let Some(other) = other {
        parts.push(other_smoke(phases, other));
    }
    for (i, &(label, kernel)) in matrix::MATRIX.iter().enumerate() {
        if kernel == matrix::FULL_SUITE_KERNEL {
            smokes.lock().expect("a lane panicked")[i] = Some(matrix::Smoke::in_full_suite(label));
            continue;
        }
        let (tests, smokes) = (&tests, &smokes);
        parts.push((
            format!("{label} smoke"),
            Box::new(move || {
                let smoke = matrix::smoke(label, kernel, tests)?;
                let code = smoke.exit_code();
                smokes.lock().expect("a lane panicked")[i] = Some(smoke);
                match code {
                    0 => Ok(()),
                    code => bail!("the {label} smoke failed (exit code {code})"),
                }
            }),
        ));
    }
    let lanes = std::thread::available_parallelism().map_or(1, usize::from);
    let failures = in_lanes(phases, parts, lanes);
    let smokes: Vec<matrix::Smoke> = smokes
        .into_inner()
        .expect("a lane panicked")
        .into_iter()
        .flatten()
        .collect();
    matrix::print_table(&smokes);
    match failures.into_iter().next() {
        Some(first) => Err(first),
        None => Ok(()),
    }
}

/// The other architecture's smoke as a part: waits for its build, then boots.
fn other_smoke<'a>(phases: &'a Phases, other: OtherSmoke) -> (String, Part<'a>) {
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

/// Runs `parts` in `lanes` threads, each timed; returns the errors of those that failed.
fn in_lanes(phases: &Phases, parts: Vec<(String, Part)>, lanes: usize) -> Vec<anyhow::Error> {
    let queue = Mutex::new(VecDeque::from(parts));
    let failures = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..lanes.max(1) {
            scope.spawn(|| loop {
                let Some((name, part)) = queue.lock().expect("a lane panicked").pop_front() else {
                    return;
                };
                if let Err(e) = phases.time(&name, part) {
                    failures.lock().expect("a lane panicked").push(e);
                }
            });
        }
    });
    failures.into_inner().expect("a lane panicked")
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
