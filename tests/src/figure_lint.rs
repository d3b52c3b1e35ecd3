//! The figure lint: what no report of a run may print, in any format. A time, cost or rate
//! below zero; a share above 100% of the whole it names; a part of the op's accounting above
//! that accounting's whole; a percentage of a clamp ("0.0% slower"); an interval of a
//! non-negative quantity below 0; in the results document, a share outside its interval or
//! above 1, and sampled places that do not add up to the op's own samples. Each finding is one
//! line naming the format, the figure and its context, so a failing test says where to look.
use std::{path::Path, sync::LazyLock};

use regex::Regex;
use serde_json::Value;

use crate::hookprof;

/// A number with a minus sign where nothing makes it a range or a `+-` half-width: after the
/// start, a space or an opening bracket, a colon, an equals sign or a comma.
static NEGATIVE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[\s(\[=:,])[-\u{2212}]\d[\d.,]*").expect("regex"));
/// `N% of the ...`, a share of a named whole (a probe overhead is a change, and `+-N% of` a
/// half-width, neither a share).
static SHARE_OF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|[^-\d.])(\d+(?:\.\d+)?)% of (?:the|its) ([a-z' ]+)").expect("regex")
});
/// A clamp printed as a figure.
static CLAMP: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"\b0\.0+% (?:slower|faster)").expect("regex"));
/// The accounting line's whole and its parts: `on CPU 3.073 us (user ..., kernel ..., ...)`.
static ON_CPU_SPLIT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"on CPU (\d+(?:\.\d+)?) (ns|us|ms|s) \(([^)]*)\)").expect("regex")
});
/// A sweep's slope split: `slope split: PATH +X (...) + ... = op +Y ns/op per STEP`.
static SLOPE_TERM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\+|falls )(\d+(?:\.\d+)?)").expect("regex"));
static PART: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"([a-z]+) (\d+(?:\.\d+)?) (ns|us|ms|s)\b").expect("regex"));

fn ns(value: &str, unit: &str) -> f64 {
    let v: f64 = value.parse().unwrap_or(f64::NAN);
    v * match unit {
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => 1.0,
    }
}

/// The text a page shows: scripts, styles and tags dropped, entities that matter read back.
pub fn visible_text(html: &str) -> String {
    let mut shown = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(start) = ["<script", "<style"]
        .iter()
        .filter_map(|t| rest.find(t))
        .min()
    {
        shown.push_str(&rest[..start]);
        let end = ["</script>", "</style>"]
            .iter()
            .filter_map(|t| rest[start..].find(t).map(|i| start + i + t.len()))
            .min()
            .unwrap_or(rest.len());
        rest = &rest[end..];
    }
    shown.push_str(rest);
    let mut out = String::with_capacity(shown.len());
    let mut in_tag = false;
    for c in shown.chars() {
        match c {
            '<' => in_tag = true,
            '>' => {
                in_tag = false;
                out.push(' ');
            }
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
}

/// The impossible figures of one rendered report (text, markdown, lmbench, or an HTML page's
/// visible text), each as `FORMAT: what: the line`.
pub fn impossible_in_text(format: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in text.lines() {
        let mut say = |what: &str| found.push(format!("{format}: {what}: {}", line.trim()));
        if NEGATIVE.is_match(line) {
            say("a figure below zero");
        }
        if CLAMP.is_match(line) {
            say("a clamp printed as a figure");
        }
        for c in SHARE_OF.captures_iter(line) {
            let share: f64 = c[1].parse().unwrap_or(0.0);
            if share > 100.05 && !c[2].starts_with("clean mean") {
                say("a share above 100% of its whole");
            }
        }
        if let Some(split) = line.split_once("slope split: ").map(|(_, s)| s) {
            if !slope_split_adds_up(split) {
                say("a slope split whose parts do not add up to the op's slope");
            }
        }
        for c in ON_CPU_SPLIT.captures_iter(line) {
            let whole = ns(&c[1], &c[2]);
            for p in PART.captures_iter(&c[3]) {
                if ns(&p[2], &p[3]) > whole * 1.0005 {
                    say("a part of the op's CPU time above it");
                }
            }
        }
    }
    found
}

/// Whether the terms of `PATH +X (...) + PATH falls X (...) = op +Y ...` add up to Y, within
/// the rounding of four significant digits per figure.
fn slope_split_adds_up(split: &str) -> bool {
    let signed = |term: &str| -> Option<f64> {
        let c = SLOPE_TERM.captures(term)?;
        let v: f64 = c[2].parse().ok()?;
        Some(if &c[1] == "+" { v } else { -v })
    };
    let Some((parts, op)) = split.split_once(" = op ") else {
        return false;
    };
    let terms: Option<Vec<f64>> = parts.split(") + ").map(signed).collect();
    let (Some(terms), Some(op)) = (terms, signed(op)) else {
        return false;
    };
    let rounding: f64 = terms
        .iter()
        .chain([&op])
        .map(|t| t.abs() * 1e-3 + 1e-4)
        .sum();
    (terms.iter().sum::<f64>() - op).abs() <= rounding
}

/// Keys whose numbers are differences of two measurements, kept signed in the data with their
/// interval (reports read them "within noise" where that holds 0).
const SIGNED: &[&str] = &["probes_cost", "sampling_cost"];

/// The impossible figures of a results document (one run's JSON).
pub fn impossible_in_results(doc: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(doc, "", &mut found);
    for w in doc["workloads"].as_array().into_iter().flatten() {
        let name = w["name"].as_str().unwrap_or("?");
        places_add_up(name, &w["profile"], &mut found);
        accounting_fits(name, &w["accounting"], &mut found);
    }
    found
}

fn walk(v: &Value, path: &str, found: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            let share = map.get("share").and_then(Value::as_f64);
            let (low, high) = (
                map.get("share_low").and_then(Value::as_f64),
                map.get("share_high").and_then(Value::as_f64),
            );
            if let (Some(s), Some(l), Some(h)) = (share, low, high) {
                if l > s + 1e-9 || s > h + 1e-9 {
                    found.push(format!(
                        "json: {path}: share {s} outside its interval {l}-{h}"
                    ));
                }
            }
            for (key, value) in map {
                if SIGNED.iter().any(|k| key == k) {
                    continue;
                }
                walk(value, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, &format!("{path}[{i}]"), found);
            }
        }
        Value::Number(n) => {
            let key = path.rsplit('.').next().unwrap_or(path);
            let key = key.split('[').next().unwrap_or(key);
            let v = n.as_f64().unwrap_or(0.0);
            let a_time = key.contains("ns") || key.contains("wall") || key.contains("cpu");
            let a_share = key.contains("share") && !key.contains("share_of");
            if (a_time || a_share) && v < 0.0 {
                found.push(format!("json: {path} = {v}: below zero"));
            }
            if a_share && v > 1.0 + 1e-9 && !key.contains("clean_op") {
                found.push(format!("json: {path} = {v}: a share above 1"));
            }
        }
        _ => {}
    }
}

/// A profile's places hold each of its own samples once.
fn places_add_up(name: &str, p: &Value, found: &mut Vec<String>) {
    let Some(places) = p["places"].as_array().filter(|a| !a.is_empty()) else {
        return;
    };
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    let own =
        count(&p["samples"]).saturating_sub(count(&p["probe_samples"]) + count(&p["lost_stacks"]));
    let placed: u64 = places.iter().map(|x| count(&x["samples"])).sum();
    if placed != own {
        found.push(format!(
            "json: {name}: places hold {placed} samples of the {own} own"
        ));
    }
}

/// The accounting's split of the CPU time fits in it.
fn accounting_fits(name: &str, a: &Value, found: &mut Vec<String>) {
    let Some(on_cpu) = a["on_cpu_ns_per_op"].as_f64() else {
        return;
    };
    let parts: Vec<f64> = ["user_ns_per_op", "kernel_ns_per_op", "probe_ns_per_op"]
        .iter()
        .filter_map(|k| a[*k].as_f64())
        .collect();
    if parts.iter().sum::<f64>() > on_cpu * 1.0005 {
        found.push(format!(
            "json: {name}: the accounting's parts {parts:?} exceed its CPU time {on_cpu}"
        ));
    }
}

/// `hookprof ARGS`, which must succeed: its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = hookprof(args);
    assert!(
        out.status.success(),
        "{args:?}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

/// The lint's findings over `files` rendered by `report` in each format a person reads, and
/// over each file's JSON.
pub fn lint_reports(files: &[&Path], extra: &[&str]) -> Vec<String> {
    let names: Vec<&str> = files.iter().map(|f| f.to_str().unwrap()).collect();
    let mut found = Vec::new();
    for format in ["text", "markdown", "lmbench", "html"] {
        let args = [&["report", "--format", format][..], extra, &names].concat();
        let out = ok(&args);
        let shown = if format == "html" {
            visible_text(&out)
        } else {
            out
        };
        found.extend(impossible_in_text(format, &shown));
    }
    for file in files {
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(file).unwrap()).expect("results JSON");
        found.extend(impossible_in_results(&doc));
    }
    found
}

/// Fails with every finding, keeping the files that hold them to look at.
pub fn say_and_keep(dir: tempfile::TempDir, found: Vec<String>) {
    if found.is_empty() {
        return;
    }
    let kept = dir.keep();
    panic!(
        "{} impossible figures (the files are kept in {}):\n{}",
        found.len(),
        kept.display(),
        found.join("\n")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lint_finds_each_kind_of_impossible_figure_and_passes_ranges_and_half_widths() {
        let bad = [
            "Per op: on CPU 851.3 us (user 0.8090 us, kernel 950.9 us, probes -100.4 us)",
            "probe overhead -20.3% of the clean mean",
            "whose sampling made the op 0.0% slower than the clean one",
            "Residual: 35 ns/op (135.5% of the op's own CPU time)",
            "on CPU 1.662 us (user 1.942 us, kernel 0 us)",
            "slope split: syscall openat +400.0 (95%: +390.0 to +410.0) + outside the probed \
             syscalls +20.00 (within noise, +-30.00) = op +520.1 ns/op per layer",
        ];
        for line in bad {
            assert!(!impossible_in_text("text", line).is_empty(), "{line}");
        }
        let fine = [
            "share 66%  64%-68%  0.4%-1.2%",
            "Probes' cost: within noise (+-13.50 us) of CPU time per op",
            "whose sampling's cost to the op is within noise (+-258.8% of the clean op)",
            "<script>var lastx = -1;</script>",
            "Environment: kernel 6.18.44-fc-v1252 (x86_64) 2026-12-07",
            "probe overhead +122.9% (+87.4% to +158.4%) of the clean mean",
            "hookprof run --rounds 2 -o x",
            "slope split: syscall openat +500.0 (95%: +390.0 to +610.0) + syscall close falls \
             1.000 (within noise, +-3.000) + outside the probed syscalls +21.10 (95%: 1.000 to \
             2.000 less) = op +520.1 ns/op per layer",
        ];
        for line in fine {
            let shown = visible_text(line);
            assert_eq!(
                impossible_in_text("text", &shown),
                Vec::<String>::new(),
                "{line}"
            );
        }
    }

    #[test]
    fn the_results_lint_checks_signs_shares_intervals_and_places() {
        let doc = serde_json::json!({"workloads": [{
            "name": "w",
            "attribution": [{"ns_per_op": -5.0, "share": 1.2}],
            "profile": {"samples": 10, "probe_samples": 1, "lost_stacks": 0,
                        "places": [{"samples": 8, "share": 0.5, "share_low": 0.6, "share_high": 0.7}]},
            "accounting": {"on_cpu_ns_per_op": 100.0, "user_ns_per_op": 60.0, "kernel_ns_per_op": 50.0,
                           "probes_cost": {"value": -3.0, "half_width": 5.0}}
        }]});
        let found = impossible_in_results(&doc);
        assert_eq!(found.len(), 5, "{found:#?}");
    }
}
