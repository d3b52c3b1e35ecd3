//! Sampled attribution: the cpu-clock samples of a workload's tasks, gathered over its probed
//! samples, become each path's inclusive and self share of the CPU time with a 95% interval
//! from the counts (Wilson), and ns per op as share x CPU ns per op. A sample inside
//! hookprof's own measuring programs is the probes' cost and counts for no path; the
//! injection's programs (`--inject`) are the workload's cost and count where they run.
use std::collections::{BTreeMap, HashMap};

use crate::{
    probes::{
        catalog::{lsm_of, task_path_of},
        kallsyms::Symbol,
        RawSample,
    },
    results::{
        GroupKind, PathKind, Place, SampledGroup, SampledPath, SampledPlace, StackProfile,
        FOLDED_LIMIT, LOST_STACK, OTHER_STACKS, USER_FRAME,
    },
    stats::shares::{share_interval, RoundCount},
    stats::wilson_interval,
};

use super::syscall_name;

/// A stack and the syscall its task was in, as counted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct StackKey {
    /// Innermost frame first, as the kernel gives them.
    ips: Vec<u64>,
    syscall_nr: i32,
    user: bool,
}

/// The workload's own samples among those taken: see [`SampledStacks::own_samples`].
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct OwnSamples {
    /// Every sample so far, the probes' and lost stacks' included.
    pub all: u64,
    /// The workload's own over all rounds so far.
    pub own: u64,
    /// The workload's own in the current round.
    pub round_own: u64,
}

/// One workload's samples over all its rounds, each stack's count kept round by round (the
/// round is the unit of a share's interval: see `shares`).
#[derive(Debug, Default)]
pub struct SampledStacks {
    /// Per stack, its count in each round so far (shorter where it was last seen earlier).
    counts: HashMap<StackKey, Vec<u64>>,
    rounds: usize,
    /// The tags of hookprof's own loaded programs (16 hex digits): with them, a program frame
    /// is the probes' only where its tag is one of these, so another tool's program that
    /// happens to share a probe's name (bpftrace names a tracepoint's program `sys_enter`) is
    /// not taken for the probes. Empty: by name alone.
    own_tags: Vec<String>,
}

impl SampledStacks {
    /// Samples added from now on belong to a new round.
    pub fn start_round(&mut self) {
        self.rounds += 1;
    }

    pub fn add(&mut self, samples: Vec<RawSample>) {
        let round = self.rounds.saturating_sub(1);
        for s in samples {
            let key = StackKey {
                ips: s.ips,
                syscall_nr: s.syscall_nr,
                user: s.user,
            };
            let counts = self.counts.entry(key).or_default();
            if counts.len() <= round {
                counts.resize(round + 1, 0);
            }
            counts[round] += s.count;
        }
    }

    /// hookprof's own programs' tags, as `own_tags` keeps them.
    pub fn set_own_programs(&mut self, tags: Vec<String>) {
        self.own_tags = tags;
    }

    pub fn total(&self) -> u64 {
        self.counts.values().flatten().sum()
    }

    /// Samples added since the current round began.
    pub fn round_total(&self) -> u64 {
        let round = self.rounds.saturating_sub(1);
        self.counts.values().filter_map(|c| c.get(round)).sum()
    }

    /// The workload's own samples (not the probes', not lost), as `profile` counts them: in
    /// the current round, and in all rounds so far.
    pub fn own_samples(&self, names: &HashMap<u64, Symbol>) -> OwnSamples {
        let round = self.rounds.saturating_sub(1);
        let mut own = OwnSamples::default();
        for (key, by_round) in &self.counts {
            let count: u64 = by_round.iter().sum();
            own.all += count;
            let named = named_frames(&key.ips, names);
            let frames: Vec<&str> = named.iter().map(String::as_str).collect();
            if is_own(context(key.user, &frames, &self.own_tags), &frames) {
                own.own += count;
                own.round_own += by_round.get(round).copied().unwrap_or(0);
            }
        }
        own
    }

    /// Rounds begun (at least one once anything was added).
    fn rounds(&self) -> usize {
        self.rounds.max(1)
    }

    /// Every address to name: a caller's return address less one, so a call that ends its
    /// function is named by the caller and not by the function after it.
    pub fn addresses(&self) -> Vec<u64> {
        let mut all: Vec<u64> = self
            .counts
            .keys()
            .flat_map(|k| {
                k.ips
                    .iter()
                    .enumerate()
                    .map(|(i, &ip)| lookup_address(i, ip))
            })
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

fn lookup_address(depth: usize, ip: u64) -> u64 {
    if depth == 0 {
        ip
    } else {
        ip.saturating_sub(1)
    }
}

/// hookprof's measuring programs (as their JIT'd symbols end: `bpf_prog_<tag>_<name>`, the
/// name cut to 15 bytes); `--inject`'s programs are not among them.
const PROBE_PROGRAMS: &[&str] = &[
    "sys_enter",
    "sys_exit",
    "scope_sys_enter",
    "fork_btf",
    "exec_btf",
    "exec_raw",
    "exit_btf",
    "exit_raw",
    "free_raw",
    "sched_switch",
    "hook_enter_",
    "hook_exit_",
    "empty_",
];
/// The kernel's way into any BPF program: a sample here with no program under it was on its
/// way into (or out of) one of the probes.
const BPF_DISPATCH: &[&str] = &[
    "__bpf_trace_",
    "bpf_trace_run",
    "__bpf_prog_enter",
    "__bpf_prog_exit",
    "__bpf_tramp_",
    TRAMPOLINE,
];
/// What a trampoline calls itself, around the programs it runs.
const TRAMPOLINE_CALLS: &[&str] = &[
    "__rcu_read_",
    "migrate_",
    "update_prog_stats",
    "rcu_read_unlock_special",
];
/// Kernel code that runs for a syscall only while a tracepoint is attached to it: a sample
/// with one of these innermost was the probes' cost (seccomp and audit, called from the same
/// place, sit deeper and stay the workload's).
const TRACEPOINT_WORK: &[&str] = &[
    "syscall_trace_enter",
    "syscall_exit_work",
    "__traceiter_",
    "trace_sys_enter",
    "trace_sys_exit",
    "rcu_read_unlock_trace_special",
];
/// A BPF trampoline's frame: the fentry/fexit machinery, which also calls the traced function
/// itself (an fexit's), so frames past it are that function's.
const TRAMPOLINE: &str = "bpf_trampoline_";

/// What a sample was doing, by its frames (root first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    User,
    Probe,
    Kernel,
}

fn context(user: bool, frames: &[&str], own_tags: &[String]) -> Context {
    if user {
        return Context::User;
    }
    // The innermost BPF frame decides: a program (ours or not), the machinery on the way into
    // or out of one, or a trampoline.
    let innermost =
        frames.iter().enumerate().rev().find(|(_, f)| {
            bpf_program(f).is_some() || BPF_DISPATCH.iter().any(|d| f.starts_with(d))
        });
    match innermost {
        // The syscall tracepoints' own code, which runs only while one is attached.
        None if frames
            .last()
            .is_some_and(|leaf| TRACEPOINT_WORK.iter().any(|t| leaf.starts_with(t))) =>
        {
            Context::Probe
        }
        None => Context::Kernel,
        Some((_, f)) if is_own_program(f, own_tags) => Context::Probe,
        Some((_, f)) if bpf_program(f).is_some() => Context::Kernel,
        Some((i, f)) if f.starts_with(TRAMPOLINE) => trampoline_context(frames, i),
        Some(_) => Context::Probe,
    }
}

/// Whether a kernel stack (root first) was hookprof's measuring at work: a sample its profile
/// counts in `probe_samples`, for an export to say so of each stack.
pub fn is_probe_stack(frames: &[&str]) -> bool {
    context(false, frames, &[]) == Context::Probe
}

/// Whether a sample counts in the shares' denominator (`own_samples`): neither the probes'
/// nor a stack the kernel lost.
fn is_own(context: Context, frames: &[&str]) -> bool {
    match context {
        Context::User => true,
        Context::Kernel => !frames.is_empty(),
        Context::Probe => false,
    }
}

/// A sample whose innermost BPF frame is the trampoline at `i`: inside the trampoline, or in
/// what it calls around the programs it runs, it is the probes' cost; in the function it
/// traces (an fexit's trampoline calls it: the same function again, though the unwinder can
/// skip that frame), it is that function's.
fn trampoline_context(frames: &[&str], i: usize) -> Context {
    let Some(next) = frames.get(i + 1) else {
        return Context::Probe;
    };
    let traced = i > 0 && frames[i - 1] == *next;
    if !traced && TRAMPOLINE_CALLS.iter().any(|c| next.starts_with(c)) {
        Context::Probe
    } else {
        Context::Kernel
    }
}

/// The name of the JIT'd BPF program a frame is, `bpf_prog_<tag>_<name>` (the tag is 16 hex
/// digits; a program loaded without a name is `bpf_prog_<tag>` and named by its tag), or None
/// for any other frame (the kernel's own `bpf_prog_*` functions among them).
pub fn bpf_program(frame: &str) -> Option<&str> {
    let tagged = frame.strip_prefix("bpf_prog_")?;
    let tag = tagged.get(..16)?;
    if !tag.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match &tagged[16..] {
        "" => Some(tag),
        rest => rest.strip_prefix('_'),
    }
}

/// Whether one frame is hookprof's measuring at work, for a flame graph's colour: one of its
/// programs (`bpf_prog_<tag>_<name>`) or the kernel's way into a BPF program. (`profile`
/// decides by the whole stack; one frame alone cannot tell a trampoline's own time.)
pub fn is_probe_frame(frame: &str) -> bool {
    match bpf_program(frame) {
        Some(program) => is_probe(program),
        None => BPF_DISPATCH.iter().any(|d| frame.starts_with(d)),
    }
}

/// The security stack's layers beside the LSMs, each known by the frames of its own code (as
/// this kernel's kallsyms names them: `seccomp_run_filters` and `audit_filter_syscall` are
/// inlined into their callers on some builds, so each layer lists its callers too).
const LAYERS: &[(PathKind, &[&str])] = &[
    (
        PathKind::Seccomp,
        &["__secure_computing", "__seccomp_", "seccomp_"],
    ),
    (PathKind::Audit, &["__audit_", "audit_"]),
    (
        PathKind::Netfilter,
        &[
            "nf_hook_slow",
            "nft_do_chain",
            "ipt_do_table",
            "ip6t_do_table",
            "arpt_do_table",
            "ebt_do_table",
        ],
    ),
];

/// The layer whose code `frame` is, by its name.
fn layer_of(frame: &str) -> Option<PathKind> {
    LAYERS
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| frame.starts_with(p)))
        .map(|(kind, _)| *kind)
}

/// Whether a frame is one of hookprof's measuring programs: named as one, and, where the
/// tags of its loaded programs are known, with one of those tags.
fn is_own_program(frame: &str, own_tags: &[String]) -> bool {
    let ours_by_tag = || {
        let tag = frame.get("bpf_prog_".len()..).and_then(|t| t.get(..16));
        own_tags.is_empty() || tag.is_some_and(|t| own_tags.iter().any(|o| o == t))
    };
    bpf_program(frame).is_some_and(is_probe) && ours_by_tag()
}

/// A BPF program's frame that is another tool's: hookprof loaded no program of its tag (where
/// the tags are known), nor is it one of hookprof's by name. `--inject`'s programs are
/// hookprof's: the workload's cost where they run, never another tool's layer.
fn other_program<'a>(frame: &'a str, own_tags: &[String]) -> Option<&'a str> {
    let tag = frame.get("bpf_prog_".len()..).and_then(|t| t.get(..16));
    // An injection's busy-wait is a subprogram, JIT'd under a tag of its own: known by name.
    let loaded_here = bpf_program(frame).is_some_and(is_injection)
        || if own_tags.is_empty() {
            bpf_program(frame).is_some_and(is_probe)
        } else {
            tag.is_some_and(|t| own_tags.iter().any(|o| o == t))
        };
    bpf_program(frame).filter(|_| !loaded_here)
}

/// `--inject`'s programs, as their JIT'd names are cut to 15 bytes.
fn is_injection(program: &str) -> bool {
    program.starts_with("inject_") || program == "spin_until"
}

fn is_probe(program: &str) -> bool {
    PROBE_PROGRAMS.iter().any(|p| {
        if p.ends_with('_') {
            program.starts_with(p)
        } else {
            program == *p
        }
    })
}

/// The syscall entry path's frames: x86_64's `entry_SYSCALL_64` -> `do_syscall_64`, arm64's
/// `el0t_64_sync` -> `el0_svc` -> `do_el0_svc` (the exception vector itself is taken for faults
/// too). A kernel has one architecture's alone.
fn is_syscall_entry(frame: &str) -> bool {
    matches!(frame, "do_syscall_64" | "el0_svc" | "do_el0_svc")
        || frame.starts_with("entry_SYSCALL")
}

/// The syscall a kernel stack is inside: its task's saved number, trusted only for a stack
/// that came in through the syscall path (an interrupt or a fault leaves other values there).
fn syscall_of(syscall_nr: i32, frames: &[&str]) -> Option<String> {
    let entered = frames.iter().any(|f| is_syscall_entry(f));
    let nr = usize::try_from(syscall_nr).ok()?;
    (entered && nr < profiler_common::MAX_SYSCALLS as usize).then(|| syscall_name(nr))
}

/// The paths one stack counts for, each once, with whether it is the innermost frame.
fn paths_of(frames: &[&str], syscall: Option<&str>, own_tags: &[String]) -> Vec<(PathKey, bool)> {
    let mut paths: Vec<(PathKey, bool)> = Vec::new();
    let mut add = |key: PathKey, innermost: bool| match paths.iter_mut().find(|(k, _)| *k == key) {
        Some((_, own)) => *own |= innermost,
        None => paths.push((key, innermost)),
    };
    let leaf = frames.len().saturating_sub(1);
    if let Some(name) = syscall {
        let own = frames.last().is_some_and(|f| is_syscall_function(f, name));
        add(PathKey::new(PathKind::Syscall, name, None, None), own);
    }
    for (i, frame) in frames.iter().enumerate() {
        if frame.starts_with("security_") {
            add(PathKey::new(PathKind::Hook, frame, None, None), i == leaf);
            // The hook's callee, past a trampoline that times it.
            let callee = frames[i + 1..]
                .iter()
                .enumerate()
                .find(|(_, f)| !f.starts_with(TRAMPOLINE));
            if let Some((j, callee)) = callee {
                if let Some(lsm) = lsm_of(callee) {
                    let key = PathKey::new(PathKind::Lsm, callee, Some(frame), Some(lsm));
                    add(key, i + 1 + j == leaf);
                }
            }
        } else if let Some(parent) = task_path_of(frame) {
            add(
                PathKey::new(PathKind::TaskPath, frame, parent, None),
                i == leaf,
            );
        } else if let Some(program) = other_program(frame, own_tags) {
            add(
                PathKey::new(PathKind::BpfProgram, program, None, None),
                i == leaf,
            );
        }
    }
    add_layers(frames, &mut add);
    paths
}

/// Each layer on a stack once, named by its outermost frame there; its own where the
/// innermost frame is its code.
fn add_layers(frames: &[&str], add: &mut impl FnMut(PathKey, bool)) {
    let leaf_layer = frames.last().and_then(|f| layer_of(f));
    for (kind, _) in LAYERS {
        if let Some(outermost) = frames.iter().find(|f| layer_of(f) == Some(*kind)) {
            add(
                PathKey::new(*kind, outermost, None, None),
                leaf_layer == Some(*kind),
            );
        }
    }
}

/// The summary's groups one stack counts in, given its paths: any hook makes it the security
/// layer's, each LSM whose function it is inside that LSM's, a hook with no LSM function under
/// it the framework's, any task path the task paths', seccomp, audit and netfilter code each
/// its layer's, and a BPF program not hookprof's the other programs' and that program's.
fn groups_of(paths: &[(PathKey, bool)]) -> Vec<(GroupKind, Option<String>)> {
    let mut groups = Vec::new();
    let any = |kind: PathKind| paths.iter().any(|(k, _)| k.kind == kind);
    if any(PathKind::Hook) {
        groups.push((GroupKind::Hooks, None));
        let lsms: std::collections::BTreeSet<&str> =
            paths.iter().filter_map(|(k, _)| k.lsm.as_deref()).collect();
        if lsms.is_empty() {
            groups.push((GroupKind::Framework, None));
        }
        groups.extend(
            lsms.into_iter()
                .map(|l| (GroupKind::Lsm, Some(l.to_string()))),
        );
    }
    if any(PathKind::TaskPath) {
        groups.push((GroupKind::TaskPaths, None));
    }
    for (path, group) in [
        (PathKind::Seccomp, GroupKind::Seccomp),
        (PathKind::Audit, GroupKind::Audit),
        (PathKind::Netfilter, GroupKind::Netfilter),
        (PathKind::BpfProgram, GroupKind::OtherBpf),
    ] {
        if any(path) {
            groups.push((group, None));
        }
    }
    groups.extend(
        paths
            .iter()
            .filter(|(k, _)| k.kind == PathKind::BpfProgram)
            .map(|(k, _)| (GroupKind::BpfProgram, Some(k.name.clone()))),
    );
    groups
}

/// The one place a sample of the workload's own counts in (`Place`): the innermost kind of
/// path on its stack (an LSM function, else a hook, else a task path), else the syscall it ran
/// in, else how the kernel was entered outside any syscall.
fn place_of(
    user: bool,
    frames: &[&str],
    paths: &[(PathKey, bool)],
    syscall: Option<&str>,
) -> (Place, Option<String>) {
    if user {
        return (Place::User, None);
    }
    let any = |kind: PathKind| paths.iter().any(|(k, _)| k.kind == kind);
    if any(PathKind::Lsm) {
        (Place::Lsm, None)
    } else if any(PathKind::Hook) {
        (Place::Hook, None)
    } else if any(PathKind::TaskPath) {
        (Place::TaskPath, None)
    } else if let Some(name) = syscall {
        (Place::Syscall, Some(name.to_string()))
    } else {
        (outside_syscalls(frames), None)
    }
}

/// Frames of softirq work, whatever ran it (an interrupt's exit, ksoftirqd).
const SOFTIRQ_FRAMES: &[&str] = &[
    "__do_softirq",
    "handle_softirqs",
    "run_ksoftirqd",
    "do_softirq",
];
/// How the kernel was entered outside a syscall, x86_64's and arm64's names, each with the
/// place it makes.
const ENTRY_FRAMES: &[(&str, Place)] = &[
    ("asm_exc_page_fault", Place::PageFault),
    ("exc_page_fault", Place::PageFault),
    ("do_user_addr_fault", Place::PageFault),
    ("el0_da", Place::PageFault),
    ("el0_ia", Place::PageFault),
    ("do_mem_abort", Place::PageFault),
    ("do_page_fault", Place::PageFault),
    ("asm_sysvec_", Place::Interrupt),
    ("sysvec_", Place::Interrupt),
    ("asm_common_interrupt", Place::Interrupt),
    ("common_interrupt", Place::Interrupt),
    ("el0_interrupt", Place::Interrupt),
    ("el1_interrupt", Place::Interrupt),
    ("gic_handle_irq", Place::Interrupt),
    ("ret_from_fork", Place::Scheduler),
    ("schedule_tail", Place::Scheduler),
    ("__schedule", Place::Scheduler),
    ("schedule", Place::Scheduler),
    ("preempt_schedule", Place::Scheduler),
    ("finish_task_switch", Place::Scheduler),
];

/// Where a kernel stack outside any syscall was: softirq work wherever it ran, else the first
/// way in from the root (a fault, an interrupt, the scheduler), else other kernel code.
fn outside_syscalls(frames: &[&str]) -> Place {
    if frames
        .iter()
        .any(|f| SOFTIRQ_FRAMES.iter().any(|s| f.starts_with(s)))
    {
        return Place::Softirq;
    }
    frames
        .iter()
        .find_map(|f| {
            ENTRY_FRAMES
                .iter()
                .find(|(name, _)| f.starts_with(name))
                .map(|(_, place)| *place)
        })
        .unwrap_or(Place::OtherKernel)
}

/// The function of `syscall` itself: x86_64's or arm64's wrapper, or the generic ones it calls.
fn is_syscall_function(frame: &str, syscall: &str) -> bool {
    syscall_of_frame(frame) == Some(syscall)
}

/// The syscall whose own function `frame` is (`__x64_sys_openat`: openat), if it is one.
pub fn syscall_of_frame(frame: &str) -> Option<&str> {
    ["__x64_sys_", "__arm64_sys_", "__do_sys_", "__se_sys_"]
        .iter()
        .find_map(|p| frame.strip_prefix(p))
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct PathKey {
    kind: PathKind,
    name: String,
    parent: Option<String>,
    lsm: Option<String>,
}

impl PathKey {
    fn new(kind: PathKind, name: &str, parent: Option<&str>, lsm: Option<&str>) -> PathKey {
        PathKey {
            kind,
            name: name.into(),
            parent: parent.map(String::from),
            lsm: lsm.map(String::from),
        }
    }
}

/// How far into a function the call to an fentry/fexit trampoline returns: the call sits at
/// its start (after an endbr64 where IBT is built in).
const FENTRY_SITE: u64 = 16;
/// Where x86_64 keeps module and BPF code (JIT images, trampolines): above this.
const MODULES_START: u64 = 0xffff_ffff_a000_0000;

/// A stack's frames, root first, named. A trampoline is freed when its program detaches, so
/// by the time the stacks are named its address reads as whatever module code lies below it;
/// it is known by where it sits instead: in module space, called from a function's fentry
/// site (its first instruction, after an endbr64), where nothing else is called from.
fn named_frames(ips: &[u64], names: &HashMap<u64, Symbol>) -> Vec<String> {
    let symbols: Vec<(u64, Option<&Symbol>)> = ips
        .iter()
        .enumerate()
        .rev()
        .map(|(depth, &ip)| (ip, names.get(&lookup_address(depth, ip))))
        .collect();
    let name = |i: usize| symbols[i].1.map_or("[unknown]", |s| s.name.as_str());
    let at_fentry_site = |i: usize| symbols[i].1.is_some_and(|s| s.offset <= FENTRY_SITE);
    // Module and BPF code right under a function's fentry site: nothing but a trampoline is
    // called from there.
    let is_trampoline = |i: usize| {
        i > 0
            && at_fentry_site(i - 1)
            && symbols[i].0 >= MODULES_START
            && !name(i).starts_with("bpf_")
    };
    (0..symbols.len())
        .map(|i| {
            if is_trampoline(i) && !name(i).starts_with(TRAMPOLINE) {
                format!("{TRAMPOLINE}[freed]")
            } else {
                name(i).to_string()
            }
        })
        .collect()
}

/// The profile of `stacks`, their addresses named by `names`; `period_ns` of CPU time per
/// sample, `ops` ops over all copies. `on_cpu_ns_per_op`: the exact CPU time per op where
/// sched_switch was probed (else samples x period stand for it).
pub fn profile(
    stacks: &SampledStacks,
    names: &HashMap<u64, Symbol>,
    period_ns: u64,
    ops: u64,
    on_cpu_ns_per_op: Option<f64>,
) -> StackProfile {
    let total = stacks.total();
    let on_cpu_ns_per_op =
        on_cpu_ns_per_op.unwrap_or_else(|| total as f64 * period_ns as f64 / ops.max(1) as f64);
    let mut counts = Counts::new(stacks.rounds());
    for (key, by_round) in &stacks.counts {
        counts.add(key, by_round, names, &stacks.own_tags);
    }
    let scale = Scale::new(&counts, total, on_cpu_ns_per_op);
    let Counts {
        user_samples,
        probe_samples,
        lost_stacks,
        own_by_round,
        tallies,
        groups,
        places,
        folded,
        ..
    } = counts;
    StackProfile {
        period_ns,
        stack_passes: None,
        groups: groups
            .into_iter()
            .map(|(group, by_round)| scale.group(group, by_round))
            .collect(),
        samples: total,
        user_samples,
        probe_samples,
        lost_stacks,
        ops,
        on_cpu_ns_per_op,
        round_samples: if scale.keep_rounds {
            own_by_round
        } else {
            Vec::new()
        },
        paths: tallies
            .into_iter()
            .filter(|(_, t)| t.inclusive > 0)
            .map(|(key, tally)| scale.path(key, tally))
            .collect(),
        folded: bounded(folded),
        places: places
            .into_iter()
            .map(|(place, by_round)| scale.place(place, by_round))
            .collect(),
    }
}

/// What the stacks hold, counted before any share is taken.
struct Counts {
    rounds: usize,
    user_samples: u64,
    probe_samples: u64,
    lost_stacks: u64,
    /// The workload's own samples in each round.
    own_by_round: Vec<u64>,
    /// Per path: samples of the workload's own with it on the stack, those with it innermost,
    /// and every sample with it on the stack, the probes' own included; and the first, round
    /// by round.
    tallies: BTreeMap<PathKey, Tally>,
    /// Per group: the workload's own samples with any of its paths on the stack, by round.
    groups: BTreeMap<(GroupKind, Option<String>), Vec<u64>>,
    /// Per place: the workload's own samples there, by round (each sample in one place).
    places: BTreeMap<(Place, Option<String>), Vec<u64>>,
    folded: HashMap<String, u64>,
}

impl Counts {
    fn new(rounds: usize) -> Counts {
        // The security layer, the task paths and the other layers are always there, at zero
        // if no sample fell in them: a profile with groups says so, where a file written
        // before them has none.
        let groups = [
            GroupKind::Hooks,
            GroupKind::TaskPaths,
            GroupKind::Seccomp,
            GroupKind::Audit,
            GroupKind::Netfilter,
            GroupKind::OtherBpf,
        ]
        .map(|kind| ((kind, None), vec![0; rounds]))
        .into();
        Counts {
            rounds,
            user_samples: 0,
            probe_samples: 0,
            lost_stacks: 0,
            own_by_round: vec![0; rounds],
            tallies: BTreeMap::new(),
            groups,
            places: BTreeMap::new(),
            folded: HashMap::new(),
        }
    }

    /// One stack, seen `by_round` times in each round.
    fn add(
        &mut self,
        key: &StackKey,
        by_round: &[u64],
        names: &HashMap<u64, Symbol>,
        own_tags: &[String],
    ) {
        let count: u64 = by_round.iter().sum();
        let named = named_frames(&key.ips, names);
        let frames: Vec<&str> = named.iter().map(String::as_str).collect();
        let line = match (key.user, frames.is_empty()) {
            (true, _) => USER_FRAME.to_string(),
            (false, true) => LOST_STACK.to_string(),
            (false, false) => frames.join(";"),
        };
        *self.folded.entry(line).or_default() += count;
        let context = context(key.user, &frames, own_tags);
        let syscall = syscall_of(key.syscall_nr, &frames);
        let paths = paths_of(&frames, syscall.as_deref(), own_tags);
        if is_own(context, &frames) {
            let place = place_of(key.user, &frames, &paths, syscall.as_deref());
            let rounds = self.rounds;
            let t = self.places.entry(place).or_insert_with(|| vec![0; rounds]);
            add_rounds(t, by_round);
            add_rounds(&mut self.own_by_round, by_round);
        }
        match context {
            Context::User => self.user_samples += count,
            Context::Probe => {
                self.probe_samples += count;
                self.add_spanned(&paths, count);
            }
            Context::Kernel => {
                if frames.is_empty() {
                    self.lost_stacks += count;
                }
                for group in groups_of(&paths) {
                    let rounds = self.rounds;
                    add_rounds(
                        self.groups.entry(group).or_insert_with(|| vec![0; rounds]),
                        by_round,
                    );
                }
                self.add_spanned(&paths, count);
                for (path, own) in &paths {
                    let t = self.tallies.get_mut(path).expect("added as spanned");
                    t.inclusive += count;
                    t.own += u64::from(*own) * count;
                    if let Some(name) = &syscall {
                        *t.by_syscall.entry(name.clone()).or_default() += count;
                    }
                    add_rounds(&mut t.by_round, by_round);
                }
            }
        }
    }

    /// Every sample with a path on the stack, the probes' own included.
    fn add_spanned(&mut self, paths: &[(PathKey, bool)], count: u64) {
        for (path, _) in paths {
            let rounds = self.rounds;
            self.tallies
                .entry(path.clone())
                .or_insert_with(|| Tally::new(rounds))
                .spanned += count;
        }
    }
}

fn add_rounds(to: &mut [u64], by_round: &[u64]) {
    for (r, n) in to.iter_mut().zip(by_round) {
        *r += n;
    }
}

/// How sample counts become shares and times: shares are of the workload's own CPU time, the
/// samples less the probes' (which a run without them would not have) and the stacks the
/// kernel lost (taken to be like the rest).
struct Scale {
    own_by_round: Vec<u64>,
    own_samples: u64,
    own_ns_per_op: f64,
    per_sample_ns: f64,
    /// One round has no spread to keep.
    keep_rounds: bool,
}

impl Scale {
    fn new(counts: &Counts, total: u64, on_cpu_ns_per_op: f64) -> Scale {
        let own_samples = total - counts.probe_samples - counts.lost_stacks;
        Scale {
            own_by_round: counts.own_by_round.clone(),
            own_samples,
            own_ns_per_op: on_cpu_ns_per_op * own_samples as f64 / total.max(1) as f64,
            per_sample_ns: on_cpu_ns_per_op / total.max(1) as f64,
            keep_rounds: counts.rounds >= crate::stats::shares::MIN_ROUNDS,
        }
    }

    fn share(&self, n: u64) -> f64 {
        n as f64 / self.own_samples.max(1) as f64
    }

    fn counted(&self, by_round: Vec<u64>) -> Counted {
        Counted::of(
            by_round,
            &self.own_by_round,
            self.own_samples,
            self.keep_rounds,
            self.own_ns_per_op,
        )
    }

    /// A path's interval is a group's: its rounds' spread where that is wider than the
    /// samples' (a share that moves from runner to runner, as security_inode_permission's does
    /// with where its runner's files and dentries land, is known only that well).
    fn path(&self, key: PathKey, tally: Tally) -> SampledPath {
        let syscall = (!matches!(key.kind, PathKind::Syscall | PathKind::Lsm))
            .then(|| tally.mostly_in())
            .flatten();
        let Tally {
            inclusive,
            own,
            spanned,
            by_round,
            ..
        } = tally;
        let c = self.counted(by_round);
        SampledPath {
            kind: key.kind,
            name: key.name,
            parent: key.parent,
            lsm: key.lsm,
            syscall,
            inclusive_samples: inclusive,
            self_samples: own,
            inclusive_share: self.share(inclusive),
            share_low: c.low,
            share_high: c.high,
            self_share: self.share(own),
            ns_per_op: self.share(inclusive) * self.own_ns_per_op,
            ns_per_op_low: c.low * self.own_ns_per_op,
            ns_per_op_high: c.high * self.own_ns_per_op,
            spanned_samples: spanned,
            spanned_ns_per_op: spanned as f64 * self.per_sample_ns,
            round_samples: c.round_samples,
        }
    }

    fn group(&self, (kind, name): (GroupKind, Option<String>), by_round: Vec<u64>) -> SampledGroup {
        let c = self.counted(by_round);
        let (lsm, program) = match kind {
            GroupKind::BpfProgram => (None, name),
            _ => (name, None),
        };
        SampledGroup {
            kind,
            lsm,
            program,
            samples: c.samples,
            share: c.share,
            share_low: c.low,
            share_high: c.high,
            ns_per_op: c.ns_per_op,
            round_samples: c.round_samples,
        }
    }

    fn place(&self, (place, syscall): (Place, Option<String>), by_round: Vec<u64>) -> SampledPlace {
        let c = self.counted(by_round);
        SampledPlace {
            place,
            syscall,
            samples: c.samples,
            share: c.share,
            share_low: c.low,
            share_high: c.high,
            ns_per_op: c.ns_per_op,
            round_samples: c.round_samples,
        }
    }
}

/// A group's or a place's samples among the workload's own, with its share's interval: the
/// rounds' where two or more were kept, never narrower than the samples' (Wilson; with no
/// sample there the rounds agree exactly, and would say 0-0).
struct Counted {
    samples: u64,
    share: f64,
    low: f64,
    high: f64,
    ns_per_op: f64,
    round_samples: Vec<u64>,
}

impl Counted {
    fn of(
        by_round: Vec<u64>,
        own_by_round: &[u64],
        own_samples: u64,
        keep_rounds: bool,
        own_ns_per_op: f64,
    ) -> Counted {
        let samples: u64 = by_round.iter().sum();
        let rounds: Vec<RoundCount> = by_round
            .iter()
            .zip(own_by_round)
            .map(|(&path, &all)| RoundCount { path, all })
            .collect();
        let wilson = wilson_interval(samples, own_samples);
        let (low, high) = keep_rounds
            .then(|| share_interval(&rounds))
            .flatten()
            .map_or(wilson, |i| (i.low.min(wilson.0), i.high.max(wilson.1)));
        let share = samples as f64 / own_samples.max(1) as f64;
        Counted {
            samples,
            share,
            low,
            high,
            ns_per_op: share * own_ns_per_op,
            round_samples: if keep_rounds { by_round } else { Vec::new() },
        }
    }
}

/// One path's sample counts.
#[derive(Debug)]
struct Tally {
    /// The workload's own samples with the path on the stack, and those with it innermost.
    inclusive: u64,
    own: u64,
    /// Every sample with the path on the stack, the probes' own included.
    spanned: u64,
    /// `inclusive`, round by round.
    by_round: Vec<u64>,
    /// `inclusive` by the syscall the samples ran in.
    by_syscall: HashMap<String, u64>,
}

impl Tally {
    fn new(rounds: usize) -> Tally {
        Tally {
            inclusive: 0,
            own: 0,
            spanned: 0,
            by_round: vec![0; rounds],
            by_syscall: HashMap::new(),
        }
    }

    /// The syscall more than half the path's samples ran in (a hook such as
    /// security_file_free runs in close and in exit alike: it is drawn under one only where
    /// most of it is there).
    fn mostly_in(&self) -> Option<String> {
        self.by_syscall
            .iter()
            .filter(|(_, &n)| 2 * n > self.inclusive)
            .map(|(name, _)| name.clone())
            .next()
    }
}

/// The folded stacks, most sampled first, the ones past `FOLDED_LIMIT` summed into one line.
fn bounded(folded: HashMap<String, u64>) -> Vec<(String, u64)> {
    let mut lines: Vec<(String, u64)> = folded.into_iter().collect();
    lines.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    if lines.len() > FOLDED_LIMIT {
        let rest: u64 = lines.drain(FOLDED_LIMIT - 1..).map(|(_, n)| n).sum();
        lines.push((OTHER_STACKS.to_string(), rest));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses 1, 2, 3, ... named by `frames` (root first), one stack.
    fn stack(frames: &[&str], nr: i32, count: u64, names: &mut HashMap<u64, Symbol>) -> RawSample {
        let base = names.len() as u64 * 0x100 + 0x1000;
        let ips: Vec<u64> = (0..frames.len() as u64)
            .map(|i| base + i * 0x10 + 1)
            .collect();
        // Innermost first, as the kernel gives them.
        let ips: Vec<u64> = ips.into_iter().rev().collect();
        for (depth, (ip, name)) in ips.iter().zip(frames.iter().rev()).enumerate() {
            let symbol = Symbol {
                name: name.to_string(),
                offset: 0x40,
            };
            names.insert(lookup_address(depth, *ip), symbol);
        }
        RawSample {
            ips,
            syscall_nr: nr,
            user: false,
            count,
        }
    }

    fn path<'a>(p: &'a StackProfile, name: &str) -> &'a SampledPath {
        p.paths.iter().find(|r| r.name == name).expect(name)
    }

    #[test]
    fn a_probe_frame_is_one_of_hookprof_s_programs_or_the_way_into_one() {
        assert!(is_probe_frame("bpf_prog_0123456789abcdef_sys_exit"));
        assert!(is_probe_frame("bpf_prog_0123456789abcdef_hook_enter_file"));
        assert!(is_probe_frame("bpf_trace_run2"));
        assert!(is_probe_frame("__bpf_prog_enter_recur"));
        // --inject's programs are the workload's cost, not the probes'.
        assert!(!is_probe_frame("bpf_prog_0123456789abcdef_inject_sys_exit"));
        assert!(!is_probe_frame("security_file_open"));
    }

    #[test]
    fn own_samples_are_profile_s_own_in_the_round_and_over_all_rounds() {
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_getppid"];
        let probe = [&entry[..], &["trace_sys_exit", "bpf_trace_run2"]].concat();
        let mut s = SampledStacks::default();
        let mut round = |own, probes, lost, names: &mut HashMap<u64, Symbol>| {
            s.start_round();
            s.add(vec![
                stack(&entry, 110, own, names),
                stack(&probe, 110, probes, names),
                RawSample {
                    ips: Vec::new(),
                    syscall_nr: 110,
                    user: false,
                    count: lost,
                },
            ]);
        };
        round(30, 7, 2, &mut names);
        round(12, 5, 1, &mut names);
        let own = s.own_samples(&names);
        assert_eq!(
            own,
            OwnSamples {
                all: 57,
                own: 42,
                round_own: 12
            }
        );
        let p = profile(&s, &names, 1000, 10, None);
        assert_eq!(p.samples - p.probe_samples - p.lost_stacks, own.own);
        assert_eq!(p.round_samples.last(), Some(&own.round_own));
    }

    #[test]
    fn hooks_lsm_functions_and_syscalls_get_inclusive_and_self_shares() {
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_openat"];
        let open = |tail: &[&'static str]| [&entry[..], tail].concat();
        let mut s = SampledStacks::default();
        s.add(vec![
            stack(
                &open(&["security_file_open", "hook_file_open"]),
                257,
                30,
                &mut names,
            ),
            stack(&open(&["security_file_open"]), 257, 10, &mut names),
            stack(&open(&["do_filp_open"]), 257, 40, &mut names),
            RawSample {
                ips: Vec::new(),
                syscall_nr: -1,
                user: true,
                count: 20,
            },
        ]);
        let p = profile(&s, &names, 1000, 100, Some(2000.0));
        assert_eq!((p.samples, p.user_samples, p.probe_samples), (100, 20, 0));
        let hook = path(&p, "security_file_open");
        assert_eq!((hook.inclusive_samples, hook.self_samples), (40, 10));
        assert!((hook.inclusive_share - 0.4).abs() < 1e-12);
        assert!((hook.ns_per_op - 800.0).abs() < 1e-9);
        assert!(hook.share_low < 0.4 && hook.share_high > 0.4);
        let lsm = path(&p, "hook_file_open");
        assert_eq!(lsm.kind, PathKind::Lsm);
        assert_eq!(lsm.lsm.as_deref(), Some("landlock"));
        assert_eq!(lsm.parent.as_deref(), Some("security_file_open"));
        assert_eq!((lsm.inclusive_samples, lsm.self_samples), (30, 30));
        let openat = path(&p, "openat");
        assert_eq!(
            (openat.kind, openat.inclusive_samples),
            (PathKind::Syscall, 80)
        );
        // The user line and the three kernel stacks, most sampled first.
        assert_eq!(p.folded.len(), 4);
        assert_eq!(p.folded[0].1, 40);
        assert!(p.folded[0].0.starts_with("entry_SYSCALL_64;do_syscall_64;"));
    }

    #[test]
    fn a_sample_counts_once_in_each_group_its_paths_belong_to() {
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_openat"];
        let open = |tail: &[&'static str]| [&entry[..], tail].concat();
        let clone = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_clone"];
        let mut s = SampledStacks::default();
        s.add(vec![
            // Two hooks on one stack (one inside the other's work): once in the hooks.
            stack(
                &open(&[
                    "security_file_open",
                    "hook_file_open",
                    "security_inode_permission",
                ]),
                257,
                30,
                &mut names,
            ),
            stack(
                &open(&["security_file_open", "bpf_lsm_file_open"]),
                257,
                5,
                &mut names,
            ),
            stack(
                &open(&["security_file_alloc", "kmem_cache_alloc"]),
                257,
                10,
                &mut names,
            ),
            stack(&open(&["do_filp_open"]), 257, 40, &mut names),
            stack(
                &[&clone[..], &["copy_process", "security_task_alloc"]].concat(),
                56,
                15,
                &mut names,
            ),
        ]);
        let p = profile(&s, &names, 1000, 100, Some(2000.0));
        let group = |kind: GroupKind, lsm: Option<&str>| {
            p.groups
                .iter()
                .find(|g| g.kind == kind && g.lsm.as_deref() == lsm)
                .map_or(0, |g| g.samples)
        };
        assert_eq!(group(GroupKind::Hooks, None), 30 + 5 + 10 + 15);
        assert_eq!(group(GroupKind::Lsm, Some("landlock")), 30);
        assert_eq!(group(GroupKind::Lsm, Some("bpf")), 5);
        // security_file_alloc's own allocation, and security_task_alloc's own body.
        assert_eq!(group(GroupKind::Framework, None), 10 + 15);
        assert_eq!(group(GroupKind::TaskPaths, None), 15);
        let hooks = p
            .groups
            .iter()
            .find(|g| g.kind == GroupKind::Hooks)
            .unwrap();
        assert!((hooks.share - 0.6).abs() < 1e-12);
        assert!((hooks.ns_per_op - 1200.0).abs() < 1e-9);
        assert!(hooks.share_low < 0.6 && hooks.share_high > 0.6);
        // Summing the hook rows would count the nested pair twice.
        let summed: u64 = p
            .paths
            .iter()
            .filter(|r| r.kind == PathKind::Hook)
            .map(|r| r.inclusive_samples)
            .sum();
        assert_eq!(summed, 90);
    }

    #[test]
    fn each_path_keeps_its_samples_round_by_round_beside_each_round_s_own_samples() {
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_openat"];
        let open = stack(
            &[&entry[..], &["security_file_open"]].concat(),
            257,
            3,
            &mut names,
        );
        let probe = stack(
            &[&entry[..], &["bpf_prog_0123456789abcdef_sys_exit"]].concat(),
            257,
            2,
            &mut names,
        );
        let user = RawSample {
            ips: Vec::new(),
            syscall_nr: -1,
            user: true,
            count: 4,
        };
        let mut s = SampledStacks::default();
        s.start_round();
        s.add(vec![open.clone(), probe]);
        // Round 2 samples nothing; round 3 sees the open stack again, and user time.
        s.start_round();
        s.start_round();
        s.add(vec![open.clone(), open, user]);
        let p = profile(&s, &names, 1000, 10, None);
        // The rounds' own samples leave out the probes', as the shares do.
        assert_eq!(p.round_samples, [3, 0, 10]);
        assert_eq!(path(&p, "security_file_open").round_samples, [3, 0, 6]);
        assert_eq!(path(&p, "openat").round_samples, [3, 0, 6]);
        assert_eq!(path(&p, "openat").inclusive_samples, 9);
        // One round has no spread: nothing is kept.
        let mut one = SampledStacks::default();
        one.add(vec![stack(&entry, 257, 3, &mut names)]);
        let p = profile(&one, &names, 1000, 10, None);
        assert!(p.round_samples.is_empty() && p.paths[0].round_samples.is_empty());
    }

    #[test]
    fn a_path_s_interval_spans_its_rounds_spread_where_that_is_wider_than_the_samples_noise() {
        // security_inode_permission's share moves from one runner to the next far more than
        // its sample count allows (0.3-1.8% at ~3,500 samples a round): an interval from the
        // pooled samples alone would exclude other runs', and perf's, figures.
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_openat"];
        let open = |tail: &[&'static str]| [&entry[..], tail].concat();
        let hook = open(&["link_path_walk", "security_inode_permission"]);
        let other = open(&["do_filp_open"]);
        let mut s = SampledStacks::default();
        for in_hook in [10, 50, 30] {
            s.start_round();
            s.add(vec![
                stack(&hook, 257, in_hook, &mut names),
                stack(&other, 257, 1000 - in_hook, &mut names),
            ]);
        }
        let p = profile(&s, &names, 1000, 100, None);
        let h = path(&p, "security_inode_permission");
        let (wilson_low, wilson_high) = wilson_interval(90, 3000);
        assert!((h.inclusive_share - 0.03).abs() < 1e-12);
        assert!(h.share_low < wilson_low && h.share_high > wilson_high);
        // Every round's own share lies inside it, and the time per op follows the share.
        assert!(h.share_low <= 0.01 && h.share_high >= 0.05);
        let own_ns = p.on_cpu_ns_per_op;
        assert!((h.ns_per_op_low - h.share_low * own_ns).abs() < 1e-9);
        assert!((h.ns_per_op_high - h.share_high * own_ns).abs() < 1e-9);
        // Rounds that agree leave about the samples' interval (binomial at the pooled share).
        let mut even = SampledStacks::default();
        for _ in 0..3 {
            even.start_round();
            even.add(vec![
                stack(&hook, 257, 30, &mut names),
                stack(&other, 257, 970, &mut names),
            ]);
        }
        let p = profile(&even, &names, 1000, 100, None);
        let h = path(&p, "security_inode_permission");
        assert!(
            (h.share_low - wilson_low).abs() < 1e-3 && (h.share_high - wilson_high).abs() < 1e-3
        );
    }

    #[test]
    fn the_probes_own_programs_count_for_no_path_but_an_injection_counts_for_its_syscall() {
        let mut names = HashMap::new();
        let exit = ["entry_SYSCALL_64", "do_syscall_64", "syscall_exit_work"];
        let via =
            |prog: &'static str| [&exit[..], &["trace_sys_exit", "bpf_trace_run2", prog]].concat();
        let mut s = SampledStacks::default();
        s.add(vec![
            stack(
                &via("bpf_prog_0123456789abcdef_sys_exit"),
                110,
                5,
                &mut names,
            ),
            stack(
                &via("bpf_prog_0123456789abcdef_inject_sys_exit"),
                110,
                50,
                &mut names,
            ),
            // On its way into a program: the probes' dispatch.
            stack(
                &[&exit[..], &["trace_sys_exit", "bpf_trace_run2"]].concat(),
                110,
                3,
                &mut names,
            ),
        ]);
        let p = profile(&s, &names, 1000, 10, None);
        assert_eq!(p.probe_samples, 8);
        assert_eq!(path(&p, "getppid").inclusive_samples, 50);
        // Without sched_switch, CPU time per op is samples x period.
        assert!((p.on_cpu_ns_per_op - 5800.0).abs() < 1e-9);
    }

    #[test]
    fn a_function_timed_by_a_trampoline_is_still_its_own_but_the_timing_program_is_not() {
        let mut names = HashMap::new();
        let open = [
            "do_syscall_64",
            "do_dentry_open",
            "bpf_trampoline_6442",
            "security_file_open",
        ];
        let mut s = SampledStacks::default();
        s.add(vec![
            // An fexit'd hook's body, and its LSM function past its own trampoline.
            stack(
                &[&open[..], &["bpf_trampoline_77", "apparmor_file_open"]].concat(),
                257,
                7,
                &mut names,
            ),
            // The fentry program timing it, and the trampoline itself.
            stack(
                &[&open[..3], &["bpf_prog_0123456789abcdef_hook_enter_3"]].concat(),
                257,
                2,
                &mut names,
            ),
            stack(&open[..3], 257, 1, &mut names),
            // A BPF LSM program under the BPF LSM's function: stacking cost, the hook's.
            stack(
                &[
                    &open[..],
                    &[
                        "bpf_lsm_file_open",
                        "bpf_trampoline_9",
                        "bpf_prog_0123456789abcdef_lsm_a1_0",
                    ],
                ]
                .concat(),
                257,
                4,
                &mut names,
            ),
        ]);
        let p = profile(&s, &names, 1000, 1, None);
        assert_eq!(p.probe_samples, 3);
        assert_eq!(path(&p, "security_file_open").inclusive_samples, 11);
        let apparmor = path(&p, "apparmor_file_open");
        assert_eq!((apparmor.inclusive_samples, apparmor.self_samples), (7, 7));
        assert_eq!(path(&p, "bpf_lsm_file_open").inclusive_samples, 4);
    }

    #[test]
    fn a_trampoline_freed_before_its_stacks_were_named_is_known_by_where_it_sits() {
        // (address, symbol, offset), root first, as named after the detach: the trampoline,
        // freed, reads as the module code below it.
        let caller = (0xffff_ffff_8100_0140, "do_dentry_open", 0x40);
        let site = (0xffff_ffff_8100_0209, "security_file_open", 9);
        let trampoline = (0xffff_ffff_c000_1234, "virtio_exit", 0x234);
        let body = (0xffff_ffff_8100_0260, "security_file_open", 0x60);
        let lsm = (0xffff_ffff_8100_0380, "hook_file_open", 0x80);
        let unlock = (0xffff_ffff_8100_0410, "__rcu_read_unlock", 0x10);
        let mut names = HashMap::new();
        let mut sample = |frames: &[(u64, &str, u64)], count| {
            let ips: Vec<u64> = frames.iter().rev().map(|f| f.0).collect();
            for (depth, (ip, name, offset)) in frames.iter().rev().enumerate() {
                let symbol = Symbol {
                    name: name.to_string(),
                    offset: *offset - u64::from(depth > 0),
                };
                names.insert(lookup_address(depth, *ip), symbol);
            }
            RawSample {
                ips,
                syscall_nr: 257,
                user: false,
                count,
            }
        };
        let samples = vec![
            sample(&[caller, site, trampoline, body, lsm], 5),
            // In the trampoline's own calls, and in the trampoline itself.
            sample(&[caller, site, trampoline, unlock], 2),
            sample(&[caller, site, trampoline], 1),
        ];
        let mut s = SampledStacks::default();
        s.add(samples);
        let p = profile(&s, &names, 1000, 1, None);
        assert_eq!(p.probe_samples, 3);
        // The span an fentry/fexit pair would time holds the probes' samples too.
        let spanned = path(&p, "security_file_open");
        assert_eq!(
            (spanned.spanned_samples, spanned.spanned_ns_per_op),
            (8, 8000.0)
        );
        let hook = path(&p, "hook_file_open");
        assert_eq!(hook.inclusive_samples, 5);
        assert_eq!(hook.parent.as_deref(), Some("security_file_open"));
        assert_eq!(path(&p, "security_file_open").inclusive_samples, 5);
        assert!(p.paths.iter().all(|r| r.name != "virtio_exit"));
        let line = "do_dentry_open;security_file_open;bpf_trampoline_[freed];security_file_open;\
                    hook_file_open";
        assert!(
            p.folded.iter().any(|(f, n)| f == line && *n == 5),
            "{:?}",
            p.folded
        );
    }

    #[test]
    fn a_fault_s_stack_is_not_taken_for_the_syscall_its_register_still_holds() {
        let mut names = HashMap::new();
        let mut s = SampledStacks::default();
        s.add(vec![stack(
            &["asm_exc_page_fault", "exc_page_fault", "handle_mm_fault"],
            0,
            4,
            &mut names,
        )]);
        let p = profile(&s, &names, 1000, 1, None);
        assert!(p.paths.is_empty(), "{:?}", p.paths);
    }

    #[test]
    fn task_paths_and_their_steps_are_found_by_name() {
        let mut names = HashMap::new();
        let fork = [
            "entry_SYSCALL_64",
            "do_syscall_64",
            "__x64_sys_clone",
            "kernel_clone",
        ];
        let mut s = SampledStacks::default();
        s.add(vec![stack(
            &[&fork[..], &["copy_process", "copy_mm"]].concat(),
            56,
            9,
            &mut names,
        )]);
        let p = profile(&s, &names, 1000, 1, None);
        assert_eq!(path(&p, "copy_process").inclusive_samples, 9);
        let step = path(&p, "copy_mm");
        assert_eq!(
            (step.parent.as_deref(), step.self_samples),
            (Some("copy_process"), 9)
        );
        assert_eq!(path(&p, "clone").kind, PathKind::Syscall);
    }

    #[test]
    fn folded_stacks_past_the_limit_are_summed_into_one_line() {
        let folded: HashMap<String, u64> = (0..FOLDED_LIMIT as u64 + 10)
            .map(|i| (format!("f{i}"), i + 1))
            .collect();
        let total: u64 = folded.values().sum();
        let lines = bounded(folded);
        assert_eq!(lines.len(), FOLDED_LIMIT);
        assert_eq!(lines.last().unwrap().0, OTHER_STACKS);
        assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), total);
        assert_eq!(lines[0].1, FOLDED_LIMIT as u64 + 10);
    }

    #[test]
    fn each_own_sample_has_one_place_and_the_places_add_up_to_the_own_samples() {
        let mut names = HashMap::new();
        let sys = |name: &str, tail: &[&'static str]| -> Vec<String> {
            let mut f = vec![
                "entry_SYSCALL_64".to_string(),
                "do_syscall_64".to_string(),
                format!("__x64_sys_{name}"),
            ];
            f.extend(tail.iter().map(|s| s.to_string()));
            f
        };
        let add = |frames: Vec<String>, nr: i32, n: u64, names: &mut HashMap<u64, Symbol>| {
            let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
            stack(&frames, nr, n, names)
        };
        let mut s = SampledStacks::default();
        s.add(vec![
            add(sys("openat", &["do_filp_open"]), 257, 40, &mut names),
            add(
                sys("openat", &["security_file_open", "hook_file_open"]),
                257,
                10,
                &mut names,
            ),
            add(sys("openat", &["security_file_alloc"]), 257, 5, &mut names),
            // exit_group's work in do_exit is the task path's; the rest is exit_group's own.
            add(
                sys("exit_group", &["do_exit", "mmput"]),
                231,
                20,
                &mut names,
            ),
            add(sys("exit_group", &[]), 231, 3, &mut names),
            add(
                vec!["asm_exc_page_fault".into(), "exc_page_fault".into()],
                -1,
                7,
                &mut names,
            ),
            add(
                vec![
                    "asm_sysvec_apic_timer_interrupt".into(),
                    "irq_exit_rcu".into(),
                    "handle_softirqs".into(),
                ],
                -1,
                2,
                &mut names,
            ),
            add(
                vec!["asm_sysvec_apic_timer_interrupt".into()],
                -1,
                4,
                &mut names,
            ),
            add(
                vec!["ret_from_fork_asm".into(), "schedule_tail".into()],
                -1,
                6,
                &mut names,
            ),
            add(vec!["some_kthread_fn".into()], -1, 1, &mut names),
            // The probes' own and a lost stack are in no place.
            add(
                sys("openat", &["trace_sys_exit", "bpf_trace_run2"]),
                257,
                9,
                &mut names,
            ),
            RawSample {
                ips: Vec::new(),
                syscall_nr: 257,
                user: false,
                count: 3,
            },
            RawSample {
                ips: Vec::new(),
                syscall_nr: -1,
                user: true,
                count: 12,
            },
        ]);
        let p = profile(&s, &names, 1000, 100, Some(1300.0));
        let at = |place: Place, syscall: Option<&str>| {
            p.places
                .iter()
                .find(|x| x.place == place && x.syscall.as_deref() == syscall)
                .map_or(0, |x| x.samples)
        };
        assert_eq!(at(Place::Syscall, Some("openat")), 40);
        assert_eq!(at(Place::Lsm, None), 10);
        assert_eq!(at(Place::Hook, None), 5);
        assert_eq!(at(Place::TaskPath, None), 20);
        assert_eq!(at(Place::Syscall, Some("exit_group")), 3);
        assert_eq!(at(Place::PageFault, None), 7);
        assert_eq!(at(Place::Softirq, None), 2);
        assert_eq!(at(Place::Interrupt, None), 4);
        assert_eq!(at(Place::Scheduler, None), 6);
        assert_eq!(at(Place::OtherKernel, None), 1);
        assert_eq!(at(Place::User, None), 12);
        let own = p.samples - p.probe_samples - p.lost_stacks;
        assert_eq!(p.places.iter().map(|x| x.samples).sum::<u64>(), own);
        let shares: f64 = p.places.iter().map(|x| x.share).sum();
        assert!((shares - 1.0).abs() < 1e-9, "{shares}");
        let ns: f64 = p.places.iter().map(|x| x.ns_per_op).sum();
        assert!((ns - p.own_ns_per_op()).abs() < 1e-6, "{ns}");
        assert!(p
            .places
            .iter()
            .all(|x| x.share_low <= x.share && x.share <= x.share_high));
    }

    #[test]
    fn seccomp_audit_netfilter_and_other_tools_programs_are_layers_of_their_own() {
        let mut names = HashMap::new();
        let enter = ["entry_SYSCALL_64", "do_syscall_64", "syscall_trace_enter"];
        let on = |tail: &[&'static str]| [&enter[..], tail].concat();
        let other = "bpf_prog_0123456789abcdef_tracepoint_raw";
        let mut s = SampledStacks::default();
        s.add(vec![
            stack(
                &on(&["__secure_computing", "__seccomp_filter"]),
                39,
                6,
                &mut names,
            ),
            stack(&on(&["__audit_syscall_entry"]), 39, 4, &mut names),
            stack(
                &on(&["trace_sys_enter", "perf_trace_sys_enter", other]),
                39,
                9,
                &mut names,
            ),
            // hookprof's own program on the same tracepoint: the probes', in no layer.
            stack(
                &on(&[
                    "trace_sys_enter",
                    "bpf_trace_run2",
                    "bpf_prog_0123456789abcdef_sys_enter",
                ]),
                39,
                5,
                &mut names,
            ),
            stack(
                &[
                    "asm_sysvec_apic_timer_interrupt",
                    "handle_softirqs",
                    "ip_rcv",
                    "nf_hook_slow",
                    "nft_do_chain_ipv4",
                    "nft_do_chain",
                ],
                -1,
                3,
                &mut names,
            ),
            // A kernel function named bpf_prog_* is no program.
            stack(&on(&["bpf_prog_free"]), 39, 2, &mut names),
        ]);
        let p = profile(&s, &names, 1000, 10, None);
        assert_eq!(p.probe_samples, 5);
        let group = |kind: GroupKind, program: Option<&str>| {
            p.groups
                .iter()
                .find(|g| g.kind == kind && g.program.as_deref() == program)
                .map(|g| g.samples)
        };
        assert_eq!(group(GroupKind::Seccomp, None), Some(6));
        assert_eq!(group(GroupKind::Audit, None), Some(4));
        assert_eq!(group(GroupKind::Netfilter, None), Some(3));
        assert_eq!(group(GroupKind::OtherBpf, None), Some(9));
        assert_eq!(
            group(GroupKind::BpfProgram, Some("tracepoint_raw")),
            Some(9)
        );
        assert_eq!(group(GroupKind::BpfProgram, Some("sys_enter")), None);
        assert_eq!(group(GroupKind::BpfProgram, Some("free")), None);
        let counts = |name: &str| {
            let x = path(&p, name);
            (x.kind, x.inclusive_samples, x.self_samples)
        };
        assert_eq!(counts("__secure_computing"), (PathKind::Seccomp, 6, 6));
        let seccomp = path(&p, "__secure_computing");
        assert_eq!(seccomp.syscall.as_deref(), Some("getpid"));
        assert_eq!(path(&p, "__audit_syscall_entry").kind, PathKind::Audit);
        let nf = path(&p, "nf_hook_slow");
        assert_eq!((nf.kind, nf.self_samples), (PathKind::Netfilter, 3));
        assert_eq!(counts("tracepoint_raw"), (PathKind::BpfProgram, 9, 9));
    }

    #[test]
    fn a_program_frame_is_bpf_prog_a_sixteen_digit_tag_and_its_name() {
        assert_eq!(
            bpf_program("bpf_prog_0123456789abcdef_sys_exit"),
            Some("sys_exit")
        );
        assert_eq!(
            bpf_program("bpf_prog_0123456789abcdef"),
            Some("0123456789abcdef")
        );
        assert_eq!(bpf_program("bpf_prog_free"), None);
        assert_eq!(bpf_program("bpf_prog_alloc_no_stats"), None);
        assert_eq!(bpf_program("security_file_open"), None);
    }

    #[test]
    fn a_profile_with_no_sample_in_a_layer_says_so_at_zero() {
        let mut names = HashMap::new();
        let mut s = SampledStacks::default();
        s.add(vec![stack(
            &["do_syscall_64", "__x64_sys_getppid"],
            110,
            3,
            &mut names,
        )]);
        let p = profile(&s, &names, 1000, 1, None);
        for kind in [
            GroupKind::Seccomp,
            GroupKind::Audit,
            GroupKind::Netfilter,
            GroupKind::OtherBpf,
        ] {
            let g = p.groups.iter().find(|g| g.kind == kind).expect("a layer");
            assert_eq!(g.samples, 0, "{kind:?}");
        }
    }

    #[test]
    fn another_tool_s_program_named_like_a_probe_is_told_apart_by_its_tag() {
        let mut names = HashMap::new();
        let enter = ["entry_SYSCALL_64", "do_syscall_64", "syscall_trace_enter"];
        let via = |prog: &'static str| [&enter[..], &["trace_sys_enter", prog]].concat();
        let mut s = SampledStacks::default();
        s.add(vec![
            stack(
                &via("bpf_prog_00000000000000aa_sys_enter"),
                39,
                5,
                &mut names,
            ),
            stack(
                &via("bpf_prog_00000000000000bb_sys_enter"),
                39,
                7,
                &mut names,
            ),
        ]);
        // By name alone both are the probes'.
        assert_eq!(profile(&s, &names, 1000, 1, None).probe_samples, 12);
        s.set_own_programs(vec!["00000000000000aa".into()]);
        let p = profile(&s, &names, 1000, 1, None);
        assert_eq!(p.probe_samples, 5);
        let other = path(&p, "sys_enter");
        assert_eq!(
            (other.kind, other.inclusive_samples),
            (PathKind::BpfProgram, 7)
        );
    }

    #[test]
    fn inject_s_programs_are_hookprof_s_never_another_tool_s_layer() {
        let tags = vec!["00000000000000aa".to_string()];
        for frame in [
            "bpf_prog_0123456789abcdef_inject_sys_exit",
            "bpf_prog_fedcba9876543210_spin_until",
        ] {
            assert_eq!(other_program(frame, &tags), None, "{frame}");
            assert_eq!(other_program(frame, &[]), None, "{frame}");
        }
        let theirs = "bpf_prog_0123456789abcdef_tracepoint_raw";
        assert_eq!(other_program(theirs, &tags), Some("tracepoint_raw"));
    }
}
