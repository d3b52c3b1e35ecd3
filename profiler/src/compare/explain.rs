//! Where an end-to-end change went: each attributed path's change per op, and the residual
//! the top-level paths leave unexplained.
use std::collections::BTreeMap;

use super::{ChangeAttribution, PathDelta};
use crate::{
    results::{
        rows::{self, Level},
        AttributionRow, PathKind, Unit,
    },
    stats::Summary,
};

/// The change of each attributed path, and what the top-level paths leave unexplained.
pub(super) fn attribute_change(
    unit: Unit,
    old: &Summary,
    new: &Summary,
    old_rows: &[AttributionRow],
    new_rows: &[AttributionRow],
) -> Option<ChangeAttribution> {
    if old_rows.is_empty() || new_rows.is_empty() {
        return None;
    }
    let total_ns = rows::op_ns(unit, new.mean)? - rows::op_ns(unit, old.mean)?;
    let level = Level::of(old_rows.iter().chain(new_rows).map(|r| r.kind))?;
    let mut keys: BTreeMap<(PathKind, &str, Option<&str>), (f64, f64)> = BTreeMap::new();
    let mut order = Vec::new();
    for (rows, is_new) in [(old_rows, false), (new_rows, true)] {
        for r in rows {
            let key = (r.kind, r.name.as_str(), r.parent.as_deref());
            if !keys.contains_key(&key) {
                order.push(key);
            }
            let entry = keys.entry(key).or_insert((0.0, 0.0));
            let ns = rows::ns_per_op(r);
            if is_new {
                entry.1 = ns;
            } else {
                entry.0 = ns;
            }
        }
    }
    let paths: Vec<PathDelta> = order
        .into_iter()
        .map(|key @ (kind, name, parent)| {
            let (o, n) = keys[&key];
            PathDelta {
                kind,
                name: name.to_string(),
                parent: parent.map(String::from),
                old_ns_per_op: o,
                new_ns_per_op: n,
                delta_ns_per_op: n - o,
                top_level: kind == level.kind(),
            }
        })
        .collect();
    let explained: f64 = paths
        .iter()
        .filter(|p| p.top_level)
        .map(|p| p.delta_ns_per_op)
        .sum();
    Some(ChangeAttribution {
        total_ns,
        level: match level {
            Level::Hooks => "hooks",
            Level::Syscalls => "syscalls",
        },
        paths,
        residual_ns: total_ns - explained,
    })
}
