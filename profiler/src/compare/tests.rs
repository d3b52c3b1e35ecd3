//! The comparison's tests: units of replication, pairing, environment differences,
//! attribution of a change, pooling.
use super::{pool::pool, *};
use crate::{
    results::fixtures::{row, sample_results},
    results::{PathKind, Results, Unit},
    stats::replication::{self, TestKind, Unit as Replication},
    stats::{self, Criteria, Verdict},
};

/// A file whose samples are independent runs (a round each), as the tests' data were
/// made to be.
fn with_clean(mut r: Results, clean: &[f64], label: &str) -> Results {
    r.label = label.into();
    r.workloads[0].clean = clean.to_vec();
    r.workloads[0].round_sizes = vec![1; clean.len()];
    r
}

/// One file of `rounds` rounds, each `per_round` samples spread +-1% around its median.
fn rounds_file(medians: &[f64], label: &str) -> Results {
    let samples: Vec<f64> = medians
        .iter()
        .flat_map(|m| [m * 0.99, *m, m * 1.01])
        .collect();
    let mut r = with_clean(sample_results(), &samples, label);
    r.workloads[0].round_sizes = vec![3; medians.len()];
    r
}

#[test]
fn samples_of_one_round_decide_nothing() {
    // Tight samples 10% apart, but each side is one round of one run: nothing measures
    // how two runs differ, so no verdict rests on them.
    let mut old = with_clean(sample_results(), &[5.0, 5.01, 4.99, 5.0], "old");
    let mut new = with_clean(sample_results(), &[5.5, 5.51, 5.49, 5.5], "new");
    old.workloads[0].round_sizes.clear();
    new.workloads[0].round_sizes.clear();
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!((w.replication, w.test), (Replication::Sample, None));
    assert_eq!(w.verdict, Verdict::Inconclusive);
    assert!(render_text(&c).contains("--rounds 2 or more"));
}

#[test]
fn rounds_are_the_unit_and_their_medians_the_observations() {
    // Round medians agree within 2% on each side; the sides differ by 10%.
    let old = rounds_file(&[5.0, 5.1, 4.95, 5.05], "old");
    let new = rounds_file(&[5.5, 5.6, 5.45, 5.55], "new");
    let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!(
        (w.replication, w.old.n, w.new.n),
        (Replication::Round, 4, 4)
    );
    assert_eq!(w.test, Some(TestKind::Welch));
    assert_eq!(w.verdict, Verdict::Regressed);
    // mpmath: Welch on the log of the ratio of [5.5, 5.6, 5.45, 5.55] to [5.0, 5.1, 4.95,
    // 5.05] (stats::welch_ratio), each round's variance above its samples' floor.
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 3.702472955514497e-05).abs() < 1e-9, "{p}");
    let mde = w.minimum_detectable_effect.unwrap();
    assert!(mde > 0.01 && mde < 0.10, "{mde}");
    assert!(w.components.between_rounds.is_some() && w.components.between_files.is_none());
    // The same run against itself: no change, and the spread says what it could detect.
    let same = compare(
        std::slice::from_ref(&old),
        std::slice::from_ref(&old),
        &Criteria::default(),
    )
    .unwrap();
    assert_eq!(same.workloads[0].verdict, Verdict::NoChange);
    assert!(render_text(&same).contains("detects a change of"));
}

fn paired(mut r: Results, variant: &str) -> Results {
    r.pairing = Some(crate::results::Pairing {
        run: "run-1".into(),
        variant: variant.into(),
        base_options: String::new(),
        versus_options: "--inject syscall:getppid=300".into(),
    });
    r
}

#[test]
fn the_variants_of_a_paired_run_pair_round_with_round() {
    // The machine drifts by 20% from round to round; the versus variant is 0.3 slower in
    // every round. Unpaired, the drift hides it; paired, it cancels.
    let base = [5.0, 5.6, 4.7, 5.3, 5.9, 4.8];
    let versus = [5.3, 5.85, 5.0, 5.6, 6.2, 5.1];
    let (old, new) = (rounds_file(&base, "base"), rounds_file(&versus, "versus"));
    let unpaired = compare(
        std::slice::from_ref(&old),
        std::slice::from_ref(&new),
        &Criteria::default(),
    )
    .unwrap();
    let w = &unpaired.workloads[0];
    assert_eq!(w.replication, Replication::Round);
    // mpmath: Welch on the log of the ratio of versus to base.
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 0.30543185362457178).abs() < 1e-9, "{p}");
    assert_ne!(w.verdict, Verdict::Regressed);

    let c = compare(
        &[paired(old.clone(), "base")],
        &[paired(new.clone(), "versus")],
        &Criteria::default(),
    )
    .unwrap();
    let w = &c.workloads[0];
    assert_eq!(
        (w.replication, w.test),
        (Replication::Pair, Some(TestKind::Paired))
    );
    // mpmath: the ratio estimator of the pairs (d = versus - ratio x base), its variance of
    // one pair above the rounds' samples' floor on both sides (2 x 1e-4 x pi / 6), 5 df.
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 4.762218831692608e-05).abs() < 1e-12, "{p}");
    assert_eq!(w.verdict, Verdict::Regressed);
    let (paired_mde, unpaired_mde) = (
        w.minimum_detectable_effect.unwrap(),
        unpaired.workloads[0].minimum_detectable_effect.unwrap(),
    );
    assert!(
        paired_mde * 3.0 < unpaired_mde,
        "{paired_mde} vs {unpaired_mde}"
    );
    assert!(render_text(&c).contains("paired"));

    // Files of two different runs, or two of the same variant, do not pair.
    let mut other_run = paired(new, "versus");
    other_run.pairing.as_mut().unwrap().run = "run-2".into();
    let c = compare(&[paired(old, "base")], &[other_run], &Criteria::default()).unwrap();
    assert_eq!(c.workloads[0].replication, Replication::Round);
}

#[test]
fn a_round_missing_on_one_side_leaves_its_pair_out() {
    let none = Default::default();
    let test = replication::paired_test(&[1.0, f64::NAN, 1.2, 1.1], &[1.1, 2.0, 1.3, 1.2], none);
    let t = test.unwrap();
    assert_eq!(t.ratio.df, 2.0);
    assert!((t.ratio.ratio - 3.6 / 3.3).abs() < 1e-12);
    assert!(replication::paired_test(&[1.0, f64::NAN], &[1.1, 1.2], none).is_none());
}

#[test]
fn a_run_against_a_baseline_of_several_is_a_prediction() {
    let baseline: Vec<Results> = [5.0, 5.1, 4.9, 5.05, 4.95]
        .iter()
        .map(|m| rounds_file(&[*m, *m], "base"))
        .collect();
    let same = rounds_file(&[5.02, 5.0], "same");
    let c = compare(&baseline, &[same], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!(
        (w.replication, w.test),
        (Replication::File, Some(TestKind::Prediction))
    );
    assert_eq!((w.old.n, w.new.n), (5, 1));
    assert_ne!(w.verdict, Verdict::Regressed);
    let slower = rounds_file(&[6.0, 6.1], "slower");
    let c = compare(&baseline, &[slower], &Criteria::default()).unwrap();
    assert_eq!(c.workloads[0].verdict, Verdict::Regressed);
    assert!(render_text(&c).contains("prediction interval"));
}

#[test]
fn the_runs_own_spread_bounds_what_more_rounds_can_detect() {
    let run_means = [5.0, 5.5, 4.5, 5.25, 4.75];
    let floor_and_effect = |rounds_of: &dyn Fn(f64) -> Vec<f64>| {
        let baseline: Vec<Results> = run_means
            .iter()
            .map(|m| rounds_file(&rounds_of(*m), "base"))
            .collect();
        let c = compare(
            &baseline,
            &[rounds_file(&[5.0, 5.0], "new")],
            &Criteria::default(),
        )
        .unwrap();
        let w = &c.workloads[0];
        assert_eq!(w.replication, Replication::File);
        (
            w.floor_over_rounds.unwrap(),
            w.minimum_detectable_effect.unwrap(),
            c,
        )
    };
    // Rounds of a run agree: the runs' spread is all their own, no round count lowers it.
    let (floor, effect, c) = floor_and_effect(&|m| vec![m, m]);
    assert!((floor - effect).abs() < 1e-9 * effect, "{floor} {effect}");
    let text = render_text(&c);
    assert!(text.contains("with any number of rounds"), "{text}");
    assert!(text.contains("more rounds would not narrow it"), "{text}");
    assert!(render_markdown(&c).contains("`run --versus`"));
    // Rounds disagree by +-30% and explain all the runs' spread: more rounds would help.
    let (floor, effect, _) = floor_and_effect(&|m| vec![m * 0.7, m * 1.3]);
    assert!(floor < effect / 2.0, "{floor} {effect}");
}

#[test]
fn a_policy_on_one_side_is_a_run_option_difference() {
    let old = sample_results();
    let mut new = sample_results();
    new.options.policy = vec![crate::results::PolicyRecord {
        kind: "landlock".into(),
        summary: "landlock (2 layers, 15 rules)".into(),
        rules: serde_json::Value::Null,
    }];
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let d = c.options.iter().find(|d| d.field == "policy").unwrap();
    assert_eq!(
        (d.old.as_slice(), d.new.as_slice()),
        (
            &["none".to_string()][..],
            &["landlock (2 layers, 15 rules)".to_string()][..]
        )
    );
    assert!(render_text(&c).contains("policy: none -> landlock (2 layers, 15 rules)"));
}

#[test]
fn load_is_said_first_and_a_workload_it_left_undecided_says_so() {
    use crate::machine::load::MachineLoad;
    let loaded = |mut r: Results, others: f64| {
        r.environment.machine_load = Some(MachineLoad {
            others_busy_percent: others,
            steal_percent: 0.0,
        });
        r
    };
    // Quiet both sides: nothing said.
    let quiet = compare(
        &[loaded(sample_results(), 3.0)],
        &[loaded(sample_results(), 5.0)],
        &Criteria::default(),
    )
    .unwrap();
    assert!(quiet.load.is_none());
    assert!(!render_text(&quiet).contains("Load:"));
    // Rounds 20% apart on the loaded side: the interval is too wide to decide.
    let old = loaded(rounds_file(&[5.0, 5.1, 4.95, 5.05], "old"), 3.0);
    let new = loaded(rounds_file(&[5.0, 6.5, 4.4, 6.2], "new"), 62.0);
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let text = render_text(&c);
    let second = text.lines().nth(1).unwrap();
    assert!(
        second.starts_with("Load: old quiet (0 of 1 runs loaded); new 1 of 1 run under load")
            && second.contains("used 62% of its CPU time")
            && second.contains("the sides' loads differ"),
        "{text}"
    );
    let w = &c.workloads[0];
    assert_eq!(w.verdict, Verdict::Inconclusive);
    assert!(
        text.contains("note: undecided under load (the new side, the Load line above)"),
        "{text}"
    );
    assert!(render_markdown(&c).contains("**Load: old quiet"));
}

#[test]
fn a_busier_machine_is_an_environment_difference_and_a_similar_one_is_not() {
    use crate::machine::load::MachineLoad;
    let with_load = |others: f64| {
        let mut r = sample_results();
        r.environment.machine_load = Some(MachineLoad {
            others_busy_percent: others,
            steal_percent: 0.0,
        });
        r
    };
    let c = compare(&[with_load(3.0)], &[with_load(12.0)], &Criteria::default()).unwrap();
    assert!(c.environment.iter().all(|d| d.field != "machine load"));
    let c = compare(&[with_load(3.0)], &[with_load(48.0)], &Criteria::default()).unwrap();
    let text = render_text(&c);
    assert!(
        text.contains(
            "machine load: the rest of the machine idle (under 25% of its CPU time) \
                       -> the rest of the machine busy (25-75% of its CPU time)"
        ),
        "{text}"
    );
}

#[test]
fn fewer_cpus_to_run_on_is_an_environment_difference() {
    let old = sample_results();
    let mut new = sample_results();
    new.environment.cpus_allowed = 1;
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let text = render_text(&c);
    assert!(
        text.contains("CPUs: 2 online, 2 allowed -> 2 online, 1 allowed"),
        "{text}"
    );
}

#[test]
fn another_network_namespace_is_an_environment_difference_where_both_sides_record_one() {
    use crate::machine::namespaces::{Namespace, Namespaces};
    let host = Namespace {
        inode: 0xEFFF_FFF9,
        initial: Some(true),
    };
    let on = |network: Namespace| {
        let mut r = sample_results();
        r.environment.namespaces = Some(Namespaces {
            network,
            pid: host,
            ..Namespaces::default()
        });
        r
    };
    let container = Namespace {
        inode: 4026532174,
        initial: Some(false),
    };
    let c = compare(&[on(host)], &[on(container)], &Criteria::default()).unwrap();
    let text = render_text(&c);
    assert!(
        text.contains("network namespace: the host's -> net:[4026532174]"),
        "{text}"
    );
    assert!(!text.contains("pid namespace:"), "{text}");
    // A file from before namespaces were recorded says nothing of them.
    let c = compare(&[sample_results()], &[on(container)], &Criteria::default()).unwrap();
    assert!(
        !render_text(&c).contains("namespace:"),
        "{}",
        render_text(&c)
    );
}

#[test]
fn another_build_tree_size_is_an_environment_difference() {
    // sample_results runs open_close and build.
    let with_units = |units: Option<u64>, build: bool| {
        let mut r = sample_results();
        if let Some(u) = units {
            r.options.build_units = Some(u);
        }
        if !build {
            r.workloads.retain(|w| w.name != "build");
        }
        r
    };
    let compared = |old, new| compare(&[old], &[new], &Criteria::default()).unwrap();
    let units_differ = |c: &Comparison| c.environment.iter().any(|d| d.field == "build units");
    // An older file without the option built the default tree.
    assert!(!units_differ(&compared(
        with_units(None, true),
        with_units(Some(300), true)
    )));
    let c = compared(with_units(None, true), with_units(Some(30), true));
    let text = render_text(&c);
    assert!(text.contains("build units: 300 -> 30"), "{text}");
    // Runs without the build workload have no tree to differ in.
    assert!(!units_differ(&compared(
        with_units(None, false),
        with_units(Some(30), false)
    )));
}

#[test]
fn a_slower_open_is_attributed_to_its_hook_and_lsm() {
    let old = with_clean(sample_results(), &[5.0, 5.02, 4.98, 5.01, 4.99], "old");
    let mut new = with_clean(sample_results(), &[5.5, 5.52, 5.48, 5.51, 5.49], "new");
    new.environment.kernel_release = "6.1.0-19-amd64".into();
    let rows = &mut new.workloads[0].attribution;
    rows[1] = row(PathKind::Hook, "security_file_open", None, 1.0, 830.0);
    rows[2] = row(
        PathKind::Lsm,
        "apparmor_file_open",
        Some("security_file_open"),
        1.0,
        790.0,
    );
    rows[0] = row(PathKind::Syscall, "openat", None, 1.0, 3450.0);
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!(w.verdict, Verdict::Regressed);
    let a = w.attribution.as_ref().unwrap();
    assert!((a.total_ns - 500.0).abs() < 1e-6, "{}", a.total_ns);
    // openat grew 450 ns, 430 of them in the hook: 20 its own, 50 outside it.
    assert!((a.residual_ns - 50.0).abs() < 1e-6, "{}", a.residual_ns);
    let named: f64 = a.parts.iter().map(|(_, ns)| ns).sum();
    assert!((named - a.total_ns).abs() < 1e-6, "{:?}", a.parts);
    let lines = attribution_lines(&w.name, a);
    assert_eq!(
        lines[0],
        "open_close +500 ns: security_file_open +430 ns (apparmor_file_open +410 ns), \
         security_file_free +0.0 ns, syscalls' own +20 ns, residual +50 ns"
    );
    assert_eq!(lines[1], "  enclosing paths: syscall openat +450 ns");
    let text = render_text(&c);
    assert!(
        text.contains("  kernel: 6.1.0-18-amd64 -> 6.1.0-19-amd64"),
        "{text}"
    );
    assert!(text.contains("Performance has regressed."), "{text}");
    assert_eq!(c.exit_code(FailOn::Regression), 1);
    // A regression outranks an inconclusive workload (build has no samples to compare).
    assert_eq!(c.exit_code(FailOn::Inconclusive), 1);
    assert_eq!(c.exit_code(FailOn::Never), 0);
    let md = render_markdown(&c);
    assert!(
        md.contains("| open_close | 5.000 us | 5.500 us | +10.00% ["),
        "{md}"
    );
    assert!(md.contains("| **regressed** |"), "{md}");
    let html = render_html(&c);
    assert!(html.starts_with("<!DOCTYPE html>") && !html.contains("http"));
    assert!(
        html.contains("aria-label=\"change attribution of open_close\""),
        "{html}"
    );
    assert!(html.contains("<tr class=\"regressed\">"), "{html}");
    let xml = render_junit(&c);
    assert!(
        xml.contains("tests=\"2\" failures=\"1\" skipped=\"1\""),
        "{xml}"
    );
    assert!(
        xml.contains("<failure message=\"open_close +10.00%, Holm p = 0.000: regressed\""),
        "{xml}"
    );
    assert!(xml.contains("security_file_open +430 ns"), "{xml}");
}

#[test]
fn single_samples_are_inconclusive_and_exit_3_only_when_asked() {
    let old = with_clean(sample_results(), &[5.0], "old");
    let new = with_clean(sample_results(), &[5.5], "new");
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    assert!(c
        .workloads
        .iter()
        .all(|w| w.verdict == Verdict::Inconclusive));
    assert_eq!(c.exit_code(FailOn::Regression), 0);
    assert!(c.inconclusive_warning(FailOn::Regression).is_some());
    assert_eq!(c.exit_code(FailOn::Inconclusive), 3);
    assert_eq!(c.exit_code(FailOn::Never), 0);
    assert!(render_text(&c).contains("Inconclusive: one run of one round on each side"));
}

#[test]
fn files_of_a_side_are_pooled_per_workload() {
    let a = with_clean(sample_results(), &[5.0, 5.1], "a");
    let b = with_clean(sample_results(), &[5.2], "b");
    let side = [a, b];
    let pooled = pool(&side).unwrap();
    assert_eq!(
        pooled[0].1.clean,
        [vec![vec![5.0], vec![5.1]], vec![vec![5.2]]]
    );
    // Rows without per-sample values contribute their single figure once per file.
    assert_eq!(pooled[0].1.attribution[1].samples_ns_per_op, [400.0, 400.0]);
    let mut c = with_clean(sample_results(), &[1.0], "c");
    c.workloads[0].unit = Unit::MegabytesPerSecond;
    let err = pool(&[sample_results(), c]).unwrap_err();
    assert!(err.to_string().contains("open_close is in us"), "{err}");
}

/// Three boots a side, eleven tight samples each, the boots apart by more than the samples.
fn boots(medians: &[f64], label: &str) -> Vec<Results> {
    medians
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let samples: Vec<f64> = (0..11).map(|k| m + (k as f64 - 5.0) * 0.01).collect();
            with_clean(sample_results(), &samples, &format!("{label}-{i}"))
        })
        .collect()
}

#[test]
fn several_files_on_a_side_make_the_file_the_unit() {
    let (old, new) = (boots(&[5.0, 5.2, 4.9], "a"), boots(&[5.1, 5.3, 5.05], "b"));
    let c = compare(&old, &new, &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!(w.replication, Replication::File);
    assert_eq!((w.old.n, w.new.n), (3, 3));
    // mpmath: Welch on the log of the ratio of [5.1, 5.3, 5.05] to [5.0, 5.2, 4.9].
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 0.37609931126188957).abs() < 1e-9, "{p}");
    // Pooling the 33 samples as independent would call the same data a regression.
    let pseudo = stats::welch_ratio(
        (&stats::summarize(
            &old.iter()
                .flat_map(|r| r.workloads[0].clean.clone())
                .collect::<Vec<_>>(),
        )
        .unwrap())
            .into(),
        (&stats::summarize(
            &new.iter()
                .flat_map(|r| r.workloads[0].clean.clone())
                .collect::<Vec<_>>(),
        )
        .unwrap())
            .into(),
    )
    .unwrap();
    assert!(pseudo.p_value < 0.01, "{pseudo:?}");
    assert_ne!(w.verdict, Verdict::Regressed);
    let text = render_text(&c);
    assert!(text.contains("(n = 3 files)"), "{text}");
    assert!(text.contains("Unit of replication: the file"), "{text}");
}

#[test]
fn one_file_a_side_keeps_the_sample_as_the_unit() {
    let old = with_clean(sample_results(), &[5.0, 5.02, 4.98], "old");
    let new = with_clean(sample_results(), &[5.5, 5.52, 5.48], "new");
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    assert_eq!(c.workloads[0].replication, Replication::Round);
    assert_eq!(c.workloads[0].old.n, 3);
    assert!(render_text(&c).contains("Unit of replication: the round"));
    // One file against three: the one is tested against the three's spread.
    let c = compare(
        &[with_clean(sample_results(), &[5.0, 5.02, 4.98], "old")],
        &boots(&[5.5, 5.6, 5.4], "b"),
        &Criteria::default(),
    )
    .unwrap();
    let w = &c.workloads[0];
    assert_eq!((w.replication, w.old.n, w.new.n), (Replication::File, 1, 3));
    assert_eq!(w.test, Some(TestKind::Prediction));
    // mpmath: 2 * t.sf(ln(5.5 / 5.0) / ((0.1 / 5.5) * sqrt(1 + 1/3)), 2)
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 0.045253335407929).abs() < 1e-9, "{p}");
}

#[test]
fn imported_kernbench_groups_compare_run_by_run() {
    let log = "\
vanilla
815.80user 113.69system 2:04.36elapsed 747%CPU (0avgtext+0avgdata 0maxresident)k
816.10user 113.20system 2:04.12elapsed 748%CPU (0avgtext+0avgdata 0maxresident)k
815.20user 113.50system 2:04.80elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
816.40user 113.30system 2:04.50elapsed 746%CPU (0avgtext+0avgdata 0maxresident)k

[PATCH 01/10] Task watchers v2
817.00user 115.01system 2:05.00elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
818.30user 114.80system 2:05.40elapsed 744%CPU (0avgtext+0avgdata 0maxresident)k
817.10user 115.20system 2:04.90elapsed 746%CPU (0avgtext+0avgdata 0maxresident)k
817.90user 114.90system 2:05.62elapsed 745%CPU (0avgtext+0avgdata 0maxresident)k
";
    let groups = crate::import::time::parse(log, "kernbench.log").unwrap();
    let c = compare(&groups[..1], &groups[1..], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!((w.replication, w.old.n), (Replication::Run, 4));
    // mpmath: Welch on the log of the ratio of new to old, elapsed and user seconds (each run
    // a round of one sample: no floor).
    let p = w.change.unwrap().p_value.unwrap();
    assert!((p - 0.012515182819644891).abs() < 1e-9, "{p}");
    let user = w.extras.iter().find(|e| e.name == "user").unwrap();
    let p = user.change.unwrap().p_value.unwrap();
    assert!((p - 0.006262606742252802).abs() < 1e-9, "{p}");
}

/// open_close's and a reference loop's round medians in one file.
fn with_reference(open_close: &[f64], mem_l1: &[f64], label: &str) -> Results {
    let mut r = rounds_file(open_close, label);
    let reference = &mut r.workloads[1];
    reference.name = "mem_l1".into();
    reference.clean = mem_l1
        .iter()
        .flat_map(|m| [m * 0.99, *m, m * 1.01])
        .collect();
    reference.round_sizes = vec![3; mem_l1.len()];
    r
}

#[test]
fn a_single_run_whose_rounds_disagree_far_more_than_the_baselines_is_no_surer_than_they_are() {
    let baseline: Vec<Results> = [
        [5.0, 5.1, 4.95, 5.05],
        [5.2, 5.1, 5.15, 5.25],
        [4.9, 5.0, 4.85, 4.95],
        [5.1, 5.0, 5.05, 5.15],
    ]
    .iter()
    .enumerate()
    .map(|(i, m)| rounds_file(m, &format!("base-{i}")))
    .collect();
    // Two of four rounds at 2.5x the others: a disturbed run, not a slower kernel.
    let disturbed = rounds_file(&[5.1, 12.5, 5.0, 12.8], "new");
    let c = compare(&baseline, &[disturbed], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert_eq!(w.test, Some(TestKind::Prediction));
    // Its rounds' spread is in its interval, which holds 0: no regression, and the note says
    // the run was disturbed.
    let (lo, _) = w.change.unwrap().ci.unwrap();
    assert!(lo < 0.0, "{:?}", w.change);
    assert_ne!(w.verdict, Verdict::Regressed);
    let d = w.disturbed_run.expect("the new run is disturbed");
    assert_eq!(d.side, "new");
    assert!(d.spread.run > 10.0 * d.spread.others, "{d:?}");
    assert_eq!(c.exit_code(FailOn::Regression), 0);
    assert!(render_text(&c).contains("the new run looks disturbed"));
    // As slow on average, but every round alike, as the baseline's are: a regression.
    let slower = rounds_file(&[8.8, 8.9, 8.75, 8.85], "new");
    let c = compare(&baseline, &[slower], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    assert!(w.disturbed_run.is_none());
    assert_eq!(w.verdict, Verdict::Regressed);
}

/// A file of two bandwidth rows: bw_pipe's and the reference bw_mem_read's round medians.
fn with_bandwidth(bw_pipe: &[f64], bw_mem_read: &[f64], label: &str) -> Results {
    let mut r = with_reference(bw_pipe, bw_mem_read, label);
    for (w, name) in r.workloads.iter_mut().zip(["bw_pipe", "bw_mem_read"]) {
        w.name = name.into();
        w.unit = Unit::MegabytesPerSecond;
    }
    r
}

#[test]
fn memory_bandwidth_that_fell_is_the_machines_not_the_kernels() {
    let old = with_bandwidth(
        &[5000.0, 5100.0, 4950.0, 5050.0],
        &[24e3, 24.5e3, 23.8e3, 24.2e3],
        "old",
    );
    // The loop that only reads memory lost 18%, bw_pipe 25%: the host's memory, not the kernel.
    let new = with_bandwidth(
        &[3750.0, 3800.0, 3700.0, 3780.0],
        &[19.7e3, 20e3, 19.5e3, 19.9e3],
        "new",
    );
    let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
    let verdict =
        |c: &Comparison, name: &str| c.workloads.iter().find(|w| w.name == name).unwrap().verdict;
    assert_eq!(verdict(&c, "bw_mem_read"), Verdict::Inconclusive);
    assert_eq!(verdict(&c, "bw_pipe"), Verdict::Inconclusive);
    assert_eq!(c.exit_code(FailOn::Regression), 0);
    assert!(
        render_text(&c).contains("memory bandwidth fell"),
        "{}",
        render_text(&c)
    );
    // Memory bandwidth held: bw_pipe's loss is a regression.
    let new = with_bandwidth(
        &[3750.0, 3800.0, 3700.0, 3780.0],
        &[24.1e3, 24e3, 24.3e3, 23.9e3],
        "new",
    );
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    assert_eq!(verdict(&c, "bw_pipe"), Verdict::Regressed);
    assert_eq!(verdict(&c, "bw_mem_read"), Verdict::NoChange);
}

#[test]
fn a_slower_machine_is_not_a_slower_kernel() {
    let old = with_reference(&[5.0, 5.1, 4.95, 5.05], &[1.26, 1.27, 1.25, 1.26], "old");
    // The loop that never enters the kernel is 40% slower: so is the machine.
    let slower = with_reference(&[7.0, 7.1, 6.95, 7.05], &[1.76, 1.77, 1.75, 1.78], "new");
    let c = compare(std::slice::from_ref(&old), &[slower], &Criteria::default()).unwrap();
    let verdict =
        |c: &Comparison, name: &str| c.workloads.iter().find(|w| w.name == name).unwrap().verdict;
    assert_eq!(verdict(&c, "mem_l1"), Verdict::Inconclusive);
    assert_eq!(verdict(&c, "open_close"), Verdict::Inconclusive);
    assert_eq!(c.count(Verdict::Regressed), 0);
    let text = render_text(&c);
    assert!(text.contains("machine speed"), "{text}");
    assert!(text.contains("the machine ran slower"), "{text}");
    // Far more than the machine could make (+300% against its +40%) stays a regression.
    let far_slower = with_reference(&[20.0, 20.4, 19.8, 20.2], &[1.76, 1.77, 1.75, 1.78], "new");
    let c = compare(
        std::slice::from_ref(&old),
        &[far_slower],
        &Criteria::default(),
    )
    .unwrap();
    assert_eq!(verdict(&c, "open_close"), Verdict::Regressed);
    // The same kernel change on a machine whose speed held: a regression.
    let same_speed = with_reference(&[7.0, 7.1, 6.95, 7.05], &[1.26, 1.25, 1.27, 1.26], "new");
    let c = compare(&[old], &[same_speed], &Criteria::default()).unwrap();
    assert_eq!(verdict(&c, "open_close"), Verdict::Regressed);
    assert_eq!(verdict(&c, "mem_l1"), Verdict::NoChange);
    assert!(!render_text(&c).contains("machine speed"));
}

/// A reference whose move is within its own noise still says the most anyone knows of the
/// machine's: a kernel row that moved its way by little more is inconclusive, one far beyond
/// keeps its verdict.
#[test]
fn a_reference_that_moved_within_its_noise_still_bounds_what_the_machine_could_do() {
    // mem_l1's rounds disagree: +4% on average, but not called a change on its own.
    let old = with_reference(&[5.0, 5.1, 4.95, 5.05], &[1.20, 1.32, 1.22, 1.30], "old");
    let new = with_reference(&[5.6, 5.7, 5.55, 5.65], &[1.24, 1.40, 1.25, 1.37], "new");
    let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
    fn row<'a>(c: &'a Comparison, name: &str) -> &'a WorkloadComparison {
        c.workloads.iter().find(|w| w.name == name).unwrap()
    }
    assert_eq!(row(&c, "mem_l1").verdict, Verdict::NoChange);
    // open_close +12%, within 3x the reference's +4% in log terms: not told from the machine.
    let w = row(&c, "open_close");
    assert_eq!(w.verdict, Verdict::Inconclusive, "{:?}", w.change);
    assert!(w.machine_speed_changed);
    assert!(w
        .machine_state
        .as_deref()
        .unwrap()
        .contains("may have run slower"));
    assert!(
        !render_text(&c).contains("machine speed (a loop"),
        "no environment line"
    );
    // +60%: beyond what the machine could make of +4%.
    let far = with_reference(&[8.0, 8.1, 7.95, 8.05], &[1.24, 1.40, 1.25, 1.37], "new");
    let c = compare(&[old], &[far], &Criteria::default()).unwrap();
    assert_eq!(row(&c, "open_close").verdict, Verdict::Regressed);
}

#[test]
fn a_run_with_an_injection_against_one_without_names_the_injection_first() {
    let old = rounds_file(&[5.0, 5.1, 4.95, 5.05], "old");
    let mut new = rounds_file(&[6.0, 6.1, 5.95, 6.05], "new");
    new.options.inject = vec!["syscall:openat=1000".into()];
    let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
    assert_eq!(c.options[0].field, "inject");
    let text = render_text(&c);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..3],
        [
            "Run options that differ (they change what ran):",
            "  inject: none -> syscall:openat=1000"
        ],
        "{text}"
    );
    // open_close calls openat: its regression is the injection's, and it says so.
    let w = &c.workloads[0];
    assert_eq!(w.verdict, Verdict::Regressed);
    assert!(
        text.contains(
            "note: the injected wait differs: openat +1000 ns a call x 1.00 calls/op = +1000 \
             ns/op; only the new side carries the syscall injection's machinery"
        ),
        "{text}"
    );
    let markdown = render_markdown(&c);
    assert!(
        markdown.contains("**Run options that differ (they change what ran)**\n\n- inject: `none` → `syscall:openat=1000`"),
        "{markdown}"
    );
    // Nothing differs: one line names everything compared, the options first.
    let same = compare(
        std::slice::from_ref(&old),
        std::slice::from_ref(&old),
        &Criteria::default(),
    )
    .unwrap();
    assert!(render_text(&same)
        .contains("Run options and environment: no differences in inject, policy, stack noop"));
}

#[test]
fn an_interval_holds_zero_when_holm_s_adjustment_takes_the_significance_away() {
    // open_close +2.4% with p = 0.04 alone; with the other workload unchanged, Holm doubles
    // it. The interval printed beside the adjusted p holds 0, and the verdict is not a change.
    let (mut old, mut new) = (
        rounds_file(&[5.0, 5.1, 4.95, 5.05], "old"),
        rounds_file(&[5.12, 5.22, 5.07, 5.17], "new"),
    );
    for r in [&mut old, &mut new] {
        r.workloads[1].clean = vec![2.0, 2.1, 1.9, 2.05, 1.95, 2.0];
        r.workloads[1].round_sizes = vec![2; 3];
    }
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let w = &c.workloads[0];
    let change = w.change.unwrap();
    let (p, adjusted) = (change.p_value.unwrap(), w.adjusted_p.unwrap());
    assert!(p < 0.05 && adjusted >= 0.05, "{p} {adjusted}");
    let (lo, hi) = change.ci.unwrap();
    assert!(lo < 0.0 && hi > 0.0, "{lo} {hi}");
    assert!(change.confidence.unwrap() > 0.95);
    assert!(matches!(
        w.verdict,
        Verdict::NoChange | Verdict::Inconclusive
    ));
    let text = render_text(&c);
    assert!(
        text.contains("No change detected; a slowdown above +"),
        "{text}"
    );
    assert!(
        text.contains("Summary: 0 regressed, 0 improved, 2 no change, 0 inconclusive; the largest slowdown it could have missed: build +"),
        "{text}"
    );
    // A workload whose spread is the machine's bounds the machine, not the kernel: the
    // summary weighs the others and names it as left out.
    let mut c = c;
    c.workloads[1].machine_state = Some("the filesystem's state".into());
    c.largest_missed_slowdown = MissedSlowdown::of(&c.workloads);
    let m = c.largest_missed_slowdown.as_ref().unwrap();
    assert_eq!(
        (m.workload.as_str(), m.left_out.as_slice()),
        ("open_close", &["build".to_string()][..])
    );
    let text = render_text(&c);
    assert!(
        text.contains("the largest slowdown it could have missed: open_close +")
            && text.contains("(95%; build left out, whose spread the machine's state explains)"),
        "{text}"
    );
}

/// `rounds_file` with openat's per-sample ns per op.
fn with_openat_samples(medians: &[f64], samples: Vec<f64>, label: &str) -> Results {
    let mut r = rounds_file(medians, label);
    let row = r.workloads[0]
        .attribution
        .iter_mut()
        .find(|a| a.name == "openat")
        .unwrap();
    row.samples_ns_per_op = samples;
    r
}

#[test]
fn a_timed_path_s_change_has_an_interval_from_its_rounds() {
    // openat's per-sample ns per op, three samples in each of four rounds, +100 ns in new.
    let with_openat = |medians: &[f64], openat: &[f64], label: &str| {
        let samples = openat.iter().flat_map(|v| [v - 5.0, *v, v + 5.0]).collect();
        with_openat_samples(medians, samples, label)
    };
    let old = with_openat(
        &[5.0, 5.1, 4.95, 5.05],
        &[3000.0, 3020.0, 2990.0, 3010.0],
        "old",
    );
    let new = with_openat(
        &[5.1, 5.2, 5.05, 5.15],
        &[3100.0, 3120.0, 3090.0, 3110.0],
        "new",
    );
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let a = c.workloads[0].attribution.as_ref().unwrap();
    let openat = a.paths.iter().find(|p| p.name == "openat").unwrap();
    let (low, high) = openat.delta_interval.expect("rounds on both sides");
    assert!((openat.delta_ns_per_op - 100.0).abs() < 1e-9, "{openat:?}");
    assert!(
        low > 50.0 && low < 100.0 && high > 100.0 && high < 150.0,
        "{low} {high}"
    );
    // Rows with one value a file (no per-sample values) have none.
    let hook = a
        .paths
        .iter()
        .find(|p| p.name == "security_file_open")
        .unwrap();
    assert_eq!(hook.delta_interval, None);
}

#[test]
fn a_path_s_figure_is_its_rounds_medians_and_one_preempted_sample_moves_it_not() {
    // openat 3000 ns per op in every sample but one of new's, which a preemption took to
    // 40 us: the mean of all samples would read +2750 ns, the rounds' medians read 0.
    let with_openat = |medians: &[f64], preempted: bool, label: &str| {
        let mut samples: Vec<f64> = (0..12).map(|i| 3000.0 + f64::from(i % 3) - 1.0).collect();
        if preempted {
            samples[4] = 40_000.0;
        }
        with_openat_samples(medians, samples, label)
    };
    let old = with_openat(&[5.0, 5.1, 4.95, 5.05], false, "old");
    let new = with_openat(&[5.0, 5.1, 4.95, 5.05], true, "new");
    let c = compare(&[old], &[new], &Criteria::default()).unwrap();
    let a = c.workloads[0].attribution.as_ref().unwrap();
    let openat = a.paths.iter().find(|p| p.name == "openat").unwrap();
    assert!(
        openat.old_ns_per_op == 3000.0 && openat.delta_ns_per_op.abs() <= 1.0,
        "{openat:?}"
    );
    let (low, high) = openat.delta_interval.unwrap();
    assert!(
        ((low + high) / 2.0 - openat.delta_ns_per_op).abs() < 1e-6,
        "the interval stands around the figure: {low} {high}"
    );
}

/// open_close's profile over four rounds of 1000 own samples: `landlock` of each round's in
/// landlock's functions, 50 in the framework's part of the hooks.
fn with_groups(medians: &[f64], landlock: [u64; 4], label: &str) -> Results {
    use crate::results::{GroupKind, SampledGroup};
    let mut r = rounds_file(medians, label);
    let mut p = crate::compare::sampled::tests::rounds_profile(&[(60, 1000); 4]);
    let group = |kind, lsm: Option<&str>, by_round: Vec<u64>| {
        let samples: u64 = by_round.iter().sum();
        SampledGroup {
            kind,
            lsm: lsm.map(String::from),
            program: None,
            samples,
            share: samples as f64 / 4000.0,
            share_low: 0.0,
            share_high: 1.0,
            ns_per_op: 0.0,
            round_samples: by_round,
        }
    };
    p.groups = vec![
        group(GroupKind::Hooks, None, landlock.map(|l| l + 50).to_vec()),
        group(GroupKind::Lsm, Some("landlock"), landlock.to_vec()),
        group(GroupKind::Framework, None, vec![50; 4]),
        group(GroupKind::TaskPaths, None, vec![0; 4]),
    ];
    r.workloads[0].profile = Some(p);
    r
}

#[test]
fn the_security_stack_s_change_is_told_per_lsm_with_the_rounds_interval() {
    let old = with_groups(&[5.0, 5.1, 4.95, 5.05], [10, 12, 9, 11], "old");
    let new = with_groups(&[5.4, 5.5, 5.35, 5.45], [60, 62, 58, 61], "new");
    let c = compare(std::slice::from_ref(&old), &[new], &Criteria::default()).unwrap();
    let groups = &c.workloads[0].sampled.as_ref().unwrap().groups;
    let landlock = groups
        .iter()
        .find(|g| g.lsm.as_deref() == Some("landlock"))
        .unwrap();
    assert!(
        (landlock.share_change - 0.049_75).abs() < 1e-9,
        "{landlock:?}"
    );
    assert!(landlock.judged.starred, "{landlock:?}");
    let framework = groups.iter().find(|g| g.label() == "framework").unwrap();
    assert!(!framework.judged.starred, "{framework:?}");
    let text = render_text(&c);
    assert!(text.contains("Security stack change"), "{text}");
    let row = text
        .lines()
        .find(|l| l.contains("  landlock"))
        .expect(&text);
    assert!(
        row.contains("1.1%") && row.contains("6.0%") && row.contains("*+4.97"),
        "{row}"
    );
    // The task paths held no sample on either side: not listed.
    assert!(!text.contains("task paths"), "{text}");
    assert!(
        text.contains("The largest change inside the hooks: landlock in open_close, 1.1% -> 6.0%"),
        "{text}"
    );
    assert!(render_markdown(&c).contains("└ landlock"));
    // The same run on both sides: no change, and none marked.
    let c = compare(
        std::slice::from_ref(&old),
        std::slice::from_ref(&old),
        &Criteria::default(),
    )
    .unwrap();
    let text = render_text(&c);
    assert!(
        text.contains("Security stack change") && !text.contains("*+"),
        "{text}"
    );
    assert!(
        !text.contains("The largest change inside the hooks"),
        "{text}"
    );
}
