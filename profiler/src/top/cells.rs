//! What every table of `top` shows, the text tables and the terminal view alike: the line
//! above an interval, the line saying what the corrected columns take out, the columns and a
//! row's cells.
use super::{
    interval::{Interval, Row},
    sampled::{SampledInterval, SampledRow},
};
use crate::{probes::top_calibration::ProbeCost, results::PathKind};

/// The line above each interval's table.
pub fn heading(i: &Interval) -> String {
    let events: Vec<String> = i.events.iter().map(|(k, v)| format!("{k} {v}")).collect();
    format!(
        "interval {} ({:.2} s), {}, by {}: {}",
        i.interval,
        i.seconds,
        i.scope,
        serde_json::to_value(i.by)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        events.join(", ")
    )
}

/// What the corrected columns take out, from the calibration top made at its start.
pub fn correction(cost: Option<&ProbeCost>) -> String {
    let Some(c) = cost else {
        return "the probes' own cost could not be measured: NS/CALL and CPU % are raw".into();
    };
    let mut line = format!(
        "NS/CALL, CPU %: less the probes' own cost (calibrated): {:.0} of the {:.0} ns a \
         syscall's probes add",
        c.syscall_in_span_ns.max(0.0),
        c.syscall_pair_ns
    );
    if let (Some(pair), Some(inside)) = (c.function_pair_ns, c.function_in_span_ns) {
        line += &format!(
            "; {:.0} of the {pair:.0} ns a function's pair adds, and {:.0} per function timed \
             inside",
            inside.max(0.0),
            pair.max(0.0)
        );
    }
    line + "; RAW: uncorrected"
}

/// The columns both the text tables and the terminal view show.
pub const COLUMNS: [&str; 7] = [
    "GROUP", "PATH", "CALLS/S", "NS/CALL", "RAW", "CPU %", "UNDER",
];

/// A row's cells, in `COLUMNS` order.
pub fn cells(r: &Row) -> [String; 7] {
    let under = match (&r.parent, &r.lsm) {
        (Some(p), Some(l)) => format!("{p} ({l})"),
        (Some(p), None) => p.clone(),
        _ => String::new(),
    };
    [
        r.group.clone(),
        r.path.clone(),
        format!("{:.0}", r.calls_per_s),
        format!("{:.0}", r.corrected_ns_per_call),
        format!("{:.0}", r.ns_per_call),
        format!("{:.2}", r.corrected_cpu_share * 100.0),
        under,
    ]
}

/// The line above the sampled table: how many samples, and the scope's CPU they stand for.
pub fn sampled_heading(s: &SampledInterval) -> String {
    let part = |n: u64| 100.0 * n as f64 / s.samples.max(1) as f64;
    format!(
        "sampled kernel stacks: {} samples at {:.0} Hz, the scope used {:.1}% of a CPU \
         ({:.0}% in user mode, {:.0}% in hookprof's probes); SHARE is of the rest",
        s.samples,
        s.hz,
        s.cpu_share * 100.0,
        part(s.user_samples),
        part(s.probe_samples)
    )
}

/// The sampled table's columns.
pub const SAMPLED_COLUMNS: [&str; 5] = [
    "SAMPLED PATH",
    "CPU %",
    "SHARE % (95% CI)",
    "SELF %",
    "UNDER",
];

/// The sampled rows a table shows: hooks, LSM functions and task paths (the timed table
/// already has the syscalls), most sampled first.
pub fn sampled_rows(s: &SampledInterval, rows: usize) -> impl Iterator<Item = &SampledRow> {
    s.rows
        .iter()
        .filter(|r| r.kind != PathKind::Syscall)
        .take(rows)
}

/// A sampled row's cells, in `SAMPLED_COLUMNS` order.
pub fn sampled_cells(r: &SampledRow) -> [String; 5] {
    let under = match (&r.parent, &r.lsm) {
        (Some(p), Some(l)) => format!("{p} ({l})"),
        (Some(p), None) => p.clone(),
        _ => String::new(),
    };
    [
        r.path.clone(),
        format!("{:.2}", r.cpu_share * 100.0),
        format!(
            "{:.1} ({:.1}-{:.1})",
            r.share * 100.0,
            r.share_low * 100.0,
            r.share_high * 100.0
        ),
        format!("{:.1}", r.self_share * 100.0),
        under,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_correction_line_says_what_is_taken_out_and_when_nothing_is() {
        let mut cost = ProbeCost {
            bare_ns: 190.0,
            syscall_pair_ns: 117.2,
            syscall_in_span_ns: 44.6,
            function_pair_ns: None,
            function_in_span_ns: None,
        };
        let line = correction(Some(&cost));
        assert!(line.contains("45 of the 117 ns a syscall's"), "{line}");
        assert!(!line.contains("function"), "{line}");
        cost.function_pair_ns = Some(300.0);
        cost.function_in_span_ns = Some(-3.0);
        let line = correction(Some(&cost));
        assert!(line.contains("; 0 of the 300 ns a function's"), "{line}");
        assert!(correction(None).contains("are raw"));
    }
}
