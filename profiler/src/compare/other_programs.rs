//! Other tools' BPF programs on each side of a comparison, by the kernel's BPF statistics over
//! an untimed sample a round: each program's ns per op old and new, matched by its name, where it is
//! attached and the command holding it (ids and pids differ between runs). A side that ran
//! without the program reads 0: the statistics price every program seen where it ran.
use serde::Serialize;

use crate::results::OtherProgramRuns;

/// One program's cost per op on each side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProgramChange {
    pub name: String,
    /// The command holding it (its pid left out).
    pub holder: String,
    pub attach: String,
    pub old_ns_per_op: f64,
    pub new_ns_per_op: f64,
}

/// The holder's command, without its pid: "bpftrace (pid 812)" is "bpftrace".
fn command(holder: &str) -> &str {
    holder.split(" (pid").next().unwrap_or(holder)
}

fn same(a: &OtherProgramRuns, b: &OtherProgramRuns) -> bool {
    a.name == b.name && a.attach == b.attach && command(&a.holder) == command(&b.holder)
}

/// Adds a file's `run` of a program to a side's (runs, run time and ops summed).
pub(super) fn merge(side: &mut Vec<OtherProgramRuns>, run: &OtherProgramRuns) {
    match side.iter_mut().find(|r| same(r, run)) {
        Some(r) => {
            r.runs += run.runs;
            r.run_time_ns += run.run_time_ns;
            r.ops += run.ops;
        }
        None => side.push(run.clone()),
    }
}

/// Each program either side ran, its ns per op on both (0 on a side without it), the largest
/// change first.
pub(super) fn changes(old: &[OtherProgramRuns], new: &[OtherProgramRuns]) -> Vec<ProgramChange> {
    let ns = |side: &[OtherProgramRuns], p: &OtherProgramRuns| {
        side.iter()
            .find(|r| same(r, p))
            .map_or(0.0, OtherProgramRuns::ns_per_op)
    };
    let mut out: Vec<ProgramChange> = Vec::new();
    for p in old.iter().chain(new) {
        if out
            .iter()
            .any(|c| c.name == p.name && c.attach == p.attach && c.holder == command(&p.holder))
        {
            continue;
        }
        out.push(ProgramChange {
            name: p.name.clone(),
            holder: command(&p.holder).to_string(),
            attach: p.attach.clone(),
            old_ns_per_op: ns(old, p),
            new_ns_per_op: ns(new, p),
        });
    }
    let change = |c: &ProgramChange| (c.new_ns_per_op - c.old_ns_per_op).abs();
    out.sort_by(|a, b| change(b).total_cmp(&change(a)));
    out
}

/// `other BPF programs (the kernel's BPF statistics): sys_enter of bpftrace (tracepoint
/// sys_enter) 0 -> 298 ns/op (+298)`; None where neither side ran one.
pub fn line(changes: &[ProgramChange]) -> Option<String> {
    let parts: Vec<String> = changes
        .iter()
        .map(|c| {
            format!(
                "{} of {} ({}) {:.0} -> {:.0} ns/op ({:+.0})",
                c.name,
                c.holder,
                c.attach,
                c.old_ns_per_op,
                c.new_ns_per_op,
                c.new_ns_per_op - c.old_ns_per_op
            )
        })
        .collect();
    (!parts.is_empty()).then(|| {
        format!(
            "other BPF programs (the kernel's BPF statistics): {}",
            parts.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(holder: &str, runs: u64, run_time_ns: u64, ops: u64) -> OtherProgramRuns {
        OtherProgramRuns {
            program_id: 7,
            name: "sys_enter".into(),
            holder: holder.into(),
            attach: "tracepoint sys_enter".into(),
            runs,
            run_time_ns,
            ops,
        }
    }

    #[test]
    fn a_program_one_side_ran_is_named_with_its_cost_and_0_on_the_other() {
        // Two runs of the new side, bpftrace held by another pid each time.
        let mut new = Vec::new();
        merge(&mut new, &runs("bpftrace (pid 10)", 1000, 300_000, 1000));
        merge(&mut new, &runs("bpftrace (pid 11)", 1000, 296_000, 1000));
        assert_eq!(new.len(), 1);
        let c = changes(&[], &new);
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].old_ns_per_op, c[0].new_ns_per_op), (0.0, 298.0));
        assert_eq!(
            line(&c).unwrap(),
            "other BPF programs (the kernel's BPF statistics): \
             sys_enter of bpftrace (tracepoint sys_enter) 0 -> 298 ns/op (+298)"
        );
        assert_eq!(line(&changes(&[], &[])), None);
    }
}
