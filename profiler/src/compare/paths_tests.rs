//! The path verdicts on constructed runs: an A/A series over many seeds calls (almost) nothing,
//! as a 5% false discovery rate allows, and a path whose share grows by 5 points of the op is
//! called, alone, nearly every time. The machinery is held at 5% (`AT_5`), where these
//! constructed effects were sized; the default 1% is held to its own A/A rate, and its power on
//! a real machine is the Benchmarks page's (a 5% cost in close: 10 of 10).
use rand::{rngs::StdRng, Rng, SeedableRng};

use super::*;
use crate::{
    compare::compare,
    results::{fixtures::sample_results, PathKind, Results},
};

/// Paths of the constructed profile, their shares 1% to 20%.
const PATHS: usize = 20;
/// Rounds a run, own samples a round.
const ROUNDS: usize = 4;
const ROUND_SAMPLES: u64 = 500;

/// A normal draw (Box-Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let (u, v): (f64, f64) = (rng.gen_range(1e-12..1.0), rng.gen());
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// A factor around 1 with relative spread `sd`.
fn noise(rng: &mut StdRng, sd: f64) -> f64 {
    (sd * normal(rng)).exp()
}

/// A binomial count of `n` at `p`, by its normal approximation.
fn count(rng: &mut StdRng, n: u64, p: f64) -> u64 {
    let mean = n as f64 * p;
    let sd = (mean * (1.0 - p)).sqrt();
    (mean + sd * normal(rng)).round().clamp(0.0, n as f64) as u64
}

/// One run of open_close: its rounds' clean samples, its timed rows per sample, and a profile
/// of `PATHS` paths whose shares stray from run to run and round to round beyond their
/// binomial noise; `shift` is added to path p0's share, `timed_shift` ns to openat's row.
fn run(rng: &mut StdRng, label: &str, shift: f64, timed_shift: f64) -> Results {
    let mut r = sample_results();
    r.label = label.into();
    r.workloads.truncate(1);
    let w = &mut r.workloads[0];
    let speed = noise(rng, 0.03);
    w.round_sizes = vec![3; ROUNDS];
    w.clean = (0..ROUNDS * 3)
        .map(|_| 5.0 * speed * noise(rng, 0.02))
        .collect();
    for row in &mut w.attribution {
        let extra = openat_only(row, timed_shift);
        let base = row.ns_per_op * speed;
        row.samples_ns_per_op = (0..ROUNDS * 3)
            .map(|_| base * noise(rng, 0.02) + extra)
            .collect();
    }
    let mut p = crate::compare::sampled::tests::profile(1, 0, 3000.0 * speed);
    let template = p.paths[0].clone();
    p.round_samples = vec![ROUND_SAMPLES; ROUNDS];
    p.samples = ROUND_SAMPLES * ROUNDS as u64;
    p.paths = (0..PATHS)
        .map(|j| {
            let share = 0.01 * (j + 1) as f64 + if j == 0 { shift } else { 0.0 };
            let in_run = share * noise(rng, 0.05);
            let by_round: Vec<u64> = (0..ROUNDS)
                .map(|_| {
                    let p = (in_run * noise(rng, 0.05)).min(1.0);
                    count(rng, ROUND_SAMPLES, p)
                })
                .collect();
            let mut path = template.clone();
            path.kind = PathKind::Hook;
            path.name = format!("p{j}");
            path.inclusive_samples = by_round.iter().sum();
            path.round_samples = by_round;
            path
        })
        .collect();
    w.profile = Some(p);
    r
}

/// `shift` on openat's row, nothing on the others.
fn openat_only(row: &crate::results::AttributionRow, shift: f64) -> f64 {
    if row.name == "openat" {
        shift
    } else {
        0.0
    }
}

/// A baseline of 10 runs against one more, as the CI recipe compares them.
/// The path verdicts at a 5% false discovery rate.
const AT_5: Criteria = Criteria {
    alpha: 0.05,
    path_alpha: 0.05,
    threshold: 0.01,
    path_threshold_ns: 10.0,
    path_threshold_share: 0.005,
};

fn recipe(seed: u64, shift: f64, timed_shift: f64) -> crate::compare::Comparison {
    recipe_at(seed, shift, timed_shift, &AT_5)
}

fn recipe_at(
    seed: u64,
    shift: f64,
    timed_shift: f64,
    criteria: &Criteria,
) -> crate::compare::Comparison {
    let mut rng = StdRng::seed_from_u64(seed);
    let old: Vec<Results> = (0..10)
        .map(|i| run(&mut rng, &format!("base-{i}"), 0.0, 0.0))
        .collect();
    let new = run(&mut rng, "new", shift, timed_shift);
    compare(&old, &[new], criteria).unwrap()
}

fn called(c: &crate::compare::Comparison) -> Vec<String> {
    c.workloads
        .iter()
        .flat_map(|w| &w.paths)
        .filter(|v| v.called())
        .map(PathVerdict::label)
        .collect()
}

#[test]
fn an_a_a_series_calls_a_path_in_at_most_the_false_discovery_rate_of_its_compares() {
    let seeds = 200;
    let mut compares_with_a_call = 0;
    let mut tested = 0;
    for seed in 0..seeds {
        let c = recipe(seed, 0.0, 0.0);
        tested += c.path_family.tested;
        let calls = called(&c);
        compares_with_a_call += usize::from(!calls.is_empty());
        // What is called is starred, and nothing else.
        let w = &c.workloads[0];
        let starred = w
            .sampled
            .as_ref()
            .unwrap()
            .paths
            .iter()
            .filter(|p| p.judged.starred);
        let timed = w
            .attribution
            .as_ref()
            .unwrap()
            .paths
            .iter()
            .filter(|p| p.starred);
        assert_eq!(starred.count() + timed.count(), calls.len(), "seed {seed}");
    }
    // Every sampled path and every timed row with a spread is in the family.
    assert!(tested >= seeds as usize * PATHS, "{tested}");
    // Under no change the false discovery rate is the chance of any call: 5% a compare, and
    // 2.5 standard deviations of 200 compares above it is 9%.
    assert!(
        compares_with_a_call <= 18,
        "{compares_with_a_call} of {seeds} A/A compares called a path"
    );
    // At the default 1%: 2 of 200 expected, 2.5 standard deviations above it is 5.
    let at_default = (0..seeds)
        .filter(|&seed| !called(&recipe_at(seed, 0.0, 0.0, &Criteria::default())).is_empty())
        .count();
    assert!(at_default <= 5, "{at_default} of {seeds} at the default 1%");
}

#[test]
fn a_path_whose_share_grows_by_five_points_is_called_and_alone() {
    let mut caught = 0;
    for seed in 0..10 {
        let c = recipe(1000 + seed, 0.05, 0.0);
        let calls = called(&c);
        if calls == ["hook p0"] {
            caught += 1;
        }
        let v = c.workloads[0]
            .paths
            .iter()
            .find(|v| v.name == "p0")
            .unwrap();
        // +5 points of a 3000 ns op, priced at the op's CPU time.
        assert_eq!(v.method, PathMethod::Sampled);
        assert!(v.change > 50.0 && v.change < 250.0, "{v:?}");
    }
    assert!(caught >= 8, "p0 called alone in {caught} of 10");
    // The headline names it.
    let c = recipe(1000, 0.05, 0.0);
    let (workload, largest) = c.path_family.largest.as_ref().unwrap();
    assert_eq!(
        (workload.as_str(), largest.name.as_str()),
        ("open_close", "p0")
    );
}

#[test]
fn a_timed_row_that_grows_by_a_fifth_is_called_on_its_ns_per_op() {
    let mut caught = 0;
    for seed in 0..10 {
        let c = recipe(2000 + seed, 0.0, 600.0);
        let v = c.workloads[0]
            .paths
            .iter()
            .find(|v| v.name == "openat")
            .unwrap();
        assert_eq!(v.method, PathMethod::Timed);
        caught += usize::from(v.verdict == Verdict::Regressed && v.low > 0.0);
    }
    assert!(caught >= 8, "openat called in {caught} of 10");
}

#[test]
fn a_called_change_below_the_threshold_is_no_change() {
    let criteria = Criteria {
        path_threshold_ns: 1e6,
        ..Criteria::default()
    };
    assert_eq!(
        verdict(PathMethod::Timed, 300.0, 1e-6, &criteria),
        Verdict::NoChange
    );
    assert_eq!(
        verdict(PathMethod::Timed, 300.0, 1e-6, &Criteria::default()),
        Verdict::Regressed
    );
    assert_eq!(
        verdict(PathMethod::Share, -0.02, 1e-6, &Criteria::default()),
        Verdict::Improved
    );
    // Not rejected by the family: no change, however large.
    assert_eq!(
        verdict(PathMethod::Share, 0.5, 0.2, &Criteria::default()),
        Verdict::NoChange
    );
}

#[test]
fn every_format_carries_the_path_verdicts_and_the_gate_fails_on_them() {
    let c = recipe(1000, 0.05, 0.0);
    assert_eq!(called(&c), ["hook p0"]);
    // The op is unchanged: only the path gate fails.
    assert_eq!(c.exit_code(crate::compare::FailOn::Regression), 0);
    assert_eq!(c.exit_code(crate::compare::FailOn::PathRegressed), 1);
    let text = crate::compare::render_text(&c);
    assert!(
        text.contains("Path verdicts: 1 regressed, 0 improved of"),
        "{text}"
    );
    assert!(text.contains("  path hook p0 +"), "{text}");
    assert!(
        text.contains("The largest path change: hook p0 in open_close, +"),
        "{text}"
    );
    assert!(
        text.contains("; paths: 1 regressed, 0 improved of"),
        "{text}"
    );
    let markdown = crate::compare::render_markdown(&c);
    assert!(
        markdown.contains("| open_close | hook p0 | +"),
        "{markdown}"
    );
    let junit = crate::compare::render_junit(&c);
    assert!(
        junit.contains("name=\"open_close paths\"><failure message=\"1 of"),
        "{junit}"
    );
    let bmf = super::super::bmf::document(&c);
    let open = &bmf["open_close"];
    assert_eq!(open["paths regressed"].value, 1.0);
    let p0 = open["change hook p0 ns/op"];
    assert!(p0.lower_value.unwrap() > 0.0 && p0.value > 50.0, "{p0:?}");
    // An A/A compare: nothing called, and a pass says what it rules out at the path level.
    let same = recipe(7, 0.0, 0.0);
    assert!(called(&same).is_empty());
    let text = crate::compare::render_text(&same);
    assert!(!text.contains("The largest path change"), "{text}");
    assert!(text.contains(" ns/op ("), "{text}");
    assert!(text.contains("no path above +"), "{text}");
    assert_eq!(same.exit_code(crate::compare::FailOn::PathRegressed), 0);
}

fn share_verdict(name: &str, change: f64) -> PathVerdict {
    PathVerdict {
        kind: "syscall",
        name: name.into(),
        parent: None,
        method: PathMethod::Share,
        change,
        low: change - 0.01,
        high: change + 0.01,
        p_value: 1e-6,
        q_value: 1e-5,
        verdict: if change > 0.0 {
            Verdict::Regressed
        } else {
            Verdict::Improved
        },
        rest_per_path: None,
        rest_factor: None,
    }
}

#[test]
fn a_share_that_rose_against_a_rest_that_collapsed_is_not_called() {
    // The hooks' share of an op that fell from 1.2 ms to 25 us rose, priced against the old
    // rest as +2,400 ns; their own time per op fell from 1,200 to 370 ns.
    let mut v = share_verdict("security hooks", 2400.0);
    v.method = PathMethod::Sampled;
    v.rest_factor = Some(25.0 / 1200.0);
    assert!(the_rest_did_not_hold(&v));
    // A loaded machine's 30% on the rest: the share's reading stands.
    v.rest_factor = Some(1.3);
    assert!(!the_rest_did_not_hold(&v));
    // Timed, a path is its own time: nothing to hold it against.
    v.method = PathMethod::Timed;
    v.rest_factor = Some(25.0 / 1200.0);
    assert!(!the_rest_did_not_hold(&v));
}

#[test]
fn judged_on_shares_a_fall_that_another_path_s_growth_explains_is_not_called() {
    // close +7 points, openat -5.8: shares add up, so openat's fall is close's growth.
    let paths = [
        share_verdict("close", 0.07),
        share_verdict("openat", -0.058),
    ];
    let largest = largest_share_moves(&paths);
    assert!(!outweighed(largest, &paths[0]));
    assert!(outweighed(largest, &paths[1]));
    // Priced in ns, a path keeps its cost when another's grows: nothing to weigh.
    let mut priced = paths.clone();
    for v in &mut priced {
        v.method = PathMethod::Sampled;
    }
    assert!(!outweighed(largest_share_moves(&priced), &priced[1]));
}

/// `run`, on a machine whose speed moves every figure of the run by `sd` (the probed op and
/// its timed rows alike, sample by sample), openat's row `timed_shift` ns longer and the op
/// with it: code that runs at the machine's speed, as a kernel's own change does (a wait by
/// the clock would not, and against the rest reads it scaled by the speeds' ratio).
fn loaded_run(rng: &mut StdRng, label: &str, sd: f64, timed_shift: f64) -> Results {
    let mut r = run(rng, label, 0.0, 0.0);
    let w = &mut r.workloads[0];
    let speed = noise(rng, sd);
    let n = ROUNDS * 3;
    let factors: Vec<f64> = (0..n).map(|_| speed * noise(rng, 0.01)).collect();
    w.probed = factors
        .iter()
        .map(|f| (5000.0 + timed_shift) * f / 1000.0)
        .collect();
    for row in &mut w.attribution {
        let extra = openat_only(row, timed_shift);
        row.samples_ns_per_op = factors
            .iter()
            .map(|f| (row.ns_per_op * noise(rng, 0.01) + extra) * f)
            .collect();
    }
    r
}

fn loaded_recipe(seed: u64, timed_shift: f64) -> crate::compare::Comparison {
    let mut rng = StdRng::seed_from_u64(seed);
    let old: Vec<Results> = (0..10)
        .map(|i| loaded_run(&mut rng, &format!("base-{i}"), 0.25, 0.0))
        .collect();
    let new = loaded_run(&mut rng, "new", 0.25, timed_shift);
    compare(&old, &[new], &AT_5).unwrap()
}

#[test]
fn against_the_rest_of_the_op_a_machine_that_runs_everything_slower_calls_no_timed_path() {
    for seed in 0..40 {
        let c = loaded_recipe(3000 + seed, 0.0);
        let timed: Vec<&PathVerdict> = c.workloads[0]
            .paths
            .iter()
            .filter(|v| v.kind == "syscall" && v.name == "openat")
            .collect();
        assert_eq!(timed[0].method, PathMethod::AgainstRest, "seed {seed}");
        assert!(!timed[0].called(), "seed {seed}: {:?}", timed[0]);
    }
}

#[test]
fn against_the_rest_of_the_op_a_path_that_grows_by_3_percent_of_the_op_reads_its_growth() {
    let mut caught = 0;
    for seed in 0..10 {
        let c = loaded_recipe(4000 + seed, 150.0);
        let v = c.workloads[0]
            .paths
            .iter()
            .find(|v| v.kind == "syscall" && v.name == "openat")
            .unwrap();
        assert_eq!(v.method, PathMethod::AgainstRest);
        // 150 ns in a 5 us op whose speed moves by 25% between runs.
        assert!(v.low < 150.0 && v.high > 150.0, "{v:?}");
        let timed_called: Vec<String> = called(&c)
            .into_iter()
            .filter(|l| !l.starts_with("hook p"))
            .collect();
        caught += usize::from(timed_called == ["syscall openat"]);
    }
    assert!(caught >= 8, "openat called alone in {caught} of 10");
}

#[test]
fn a_path_whose_interval_reaches_the_whole_op_bounds_nothing_and_is_said_so() {
    let priced = |name: &str, high: f64| PathVerdict {
        method: PathMethod::Sampled,
        change: 0.0,
        low: -500.0,
        high,
        verdict: Verdict::NoChange,
        ..share_verdict(name, 0.0)
    };
    let mut f = PathFamily {
        tested: 2,
        confidence: 0.99,
        ..PathFamily::default()
    };
    f.count("fs_create_0k", &priced("openat", f64::INFINITY));
    f.count("open_close", &priced("close", 93.0));
    assert_eq!(f.unbounded, 1);
    assert_eq!(f.ruled_out_ns.as_ref().map(|r| r.bound), Some(93.0));
    let text = crate::compare::path_text::ruled_out(&f).unwrap();
    assert!(
        text.starts_with("no path above +93 ns/op (syscall close in open_close)")
            && text.ends_with(
                "1 path's share reaches the whole op at its interval's top, so it bounds nothing"
            ),
        "{text}"
    );
}
