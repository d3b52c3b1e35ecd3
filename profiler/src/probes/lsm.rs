//! Ground-truth BPF LSM programs (`--inject HOOK=NS`, `--stack-noop`): attached for the whole
//! run, clean and probed passes alike, because they stand for a slower or an extra LSM. They
//! always return the verdict they were given (see the eBPF side).
use anyhow::{bail, Context, Result};
use aya::{
    maps::Array,
    programs::{links::FdLink, Lsm},
};
use profiler_common::{LsmSlotConfig, LSM_MAX_ARGS, LSM_SLOTS};

use super::{refusal, KernelBtf, Probes};

/// One attached ground-truth program.
pub struct LsmProgram {
    pub hook: String,
    pub busy_ns: u64,
    program: String,
    /// Owned: dropping it detaches the program.
    link: Option<FdLink>,
}

/// The LSM hook a `security_*` function calls, as the BPF LSM names it: mostly the same name
/// (security_file_open -> file_open), sometimes with `_security` (security_file_alloc ->
/// file_alloc_security) or renamed (security_prepare_creds -> cred_prepare). None if the
/// function calls no LSM hook on this kernel.
pub fn lsm_hook_of(kernel: &KernelBtf, function: &str) -> Option<String> {
    super::catalog::hook_names(function)
        .into_iter()
        .find(|hook| kernel.has_function(&format!("bpf_lsm_{hook}")))
}

impl Probes {
    /// Loads and attaches a BPF LSM program on `hook` (e.g. `file_open`) that busy-waits
    /// `busy_ns` per call (0: a no-op).
    pub fn attach_lsm(&mut self, kernel: &KernelBtf, hook: &str, busy_ns: u64) -> Result<()> {
        let hook = hook.strip_prefix("security_").unwrap_or(hook);
        let Some(args) = kernel.function_arg_count(&format!("bpf_lsm_{hook}")) else {
            bail!("'{hook}' is not an LSM hook on this kernel (no bpf_lsm_{hook} in its BTF)");
        };
        if args > LSM_MAX_ARGS as usize {
            bail!("LSM hook {hook} takes {args} arguments; hookprof's programs handle up to {LSM_MAX_ARGS}");
        }
        let slot = self
            .lsm_programs
            .iter()
            .filter(|p| p.program.starts_with(&format!("lsm_a{args}_")))
            .count();
        if slot >= LSM_SLOTS as usize {
            bail!("more than {LSM_SLOTS} BPF LSM programs for hooks of {args} arguments");
        }
        let index = args as u32 * LSM_SLOTS + slot as u32;
        let mut config: Array<_, LsmSlotConfig> = Array::try_from(
            self.ebpf
                .map_mut("LSM_CONFIG")
                .context("no LSM_CONFIG map")?,
        )?;
        config.set(index, LsmSlotConfig { busy_ns }, 0)?;
        let program = format!("lsm_a{args}_{slot}");
        let aya = self.kernel_btf()?;
        let p: &mut Lsm = self
            .ebpf
            .program_mut(&program)
            .context("no such LSM program")?
            .try_into()?;
        let attached = p
            .load(hook, aya.btf())
            .and_then(|()| p.attach())
            .and_then(|id| p.take_link(id));
        let link = match attached {
            Ok(link) => link,
            Err(e) => {
                let r = refusal::refusal(crate::results::ProbeKind::Lsm, hook, &e);
                bail!(
                    "the kernel refused a BPF LSM program on {hook}: {}",
                    r.reason
                );
            }
        };
        self.lsm_programs.push(LsmProgram {
            hook: hook.into(),
            busy_ns,
            program,
            link: Some(link.into()),
        });
        Ok(())
    }

    pub fn lsm_programs(&self) -> &[LsmProgram] {
        &self.lsm_programs
    }

    /// The kernel's run count and mean run time (ns) of a ground-truth program, when BPF
    /// run-time statistics are on.
    pub fn lsm_run_stats(&self, program: &LsmProgram) -> Option<(u64, f64)> {
        let info = self.ebpf.program(&program.program)?.info().ok()?;
        let runs = info.run_count();
        (runs > 0).then(|| (runs, info.run_time().as_nanos() as f64 / runs as f64))
    }

    /// Detaches every ground-truth program (also done when the object is dropped).
    pub fn detach_lsm(&mut self) {
        for p in &mut self.lsm_programs {
            p.link = None;
        }
    }
}
