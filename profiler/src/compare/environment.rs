//! What differs between the sides' environments (kernel, CPU, CPUs, LSMs, lockdown, policy,
//! copies, the machine's load): facts listed before any verdict.
use super::EnvironmentDifference;
use crate::results::Results;

pub(super) fn environment_differences(
    old: &[Results],
    new: &[Results],
) -> Vec<EnvironmentDifference> {
    type Field = (&'static str, fn(&Results) -> String);
    let fields: [Field; 9] = [
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
        ("policy", Results::policy_summary),
        // Copies at once (`--parallel`): a hook's ns/call at N against 1 shows contention.
        ("parallel copies", |r| r.parallel().to_string()),
        // A build of another tree size is other work, not a slower kernel.
        ("build units", |r| {
            r.build_units().map(|u| u.to_string()).unwrap_or_default()
        }),
        // A task sharing the run's CPU stretches the ops it overlaps.
        ("machine load", |r| {
            r.environment
                .machine_load
                .map(|l| l.class())
                .unwrap_or_default()
        }),
    ];
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
