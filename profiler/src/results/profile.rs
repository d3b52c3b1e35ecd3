//! The results' sampled side: where a workload's CPU time went by sampled kernel stacks
//! (`StackProfile`), and how an op's time divides between CPU and waiting (`Accounting`).
//! Both come from the probed samples; each figure names the method behind it.
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PathKind;

/// cpu-clock samples of the workload's tasks over its probed samples, with the paths they
/// fell in. A share is a ratio inside one run, so machine-speed drift cancels in it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StackProfile {
    /// The sampling period of the timed probed passes, ns of CPU time per sample (the
    /// software cpu-clock event).
    pub period_ns: u64,
    /// Samples that interrupted the workload's tasks, in user and kernel mode.
    pub samples: u64,
    /// Of those, samples in user mode.
    pub user_samples: u64,
    /// Of those, samples inside hookprof's own measuring programs (the probes' cost).
    pub probe_samples: u64,
    /// Kernel-mode samples whose stack the kernel could not keep (counted, without frames).
    #[serde(default)]
    pub lost_stacks: u64,
    /// Of `samples`, those taken in passes for the stacks alone (`run --stack-samples`), at
    /// their own rate; absent when every sample came from the timed passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_passes: Option<StackPasses>,
    /// Ops the timed probed samples ran, over all copies.
    pub ops: u64,
    /// CPU ns per op behind the shares, from the timed probed samples alone: the sched_switch
    /// accounting's when it ran, else their samples times the period.
    pub on_cpu_ns_per_op: f64,
    /// The workload's own samples (all less the probes' and the lost stacks) in each round,
    /// the unit of a share's round-level interval; empty with one round, and in files written
    /// before rounds were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_samples: Vec<u64>,
    /// Each hook, LSM function, syscall and task path the samples fell in.
    pub paths: Vec<SampledPath>,
    /// Folded stacks (root first, frames joined by ';') with their sample counts, most
    /// sampled first; past `FOLDED_LIMIT` stacks the rest are one `[other stacks]` line.
    #[serde(default)]
    pub folded: Vec<(String, u64)>,
    /// The paths taken together as the suite summary reads them: every security hook at once,
    /// each LSM's own functions, the hooks' own dispatch, the task paths. A sample counts once
    /// in a group however many of the group's paths are on its stack, so groups do not double
    /// count nested paths as a sum of `paths` would. Absent in files written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<SampledGroup>,
    /// The workload's own samples, each in exactly one place (user, an LSM function, a hook,
    /// a task path, one syscall's own code, or kernel work outside any syscall): the exclusive
    /// parts of the op that add up to its own CPU time. Absent in files written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub places: Vec<SampledPlace>,
}

/// Where a sample of the op's own CPU time was, each sample in one place only: the innermost
/// kind of path on its stack, else the syscall it was in, else how the kernel was entered.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Place {
    /// In user mode.
    User,
    /// In an LSM's own function under a hook.
    Lsm,
    /// In a security hook, in no LSM's function: the framework's dispatch and the hook's own
    /// work.
    Hook,
    /// In a fork/exit/exec task path, in no hook.
    TaskPath,
    /// In one syscall's own code (`syscall` names it), in no hook or task path.
    Syscall,
    /// In the page fault handler, outside any syscall.
    PageFault,
    /// In a hardware interrupt's handler, outside any syscall.
    Interrupt,
    /// In softirq work (network receive, timers, RCU), outside any syscall.
    Softirq,
    /// In the scheduler outside any syscall: a switch, or a new task's first steps.
    Scheduler,
    /// Anywhere else in the kernel, outside any syscall.
    OtherKernel,
}

impl Place {
    /// How a sentence names the place (`syscall` for a syscall's own code).
    pub fn describe(self, syscall: Option<&str>) -> String {
        match self {
            Place::User => "user time".into(),
            Place::Lsm => "LSM functions".into(),
            Place::Hook => "security hooks' own dispatch".into(),
            Place::TaskPath => "task paths".into(),
            Place::Syscall => syscall.unwrap_or("syscalls").into(),
            Place::PageFault => "page faults".into(),
            Place::Interrupt => "interrupts".into(),
            Place::Softirq => "softirqs".into(),
            Place::Scheduler => "the scheduler".into(),
            Place::OtherKernel => "other kernel code".into(),
        }
    }
}

/// One place's samples among the workload's own, with its share and the share's interval as
/// the groups have theirs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampledPlace {
    pub place: Place,
    /// The syscall, for `place` syscall (one entry per syscall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    pub samples: u64,
    /// samples over the workload's own samples.
    pub share: f64,
    pub share_low: f64,
    pub share_high: f64,
    /// share x the op's own CPU ns.
    pub ns_per_op: f64,
    /// `samples` round by round, beside the profile's `round_samples`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_samples: Vec<u64>,
}

/// What a [`SampledGroup`] takes together.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum GroupKind {
    /// Samples with any `security_*` hook on the stack: what the security layer costs.
    Hooks,
    /// Samples inside one LSM's own functions (`lsm` names it) under a hook.
    Lsm,
    /// Samples inside a hook but in no LSM's function: the framework's dispatch, and the
    /// work the hook does itself (a security blob's allocation, for one).
    Framework,
    /// Samples with a fork/exit/exec task path on the stack.
    TaskPaths,
    /// Samples in seccomp's filtering (`__secure_computing`, `__seccomp_filter` and the
    /// filters they run).
    Seccomp,
    /// Samples in audit's syscall filtering and logging (`__audit_*`, `audit_*`).
    Audit,
    /// Samples in a netfilter hook's chain walk (`nf_hook_slow`, `nft_do_chain`,
    /// `ipt_do_table`).
    Netfilter,
    /// Samples in any BPF program not hookprof's own measuring ones (another tool's, and
    /// `--inject`'s).
    OtherBpf,
    /// Samples in one such BPF program (`program` names it).
    BpfProgram,
}

/// One group's share of the workload's own CPU samples (the denominator of every share of
/// the profile: its samples less the probes' and the lost stacks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampledGroup {
    pub kind: GroupKind,
    /// The LSM, for `kind` lsm.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsm: Option<String>,
    /// The BPF program's name, for `kind` bpf_program.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    pub samples: u64,
    pub share: f64,
    /// The share's 95% interval: with the round as the unit where the profile kept two or
    /// more rounds (`round_samples`), never narrower than the samples' (Wilson score), which
    /// it is with one round.
    pub share_low: f64,
    pub share_high: f64,
    /// share x the op's own CPU ns.
    pub ns_per_op: f64,
    /// `samples` round by round, beside the profile's `round_samples`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_samples: Vec<u64>,
}

impl GroupKind {
    /// A group's name as a summary's column or row says it (`name`: the LSM's for `Lsm`, the
    /// program's for `BpfProgram`).
    pub fn label(self, name: Option<&str>) -> String {
        match self {
            GroupKind::Hooks => "security hooks".into(),
            GroupKind::Lsm => name.unwrap_or_default().into(),
            GroupKind::Framework => "framework".into(),
            GroupKind::TaskPaths => "task paths".into(),
            GroupKind::Seccomp => "seccomp".into(),
            GroupKind::Audit => "audit".into(),
            GroupKind::Netfilter => "netfilter".into(),
            GroupKind::OtherBpf => "other BPF".into(),
            GroupKind::BpfProgram => format!("BPF program {}", name.unwrap_or_default()),
        }
    }
}

impl SampledGroup {
    pub fn label(&self) -> String {
        self.kind
            .label(self.lsm.as_deref().or(self.program.as_deref()))
    }
}

/// The samples a run took in passes for the stacks alone: nothing in those passes is timed, so
/// they sample at a rate of their own and add to the shares, not to the CPU time per op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StackPasses {
    /// Their sampling period, ns of CPU time per sample.
    pub period_ns: u64,
    pub samples: u64,
    /// They ran with the sampler and the scope gate alone: no timed function, no syscall
    /// timing, no sched_switch in their stacks (false in older files, and on kernels without
    /// bpf_task_pt_regs, where a sample's syscall needs the timing probe's record).
    #[serde(default)]
    pub unprobed: bool,
    /// The programs attached in them, where they ran unprobed (the timed passes attach every
    /// program the header lists): the sampler and the task tracepoints, with the scope gate
    /// where the workload's children count from their execve on (empty in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    /// Where they ran unprobed: what their sampling added to the op's time, a fraction of the
    /// clean op's (their time per op against the clean passes'). The profile's CPU time per op
    /// is the one they counted, this cost in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_cost: Option<f64>,
    /// The 95% half-width of `sampling_cost` (their passes against the clean samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_cost_half_width: Option<f64>,
}

impl StackProfile {
    /// The samples its shares are of: its own, without the probes' and the lost stacks.
    pub fn own_samples(&self) -> u64 {
        self.samples
            .saturating_sub(self.probe_samples + self.lost_stacks)
    }

    /// The CPU time per op its shares are of: the op's, less the probes' and the lost
    /// stacks' part of the samples.
    pub fn own_ns_per_op(&self) -> f64 {
        self.on_cpu_ns_per_op * self.own_samples() as f64 / self.samples.max(1) as f64
    }

    /// Whether its shares and its CPU time per op are the unprobed op's: its passes for the
    /// stacks alone ran without the timing probes and counted the op's CPU time themselves.
    pub fn of_unprobed_op(&self) -> bool {
        self.stack_passes.as_ref().is_some_and(|s| s.unprobed)
    }

    /// The one name every kernel frame has, when a stack has several frames and they all have
    /// it: what a run that read kallsyms with its addresses hidden (kernel.kptr_restrict)
    /// named them, every address past the last symbol listed. Such stacks are no profile.
    pub fn names_hidden(&self) -> Option<&str> {
        let stacks = self
            .folded
            .iter()
            .map(|(stack, _)| stack.as_str())
            .filter(|s| !s.starts_with('['));
        let mut frames = stacks.clone().flat_map(|s| s.split(';'));
        let first = frames.next()?;
        let deep = stacks.clone().any(|s| s.contains(';'));
        (deep && frames.all(|f| f == first)).then_some(first)
    }

    /// Where the samples came from, for a heading: the timed passes' rate, and the passes'
    /// for the stacks alone where some ran.
    pub fn rates(&self) -> String {
        let hz = |period_ns: u64| format!("{:.0}", 1e9 / period_ns.max(1) as f64);
        match &self.stack_passes {
            Some(s) => format!(
                "{} at {} Hz in passes for the stacks alone{}, {} at {} Hz in the timed passes",
                s.samples,
                hz(s.period_ns),
                if s.unprobed {
                    " (no timing probe attached)"
                } else {
                    ""
                },
                self.samples - s.samples.min(self.samples),
                hz(self.period_ns)
            ),
            None => format!("at {} Hz", hz(self.period_ns)),
        }
    }
}

/// Folded stacks a workload keeps in its results (the rest are summed into one line).
pub const FOLDED_LIMIT: usize = 400;
/// The folded line that sums the stacks past the limit.
pub const OTHER_STACKS: &str = "[other stacks]";
/// The frame of a user-mode sample (user stacks are not walked).
pub const USER_FRAME: &str = "[user]";
/// The folded line of kernel-mode samples whose stack the kernel could not keep.
pub const LOST_STACK: &str = "[lost stack]";

/// One path's share of the workload's CPU samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SampledPath {
    pub kind: PathKind,
    pub name: String,
    /// The hook an LSM function ran under, or the task path a step ran under.
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub lsm: Option<String>,
    /// For a hook or a task path: the syscall most of its own samples ran in (None for a
    /// syscall, an LSM function, a path mostly outside any syscall, and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscall: Option<String>,
    /// Samples with the path anywhere on the stack, and with it as the innermost frame.
    pub inclusive_samples: u64,
    pub self_samples: u64,
    /// inclusive_samples over the workload's own samples (all less `probe_samples` and
    /// `lost_stacks`: the share of its CPU time without the probes), with its 95% interval
    /// (Wilson score).
    pub inclusive_share: f64,
    pub share_low: f64,
    pub share_high: f64,
    pub self_share: f64,
    /// inclusive_share x the op's own CPU ns (the CPU time less the probes' and lost
    /// samples' part), with the interval's ends likewise.
    pub ns_per_op: f64,
    pub ns_per_op_low: f64,
    pub ns_per_op_high: f64,
    /// Every sample with the path on the stack, the probes' own inside it included, and its
    /// ns per op of the probed op: the span an enter-to-exit timing of the path measures,
    /// to cross-check the two methods where both ran.
    #[serde(default)]
    pub spanned_samples: u64,
    #[serde(default)]
    pub spanned_ns_per_op: f64,
    /// inclusive_samples round by round (beside the profile's `round_samples`); empty as
    /// those are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_samples: Vec<u64>,
}

/// An op's time, whole: on a CPU (user, kernel, the probes' own) and off it (runnable but
/// waiting for a CPU, or blocked), summed over the op's tasks (sched_switch). With one task
/// these add up to the op's probed time; with several, `tasks` says how many were busy or
/// waiting at once on average, and CPU time per op stands beside wall time per op.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Accounting {
    /// The probed op's wall time (mean over the probed samples, per copy).
    pub wall_ns_per_op: f64,
    pub on_cpu_ns_per_op: f64,
    pub off_cpu_runnable_ns_per_op: f64,
    pub off_cpu_blocked_ns_per_op: f64,
    /// The CPU time's split by sampled stacks (None without samples).
    #[serde(default)]
    pub user_ns_per_op: Option<f64>,
    #[serde(default)]
    pub kernel_ns_per_op: Option<f64>,
    #[serde(default)]
    pub probe_ns_per_op: Option<f64>,
    /// (on + off CPU) / wall: 1 for a single task that was there all along.
    pub tasks: f64,
    /// Where the stacks were sampled in passes without the timing probes (the user and kernel
    /// split is then the profile's, of the unprobed op): what the probes added to the op's
    /// CPU time, this on-CPU time less the unprobed op's own, with its 95% half-width.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes_cost: Option<Estimate>,
}

/// A figure that is the difference of two measurements, with the half-width of its 95%
/// interval: read as "within noise" where the interval holds 0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Estimate {
    pub value: f64,
    pub half_width: f64,
}

impl Estimate {
    /// Whether the interval holds 0: the difference is not told from noise.
    pub fn within_noise(self) -> bool {
        self.value.abs() <= self.half_width
    }
}

impl Accounting {
    pub fn off_cpu_ns_per_op(&self) -> f64 {
        self.off_cpu_runnable_ns_per_op + self.off_cpu_blocked_ns_per_op
    }
}

#[cfg(test)]
mod tests {
    use super::StackPasses;

    #[test]
    fn the_heading_names_each_pass_kinds_rate_and_samples() {
        let mut p = crate::report::folded::tests::profile(1);
        p.period_ns = 1_000_000_000 / 249;
        assert_eq!(p.rates(), "at 249 Hz");
        p.stack_passes = Some(StackPasses {
            period_ns: 1_000_000_000 / 4_999,
            samples: 90,
            unprobed: false,
            programs: Vec::new(),
            sampling_cost: None,
            sampling_cost_half_width: None,
        });
        assert_eq!(
            p.rates(),
            "90 at 4999 Hz in passes for the stacks alone, 10 at 249 Hz in the timed passes"
        );
        p.stack_passes.as_mut().unwrap().unprobed = true;
        assert!(p.rates().starts_with(
            "90 at 4999 Hz in passes for the stacks alone (no timing probe attached),"
        ));
    }
}
