//! The probes' own cost on this kernel, measured on getppid (a syscall with a trivial body):
//! the same loop with nothing attached, with the syscall probes, with an empty fentry/fexit
//! pair added on the syscall's function, and with a timed pair instead. Rounds alternate and
//! medians are kept, so drift hits every mode alike. The kernel's own BPF run-time statistics
//! are read beside them as a cross-check.
use std::time::Instant;

use anyhow::{Context, Result};
use aya::programs::{FEntry, FExit};

use super::{catalog::Target, gate, KernelBtf, Kind, ProbePlan, Probes};
pub use crate::results::Calibration;

/// The function behind getppid(2) on x86_64 kernels with and without syscall wrappers.
const CALIBRATION_FUNCTIONS: &[&str] = &["__x64_sys_getppid", "__do_sys_getppid", "sys_getppid"];
const CALLS: u32 = 100_000;
const ROUNDS: usize = 7;

pub fn calibrate(kernel: &KernelBtf) -> Result<Calibration> {
    let function = CALIBRATION_FUNCTIONS
        .iter()
        .find(|f| kernel.has_function(f))
        .context("no getppid function in this kernel's BTF to calibrate on")?;
    let _stats = aya::sys::enable_stats(aya::sys::Stats::RunTime).ok();
    let plan = ProbePlan {
        syscalls: true,
        tasks: false,
        functions: vec![Target::top(function)],
    };
    let mut probes = Probes::load(&plan, kernel)?;
    let pair_loaded =
        probes.hooks.first().is_some_and(Option::is_some) && probes.load_empty_pair(function);
    let mut cal = Calibration {
        function: function.to_string(),
        ..Default::default()
    };
    if !pair_loaded {
        cal.refused = probes
            .refused
            .first()
            .map(|r| format!("{} {}: {}", r.kind, r.target, r.reason));
    }

    let modes: &[&[&str]] = if pair_loaded {
        &[
            &[],
            SYSCALL_PROGRAMS,
            &["sys_enter", "sys_exit", "empty_enter", "empty_exit"],
            &["sys_enter", "sys_exit", "hook_enter_0", "hook_exit_0"],
        ]
    } else {
        &[&[], SYSCALL_PROGRAMS]
    };
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    let before = probes.snapshot()?;
    for _ in 0..ROUNDS {
        for (mode, programs) in modes.iter().enumerate() {
            probes.attach_only(programs)?;
            gate(true);
            let t = getppid_loop();
            gate(false);
            probes.detach()?;
            times[mode].push(t);
        }
    }
    let median: Vec<f64> = times.iter_mut().map(|t| median(t)).collect();
    cal.bare_ns = median[0];
    cal.syscall_probes_ns = median[1] - median[0];
    if pair_loaded {
        let empty = median[2] - median[1];
        let timed = median[3] - median[1];
        cal.empty_pair_ns = Some(empty);
        cal.timed_pair_ns = Some(timed);
        cal.timed_over_empty = (empty > 0.0).then(|| timed / empty);
        let hook = &probes.snapshot()?.since(&before).hooks[0];
        cal.self_ns = (hook.timed > 0).then(|| hook.total_ns as f64 / hook.timed as f64);
    }
    for (name, program) in probes.ebpf.programs() {
        if let Ok(info) = program.info() {
            if info.run_count() > 0 {
                cal.kernel_run_ns.push((
                    name.to_string(),
                    info.run_time().as_nanos() as f64 / info.run_count() as f64,
                ));
            }
        }
    }
    cal.kernel_run_ns.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(cal)
}

const SYSCALL_PROGRAMS: &[&str] = &["sys_enter", "sys_exit"];

impl Probes {
    /// Loads the empty fentry/fexit pair on `function`; false if the kernel refused it.
    fn load_empty_pair(&mut self, function: &str) -> bool {
        let Ok(btf) = aya::Btf::from_sys_fs() else {
            return false;
        };
        let entry = (|| {
            let p: &mut FEntry = self.program("empty_enter")?.try_into()?;
            p.load(function, &btf)
        })();
        if !self.record("empty_enter", Kind::FEntry, function, entry) {
            return false;
        }
        let exit = (|| {
            let p: &mut FExit = self.program("empty_exit")?.try_into()?;
            p.load(function, &btf)
        })();
        self.record("empty_exit", Kind::FExit, function, exit)
    }
}

/// ns per getppid call over CALLS calls.
fn getppid_loop() -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        // SAFETY: getppid has no preconditions.
        std::hint::black_box(unsafe { libc::getppid() });
    }
    start.elapsed().as_nanos() as f64 / f64::from(CALLS)
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}
