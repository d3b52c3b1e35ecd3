//! One interval of `top`: the difference of two readings of the aggregate, as rows per (group,
//! path) ranked by their time on a CPU, each also corrected for the probes' own cost, with the
//! time they spent switched out apart. Pure: readings and the calibration in, rows out.
use std::collections::{BTreeMap, HashMap};

use profiler_common::{AggregateKey, Tally, HIST_BUCKETS, HOOK_PATHS};
use serde::Serialize;

use crate::{
    attribution::{function_kind, syscall_name},
    probes::{tally_since, GroupBy, Target},
    results::PathKind,
    top::probe_cost::ProbeCost,
};

/// The aggregate's cumulative tallies at one moment.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// CLOCK_MONOTONIC, ns.
    pub at_ns: u64,
    /// The same moment in seconds since the Unix epoch (an interval's end, as printed).
    pub at_unix_s: f64,
    pub tallies: HashMap<AggregateKey, Tally>,
    /// Indexed by `profiler_common::event`.
    pub events: Vec<u64>,
}

/// What `top` prints per interval (one JSON line each).
#[derive(Debug, Clone, Serialize)]
pub struct Interval {
    /// 1 for the first interval.
    pub interval: u64,
    /// When it ended, in seconds since the Unix epoch.
    pub end_unix_s: f64,
    /// Its length in seconds.
    pub seconds: f64,
    /// Which tasks were counted (`system`, `cgroup /x`, `pid N`, `comm NAME`).
    pub scope: String,
    pub by: GroupBy,
    /// The probes' own cost, calibrated when top started, which the corrected figures take
    /// out (None if it could not be measured: they are then the raw ones).
    pub probe_cost: Option<ProbeCost>,
    /// Sorted by time spent, the most first.
    pub rows: Vec<Row>,
    /// Task events of the tasks in scope (fork, exec, exit), and diagnostics when nonzero.
    pub events: BTreeMap<String, u64>,
    /// The scope's sampled kernel stacks (absent when top samples nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sampled: Option<super::sampled::SampledInterval>,
}

/// One group's (cgroup or command) time in one path in one interval.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// The cgroup's path (from the cgroup2 root) or the command name.
    pub group: String,
    pub kind: PathKind,
    /// The syscall's or the kernel function's name.
    pub path: String,
    /// The hook an LSM function runs under, or the task path a step runs under.
    pub parent: Option<String>,
    pub lsm: Option<String>,
    /// Entries in the interval.
    pub calls: u64,
    pub calls_per_s: f64,
    /// Calls whose exit was matched (their time is known).
    pub timed: u64,
    /// Time in the path, entry to exit (a syscall's includes any time it was switched out).
    pub total_ns: u64,
    /// The part of `total_ns` the tasks spent switched out inside the call, blocked or waiting
    /// for a CPU (sched_switch): a syscall's wait, not its cost (0 for a function, where it is
    /// not measured).
    pub off_cpu_ns: u64,
    /// Timed functions the same tasks entered inside the timed calls (each added a pair).
    pub nested: u64,
    pub ns_per_call: f64,
    /// `total_ns` over the interval (wall time in the path, its waits included): 1.0 is one
    /// task in the path for the whole interval.
    pub cpu_share: f64,
    /// `ns_per_call` and `cpu_share` less the probes' own cost inside the timed calls (see
    /// `corrected_ns`), never below zero.
    pub corrected_ns_per_call: f64,
    pub corrected_cpu_share: f64,
    /// On-CPU time in the path (its time less its wait and the probes' own cost), per timed
    /// call and over the interval (1.0 is one CPU's worth): what `top` ranks by, as `perf top`
    /// ranks by samples on a CPU.
    pub on_cpu_ns_per_call: f64,
    pub on_cpu_share: f64,
    /// `off_cpu_ns` per timed call.
    pub wait_ns_per_call: f64,
    /// Log2 histogram of the timed calls (bucket b: 2^(b-1) <= ns < 2^b).
    #[serde(skip)]
    pub histogram: [u64; HIST_BUCKETS],
}

/// Names what an aggregate key's group and path are.
pub trait Names {
    fn group(&self, key: &AggregateKey) -> String;
}

/// The events an interval lists always, and those listed only when nonzero.
const EVENTS: &[(&str, u32)] = &[
    ("fork", profiler_common::event::FORK),
    ("exec", profiler_common::event::EXEC),
    ("exit", profiler_common::event::EXIT),
];
const DIAGNOSTICS: &[(&str, u32)] = &[
    ("untracked_tasks", profiler_common::event::TRACK_FULL),
    ("unmatched_exits", profiler_common::event::UNMATCHED_EXIT),
    ("stale_exits", profiler_common::event::STALE_EXIT),
    ("stack_full", profiler_common::event::STACK_FULL),
    ("aggregate_full", profiler_common::event::AGGREGATE_FULL),
];

/// The rows of what happened between `earlier` and `now`; `hooks` names the hook slots.
pub fn rows(
    earlier: &Reading,
    now: &Reading,
    hooks: &[Option<Target>],
    names: &dyn Names,
    cost: Option<&ProbeCost>,
) -> Vec<Row> {
    let seconds = now.at_ns.saturating_sub(earlier.at_ns) as f64 / 1e9;
    let mut rows: Vec<Row> = now
        .tallies
        .iter()
        .filter_map(|(key, tally)| {
            let delta = match earlier.tallies.get(key) {
                // A key the programs re-created after user space forgot it starts from zero.
                Some(before) if before.calls <= tally.calls => tally_since(tally, before),
                _ => *tally,
            };
            if delta.calls == 0 && delta.timed == 0 {
                return None;
            }
            let (kind, path, parent, lsm) = describe(key.path, hooks)?;
            let corrected = corrected_ns(kind, &delta, cost);
            let on_cpu = (corrected - delta.off_cpu_ns as f64).max(0.0);
            Some(Row {
                group: names.group(key),
                kind,
                path,
                parent,
                lsm,
                calls: delta.calls,
                calls_per_s: per_second(delta.calls as f64, seconds),
                timed: delta.timed,
                total_ns: delta.total_ns,
                off_cpu_ns: delta.off_cpu_ns,
                nested: delta.nested,
                ns_per_call: per_call(delta.total_ns as f64, delta.timed),
                cpu_share: per_second(delta.total_ns as f64, seconds) / 1e9,
                corrected_ns_per_call: per_call(corrected, delta.timed),
                corrected_cpu_share: per_second(corrected, seconds) / 1e9,
                on_cpu_ns_per_call: per_call(on_cpu, delta.timed),
                on_cpu_share: per_second(on_cpu, seconds) / 1e9,
                wait_ns_per_call: per_call(delta.off_cpu_ns as f64, delta.timed),
                histogram: delta.hist,
            })
        })
        .collect();
    // Ranked by time on a CPU: a call blocked in wait4 or futex costs the machine nothing.
    rows.sort_by(|a, b| {
        b.on_cpu_share
            .total_cmp(&a.on_cpu_share)
            .then(b.calls.cmp(&a.calls))
            .then_with(|| (&a.group, &a.path).cmp(&(&b.group, &b.path)))
    });
    rows
}

/// Task events and nonzero diagnostics between two readings.
pub fn events(earlier: &Reading, now: &Reading) -> BTreeMap<String, u64> {
    let delta = |index: u32| {
        let i = index as usize;
        now.events.get(i).copied().unwrap_or(0) - earlier.events.get(i).copied().unwrap_or(0)
    };
    let mut out: BTreeMap<String, u64> = EVENTS
        .iter()
        .map(|(name, index)| (name.to_string(), delta(*index)))
        .collect();
    for (name, index) in DIAGNOSTICS {
        let n = delta(*index);
        if n > 0 {
            out.insert(name.to_string(), n);
        }
    }
    out
}

/// Keys that did nothing between two readings: the aggregate can forget them.
pub fn idle(earlier: &Reading, now: &Reading) -> Vec<AggregateKey> {
    now.tallies
        .iter()
        .filter(|(key, tally)| earlier.tallies.get(key) == Some(tally))
        .map(|(key, _)| *key)
        .collect()
}

/// A tally's time less the probes' own cost inside it: each timed call loses the part of its own
/// pair inside its span, and each timed function entered inside it a whole function pair
/// (`run`'s model, with the syscall pair's part too, which top measures). Never below zero.
fn corrected_ns(kind: PathKind, delta: &Tally, cost: Option<&ProbeCost>) -> f64 {
    let raw = delta.total_ns as f64;
    let Some(c) = cost else { return raw };
    // A noisy calibration can come out negative; a probe never costs less than nothing.
    let own = match kind {
        PathKind::Syscall => c.syscall_in_span_ns,
        _ => c.function_in_span_ns.unwrap_or(0.0),
    }
    .max(0.0);
    let pair = c.function_pair_ns.unwrap_or(0.0).max(0.0);
    (raw - delta.timed as f64 * own - delta.nested as f64 * pair).max(0.0)
}

fn per_call(ns: f64, timed: u64) -> f64 {
    if timed == 0 {
        0.0
    } else {
        ns / timed as f64
    }
}

fn per_second(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

/// A path's kind and names: a syscall number, or a hook slot (None for a slot without a
/// function, which the programs never fill).
fn describe(
    path: u32,
    hooks: &[Option<Target>],
) -> Option<(PathKind, String, Option<String>, Option<String>)> {
    if path < HOOK_PATHS {
        return Some((PathKind::Syscall, syscall_name(path as usize), None, None));
    }
    let target = hooks.get((path - HOOK_PATHS) as usize)?.as_ref()?;
    Some((
        function_kind(target),
        target.function.clone(),
        target.parent.clone(),
        target.lsm.clone(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct ByComm;
    impl Names for ByComm {
        fn group(&self, key: &AggregateKey) -> String {
            String::from_utf8_lossy(&key.comm)
                .trim_end_matches('\0')
                .to_string()
        }
    }

    fn key(comm: &str, path: u32) -> AggregateKey {
        let mut k = AggregateKey {
            cgroup_id: 0,
            comm: [0; 16],
            path,
            _pad: 0,
        };
        k.comm[..comm.len()].copy_from_slice(comm.as_bytes());
        k
    }

    fn tally(calls: u64, total_ns: u64) -> Tally {
        let mut t = Tally {
            calls,
            timed: calls,
            total_ns,
            ..Tally::ZERO
        };
        t.hist[5] = calls;
        t
    }

    fn reading(at_ns: u64, tallies: &[(AggregateKey, Tally)]) -> Reading {
        Reading {
            at_ns,
            at_unix_s: at_ns as f64 / 1e9,
            tallies: tallies.iter().copied().collect(),
            events: vec![0; profiler_common::event::COUNT as usize],
        }
    }

    #[test]
    fn rows_are_the_differences_sorted_by_time_with_rates_and_shares() {
        let getppid = 110;
        let openat = 257;
        let hooks = vec![Some(Target {
            function: "hook_file_open".into(),
            parent: Some("security_file_open".into()),
            lsm: Some("landlock".into()),
        })];
        let before = reading(
            0,
            &[
                (key("a", getppid), tally(100, 1_000)),
                (key("b", openat), tally(5, 500)),
            ],
        );
        let after = reading(
            500_000_000,
            &[
                (key("a", getppid), tally(1100, 11_000)),
                (key("b", openat), tally(5, 500)),
                (key("b", HOOK_PATHS), tally(50, 250_000_000)),
            ],
        );
        let rows = rows(&before, &after, &hooks, &ByComm, None);
        assert_eq!(rows.len(), 2, "an idle key has no row: {rows:?}");
        assert_eq!(rows[0].path, "hook_file_open");
        assert_eq!(rows[0].kind, PathKind::Lsm);
        assert_eq!(rows[0].parent.as_deref(), Some("security_file_open"));
        assert_eq!(rows[0].cpu_share, 0.5);
        assert_eq!(
            (rows[1].group.as_str(), rows[1].path.as_str()),
            ("a", "getppid")
        );
        assert_eq!(rows[1].calls, 1000);
        assert_eq!(rows[1].calls_per_s, 2000.0);
        assert_eq!(rows[1].ns_per_call, 10.0);
        assert_eq!(rows[1].histogram[5], 1000);
        assert_eq!(idle(&before, &after), vec![key("b", openat)]);
        // Without a calibration the corrected figures are the raw ones.
        assert!(rows
            .iter()
            .all(|r| r.corrected_ns_per_call == r.ns_per_call
                && r.corrected_cpu_share == r.cpu_share));
    }

    #[test]
    fn rows_rank_by_time_on_a_cpu_and_keep_the_wait_apart() {
        let (wait4, statx) = (61, 332);
        // 10 wait4 calls blocked 90 ms each; 100,000 statx calls of 2 us on a CPU.
        let mut blocked = tally(10, 900_000_000);
        blocked.off_cpu_ns = 899_000_000;
        let before = reading(0, &[]);
        let after = reading(
            1_000_000_000,
            &[
                (key("bash", wait4), blocked),
                (key("ls", statx), tally(100_000, 200_000_000)),
            ],
        );
        let rows = rows(&before, &after, &[], &ByComm, None);
        assert_eq!(rows[0].path, "statx");
        assert_eq!(rows[0].on_cpu_share, 0.2);
        assert_eq!(rows[1].path, "wait4");
        assert_eq!(rows[1].cpu_share, 0.9);
        assert!((rows[1].on_cpu_share - 0.001).abs() < 1e-12);
        assert_eq!(rows[1].wait_ns_per_call, 89_900_000.0);
        assert_eq!(rows[1].on_cpu_ns_per_call, 100_000.0);
    }

    #[test]
    fn a_key_recreated_after_it_was_forgotten_counts_from_zero() {
        let before = reading(0, &[(key("a", 0), tally(100, 100))]);
        let after = reading(1_000_000_000, &[(key("a", 0), tally(3, 30))]);
        let rows = rows(&before, &after, &[], &ByComm, None);
        assert_eq!(rows[0].calls, 3);
    }

    #[test]
    fn corrected_rows_lose_their_own_pair_s_part_and_every_nested_pair_never_below_zero() {
        let lsm = Target {
            function: "hook_file_open".into(),
            parent: Some("security_file_open".into()),
            lsm: Some("landlock".into()),
        };
        let cost = ProbeCost {
            bare_ns: 100.0,
            syscall_pair_ns: 120.0,
            syscall_in_span_ns: 40.0,
            function_pair_ns: Some(300.0),
            function_in_span_ns: Some(50.0),
        };
        // 10 openat calls of 1000 ns, each with one timed LSM function inside.
        let mut openat = tally(10, 10_000);
        openat.nested = 10;
        let before = reading(0, &[]);
        let after = reading(
            1_000_000_000,
            &[
                (key("a", 257), openat),
                (key("a", HOOK_PATHS), tally(10, 2_000)),
                (key("a", 110), tally(10, 300)),
            ],
        );
        let rows = rows(&before, &after, &[Some(lsm)], &ByComm, Some(&cost));
        let row = |path: &str| rows.iter().find(|r| r.path == path).unwrap();
        // 1000 - 40 of its own pair - 300 of the nested one.
        assert_eq!(row("openat").corrected_ns_per_call, 660.0);
        assert_eq!(row("openat").corrected_cpu_share, 6.6e-6);
        assert_eq!(row("openat").ns_per_call, 1000.0);
        assert_eq!(row("hook_file_open").corrected_ns_per_call, 150.0);
        // 30 ns a call, less than the 40 ns the probes put inside it: zero, not negative.
        assert_eq!(row("getppid").corrected_ns_per_call, 0.0);
        // A calibration that came out negative takes nothing out.
        let noisy = ProbeCost {
            syscall_in_span_ns: -5.0,
            function_pair_ns: Some(-1.0),
            ..cost
        };
        assert_eq!(
            corrected_ns(PathKind::Syscall, &openat, Some(&noisy)),
            10_000.0
        );
    }

    #[test]
    fn events_list_task_events_always_and_diagnostics_when_they_happened() {
        let before = reading(0, &[]);
        let mut after = reading(1, &[]);
        after.events[profiler_common::event::FORK as usize] = 4;
        after.events[profiler_common::event::AGGREGATE_FULL as usize] = 1;
        let e = events(&before, &after);
        assert_eq!(e["fork"], 4);
        assert_eq!(e["exit"], 0);
        assert_eq!(e["aggregate_full"], 1);
        assert!(!e.contains_key("stale_exits"));
    }
}
