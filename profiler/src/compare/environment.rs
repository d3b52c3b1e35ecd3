//! What differs between the sides, as facts listed before any verdict: first the run options
//! that change what ran (an injected delay, a policy, the probes, where the workloads' files
//! live), then the machine and kernel (kernel, CPU, CPUs, LSMs, lockdown, the machine's
//! load, other tools' BPF programs on the measured paths, the network and pid namespaces).
//! Each is a field of the results read as one line per side; a new one is a line in its table.
use super::EnvironmentDifference;
use crate::results::Results;

/// A compared fact: its name and its value in one results file ("" where the file cannot say).
type Field = (&'static str, fn(&Results) -> String);

/// Run options that change what ran. An option a file does not record (an import, a file
/// from before it was recorded) is not compared.
const RUN_OPTIONS: &[Field] = &[
    ("inject", |r| {
        let inject = &r.options.inject;
        match (r.records_run_options(), inject.is_empty()) {
            (false, _) => String::new(),
            (true, true) => "none".into(),
            (true, false) => inject.join(", "),
        }
    }),
    ("policy", Results::policy_summary),
    ("stack noop", |r| {
        recorded(r, || match r.options.stack_noop {
            true => "a no-op BPF LSM program on every hook".into(),
            false => "none".into(),
        })
    }),
    ("user", |r| {
        recorded(r, || {
            r.options
                .user
                .clone()
                .unwrap_or_else(|| "the caller".into())
        })
    }),
    // Copies at once (`--parallel`): a hook's ns/call at N against 1 shows contention.
    ("parallel copies", |r| r.parallel().to_string()),
    ("probes", |r| joined(&r.options.probes)),
    ("hooks", |r| joined(&r.options.hooks)),
    // Each sample is an interrupt whose cost lands in the op it hits.
    ("stack sampling", |r| {
        let o = &r.options;
        let rate = |hz: Option<u64>| hz.map_or("?".into(), |hz| format!("{hz} Hz"));
        match (o.sample_hz, o.stack_sample_hz) {
            (None, None) => String::new(),
            (timed, stacks) => format!(
                "{} in the timed passes, {} in the stack passes",
                rate(timed),
                rate(stacks)
            ),
        }
    }),
    // A deeper directory is a longer path walk in every open and stat.
    ("workloads' files in", |r| {
        r.options.tmpdir.clone().unwrap_or_default()
    }),
    // A build of another tree size is other work, not a slower kernel.
    ("build units", |r| {
        r.build_units().map(|u| u.to_string()).unwrap_or_default()
    }),
];

/// The machine and kernel the runs ran on.
const ENVIRONMENT: &[Field] = &[
    ("kernel", |r| r.environment.kernel_release.clone()),
    ("CPU", |r| r.environment.cpu_model.clone()),
    // Fewer CPUs to run on (taskset, a cpuset) changes two-process and parallel workloads.
    ("CPUs", |r| {
        match (r.environment.cpus_online, r.environment.cpus_allowed) {
            (0, 0) => String::new(),
            (0, allowed) => format!("{allowed} allowed"),
            (online, allowed) => format!("{online} online, {allowed} allowed"),
        }
    }),
    ("LSMs", |r| r.environment.active_lsms.join(",")),
    ("lockdown", |r| r.environment.lockdown.clone()),
    // A task sharing the run's CPU stretches the ops it overlaps.
    ("machine load", |r| {
        r.environment
            .machine_load
            .map(|l| l.class())
            .unwrap_or_default()
    }),
    // Another tool's programs on the measured paths cost every op they ran in.
    ("other BPF programs", |r| {
        r.environment
            .other_bpf_programs
            .as_deref()
            .map(crate::machine::other_probes::summary)
            .unwrap_or_default()
    }),
];

/// The namespaces the runs ran in, compared where both sides record them (a file from before
/// they were recorded says nothing of them).
const NAMESPACES: &[Field] = &[
    // The network workloads ran on this namespace's stack (its devices, rules, routes).
    ("network namespace", |r| {
        r.environment
            .namespaces
            .map(|n| n.network_shown())
            .unwrap_or_default()
    }),
    // In a nested one every probe translates the pids it sees.
    ("pid namespace", |r| {
        r.environment
            .namespaces
            .map(|n| n.pid_shown())
            .unwrap_or_default()
    }),
];

/// `value` for a hookprof run, "" for a file that records no run options.
fn recorded(r: &Results, value: impl FnOnce() -> String) -> String {
    if r.records_run_options() {
        value()
    } else {
        String::new()
    }
}

fn joined(values: &[String]) -> String {
    values.join(",")
}

/// The run options that differ, where both sides record them.
pub(super) fn option_differences(old: &[Results], new: &[Results]) -> Vec<EnvironmentDifference> {
    recorded_differences(RUN_OPTIONS, old, new)
}

/// The `fields` that differ where both sides record them.
fn recorded_differences(
    fields: &[Field],
    old: &[Results],
    new: &[Results],
) -> Vec<EnvironmentDifference> {
    differences(fields, old, new)
        .into_iter()
        .filter(|d| !d.old.is_empty() && !d.new.is_empty())
        .collect()
}

/// The machine and kernel facts that differ.
pub(super) fn environment_differences(
    old: &[Results],
    new: &[Results],
) -> Vec<EnvironmentDifference> {
    let mut found = differences(ENVIRONMENT, old, new);
    found.extend(recorded_differences(NAMESPACES, old, new));
    found
}

/// Every compared fact's name, options first, for the line that says none differ.
pub(super) fn compared() -> Vec<&'static str> {
    RUN_OPTIONS
        .iter()
        .chain(ENVIRONMENT)
        .chain(NAMESPACES)
        .map(|(name, _)| *name)
        .collect()
}

fn differences(fields: &[Field], old: &[Results], new: &[Results]) -> Vec<EnvironmentDifference> {
    let distinct = |side: &[Results], f: fn(&Results) -> String| {
        let mut values: Vec<String> = Vec::new();
        for v in side.iter().map(f).filter(|v| !v.is_empty()) {
            if !values.contains(&v) {
                values.push(v);
            }
        }
        values
    };
    fields
        .iter()
        .filter_map(|&(field, f)| {
            let (o, n) = (distinct(old, f), distinct(new, f));
            (o != n).then_some(EnvironmentDifference {
                field,
                old: o,
                new: n,
            })
        })
        .collect()
}
