//! Reading the probes' aggregate map: every (group, path) tally the programs add up for `top`,
//! summed over the CPUs, and forgetting the groups that went idle.
use anyhow::Result;
use profiler_common::{AggregateKey, Tally};

use crate::probes::{tally_sum, Probes};

/// Every (group, path) tally the programs hold, each summed over the CPUs. The tallies only
/// grow: what happened in an interval is the difference of two readings.
pub fn aggregate(probes: &Probes) -> Result<Vec<(AggregateKey, Tally)>> {
    let map = probes.aggregate_map()?;
    let mut out = Vec::new();
    for entry in map.iter() {
        // A key removed between listing and reading is simply not there this time.
        let Ok((key, per_cpu)) = entry else { continue };
        let sum = per_cpu
            .iter()
            .fold(Tally::ZERO, |acc, t| tally_sum(&acc, t));
        out.push((key, sum));
    }
    Ok(out)
}

/// Removes tallies (groups that went idle), so the map keeps room for new ones.
pub fn forget(probes: &mut Probes, keys: &[AggregateKey]) -> Result<()> {
    let mut map = probes.aggregate_map_mut()?;
    for key in keys {
        // Already gone is as good.
        let _ = map.remove(key);
    }
    Ok(())
}

/// One path's time and timed calls, summed over every group.
pub fn path_total(probes: &Probes, path: u32) -> Result<(u64, u64)> {
    Ok(aggregate(probes)?
        .iter()
        .filter(|(key, _)| key.path == path)
        .fold((0, 0), |(ns, n), (_, t)| (ns + t.total_ns, n + t.timed)))
}
