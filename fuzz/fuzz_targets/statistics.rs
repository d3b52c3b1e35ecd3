//! compare's and history's statistics on any finite samples, extreme magnitudes included: every
//! figure of a summary, a Welch test, a change and a change point is a number, and comparing,
//! finding change points and rendering never panic. The input is two sample counts, then the samples as raw
//! f64 bits (so huge, tiny and subnormal values come as often as ordinary ones).
#![no_main]
use hookprof::{compare, history, results::Results, stats};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let (n_old, n_new) = (2 + usize::from(a % 8), 2 + usize::from(b % 8));
    let values: Vec<f64> = rest
        .chunks_exact(8)
        .map(|c| f64::from_bits(u64::from_le_bytes(c.try_into().expect("8 bytes"))))
        .filter(|v| v.is_finite())
        .collect();
    if values.len() < n_old + n_new {
        return;
    }
    let (old, new) = (&values[..n_old], &values[n_old..n_old + n_new]);
    check_statistics(old, new);
    // Files hold no negative samples (they are refused at load): compare what a file can hold.
    let old: Vec<f64> = old.iter().map(|v| v.abs()).collect();
    let new: Vec<f64> = new.iter().map(|v| v.abs()).collect();
    let c = compare::compare(&[results(&old)], &[results(&new)], &Default::default())
        .expect("one workload in common");
    let _ = (compare::render_text(&c), compare::render_markdown(&c));
    let _ = (compare::render_html(&c), compare::render_junit(&c));
    // history's change points over the same values in a row (few permutations: the whole of
    // `history` takes about a second per input, too slow to fuzz).
    let series: Vec<f64> = old.iter().chain(&new).copied().collect();
    for c in history::edivisive::change_points(&series, 0.5, 19) {
        assert!(c.statistic.is_finite() && (0.0..=1.0).contains(&c.p_value), "{c:?}");
    }
});

fn check_statistics(old: &[f64], new: &[f64]) {
    let (o, n) = (stats::summarize(old).unwrap(), stats::summarize(new).unwrap());
    for s in [&o, &n] {
        let (lo, hi) = s.ci.expect("two samples or more");
        let half = s.ci_half_width();
        let figures = [s.mean, s.median, s.stdev, s.pop_stdev, s.min, s.max, s.cv, lo, hi, half];
        assert!(figures.iter().all(|v| v.is_finite()), "{s:?}");
    }
    if let Some(t) = stats::welch_ratio((&o).into(), (&n).into()) {
        let figures = [t.ratio, t.log_std_error, t.df, t.p_value];
        assert!(figures.iter().all(|v| v.is_finite()), "{t:?}");
        assert!((0.0..=1.0).contains(&t.p_value), "{t:?}");
        let level = stats::holm_levels(&[t.p_value], 0.05)[0];
        let c = stats::Change::tested(&t, level);
        let (lo, hi) = c.ci.expect("a ratio test");
        assert!([c.relative, lo, hi].iter().all(|v| v.is_finite()), "{c:?}");
        assert!(lo >= -1.0 && lo <= hi, "{c:?}");
        let _ = stats::holm(&[t.p_value]);
        let _ = stats::verdict(&c, false, &Default::default());
    }
    if let Some((lo, hi)) = stats::difference_interval(&o, &n) {
        assert!(lo.is_finite() && hi.is_finite() && lo <= hi, "{lo} {hi}");
    }
}

/// A results file with workload `w` sampled as `samples` (clean and probed) and one syscall
/// row whose per-sample costs are the same figures.
fn results(samples: &[f64]) -> Results {
    let list = samples
        .iter()
        .map(|v| format!("{v:?}"))
        .collect::<Vec<_>>()
        .join(",");
    let first = format!("{:?}", samples[0]);
    let text = format!(
        r#"{{"schema_version": 1, "label": "fuzz", "complete": true, "source": "hookprof",
        "environment": {{"kernel_release": "6.1", "hookprof_version": "0.1"}},
        "workloads": [{{"name": "w", "family": "processes", "unit": "us", "iterations": 1,
        "clean": [{list}], "probed": [{list}],
        "attribution": [{{"kind": "syscall", "name": "getppid", "calls_per_op": 1.0,
        "ns_per_call": {first}, "ns_per_op": {first}, "share": 1.0,
        "samples_ns_per_op": [{list}]}}]}}]}}"#
    );
    Results::parse(&text, "fuzz.json").expect("valid results")
}
