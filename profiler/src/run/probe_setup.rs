//! The run's probes stage: privileges and bad input checked first, the probes loaded, the
//! ground-truth LSM programs attached, the functions to time chosen (by the discovery pass for
//! `--hooks default`), the probes' own cost calibrated, then `--inject syscall:` attached.
use std::sync::Arc;

use anyhow::{bail, Result};
use indicatif::ProgressBar;

use super::{
    discovery::{self, Found},
    inject, probe_cost,
    run_probes::RunProbes,
};
use crate::{
    peak_rss,
    probes::injection::{self, Injection},
    probes::{
        calibration::Calibration,
        catalog,
        kallsyms::FunctionNames,
        lsm_hook_of, refusal,
        selection::{self, Selection},
        AyaKernel, Features, KernelBtf, ProbePlan, Probes, Target, TaskLayout,
    },
    results::Refusal,
    runner::{Supervisor, Wait},
    workloads::{WorkloadSetup, WorkloadSpec},
};

/// Which probe kinds `--probes` asks for.
#[derive(Debug, Clone, Copy)]
pub struct Kinds {
    pub tasks: bool,
    pub hooks: bool,
    pub sched: bool,
    /// The stack sampling period in ns, when stacks are sampled.
    pub stacks: Option<u64>,
}

/// What the run's arguments ask of the probes (checked in `check`).
pub(super) struct ProbeRequest {
    /// `--probes` (None: clean only).
    pub kinds: Option<Kinds>,
    /// Probes left out before loading, with why (the stacks, where kallsyms hides addresses).
    pub refused: Vec<Refusal>,
    /// `--hooks`.
    pub hooks: Vec<String>,
    /// `--inject`'s LSM hooks and their ns.
    pub lsm_inject: Vec<(String, u64)>,
    pub stack_noop: bool,
    /// `run -v`: print the probes' messages.
    pub verbose: bool,
}

/// What loading the probes needs from the run.
pub(super) struct ProbeSetup<'a> {
    /// What the run's arguments ask of the probes.
    pub request: &'a ProbeRequest,
    /// `--inject syscall:NAME=NS` among the others, for each variant of the run.
    pub injections: Vec<Vec<Injection>>,
    pub specs: &'a [&'static WorkloadSpec],
    /// How the discovery pass sets each workload up.
    pub setup: &'a WorkloadSetup,
    pub active_lsms: &'a [String],
    pub bar: &'a ProgressBar,
}

struct LoadedProbes {
    probes: Probes,
    /// The kernel's BTF as aya needs it, held over the set-up so its loads share one read.
    aya: Arc<AyaKernel>,
    /// The kernel's task layout (from its BTF), which the syscall injection loads with too.
    layout: TaskLayout,
    calibration: Option<Calibration>,
    /// Which timed functions each workload attaches (None: all of them, for every workload).
    focus: Option<Found>,
}

/// The probes stage: the probes (of the kinds asked for), then the syscall injection.
pub(super) fn set_up(setup: &ProbeSetup, supervisor: &mut Supervisor) -> Result<Wait<RunProbes>> {
    // What the kernel cannot inject fails now, not after the probes' minutes of set-up.
    if setup
        .injections
        .iter()
        .any(|v| !injection::syscalls(v).is_empty())
    {
        require_bpf_privileges()?;
        Features::get()?.check_syscall_injection()?;
    }
    let loaded = match setup.request.kinds {
        Some(kinds) => {
            let Wait::Done(loaded) = load_probes(kinds, setup, supervisor)? else {
                return Ok(Wait::Interrupted);
            };
            if setup.request.verbose {
                match loaded.probes.logging_program_id() {
                    Some(id) => supervisor.follow_kernel_log(id)?,
                    None => supervisor.warn("-v: no probe that logs was loaded"),
                }
            }
            Some(loaded)
        }
        None => None,
    };
    // After calibration and discovery: the injection is part of the measured kernel only.
    let layout = loaded.as_ref().map(|l| l.layout);
    let Wait::Done(syscall_injection) =
        inject::inject_syscalls(&setup.injections, layout, supervisor)?
    else {
        return Ok(Wait::Interrupted);
    };
    Ok(Wait::Done(match loaded {
        Some(mut l) => {
            // The last load is done: the BTF goes, unless the probes reload before attaching.
            drop(l.aya);
            l.probes.release_kernel_btf();
            RunProbes::new(Some(l.probes), l.calibration, l.focus, syscall_injection)
        }
        None => RunProbes::new(None, None, None, syscall_injection),
    }))
}

/// `--inject` and `--stack-noop`: every hook injected is an LSM hook of this kernel, and the
/// BPF LSM they attach to is active.
fn check_lsm_programs(kernel: &KernelBtf, setup: &ProbeSetup) -> Result<()> {
    if let Some((hook, _)) = setup
        .request
        .lsm_inject
        .iter()
        .find(|(hook, _)| !kernel.has_function(&format!("bpf_lsm_{hook}")))
    {
        bail!("--inject {hook}: not an LSM hook on this kernel (no bpf_lsm_{hook} in its BTF); see `hookprof hooks`");
    }
    let active_lsms = setup.active_lsms;
    if (setup.request.stack_noop || !setup.request.lsm_inject.is_empty())
        && !active_lsms.iter().any(|l| l == "bpf")
    {
        bail!(
            "--inject and --stack-noop need the BPF LSM, which is not active (LSMs: {}); add \
             bpf to the kernel's lsm= boot parameter, e.g. lsm={},bpf",
            active_lsms.join(","),
            active_lsms.join(",")
        );
    }
    Ok(())
}

/// Where the kernel refuses trampolines, no function can be timed: the probes need not
/// carry the slots, nor discovery load its batches. Asked only when hooks are probed.
fn trampolines_refused(
    kinds: Kinds,
    kernel: &Arc<KernelBtf>,
    supervisor: &mut Supervisor,
) -> Result<Wait<Option<i32>>> {
    if !kinds.hooks {
        return Ok(Wait::Done(None));
    }
    let shared = Arc::clone(kernel);
    let Wait::Done(refused) =
        supervisor.blocking(move || Probes::kernel_refuses_trampolines(&shared))?
    else {
        return Ok(Wait::Interrupted);
    };
    Ok(Wait::Done(refused?))
}

/// Loads the probes and the ground-truth LSM programs, chooses the functions to time (by the
/// discovery pass for `--hooks default`), and calibrates their cost when fentry/fexit pairs
/// could be loaded.
fn load_probes(
    kinds: Kinds,
    setup: &ProbeSetup,
    supervisor: &mut Supervisor,
) -> Result<Wait<LoadedProbes>> {
    require_bpf_privileges()?;
    peak_rss::one_heap();
    // The slow steps of start-up (the BTF parse, loading the programs) run while the event
    // loop watches for an interrupt. aya's BTF first: its parse is the set-up's peak, and the
    // function list read next is not resident under it.
    let Wait::Done(aya) = supervisor.blocking(AyaKernel::hold)? else {
        return Ok(Wait::Interrupted);
    };
    let aya = aya?;
    let Wait::Done(kernel) = supervisor.blocking(KernelBtf::load_in_child)? else {
        return Ok(Wait::Interrupted);
    };
    let kernel = Arc::new(kernel?);
    let selection = if kinds.hooks {
        selection::from_hooks_option(&kernel, &setup.request.hooks, setup.active_lsms)?
    } else {
        Selection::Listed(Vec::new())
    };
    peak_rss::note_phase("hook catalog");
    // Bad input fails before anything is loaded.
    check_lsm_programs(&kernel, setup)?;
    let Wait::Done(trampolines_refused) = trampolines_refused(kinds, &kernel, supervisor)? else {
        return Ok(Wait::Interrupted);
    };
    // The syscall programs carry the scope gate: whatever else is probed needs them.
    let plan = ProbePlan {
        syscalls: true,
        tasks: kinds.tasks,
        functions_later: kinds.hooks,
        trampolines_refused,
        stacks: kinds.stacks,
        switches: kinds.sched,
        ..ProbePlan::default()
    };
    let shared = Arc::clone(&kernel);
    let Wait::Done(probes) = supervisor.blocking(move || Probes::load(&plan, &shared))? else {
        return Ok(Wait::Interrupted);
    };
    let mut probes = probes?;
    peak_rss::release_free_heap(); // the object's parse
    peak_rss::note_phase("probes loaded");
    if !probes.scoping_works() {
        bail!(
            "the kernel refused the raw_syscalls tracepoints, which hookprof needs to scope \
             every probe to the workload; use --probes none to measure without probes"
        );
    }
    for (hook, ns) in &setup.request.lsm_inject {
        probes.attach_lsm(&kernel, hook, *ns)?;
    }
    let Wait::Done((functions, focus)) =
        chosen_functions(selection, kinds, setup, &kernel, &mut probes, supervisor)?
    else {
        return Ok(Wait::Interrupted);
    };
    peak_rss::note_phase("hooks chosen");
    let shared = Arc::clone(&kernel);
    let Wait::Done((mut probes, loaded)) = supervisor.blocking(move || {
        let loaded = probes.load_functions(&functions, false, &shared);
        (probes, loaded)
    })?
    else {
        return Ok(Wait::Interrupted);
    };
    loaded?;
    for line in refusal::lines(&probes.report().refused) {
        eprintln!("hookprof: {line}");
    }
    let calibration = if probes.hook_functions().iter().any(Option::is_some) {
        let Wait::Done(calibration) =
            probe_cost::measure_probe_cost(&mut probes, &kernel, supervisor)?
        else {
            return Ok(Wait::Interrupted);
        };
        Some(calibration)
    } else {
        None
    };
    peak_rss::note_phase("calibration");
    Ok(Wait::Done(LoadedProbes {
        probes,
        aya,
        layout: kernel.layout(),
        calibration,
        focus,
    }))
}

/// The functions to time: those listed (with `--stack-noop`'s programs on them), or those the
/// discovery pass found each workload to call, with what it found.
fn chosen_functions(
    selection: Selection,
    kinds: Kinds,
    setup: &ProbeSetup,
    kernel: &KernelBtf,
    probes: &mut Probes,
    supervisor: &mut Supervisor,
) -> Result<Wait<(Vec<Target>, Option<Found>)>> {
    Ok(match selection {
        Selection::Listed(functions) => {
            if setup.request.stack_noop {
                stack_noop(probes, kernel, &functions, &setup.request.lsm_inject)?;
            }
            Wait::Done((functions, None))
        }
        Selection::Discover => discover_functions(kinds, setup, kernel, probes, supervisor)?
            .map(|found| (found.union(), Some(found))),
    })
}

/// The discovery pass in two rounds: the hooks and task paths each workload calls, then the
/// active LSMs' functions under those hooks. `--stack-noop`'s programs go on between the
/// rounds, so the second round finds the BPF LSM functions they make the kernel call.
fn discover_functions(
    kinds: Kinds,
    setup: &ProbeSetup,
    kernel: &KernelBtf,
    probes: &mut Probes,
    supervisor: &mut Supervisor,
) -> Result<Wait<Found>> {
    let progress = |name: &str| setup.bar.set_message(format!("discovering hooks: {name}"));
    let asked = discovery::Discovery {
        kernel,
        follow_children: kinds.tasks,
        trampolines_refused: probes.trampolines_refused(),
        specs: setup.specs,
        setup: setup.setup,
    };
    let mut discover =
        |candidates: &[Target]| discovery::discover(&asked, candidates, supervisor, &progress);
    if asked.trampolines_refused.is_some() {
        // Nothing can be timed: every function of the catalog `hookprof hooks` tries is refused
        // alike, and counted as it counts them.
        let Wait::Done(mut found) = discover(&selection::catalog(kernel, setup.active_lsms))?
        else {
            return Ok(Wait::Interrupted);
        };
        probes.add_refusals(std::mem::take(&mut found.refused));
        if setup.request.stack_noop {
            // No hook was found to stack on: this fails with the kernel's own reason.
            stack_noop(probes, kernel, &[], &setup.request.lsm_inject)?;
        }
        return Ok(Wait::Done(found));
    }
    let Wait::Done(mut found) = discover(&selection::hook_candidates(kernel))? else {
        return Ok(Wait::Interrupted);
    };
    let hooks = found.union();
    if setup.request.stack_noop {
        stack_noop(probes, kernel, &hooks, &setup.request.lsm_inject)?;
    }
    let Wait::Done(lsms) = discover(&selection::lsm_candidates(
        kernel,
        &hooks,
        setup.active_lsms,
    ))?
    else {
        return Ok(Wait::Interrupted);
    };
    found.merge(lsms);
    probes.add_refusals(std::mem::take(&mut found.refused));
    let symbols = FunctionNames::read()?;
    let lookups = catalog::lsm_lookups(kernel, &symbols, &hooks, setup.active_lsms);
    if setup.request.verbose {
        for l in &lookups {
            supervisor.warn(&l.describe());
        }
    }
    probes.set_lsm_lookups(lookups);
    Ok(Wait::Done(found))
}

/// `--stack-noop`: a no-op BPF LSM program on the LSM hook behind each of `functions`. A run
/// that stacks nothing fails, with the kernel's reason, as `--inject` does: its results would
/// say `stack_noop` over a kernel that ran no program.
fn stack_noop(
    probes: &mut Probes,
    kernel: &KernelBtf,
    functions: &[Target],
    inject: &[(String, u64)],
) -> Result<()> {
    // Helpers such as security_file_free call no LSM hook of their own: nothing to stack.
    let hooks = functions
        .iter()
        .filter_map(|t| lsm_hook_of(kernel, &t.function));
    let (mut stacked, mut refused) = (0, None);
    for hook in hooks {
        if inject.iter().any(|(h, _)| *h == hook) {
            stacked += 1; // the injected program is this hook's
            continue;
        }
        // Some hooks take no BPF LSM program (void hooks the verifier rejects): the rest
        // still stack, and the refusal is said, not hidden.
        match probes.attach_lsm(kernel, &hook, 0) {
            Ok(()) => stacked += 1,
            Err(e) => {
                eprintln!("hookprof: --stack-noop: no program on {hook}: {e:#}");
                refused.get_or_insert(e);
            }
        }
    }
    if stacked > 0 {
        return Ok(());
    }
    // No hook was chosen (where fentry is refused, none is found): does the kernel take a BPF
    // LSM program at all? file_open is an LSM hook on every kernel with the BPF LSM.
    let refused = match refused {
        Some(e) => e,
        None => match probes.attach_lsm(kernel, "file_open", 0) {
            Err(e) => e,
            Ok(()) => bail!(
                "--stack-noop: none of the chosen hooks runs an LSM hook; choose some with --hooks"
            ),
        },
    };
    Err(refused.context("--stack-noop"))
}

pub(crate) fn require_bpf_privileges() -> Result<()> {
    // CAP_SYS_ADMIN covers loading and attaching everything hookprof uses; root has it.
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_BPF: u32 = 39;
    const CAP_PERFMON: u32 = 38;
    crate::machine::namespaces::check_proc()?;
    crate::machine::namespaces::refuse_user_namespace()?;
    let caps = crate::safety::credentials::Capabilities::of_this_thread()?;
    let has = |cap: u32| caps.has_effective(cap);
    if has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON)) {
        return Ok(());
    }
    bail!(
        "loading eBPF probes needs root (CAP_SYS_ADMIN, or CAP_BPF and CAP_PERFMON; this process \
         has {}); run with sudo, or use --probes none for clean timings only",
        if has(CAP_BPF) {
            "CAP_BPF only"
        } else {
            "neither"
        }
    )
}
