//! What every table of `top` shows, the text tables and the terminal view alike: the line
//! above an interval, the line saying what the corrected columns take out, the columns and a
//! row's cells.
use super::{
    interval::{Interval, Row},
    sampled::{SampledInterval, SampledRow},
};
use crate::{
    report::figures::Scale,
    results::{PathKind, Unit},
    top::probe_cost::ProbeCost,
};

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
        return "the probes' own cost could not be measured: CPU/CALL and CPU % are raw".into();
    };
    let mut line = format!(
        "CPU/CALL, CPU %: less the probes' own cost (calibrated): {:.0} of the {:.0} ns a \
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
    line + " (the JSON lines carry the raw figures too)"
}

/// The columns both the text tables and the terminal view show (`--help` says what each is).
pub const COLUMNS: [&str; 7] = [
    "GROUP",
    "PATH",
    "CALLS/S",
    "CPU/CALL",
    "CPU %",
    "WAIT/CALL",
    "UNDER",
];

/// The widest a name column grows: a cgroup path keeps its end, a function its start.
const GROUP_WIDTH: usize = 24;
const PATH_WIDTH: usize = 28;
const UNDER_WIDTH: usize = 32;

/// A row's cells, in `COLUMNS` order.
pub fn cells(r: &Row) -> [String; 7] {
    let under = match (&r.parent, &r.lsm) {
        (Some(p), Some(l)) => format!("{p} ({l})"),
        (Some(p), None) => p.clone(),
        _ => String::new(),
    };
    [
        keep_end(&r.group, GROUP_WIDTH),
        keep_start(&r.path, PATH_WIDTH),
        per_second(r.calls_per_s),
        duration(r.on_cpu_ns_per_call),
        format!("{:.1}", r.on_cpu_share * 100.0),
        match r.kind {
            PathKind::Syscall => duration(r.wait_ns_per_call),
            // A function's time switched out is not measured.
            _ => "-".into(),
        },
        keep_start(&under, UNDER_WIDTH),
    ]
}

/// `850 ns`, `12.30 us`, `1.500 ms`: the unit its size calls for.
fn duration(ns: f64) -> String {
    if ns == 0.0 {
        return "0".into();
    }
    Scale::of(Unit::Nanoseconds, ns).show(ns)
}

/// `950`, `12.3k`, `1.20M` calls a second.
fn per_second(n: f64) -> String {
    match n {
        n if n < 1e3 => format!("{n:.0}"),
        n if n < 1e6 => format!("{:.1}k", n / 1e3),
        n => format!("{:.2}M", n / 1e6),
    }
}

/// `s` cut to `width` characters, its end kept (a cgroup path says most at its end).
fn keep_end(s: &str, width: usize) -> String {
    let count = s.chars().count();
    if count <= width {
        return s.to_string();
    }
    let tail: String = s.chars().skip(count - (width - 1)).collect();
    format!("…{tail}")
}

/// `s` cut to `width` characters, its start kept.
fn keep_start(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return s.to_string();
    }
    let head: String = s.chars().take(width - 1).collect();
    format!("{head}…")
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

    #[test]
    fn cells_scale_their_units_and_stay_narrow() {
        use crate::top::interval::Row;
        let row = Row {
            group: "/user.slice/user-0.slice/session-12.scope/inner".into(),
            kind: PathKind::Syscall,
            path: "wait4".into(),
            parent: None,
            lsm: None,
            calls: 10,
            calls_per_s: 12_345.0,
            timed: 10,
            total_ns: 0,
            off_cpu_ns: 0,
            nested: 0,
            ns_per_call: 0.0,
            cpu_share: 0.9,
            corrected_ns_per_call: 0.0,
            corrected_cpu_share: 0.9,
            on_cpu_ns_per_call: 1_500.0,
            on_cpu_share: 0.0015,
            wait_ns_per_call: 89_900_000.0,
            histogram: [0; profiler_common::HIST_BUCKETS],
        };
        let c = cells(&row);
        assert_eq!(c[0], "…/session-12.scope/inner");
        assert_eq!(c[0].chars().count(), GROUP_WIDTH);
        assert_eq!(&c[1..6], ["wait4", "12.3k", "1.500 us", "0.1", "89.90 ms"]);
        let function = Row {
            kind: PathKind::Lsm,
            parent: Some("security_file_open".into()),
            lsm: Some("landlock".into()),
            ..row
        };
        assert_eq!(cells(&function)[5], "-");
        assert_eq!(cells(&function)[6], "security_file_open (landlock)");
    }
}
