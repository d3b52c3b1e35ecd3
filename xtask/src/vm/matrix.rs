//! `cargo xtask vm-matrix`: the kernel matrix's smoke (`tests/guest_kernels.rs`, the guest
//! tests named `kernels::`) booted on each kernel of `MATRIX`, and a table of what each kernel
//! took: probes attached and refused by kind, hooks, LSM functions and task paths timed, stack
//! samples, the fallbacks it needed, and the time its boot took. `cargo xtask test` boots all
//! but `FULL_SUITE_KERNEL`, where the full guest suite has run instead.
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{Context, Result};
use comfy_table::{presets::ASCII_MARKDOWN, Table};

use crate::lanes::{self, Part};
use crate::phases::Phases;

use super::{
    test::{boot_with_tests, SMOKE_FILTER},
    BootArgs, GUEST_PANICKED,
};

/// What the smoke leaves in the share (see `tests/guest_kernels.rs`).
const SUMMARY: &str = "kernel-smoke.json";

/// Each kernel of the matrix: the LTS kernels Debian ships, and its newest.
pub const MATRIX: &[(&str, &str)] = &[
    ("5.10 (bullseye)", "bullseye"),
    ("6.1 (bookworm)", FULL_SUITE_KERNEL),
    ("6.12 (trixie)", "trixie"),
    ("newest (sid)", "sid"),
];
/// The kernel the full guest suite boots (`vm-test`'s default).
pub const FULL_SUITE_KERNEL: &str = "bookworm";

#[derive(clap::Args, Default)]
pub struct VmMatrixArgs {
    /// Boot only these kernels of the matrix (by `--kernel` name, e.g. bullseye,sid).
    #[arg(long, value_delimiter = ',', value_name = "KERNELS")]
    pub only: Vec<String>,
}

/// One kernel's smoke: its summary (None if the smoke failed before writing it, or did not run
/// because the full suite ran on its kernel).
pub struct Smoke {
    label: String,
    exit_code: i32,
    /// None where the full suite stood in for the smoke.
    boot_seconds: Option<f64>,
    summary: Option<serde_json::Value>,
    /// The guest kernel panicked in a first boot, and this is the second's.
    after_a_panic: bool,
}

impl Smoke {
    /// The row of the kernel whose full guest suite passed: no boot of its own.
    pub fn in_full_suite(label: &str) -> Smoke {
        Smoke {
            label: label.to_string(),
            exit_code: 0,
            boot_seconds: None,
            summary: None,
            after_a_panic: false,
        }
    }
}

pub fn vm_matrix(args: &VmMatrixArgs) -> Result<i32> {
    let tests = super::test::build_guest_tests()?;
    let kernels: Vec<(&str, &str)> = MATRIX
        .iter()
        .copied()
        .filter(|(_, k)| args.only.is_empty() || args.only.iter().any(|o| o == k))
        .collect();
    let smokes = Smokes::new(&kernels, false);
    let phases = Phases::new();
    let failures = lanes::in_lanes(&phases, smokes.parts(&tests), lanes::cpus());
    phases.print();
    let smokes = smokes.done();
    print_table(&smokes);
    match (first_failure(&smokes), failures.into_iter().next()) {
        (0, Some(error)) => Err(error),
        (code, _) => Ok(code),
    }
}

/// The smokes of some of the matrix's kernels, each row filled in as its boot ends (boots run
/// side by side).
pub struct Smokes {
    kernels: Vec<(&'static str, &'static str)>,
    rows: Mutex<Vec<Option<Smoke>>>,
}

impl Smokes {
    /// With `full_suite_ran`, the full suite's kernel gets its row without a boot.
    pub fn new(kernels: &[(&'static str, &'static str)], full_suite_ran: bool) -> Smokes {
        let rows = kernels
            .iter()
            .map(|&(label, kernel)| {
                (full_suite_ran && kernel == FULL_SUITE_KERNEL).then(|| Smoke::in_full_suite(label))
            })
            .collect();
        Smokes {
            kernels: kernels.to_vec(),
            rows: Mutex::new(rows),
        }
    }

    /// A part for each kernel still to boot: its smoke, failing if the smoke fails.
    pub fn parts<'a>(&'a self, tests: &'a Path) -> Vec<Part<'a>> {
        let rows = self.rows.lock().expect("a lane panicked");
        let mut parts: Vec<Part<'a>> = Vec::new();
        for (i, &(label, kernel)) in self.kernels.iter().enumerate() {
            if rows[i].is_some() {
                continue;
            }
            let boot = move || {
                let smoke = smoke(label, kernel, tests)?;
                let code = smoke.exit_code;
                self.rows.lock().expect("a lane panicked")[i] = Some(smoke);
                anyhow::ensure!(code == 0, "the {label} smoke failed (exit code {code})");
                Ok(())
            };
            parts.push((format!("{label} smoke"), Box::new(boot)));
        }
        parts
    }

    /// The rows of the kernels whose smoke ended (or that the full suite stood in for).
    pub fn done(self) -> Vec<Smoke> {
        let rows = self.rows.into_inner().expect("a lane panicked");
        rows.into_iter().flatten().collect()
    }
}

/// Boots `kernel` with the smoke alone; once more where its kernel panicked. Under TCG a
/// Debian 6.12 guest once double-faulted in vmalloc while linking a trampoline (its stack in
/// alloc_vmap_area, garbage in EFLAGS) beside a cross build, and passed booted again on a
/// quiet machine: the emulator's or the kernel's, not the smoke's. A second panic fails the
/// matrix, and the table says when a smoke passed only on its second boot.
fn smoke(label: &str, kernel: &str, tests: &Path) -> Result<Smoke> {
    let first = boot_smoke(label, kernel, tests)?;
    if first.exit_code != GUEST_PANICKED {
        return Ok(first);
    }
    println!(
        "xtask vm-matrix: the {label} guest's kernel panicked (its stack is above): booting it \
         once more"
    );
    Ok(Smoke {
        after_a_panic: true,
        ..boot_smoke(label, kernel, tests)?
    })
}

fn boot_smoke(label: &str, kernel: &str, tests: &Path) -> Result<Smoke> {
    let (_share, share) = share_dir()?;
    let boot = BootArgs {
        kernel: Some(kernel.to_string()),
        timeout: Some(SMOKE_TIMEOUT_S),
        share: Some(share.clone()),
        ..BootArgs::default()
    };
    let started = Instant::now();
    let exit_code = boot_with_tests(&boot, tests, &[SMOKE_FILTER.to_string()])?;
    Ok(Smoke {
        label: label.to_string(),
        exit_code,
        boot_seconds: Some(started.elapsed().as_secs_f64()),
        summary: read_summary(&share),
        after_a_panic: false,
    })
}

/// A stuck guest's bound: a smoke takes 1-3 min under TCG.
const SMOKE_TIMEOUT_S: u64 = 900;

/// The smoke's summary in a share, if it wrote one.
fn read_summary(share: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(share.join(SUMMARY)).ok()?;
    serde_json::from_str(&text).ok()
}

/// A fresh share for a boot whose smoke summary is read afterwards.
fn share_dir() -> Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::Builder::new()
        .prefix("hookprof-smoke-")
        .tempdir()
        .context("make a share directory")?;
    let path = dir.path().to_path_buf();
    Ok((dir, path))
}

fn first_failure(smokes: &[Smoke]) -> i32 {
    smokes
        .iter()
        .map(|s| s.exit_code)
        .find(|&c| c != 0)
        .unwrap_or(0)
}

/// The matrix as a markdown table (it goes into issues and the manual as it is).
pub fn print_table(smokes: &[Smoke]) {
    let mut table = Table::new();
    table.load_preset(ASCII_MARKDOWN).set_header([
        "kernel",
        "release",
        "attached",
        "refused",
        "hooks / LSM fns / task paths timed",
        "stack samples",
        "fallbacks",
        "smoke",
        "boot",
    ]);
    for s in smokes {
        let field = |key: &str| s.summary.as_ref().map(|v| v[key].clone());
        let kinds = |key: &str| {
            field(key)
                .and_then(|v| v.as_object().cloned())
                .map(|m| {
                    let parts: Vec<String> = m.iter().map(|(k, n)| format!("{k} {n}")).collect();
                    if parts.is_empty() {
                        "none".into()
                    } else {
                        parts.join(", ")
                    }
                })
                .unwrap_or_else(|| "-".into())
        };
        let number = |key: &str| field(key).map_or_else(|| "-".into(), |v| v.to_string());
        let fallbacks = field("fallbacks")
            .and_then(|v| v.as_array().cloned())
            .map(|a| {
                let names: Vec<String> = a
                    .iter()
                    .filter_map(|n| n.as_str())
                    .map(|n| n.split(':').next().unwrap_or(n).to_string())
                    .collect();
                if names.is_empty() {
                    "none".into()
                } else {
                    names.join("; ")
                }
            })
            .unwrap_or_else(|| "-".into());
        table.add_row([
            s.label.clone(),
            field("kernel")
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "-".into()),
            kinds("attached"),
            kinds("refused"),
            format!(
                "{} / {} / {}",
                number("hooks_timed"),
                number("lsm_functions_timed"),
                number("task_paths_timed")
            ),
            number("stack_samples"),
            fallbacks,
            match (s.exit_code, s.boot_seconds, s.after_a_panic) {
                (0, None, _) => "full guest suite passed".to_string(),
                (0, Some(_), false) => "passed".to_string(),
                (0, Some(_), true) => "passed on a second boot (the first panicked)".to_string(),
                (code, _, _) => format!("FAILED (exit {code})"),
            },
            s.boot_seconds
                .map_or_else(|| "-".into(), |t| format!("{t:.0} s")),
        ]);
    }
    println!("xtask: the kernel matrix\n{table}");
}
