//! `top`'s sampled kernel stacks: every interval, the scope's cpu-clock samples become each
//! hook's, LSM function's, task path's and syscall's share of the scope's CPU time and the
//! CPU it took (as a fraction of one CPU), so the security stack's cost shows where the kernel
//! refuses trampolines too. The shares are over the whole scope (not per group): the sample
//! program keys stacks, not groups. Symbols come from a table of kallsyms read before the
//! first interval and again at most once a minute.
use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use anyhow::Result;
use serde::Serialize;

use crate::{
    attribution::{profile, SampledStacks},
    probes::{
        kallsyms::{Symbol, SymbolTable},
        RawSample,
    },
    results::PathKind,
};

/// What one interval's samples say.
#[derive(Debug, Clone, Serialize)]
pub struct SampledInterval {
    /// Sampling rate per CPU-second of the scope's tasks.
    pub hz: f64,
    /// Samples of the scope's tasks: in user mode, in hookprof's own probes, kernel samples
    /// whose stack the kernel could not keep, and all of them.
    pub samples: u64,
    pub user_samples: u64,
    pub probe_samples: u64,
    pub lost_stacks: u64,
    /// The scope's CPU time as sampled (samples x period), as a fraction of one CPU.
    pub cpu_share: f64,
    /// Paths with samples, most first.
    pub rows: Vec<SampledRow>,
}

/// One path's part of the scope's CPU time in an interval.
#[derive(Debug, Clone, Serialize)]
pub struct SampledRow {
    pub kind: PathKind,
    pub path: String,
    pub parent: Option<String>,
    pub lsm: Option<String>,
    pub inclusive_samples: u64,
    pub self_samples: u64,
    /// Of the scope's own samples (the probes' and lost stacks' left out), with the 95%
    /// interval from the counts (Wilson).
    pub share: f64,
    pub share_low: f64,
    pub share_high: f64,
    pub self_share: f64,
    /// The CPU time in the path, as a fraction of one CPU over the interval.
    pub cpu_share: f64,
}

/// How long the symbol table serves before an address not seen since it was read has it read
/// again (BPF programs and modules come and go): at most one pass over kallsyms a minute,
/// where reading it for every interval with a new address cost top ~65 ms of CPU an interval.
const TABLE_KEPT: Duration = Duration::from_secs(60);

pub struct Sampler {
    period_ns: u64,
    table: Option<(SymbolTable, Instant)>,
    /// Addresses named since the table was read.
    seen: HashSet<u64>,
}

impl Sampler {
    /// A sampler with kallsyms read now, before any interval is timed.
    pub fn start(period_ns: u64) -> Result<Sampler> {
        Ok(Sampler {
            period_ns,
            table: Some((SymbolTable::reload(None)?, Instant::now())),
            seen: HashSet::new(),
        })
    }

    /// The interval's samples (as `take_samples` gave them) over `seconds`.
    pub fn interval(&mut self, samples: Vec<RawSample>, seconds: f64) -> Result<SampledInterval> {
        let mut stacks = SampledStacks::default();
        stacks.add(samples);
        let addresses = stacks.addresses();
        let stale = match &self.table {
            None => true,
            Some((_, read)) => {
                read.elapsed() > TABLE_KEPT && addresses.iter().any(|a| !self.seen.contains(a))
            }
        };
        if stale {
            let previous = self.table.take().map(|(table, _)| table);
            self.table = Some((SymbolTable::reload(previous)?, Instant::now()));
            self.seen.clear();
        }
        let (table, _) = self.table.as_ref().expect("loaded above");
        self.seen.extend(&addresses);
        let names: HashMap<u64, Symbol> = addresses.iter().map(|&a| (a, table.name(a))).collect();
        Ok(summarise(&stacks, &names, self.period_ns, seconds))
    }
}

/// The rows of one interval's stacks: `profile` over the interval as one op, its ns per op
/// the CPU time in each path.
fn summarise(
    stacks: &SampledStacks,
    names: &HashMap<u64, Symbol>,
    period_ns: u64,
    seconds: f64,
) -> SampledInterval {
    let p = profile(stacks, names, period_ns, 1, None);
    let interval_ns = (seconds * 1e9).max(1.0);
    let mut rows: Vec<SampledRow> = p
        .paths
        .into_iter()
        .map(|path| SampledRow {
            kind: path.kind,
            path: path.name,
            parent: path.parent,
            lsm: path.lsm,
            inclusive_samples: path.inclusive_samples,
            self_samples: path.self_samples,
            share: path.inclusive_share,
            share_low: path.share_low,
            share_high: path.share_high,
            self_share: path.self_share,
            cpu_share: path.ns_per_op / interval_ns,
        })
        .collect();
    rows.sort_by(|a, b| {
        b.inclusive_samples
            .cmp(&a.inclusive_samples)
            .then_with(|| (a.kind, &a.path).cmp(&(b.kind, &b.path)))
    });
    SampledInterval {
        hz: 1e9 / period_ns.max(1) as f64,
        samples: p.samples,
        user_samples: p.user_samples,
        probe_samples: p.probe_samples,
        lost_stacks: p.lost_stacks,
        cpu_share: p.samples as f64 * period_ns as f64 / interval_ns,
        rows,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Addresses 1, 2, 3, ... named by `frames` (root first), as one stack of `count` samples
    /// in syscall 257 (openat).
    fn stack(frames: &[&str], count: u64, names: &mut HashMap<u64, Symbol>) -> RawSample {
        let base = names.len() as u64 * 100 + 1000;
        let ips: Vec<u64> = (0..frames.len() as u64).rev().map(|i| base + i).collect();
        for (i, frame) in frames.iter().enumerate() {
            // The innermost address is looked up as it is, the callers' one less.
            let depth = frames.len() - 1 - i;
            let at = if depth == 0 {
                ips[depth]
            } else {
                ips[depth] - 1
            };
            names.insert(
                at,
                Symbol {
                    name: frame.to_string(),
                    offset: 40,
                },
            );
        }
        RawSample {
            ips,
            syscall_nr: 257,
            user: false,
            count,
        }
    }

    #[test]
    fn an_interval_gives_each_hook_its_share_and_the_cpu_it_took() {
        let mut names = HashMap::new();
        let entry = ["entry_SYSCALL_64", "do_syscall_64", "__x64_sys_openat"];
        let open = [&entry[..], &["security_file_open", "hook_file_open"]].concat();
        let other = [&entry[..], &["do_filp_open"]].concat();
        let samples = vec![
            stack(&open, 30, &mut names),
            stack(&other, 70, &mut names),
            RawSample {
                ips: Vec::new(),
                syscall_nr: -1,
                user: true,
                count: 100,
            },
        ];
        let mut stacks = SampledStacks::default();
        stacks.add(samples);
        // 200 samples of 1 ms in a 2 s interval: a tenth of a CPU.
        let i = summarise(&stacks, &names, 1_000_000, 2.0);
        assert_eq!(i.samples, 200);
        assert_eq!(i.user_samples, 100);
        assert!((i.cpu_share - 0.1).abs() < 1e-9, "{}", i.cpu_share);
        let hook = i
            .rows
            .iter()
            .find(|r| r.path == "security_file_open")
            .unwrap();
        assert_eq!(hook.kind, PathKind::Hook);
        assert_eq!(hook.inclusive_samples, 30);
        assert!((hook.share - 0.15).abs() < 1e-9);
        assert!(hook.share_low < 0.15 && hook.share_high > 0.15);
        // 30 ms of CPU over 2 s.
        assert!((hook.cpu_share - 0.015).abs() < 1e-9, "{}", hook.cpu_share);
        let lsm = i.rows.iter().find(|r| r.path == "hook_file_open").unwrap();
        assert_eq!(lsm.parent.as_deref(), Some("security_file_open"));
        assert_eq!(lsm.lsm.as_deref(), Some("landlock"));
        assert_eq!(lsm.self_samples, 30);
        // The syscall holds everything its stacks had, most first.
        assert_eq!(i.rows[0].path, "openat");
        assert_eq!(i.rows[0].inclusive_samples, 100);
    }
}
