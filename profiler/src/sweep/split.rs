//! An op's slope split into the slopes of the outermost probed paths (disjoint in time, as the
//! breakdown takes them: the syscalls, else the hooks and task paths under no other path) and
//! a remainder named by what it is outside of. Each path's line is its own fit; the
//! remainder's is the fit of the op less those paths, value by value and round by round, so
//! its interval comes from that fit (never the difference of two clamped figures) and the
//! slopes add up to the op's exactly (a least-squares slope is linear in the values).
use serde::Serialize;

use super::fit::{self, Line};
use crate::{attribution::Level, results::PathKind, stats};

/// A path by its kind, name and the path it runs under.
pub type PathKey = (PathKind, String, Option<String>);

/// The op's slope as its parts' slopes plus the remainder's.
#[derive(Debug, Clone, Serialize)]
pub struct SlopeSplit {
    /// Which paths are the parts: the probed syscalls, else the hooks and task paths.
    pub level: Level,
    /// The outermost paths, largest slope (by magnitude) first.
    pub parts: Vec<SlopePart>,
    /// What the op spends outside them (`outside the probed syscalls`), and its line.
    pub remainder: SlopePart,
}

#[derive(Debug, Clone, Serialize)]
pub struct SlopePart {
    /// `syscall openat`, or the remainder's description.
    pub name: String,
    pub line: Line,
}

/// One sweep value's figures: the op's value per round, and each path's value per round (or
/// one value for the whole run) with its key.
pub struct ValueFigures<'a> {
    pub x: u64,
    pub op: &'a [f64],
    pub paths: Vec<(&'a PathKey, &'a [f64])>,
}

/// The split, where some path is outermost and every line can be fitted.
pub fn split(values: &[ValueFigures]) -> Option<SlopeSplit> {
    let keys = outermost(values)?;
    let rounds_of = |v: &ValueFigures, key: &PathKey| -> Vec<f64> {
        let found = v.paths.iter().find(|(k, _)| *k == key).map(|(_, r)| *r);
        per_round(found.unwrap_or(&[]), v.op.len())
    };
    let mut parts = Vec::new();
    for key in &keys {
        let points: Vec<(u64, Vec<f64>)> =
            values.iter().map(|v| (v.x, rounds_of(v, key))).collect();
        parts.push(SlopePart {
            name: format!("{} {}", key.0.name(), key.1),
            line: fit::through(&points)?,
        });
    }
    let remainder: Vec<(u64, Vec<f64>)> = values
        .iter()
        .map(|v| {
            let mut left = v.op.to_vec();
            for key in &keys {
                for (l, p) in left.iter_mut().zip(rounds_of(v, key)) {
                    *l -= p;
                }
            }
            (v.x, left)
        })
        .collect();
    parts.sort_by(|a, b| b.line.slope.abs().total_cmp(&a.line.slope.abs()));
    Some(SlopeSplit {
        level: keys_level(&keys),
        parts,
        remainder: SlopePart {
            name: keys_level(&keys).describe().into(),
            line: fit::through(&remainder)?,
        },
    })
}

/// The paths the split is made of: every syscall seen at any value, else every hook and task
/// path under no other path.
fn outermost<'a>(values: &[ValueFigures<'a>]) -> Option<Vec<&'a PathKey>> {
    let mut keys: Vec<&PathKey> = Vec::new();
    for (key, _) in values.iter().flat_map(|v| &v.paths) {
        if !keys.contains(key) {
            keys.push(key);
        }
    }
    let syscalls: Vec<&PathKey> = keys
        .iter()
        .copied()
        .filter(|k| k.0 == PathKind::Syscall)
        .collect();
    if !syscalls.is_empty() {
        return Some(syscalls);
    }
    let top: Vec<&PathKey> = keys
        .into_iter()
        .filter(|k| matches!(k.0, PathKind::Hook | PathKind::TaskPath) && k.2.is_none())
        .collect();
    (!top.is_empty()).then_some(top)
}

fn keys_level(keys: &[&PathKey]) -> Level {
    match keys.first().map(|k| k.0) {
        Some(PathKind::Syscall) => Level::Syscalls,
        _ => Level::Hooks,
    }
}

/// A path's value in each of the op's `rounds`: its own per round where it has as many, else
/// its mean in every round (0 where the value ran without it being seen).
fn per_round(path: &[f64], rounds: usize) -> Vec<f64> {
    if path.len() == rounds {
        return path.to_vec();
    }
    vec![stats::mean(path).unwrap_or(0.0); rounds]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(kind: PathKind, name: &str, parent: Option<&str>) -> PathKey {
        (kind, name.into(), parent.map(Into::into))
    }

    #[test]
    fn the_parts_and_the_remainder_add_up_to_the_ops_slope_with_their_own_intervals() {
        let openat = key(PathKind::Syscall, "openat", None);
        let close = key(PathKind::Syscall, "close", None);
        let hook = key(PathKind::Hook, "security_file_open", None);
        // openat grows 100 a step, the op 130 (30 outside the syscalls), three rounds of noise;
        // close has one figure per value; the hook (inside openat) is no part.
        let xs = [1u64, 2, 4, 8];
        let noise = [
            [1.0, -2.0, 0.5],
            [-1.5, 1.0, 0.0],
            [0.5, 0.5, -1.0],
            [2.0, -1.0, 1.0],
        ];
        let op: Vec<Vec<f64>> = xs
            .iter()
            .zip(noise)
            .map(|(&x, n)| {
                n.iter()
                    .map(|e| 1000.0 + 130.0 * x as f64 + 3.0 * e)
                    .collect()
            })
            .collect();
        let open: Vec<Vec<f64>> = xs
            .iter()
            .zip(noise)
            .map(|(&x, n)| n.iter().map(|e| 600.0 + 100.0 * x as f64 - e).collect())
            .collect();
        let shut = [[200.0], [201.0], [199.0], [200.5]];
        let inner = [[50.0], [150.0], [350.0], [750.0]];
        let values: Vec<ValueFigures> = (0..4)
            .map(|i| ValueFigures {
                x: xs[i],
                op: &op[i],
                paths: vec![
                    (&openat, &open[i][..]),
                    (&close, &shut[i][..]),
                    (&hook, &inner[i][..]),
                ],
            })
            .collect();
        let s = split(&values).unwrap();
        assert_eq!(s.level, Level::Syscalls);
        let names: Vec<&str> = s.parts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["syscall openat", "syscall close"]);
        let op_slope = fit::through(
            &xs.iter()
                .zip(&op)
                .map(|(&x, r)| (x, r.clone()))
                .collect::<Vec<_>>(),
        )
        .unwrap()
        .slope;
        let sum: f64 = s.parts.iter().map(|p| p.line.slope).sum::<f64>() + s.remainder.line.slope;
        assert!((sum - op_slope).abs() < 1e-9, "{sum} against {op_slope}");
        let r = s.remainder.line;
        assert!((r.slope - 30.0).abs() < 3.0, "{r:?}");
        assert!(
            r.slope_low.unwrap() > 0.0 && r.slope_high.unwrap() > r.slope,
            "{r:?}"
        );
        assert_eq!(s.remainder.name, "outside the probed syscalls");
    }

    #[test]
    fn without_syscalls_the_parts_are_the_hooks_under_no_other_path() {
        let hook = key(PathKind::Hook, "security_file_open", None);
        let lsm = key(PathKind::Lsm, "hook_file_open", Some("security_file_open"));
        let op = [vec![500.0, 510.0], vec![700.0, 690.0]];
        let h = [[100.0], [300.0]];
        let values: Vec<ValueFigures> = (0..2)
            .map(|i| ValueFigures {
                x: i as u64,
                op: &op[i],
                paths: vec![(&hook, &h[i][..]), (&lsm, &h[i][..])],
            })
            .collect();
        let s = split(&values).unwrap();
        assert_eq!(s.level, Level::Hooks);
        assert_eq!(s.parts.len(), 1);
        assert!((s.parts[0].line.slope - 200.0).abs() < 1e-9);
        assert!((s.remainder.line.slope - (-10.0)).abs() < 1e-9);
    }
}
