//! The path verdicts in words: the family's sentence, each called path's line, the largest
//! called change and what a pass rules out; every format (text, markdown, JUnit) says them so.
use std::fmt::Write;

use super::{
    paths::{PathFamily, PathMethod, PathVerdict, RuledOut},
    Comparison, WorkloadComparison,
};

/// `+57 ns/op` or `+1.20 pp`.
fn figure(method: PathMethod, v: f64) -> String {
    format!("{} {}", Number(method, v), unit(method))
}

/// The figure's signed number without its unit: `+57`, `+1.20`. Shown where it is written,
/// so the lines of many paths are written without a string per figure.
struct Number(PathMethod, f64);

impl std::fmt::Display for Number {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let Number(method, v) = *self;
        match method {
            PathMethod::Share => write!(f, "{:+.2}", v * 100.0),
            _ if v.abs() < 10.0 => write!(f, "{v:+.1}"),
            _ => write!(f, "{v:+.0}"),
        }
    }
}

fn unit(method: PathMethod) -> &'static str {
    match method {
        PathMethod::Share => "pp",
        _ => "ns/op",
    }
}

/// `[+21, +93]` in the figure's unit.
fn interval(method: PathMethod, low: f64, high: f64) -> String {
    format!("[{}, {}]", Number(method, low), Number(method, high))
}

/// What a path's figure is.
fn how(method: PathMethod) -> &'static str {
    match method {
        PathMethod::Timed => "timed",
        PathMethod::AgainstRest => "timed, against the rest of the op",
        PathMethod::Sampled => "sampled share against the rest of the op",
        PathMethod::Share => "sampled share alone",
    }
}

/// `syscall close +57 ns/op [+21, +93] regressed (timed, q = 0.003)`.
pub fn verdict_line(v: &PathVerdict) -> String {
    let mut line = String::new();
    write_verdict(&mut line, v);
    line
}

/// The verdict line written onto `out`: a compare of many paths writes each without the
/// strings of its parts.
fn write_verdict(out: &mut String, v: &PathVerdict) {
    let _ = write!(out, "{} {}", v.kind, v.name);
    if let Some(p) = &v.parent {
        let _ = write!(out, " (under {p})");
    }
    let _ = write!(
        out,
        " {} {} [{}, {}] {} ({}, q = {})",
        Number(v.method, v.change),
        unit(v.method),
        Number(v.method, v.low),
        Number(v.method, v.high),
        v.verdict,
        how(v.method),
        crate::report::figures::format_p(v.q_value)
    );
}

/// The called paths of `w`, one line each.
pub fn workload_lines(w: &WorkloadComparison) -> Vec<String> {
    w.paths
        .iter()
        .filter(|v| v.called())
        .map(|v| {
            let mut line = String::from("path ");
            write_verdict(&mut line, v);
            line
        })
        .collect()
}

/// How the paths were judged and what was called, in one sentence.
pub fn family_sentence(c: &Comparison) -> String {
    let f = &c.path_family;
    format!(
        "Path verdicts: {} regressed, {} improved of {} paths tested (Benjamini-Hochberg over \
         every path of the compare, false discovery rate {}; intervals at {:.2}%, the level that \
         goes with it; a path counts past {} ns/op, or {} pp where it is judged on its share \
         alone).",
        f.regressed,
        f.improved,
        f.tested,
        c.criteria.path_alpha,
        100.0 * f.confidence,
        c.criteria.path_threshold_ns,
        100.0 * c.criteria.path_threshold_share
    )
}

/// `The largest path change: syscall getppid in null_call, +2000 ns/op [...] regressed (...)`.
pub fn largest_sentence(f: &PathFamily) -> Option<String> {
    let (workload, v) = f.largest.as_ref()?;
    let line = verdict_line(v);
    let (path, rest) = line.split_at(v.label().len());
    Some(format!(
        "The largest path change: {path} in {workload},{rest}."
    ))
}

/// What a pass rules out at the path level: `no path above +93 ns/op (syscall openat in
/// open_close), no share up more than 1.20 pp (...)`; None when no path was tested.
pub fn ruled_out(f: &PathFamily) -> Option<String> {
    let say = |r: &RuledOut, method: PathMethod, what: &str| {
        format!(
            "{what} {} ({} in {})",
            figure(method, r.bound),
            r.path,
            r.workload
        )
    };
    let parts: Vec<String> = [
        f.ruled_out_ns
            .as_ref()
            .map(|r| say(r, PathMethod::Timed, "no path above")),
        f.ruled_out_share
            .as_ref()
            .map(|r| say(r, PathMethod::Share, "no share up more than")),
    ]
    .into_iter()
    .flatten()
    .collect();
    let unbounded = match f.unbounded {
        0 => String::new(),
        1 => "; 1 path's share reaches the whole op at its interval's top, so it bounds nothing"
            .to_string(),
        n => format!(
            "; {n} paths' shares reach the whole op at their intervals' tops, so they bound nothing"
        ),
    };
    (!parts.is_empty()).then(|| {
        format!(
            "{} ruled out ({:.2}%){unbounded}",
            parts.join(", "),
            100.0 * f.confidence
        )
    })
}

/// The called paths as a markdown table (empty when none was called).
pub fn markdown_table(c: &Comparison) -> String {
    let called: Vec<(&str, &PathVerdict)> = c
        .workloads
        .iter()
        .flat_map(|w| w.paths.iter().map(move |v| (w.name.as_str(), v)))
        .filter(|(_, v)| v.called())
        .collect();
    if called.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "| workload | path | change | interval | q (BH) | verdict | method |\n\
         |---|---|---:|---|---:|---|---|\n",
    );
    for (w, v) in called {
        let _ = writeln!(
            out,
            "| {w} | {} | {} | {} | {} | **{}** | {} |",
            v.label(),
            figure(v.method, v.change),
            interval(v.method, v.low, v.high),
            crate::report::figures::format_p(v.q_value),
            v.verdict,
            how(v.method)
        );
    }
    out
}
