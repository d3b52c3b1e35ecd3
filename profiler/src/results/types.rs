//! The results file's types: one JSON document per run (or per imported configuration).
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::RunOptions;

/// Bumped whenever a field changes meaning or a required field is added.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Results {
    #[serde(deserialize_with = "crate::results::load::supported_schema")]
    pub schema_version: u32,
    /// Free label of this run or configuration (an imported summary's host label, `--label`).
    pub label: String,
    /// false when the run was interrupted and holds only what was gathered so far.
    pub complete: bool,
    /// Where the numbers came from: "hookprof" or "import:lmbench" / "import:time".
    #[schemars(with = "String")]
    pub source: Source,
    pub environment: Environment,
    /// The options the run was made with (those a file leaves out were not given, or are
    /// not known to its source).
    #[serde(default)]
    pub options: RunOptions,
    #[serde(default)]
    pub probes: ProbeReport,
    /// The probes' own cost, measured in the same run (absent when nothing could be timed).
    #[serde(default)]
    pub calibration: Option<Calibration>,
    /// Ground-truth BPF LSM programs attached for the whole run (`--inject`, `--stack-noop`).
    #[serde(default)]
    pub lsm_programs: Vec<LsmProgramRecord>,
    /// Syscall injections in force for the whole run (`--inject syscall:NAME=NS`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub syscall_injections: Vec<SyscallInjectionRecord>,
    /// One variant of a paired run (`run --versus`): its rounds pair with the other variant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairing: Option<Pairing>,
    #[serde(deserialize_with = "crate::results::load::workloads")]
    pub workloads: Vec<WorkloadResult>,
}

/// The variant a paired run's file holds. Both variants of a `run --versus` were measured in
/// the same rounds of one run, back to back with a fresh runner each, so round i of one and
/// round i of the other shared the machine's state: their difference is the variant's effect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Pairing {
    /// The run both variants came from (the same in both files).
    pub run: String,
    /// "base" (the run's own options) or "versus" (the options of `--versus`), or one value of
    /// `run --sweep` (`seccomp-filters=4`): every value of a sweep is a variant of one run.
    pub variant: String,
    /// The options that made each variant differ, as given: the base's, and `--versus`'s (or
    /// `--sweep`'s).
    pub base_options: String,
    pub versus_options: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct LsmProgramRecord {
    /// LSM hook name without the `security_` prefix (`file_open`).
    pub hook: String,
    /// Busy-wait per call in ns (0 for a no-op program).
    pub busy_ns: u64,
    /// The kernel's own BPF statistics for the program over the whole run: invocations and
    /// mean run time (a cross-check of the injected cost).
    #[serde(default)]
    pub runs: u64,
    #[serde(default)]
    pub mean_run_ns: f64,
}

/// A syscall the runners' tracked tasks busy-waited on, on their way out of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SyscallInjectionRecord {
    /// Its name and number in the table of the architecture the run was made on.
    pub syscall: String,
    pub nr: u32,
    /// The wait asked for, ns per call.
    pub busy_ns: u64,
    /// Calls that waited (the tracked tasks' calls only, clean and probed samples alike) and
    /// the wait each took on average, clock to clock.
    pub calls: u64,
    pub mean_wait_ns: f64,
    /// The kernel's own BPF statistics for the program: it runs on every syscall exit on the
    /// machine (an untracked task's after one lookup), so these are mostly others' runs.
    #[serde(default)]
    pub runs: u64,
    #[serde(default)]
    pub mean_run_ns: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Calibration {
    /// The kernel function the pairs were attached to.
    pub function: String,
    /// getppid with nothing attached, ns per call.
    pub bare_ns: f64,
    /// The floor: what empty raw_tracepoint programs on sys_enter/sys_exit add to one syscall.
    #[serde(default)]
    pub empty_syscall_pair_ns: f64,
    /// What the syscall probes (sys_enter/sys_exit with timing) add to a tracked syscall.
    pub syscall_probes_ns: f64,
    /// What the syscall probes add to a syscall of an untracked task (the rest of the machine).
    #[serde(default)]
    pub untracked_syscall_ns: f64,
    /// What an empty fentry/fexit pair adds to one call.
    pub empty_pair_ns: Option<f64>,
    /// What hookprof's timed pair adds to one call.
    pub timed_pair_ns: Option<f64>,
    /// timed / empty: hookprof's timing code relative to the trampoline floor.
    pub timed_over_empty: Option<f64>,
    /// The duration the timed pair reports for the (nearly empty) function: how much of the
    /// probe's own cost lands inside every measured call.
    pub self_ns: Option<f64>,
    /// Kernel BPF statistics, from a pass of their own (they slow every program down, so the
    /// timed loops above run without them): average run time per invocation of each program.
    pub kernel_run_ns: Vec<(String, f64)>,
    /// Why the pair figures are missing, if they are.
    pub refused: Option<String>,
}

impl Results {
    /// A run's results before any workload is measured: its label, where it runs, the options
    /// it was made with, its probes and what their calibration found.
    pub fn begun(
        label: String,
        environment: Environment,
        options: RunOptions,
        probes: ProbeReport,
        calibration: Option<Calibration>,
    ) -> Results {
        Results {
            schema_version: SCHEMA_VERSION,
            label,
            complete: true,
            source: Source::Hookprof,
            environment,
            options,
            probes,
            lsm_programs: Vec::new(),
            syscall_injections: Vec::new(),
            pairing: None,
            calibration,
            workloads: Vec::new(),
        }
    }

    pub fn workload(&self, name: &str) -> Option<&WorkloadResult> {
        self.workloads.iter().find(|w| w.name == name)
    }

    /// The names of the workloads that failed, in run order.
    pub fn failed_workloads(&self) -> Vec<&str> {
        self.workloads
            .iter()
            .filter(|w| w.failure.is_some())
            .map(|w| w.name.as_str())
            .collect()
    }

    /// The translation units of the `build` workload's tree, if this run built it (older
    /// files: the default tree; imports built something else).
    pub fn build_units(&self) -> Option<u64> {
        let built = self.workloads.iter().any(|w| w.name == "build");
        (built && !self.samples_are_runs()).then(|| {
            self.options
                .build_units
                .unwrap_or(DEFAULT_BUILD_UNITS as u64)
        })
    }
}

impl Results {
    /// Each sample is a separate run (imported summaries: lmbench's and kernbench's tables
    /// list one value per run), not one of many taken under one run's conditions.
    pub fn samples_are_runs(&self) -> bool {
        matches!(self.source, Source::Import(_))
    }
}

/// Where a results file's numbers came from, spelt in the file as `hookprof` or
/// `import:FORMAT`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Source {
    /// Measured by a hookprof run (or stat).
    Hookprof,
    /// Imported from another tool's output: lmbench's summary, time's.
    Import(String),
}

impl TryFrom<String> for Source {
    type Error = String;
    fn try_from(s: String) -> Result<Source, String> {
        match s.strip_prefix("import:") {
            _ if s == "hookprof" => Ok(Source::Hookprof),
            Some(from) if !from.is_empty() => Ok(Source::Import(from.to_string())),
            _ => Err(format!(
                "source '{s}' is neither hookprof nor import:FORMAT"
            )),
        }
    }
}

impl From<Source> for String {
    fn from(s: Source) -> String {
        s.to_string()
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Source::Hookprof => f.write_str("hookprof"),
            Source::Import(from) => write!(f, "import:{from}"),
        }
    }
}

impl Calibration {
    /// A program's mean run time by the kernel's stats, if it ran in the statistics pass.
    pub fn run_ns(&self, program: &str) -> Option<f64> {
        self.kernel_run_ns
            .iter()
            .find(|(name, _)| name == program)
            .map(|&(_, ns)| ns)
    }

    /// Kernel run time of a pair of programs relative to another pair, by the kernel's stats.
    pub fn kernel_ratio(&self, pair: [&str; 2], floor: [&str; 2]) -> Option<f64> {
        let sum = |names: [&str; 2]| Some(self.run_ns(names[0])? + self.run_ns(names[1])?);
        let floor = sum(floor)?;
        (floor > 0.0).then_some(sum(pair)? / floor)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Environment {
    pub kernel_release: String,
    #[serde(default)]
    pub kernel_version: String,
    /// The machine's architecture (`uname -m`: x86_64, aarch64), whose syscall table names
    /// the syscalls; empty in files from before it was recorded, and in imports.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub machine: String,
    /// From /sys/kernel/security/lsm, in order.
    #[serde(default)]
    pub active_lsms: Vec<String>,
    /// The bracketed mode of /sys/kernel/security/lockdown ("none", "integrity", ...).
    #[serde(default)]
    pub lockdown: String,
    #[serde(default)]
    pub cpu_model: String,
    /// The CPUs the machine has online; 0 when unknown (files from before it was recorded,
    /// imports).
    #[serde(default)]
    pub cpus_online: u32,
    /// The CPUs the run could use: its affinity mask, which `taskset` and cpusets narrow; 0
    /// when unknown. Files from before `cpus_online` have it as `cpus`, which counted these (or
    /// fewer, under a cgroup CPU quota).
    #[serde(default, alias = "cpus")]
    pub cpus_allowed: u32,
    #[serde(default)]
    pub hostname: String,
    pub hookprof_version: String,
    /// Unix time the run started, seconds.
    #[serde(default)]
    pub started_at: u64,
    /// The profiler process's peak resident set over the run, KiB (the workloads run in a
    /// runner process of their own: see each workload's `runner_peak_rss_kib`).
    #[serde(default)]
    pub profiler_peak_rss_kib: Option<u64>,
    /// The profiler's peak resident set as it stood at the end of each phase (loading the
    /// probes, each workload), so a growth is pinned on the phase that caused it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub profiler_peak_rss_by_phase: Vec<PhasePeak>,
    /// How busy the rest of the machine was while the workloads were measured (None for
    /// imports and files from before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_load: Option<crate::machine::load::MachineLoad>,
    /// Other processes' BPF programs attached where the run measured, found before and after
    /// the workloads ran (another hookprof, `top`, bpftrace, an agent): their cost is in every
    /// time. Empty when there were none; absent when not looked for (imports, older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_bpf_programs: Option<Vec<crate::machine::other_probes::OtherProgram>>,
    /// The pid, user, mount, cgroup and network namespaces the run ran in (absent in imports
    /// and older files): the network workloads ran in its network namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<crate::machine::namespaces::Namespaces>,
}

/// The profiler's peak resident set at the end of a phase of the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PhasePeak {
    pub phase: String,
    pub peak_rss_kib: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeReport {
    pub attached: Vec<ProbeRecord>,
    pub refused: Vec<Refusal>,
    /// For each hook the workloads called, the LSM functions the plan looked for under it
    /// on this kernel, and why any is not timed. Empty where no hook was found, and in older
    /// files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lsm_lookups: Vec<HookLookup>,
}

/// The LSM functions looked for under one `security_*` hook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookLookup {
    pub hook: String,
    /// The active LSMs in their order, then the inactive ones whose function is built in.
    pub lsms: Vec<LsmLookup>,
}

/// One LSM's function under a hook: the names tried, the one found, or why none is timed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LsmLookup {
    pub lsm: String,
    /// The names looked for, in order (`apparmor_file_open`, `apparmor_file_open_security`).
    pub looked_for: Vec<String>,
    /// The name found in the kernel's BTF, which the plan times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Missing>,
}

/// Why an LSM's function under a hook is not timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Missing {
    /// Built in, but the LSM is not in the active list (`lsm=`): the kernel never calls it.
    NotActive,
    /// In kallsyms but not in BTF: no trampoline attaches without the function's type.
    NotInBtf,
    /// Only a compiler's specialised copy is in kallsyms (`NAME.isra.0`, `.constprop.0`).
    CompilerCopy,
    /// In neither kallsyms nor BTF: the LSM has no such hook here, or it was inlined.
    NotInKernel,
}

impl Missing {
    pub fn describe(self) -> &'static str {
        match self {
            Missing::NotActive => "LSM not active",
            Missing::NotInBtf => "in kallsyms, not in BTF",
            Missing::CompilerCopy => "only a compiler's copy (.isra/.constprop) in kallsyms",
            Missing::NotInKernel => {
                "in neither kallsyms nor BTF (no such hook in that LSM here, or inlined)"
            }
        }
    }
}

impl HookLookup {
    /// `security_file_open: looked for bpf: bpf_lsm_file_open; capability: cap_file_open or
    /// cap_file_open_security? in neither kallsyms nor BTF (...)`.
    pub fn describe(&self) -> String {
        let each: Vec<String> = self.lsms.iter().map(LsmLookup::describe).collect();
        format!("{}: looked for {}", self.hook, each.join("; "))
    }
}

impl LsmLookup {
    /// `apparmor: apparmor_file_open` or `tomoyo: tomoyo_file_open? LSM not active`.
    pub fn describe(&self) -> String {
        match (&self.found, self.missing) {
            (Some(f), None) => format!("{}: {f}", self.lsm),
            (_, missing) => format!(
                "{}: {}? {}",
                self.lsm,
                self.looked_for.join(" or "),
                missing.map_or("not found", Missing::describe)
            ),
        }
    }
}

impl ProbeReport {
    /// The functions refused a timing pair (fentry/fexit), each once: the count `hookprof hooks`
    /// gives for the same functions.
    pub fn refused_functions(&self) -> usize {
        let mut functions: Vec<&str> = self
            .refused
            .iter()
            .filter(|r| r.kind.is_trampoline_pair())
            .map(|r| r.target.as_str())
            .collect();
        functions.sort_unstable();
        functions.dedup();
        functions.len()
    }

    /// The functions timed by a pair (fentry attached), each once.
    pub fn timed_functions(&self) -> usize {
        let mut functions: Vec<&str> = self
            .attached
            .iter()
            .filter(|a| a.kind == ProbeKind::FEntry)
            .map(|a| a.target.as_str())
            .collect();
        functions.sort_unstable();
        functions.dedup();
        functions.len()
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeRecord {
    pub kind: ProbeKind,
    pub target: String,
}

/// The kind of BPF program a probe is, spelt as libbpf's section names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    RawTracepoint,
    TpBtf,
    #[serde(rename = "fentry")]
    FEntry,
    #[serde(rename = "fexit")]
    FExit,
    /// A BPF LSM program (`--inject`, `--stack-noop`).
    Lsm,
    /// One perf event per CPU (`target` names the CPU): the stack sampler.
    PerfEvent,
}

impl ProbeKind {
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::RawTracepoint => "raw_tracepoint",
            ProbeKind::TpBtf => "tp_btf",
            ProbeKind::FEntry => "fentry",
            ProbeKind::FExit => "fexit",
            ProbeKind::Lsm => "lsm",
            ProbeKind::PerfEvent => "perf_event",
        }
    }

    /// A timing pair's half: fentry or fexit.
    pub fn is_trampoline_pair(self) -> bool {
        matches!(self, ProbeKind::FEntry | ProbeKind::FExit)
    }
}

impl std::fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Refusal {
    pub kind: ProbeKind,
    pub target: String,
    /// errno from the kernel, when it gave one.
    pub errno: Option<i32>,
    /// What the refusal means, in words.
    pub reason: String,
}

/// What a metric's number means and which way is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum Unit {
    /// Microseconds per operation (lmbench latencies).
    #[serde(rename = "us")]
    Microseconds,
    /// Nanoseconds per operation (memory latency).
    #[serde(rename = "ns")]
    Nanoseconds,
    /// Megabytes (10^6 bytes, as lmbench) per second.
    #[serde(rename = "MB/s")]
    MegabytesPerSecond,
    /// Seconds per run (build elapsed, user, system).
    #[serde(rename = "s")]
    Seconds,
    /// Percent (build %CPU).
    #[serde(rename = "%")]
    Percent,
}

impl Unit {
    /// What a workload's main metric in this unit is: `Time` per operation, or `Bandwidth`.
    pub fn metric_name(self) -> &'static str {
        match self {
            Unit::MegabytesPerSecond => "Bandwidth",
            Unit::Percent => "CPU",
            Unit::Microseconds | Unit::Nanoseconds | Unit::Seconds => "Time",
        }
    }

    /// For latencies and times smaller is better; for bandwidth and %CPU larger is.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Unit::MegabytesPerSecond | Unit::Percent)
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Unit::Microseconds => "us",
            Unit::Nanoseconds => "ns",
            Unit::MegabytesPerSecond => "MB/s",
            Unit::Seconds => "s",
            Unit::Percent => "%",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadResult {
    /// Canonical workload name (`null_call`, `open_close`, `build`, ...).
    pub name: String,
    /// lmbench family: processes, ctxsw, latency, file_vm, bandwidth, memory, macro.
    pub family: Family,
    pub unit: Unit,
    /// Operations timed per sample (0 for imported data).
    #[serde(default)]
    pub iterations: u64,
    /// The metric without probes attached, one value per sample.
    #[serde(deserialize_with = "crate::results::load::samples")]
    pub clean: Vec<f64>,
    /// The metric with probes attached, one value per sample (empty when nothing was probed).
    #[serde(default, deserialize_with = "crate::results::load::samples")]
    pub probed: Vec<f64>,
    /// Further metrics of the same samples (build: user, system, cpu_percent).
    #[serde(default)]
    pub extra: Vec<ExtraMetric>,
    /// Where each op's time goes, from the probed samples.
    #[serde(default)]
    pub attribution: Vec<AttributionRow>,
    /// Task events per op from the probed samples (fork, exec, exit).
    #[serde(default)]
    pub events_per_op: BTreeMap<String, f64>,
    /// Anything the user should know about these numbers (a probe missed calls, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// Why the workload could not be measured to the end (the samples before it are kept).
    #[serde(default)]
    pub failure: Option<WorkloadFailure>,
    /// The runner process's peak resident set while it hosted this workload, KiB.
    #[serde(default)]
    pub runner_peak_rss_kib: Option<u64>,
    /// With `--parallel N` (N > 1), each copy's own samples; `clean` and `probed` above then
    /// hold per sample the mean over the copies (latency) or their sum (bandwidth).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<CopySamples>,
    /// How many of `clean` (and of `probed`) each round took, in order (`run --rounds`): a
    /// round is measured by a fresh runner with the workloads in a fresh order, so its samples
    /// share that round's conditions. Empty (files before rounds, imports): one round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub round_sizes: Vec<usize>,
    /// Sampled kernel stacks of the probed samples (`--probes stacks`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<super::StackProfile>,
    /// The probed op's time on and off CPU (`--probes sched`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accounting: Option<super::Accounting>,
    /// What the attribution rows' `share` is of (None: nothing attributed, or a file from
    /// before shares said it, read as of the clean op).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of: Option<ShareWhole>,
    /// Other tools' BPF programs by the kernel's BPF statistics, over one untimed, unprobed
    /// sample a round.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub other_programs: Vec<crate::machine::bpf_stats::OtherProgramRuns>,
}

impl WorkloadResult {
    /// A workload of this name, family and unit with these clean samples and nothing else yet
    /// (the one constructor: measuring and importing fill in the rest).
    pub fn new(name: &str, family: Family, unit: Unit, clean: Vec<f64>) -> WorkloadResult {
        WorkloadResult {
            name: name.into(),
            family,
            unit,
            iterations: 0,
            clean,
            probed: Vec::new(),
            extra: Vec::new(),
            attribution: Vec::new(),
            events_per_op: BTreeMap::new(),
            notes: Vec::new(),
            failure: None,
            runner_peak_rss_kib: None,
            copies: Vec::new(),
            round_sizes: Vec::new(),
            profile: None,
            accounting: None,
            share_of: None,
            other_programs: Vec::new(),
        }
    }

    /// A per-sample series of this workload (`clean`, `probed`, a further metric's) cut into
    /// its rounds, in order; every sample in one round when the file records no rounds (or
    /// rounds that do not add up to the series).
    pub fn by_round<'a>(&self, samples: &'a [f64]) -> Vec<&'a [f64]> {
        split_by_round(samples, &self.round_sizes)
    }
}

/// `samples` cut into rounds of `sizes`; all in one round when the sizes do not add up to them.
fn split_by_round<'a>(samples: &'a [f64], sizes: &[usize]) -> Vec<&'a [f64]> {
    if sizes.is_empty() || sizes.iter().sum::<usize>() != samples.len() {
        return vec![samples];
    }
    let mut rest = samples;
    sizes
        .iter()
        .map(|&n| {
            let (round, tail) = rest.split_at(n);
            rest = tail;
            round
        })
        .collect()
}

/// One copy's samples of a workload run with `--parallel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CopySamples {
    /// The copy's metric without probes attached, one value per sample.
    #[serde(deserialize_with = "crate::results::load::samples")]
    pub clean: Vec<f64>,
    /// The copy's metric with probes attached, one value per sample.
    #[serde(default, deserialize_with = "crate::results::load::samples")]
    pub probed: Vec<f64>,
    /// When each clean sample ran: [start, end] in CLOCK_MONOTONIC ns, the same clock for
    /// every copy, so the copies' overlap in time can be checked.
    pub clean_spans: Vec<[u64; 2]>,
    /// When each probed sample ran, as `clean_spans`.
    #[serde(default)]
    pub probed_spans: Vec<[u64; 2]>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WorkloadFailure {
    /// What the workload was doing: set-up, calibration, warm-up, sample N, tear-down.
    pub phase: String,
    pub error: String,
}

impl WorkloadFailure {
    /// `failed in warm-up: '/bin/false' failed (exit status: 1)`.
    pub fn sentence(&self) -> String {
        let error = self
            .error
            .strip_prefix(&format!("{}: ", self.phase))
            .unwrap_or(&self.error);
        format!("failed in {}: {error}", self.phase)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExtraMetric {
    pub name: String,
    pub unit: Unit,
    #[serde(deserialize_with = "crate::results::load::samples")]
    pub clean: Vec<f64>,
}

/// How a row's corrected figures took the probes' own cost out of its timed span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionMethod {
    /// A pair cost calibrated on getppid's function (`calibration`) per probed call: its own
    /// pair's part inside the span, and a whole pair per timed call nested in it.
    Calibrated,
    /// The span's sampled stacks in the same run: the time less the share of the samples
    /// inside the span that landed in the probes (their trampolines and programs), which
    /// prices the probes where they ran rather than in a loop.
    SampledSpan,
}

impl CorrectionMethod {
    /// The short label reports put beside a corrected figure.
    pub fn label(self) -> &'static str {
        match self {
            CorrectionMethod::Calibrated => "calibrated",
            CorrectionMethod::SampledSpan => "sampled",
        }
    }
}

/// The translation units of the `build` workload's default tree (`--build-units`), which a
/// file that does not record them built.
pub const DEFAULT_BUILD_UNITS: usize = 300;

/// The lmbench summary section a workload belongs to, spelt as its key in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Family {
    #[serde(rename = "processes")]
    Processes,
    #[serde(rename = "ctxsw")]
    ContextSwitch,
    #[serde(rename = "latency")]
    LocalLatency,
    #[serde(rename = "file_vm")]
    FileVm,
    #[serde(rename = "bandwidth")]
    Bandwidth,
    #[serde(rename = "memory")]
    MemoryLatency,
    #[serde(rename = "macro")]
    Macro,
}

impl Family {
    pub fn key(self) -> &'static str {
        match self {
            Family::Processes => "processes",
            Family::ContextSwitch => "ctxsw",
            Family::LocalLatency => "latency",
            Family::FileVm => "file_vm",
            Family::Bandwidth => "bandwidth",
            Family::MemoryLatency => "memory",
            Family::Macro => "macro",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// The whole a workload's attribution shares are of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ShareWhole {
    /// The probed op's CPU time over all its tasks (sched_switch measured it): the rows are
    /// CPU time too.
    ProbedOpCpuTime,
    /// The clean op's mean, where the CPU time was not measured.
    CleanOp,
    /// The probed op's mean time, where its CPU time was not measured: the pass the rows
    /// timed.
    ProbedOp,
    /// The op's own CPU time by its sampled stacks (the probes' samples left out): what the
    /// sampled parts and shares are of.
    OpOwnCpuTime,
    /// The same, counted in passes for the stacks alone with no timing probe attached.
    UnprobedOpOwnCpuTime,
}

impl ShareWhole {
    /// `of the clean op`, as a sentence names the whole.
    pub fn of(self) -> &'static str {
        match self {
            ShareWhole::ProbedOpCpuTime => "of the probed op's CPU time",
            ShareWhole::CleanOp => "of the clean op",
            ShareWhole::ProbedOp => "of the probed op",
            ShareWhole::OpOwnCpuTime => "of the op's own CPU time",
            ShareWhole::UnprobedOpOwnCpuTime => "of the unprobed op's own CPU time",
        }
    }

    /// A share column's heading.
    pub fn heading(self) -> &'static str {
        match self {
            ShareWhole::ProbedOpCpuTime => "CPU share",
            ShareWhole::CleanOp | ShareWhole::ProbedOp => "share",
            ShareWhole::OpOwnCpuTime | ShareWhole::UnprobedOpOwnCpuTime => "CPU share",
        }
    }
}

/// What kind of path an attribution row measures.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    Syscall,
    /// A `security_*` hook (inclusive of the LSM functions under it).
    Hook,
    /// One LSM's own function under a hook; `parent` names the hook.
    Lsm,
    /// A fork/exit/exec task path (copy_process, do_exit, their per-subsystem steps).
    TaskPath,
    /// Seccomp's filtering at syscall entry, named by its outermost frame (sampled only).
    Seccomp,
    /// Audit's syscall filtering and logging, named by its outermost frame (sampled only).
    Audit,
    /// A netfilter hook's chain walk (`nf_hook_slow`, nftables, iptables; sampled only).
    Netfilter,
    /// A BPF program not hookprof's own, by its name (sampled only).
    BpfProgram,
}

impl PathKind {
    /// The short name reports put before a path's name ("syscall openat", "task copy_process").
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Syscall => "syscall",
            PathKind::Hook => "hook",
            PathKind::Lsm => "lsm",
            PathKind::TaskPath => "task",
            PathKind::Seccomp => "seccomp",
            PathKind::Audit => "audit",
            PathKind::Netfilter => "netfilter",
            PathKind::BpfProgram => "bpf program",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AttributionRow {
    pub kind: PathKind,
    /// Syscall or kernel function name.
    pub name: String,
    /// The hook an LSM function runs under, or the task path a step runs under.
    #[serde(default)]
    pub parent: Option<String>,
    /// For an LSM function: which LSM (as in /sys/kernel/security/lsm).
    #[serde(default)]
    pub lsm: Option<String>,
    pub calls_per_op: f64,
    /// Mean time per timed call, raw (probe cost included); for a syscall whose wait was
    /// measured (`off_cpu_ns_per_op`), its time on a CPU.
    pub ns_per_call: f64,
    /// calls_per_op * ns_per_call.
    pub ns_per_op: f64,
    /// ns_per_op as a fraction of the whole its workload's `share_of` names: the figure the
    /// reports print (rows of one level add up to at most 1 of the probed op's CPU time, but
    /// for noise). Absent where the row outgrew that whole (a part above its whole is two
    /// measurements of one pass disagreeing, never a share: the reports say it in words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<f64>,
    /// ns_per_op as a fraction of the clean op time (may exceed 1: the probes' cost is in
    /// ns_per_op, and a blocking call's wait where it was not measured apart). None in files
    /// written before it was kept apart, whose `share` was this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share_of_clean_op: Option<f64>,
    /// ns_per_call less the probes' own cost inside the call, by `correction`; equal to
    /// ns_per_call when nothing nested was probed or no correction was possible.
    #[serde(default)]
    pub corrected_ns_per_call: f64,
    /// calls_per_op * corrected_ns_per_call.
    #[serde(default)]
    pub corrected_ns_per_op: f64,
    /// How the corrected figures took the probes' cost out (None: nothing was taken out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correction: Option<CorrectionMethod>,
    /// For a hook with LSM rows under it: its own dispatch cost per op (corrected inclusive
    /// time minus the LSM functions' corrected time).
    #[serde(default)]
    pub dispatch_ns_per_op: Option<f64>,
    /// Calls whose exit could not be matched (counted, not timed).
    #[serde(default)]
    pub untimed_calls: u64,
    /// Log2 histogram of call durations: bucket b counts 2^(b-1) <= ns < 2^b.
    #[serde(default)]
    pub histogram: Vec<u64>,
    /// Per-sample ns per op, for comparing hook costs across runs.
    #[serde(default, deserialize_with = "crate::results::load::samples")]
    pub samples_ns_per_op: Vec<f64>,
    /// A syscall's time switched out inside it per op (blocked or waiting for a CPU), kept
    /// out of its ns figures (None where sched_switch was not probed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu_ns_per_op: Option<f64>,
}
