//! Where the variance is, and what one observation of a comparison is: pure statistics over a
//! nested design (samples within rounds, rounds within files), no I/O.
//!
//! Samples of one round share its runner, CPU placement, memory layout and the machine's state,
//! so they agree with each other better than two rounds do, and two rounds of one run better
//! than two runs. Treating samples as independent makes a comparison's p-value far too small
//! (two runs of the same binary are then "regressions"). So, as Kalibera and Jones ("Rigorous
//! Benchmarking in Reasonable Time", ISMM 2013) advise, the unit of a verdict is the highest
//! level that was repeated: a file's value (the mean of its rounds' values) when a side has
//! several files, else a round's value. A round's value is the median of its samples: a
//! sample that another task preempted (one-sided noise, common on a shared machine) moves a
//! mean, not a median. The spread at each level is estimated (one-way ANOVA, method of
//! moments) and reported, and so is the smallest change the test could detect. An
//! observation's variance is never taken below what the level under it adds (`variance_floor`):
//! a few runs can agree by chance, their rounds cannot all do so. Tests are of the ratio of
//! the means, on the log scale.
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

use crate::stats::{self, Moments, RatioTest, Summary};

/// The samples of one file, round by round.
pub type FileRounds = Vec<Vec<f64>>;

/// What one observation of a comparison is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// One run of one round on each side: nothing measures the spread between runs.
    Sample,
    /// A round's median (one file a side, several rounds).
    Round,
    /// One run of the benchmark: a row of an imported summary (lmbench's and kernbench's
    /// tables list one value per run, each a round of its own here).
    Run,
    /// A file's value, the mean of its rounds' medians (several files on a side: runs, boots).
    File,
    /// The difference of two variants' medians in one round of a paired run (`run --versus`):
    /// both shared the round's machine state, so its drift cancels.
    Pair,
}

impl Unit {
    pub fn describe(self) -> &'static str {
        match self {
            Unit::Sample => "none (one run of one round a side: samples are not independent)",
            Unit::Round => "the round (its median; a fresh runner and order each round)",
            Unit::Run => "the run (each row of an imported summary is one run of the benchmark)",
            Unit::File => "the file (the mean of its rounds; several files on a side)",
            Unit::Pair => {
                "the pair of rounds (both variants back to back in each round of one run)"
            }
        }
    }

    /// Plural noun for counts ("n = 4 rounds").
    pub fn noun(self) -> &'static str {
        match self {
            Unit::Sample => "samples",
            Unit::Round => "rounds",
            Unit::Run => "runs",
            Unit::File => "files",
            Unit::Pair => "paired rounds",
        }
    }
}

/// The spread at each level, as standard deviations relative to the grand mean (0.02 = 2%).
/// None where the level was not repeated; 0 where the level below explains it all.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Components {
    /// Between samples of one round.
    pub within_round: Option<f64>,
    /// Between rounds of one file, beyond what the samples' spread explains.
    pub between_rounds: Option<f64>,
    /// Between files of one side, beyond what the rounds' spread explains.
    pub between_files: Option<f64>,
}

impl Components {
    /// The spread comes from the machine's state rather than from the samples: rounds or files
    /// disagree by more than 5% and by more than twice what samples of one round do. Rounds of
    /// one sample (an imported summary's runs) measure no spread within a round to set against.
    pub fn machine_state_dominates(&self) -> bool {
        let (Some(between), Some(within)) = (self.between(), self.within_round) else {
            return false;
        };
        between > 0.05 && between > 2.0 * within
    }

    /// The larger of the spreads between rounds and between files.
    pub fn between(&self) -> Option<f64> {
        match (self.between_rounds, self.between_files) {
            (Some(r), Some(f)) => Some(r.max(f)),
            (r, f) => r.or(f),
        }
    }
}

/// What the spread of samples adds to the variance of a round's median of `n` of them, per
/// unit of their variance: pi / (2n), the normal approximation (exact for n <= 2, where the
/// median is the mean, is 1/n).
fn median_variance_factor(n: f64) -> f64 {
    if n <= 2.0 {
        1.0 / n
    } else {
        std::f64::consts::PI / (2.0 * n)
    }
}

/// The variance components of one or more sides (each side's files around its own mean, so a
/// real change between the sides does not count as spread).
pub fn components(sides: &[&[FileRounds]]) -> Components {
    // Relative spreads do not depend on the scale: take it out first, so squares of samples
    // near f64::MAX do not overflow.
    let largest = sides
        .iter()
        .flat_map(|s| s.iter().flatten().flatten())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    if !(largest > 0.0 && largest.is_finite()) {
        return Components::default();
    }
    let scaled: Vec<Vec<FileRounds>> = sides
        .iter()
        .map(|side| {
            side.iter()
                .map(|f| {
                    f.iter()
                        .map(|r| r.iter().map(|v| v / largest).collect())
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut within = Pooled::default();
    let mut rounds = Pooled::default();
    let mut files = Pooled::default();
    let mut grand = Vec::new();
    for side in &scaled {
        let mut file_values = Vec::new();
        for file in side.iter() {
            let values: Vec<f64> = file.iter().filter_map(|r| median(r)).collect();
            for round in file {
                within.add(round);
            }
            rounds.add(&values);
            if let Some(m) = stats::mean(&values) {
                file_values.push(m);
            }
        }
        files.add(&file_values);
        grand.extend(file_values);
    }
    let Some(scale) = stats::mean(&grand).map(f64::abs).filter(|m| *m > 0.0) else {
        return Components::default();
    };
    let var_within = within.variance();
    // A round value's variance is sigma_round^2 plus what its samples' spread adds.
    let var_rounds = (rounds.variance()
        - var_within * median_variance_factor(within.mean_group_size()))
    .max(0.0);
    // A file value's variance is sigma_file^2 + (a round value's variance) / rounds.
    let var_files = (files.variance() - rounds.variance() / rounds.mean_group_size()).max(0.0);
    let relative = |repeated: bool, var: f64| repeated.then(|| var.sqrt() / scale);
    Components {
        within_round: relative(within.df > 0, var_within),
        between_rounds: relative(rounds.df > 0, var_rounds),
        between_files: relative(files.df > 0, var_files),
    }
}

/// Sums of squares pooled over groups, each around its own mean.
#[derive(Debug, Default)]
struct Pooled {
    sum_sq: f64,
    df: usize,
    groups: usize,
    values: usize,
}

impl Pooled {
    fn add(&mut self, group: &[f64]) {
        let Some(m) = stats::mean(group) else { return };
        self.sum_sq += group.iter().map(|v| (v - m).powi(2)).sum::<f64>();
        self.df += group.len() - 1;
        self.groups += 1;
        self.values += group.len();
    }

    fn variance(&self) -> f64 {
        if self.df == 0 {
            0.0
        } else {
            self.sum_sq / self.df as f64
        }
    }

    fn mean_group_size(&self) -> f64 {
        if self.groups == 0 {
            1.0
        } else {
            self.values as f64 / self.groups as f64
        }
    }
}

fn median(xs: &[f64]) -> Option<f64> {
    stats::summarize(xs).map(|s| s.median)
}

/// The median of each round that has samples.
pub fn round_medians<R: AsRef<[f64]>>(rounds: &[R]) -> Vec<f64> {
    rounds.iter().filter_map(|r| median(r.as_ref())).collect()
}

/// How far one run's rounds disagree against how far the rounds of the runs it is judged
/// against do, as relative standard deviations, and the one-sided F-test's p-value that its
/// rounds spread no more than theirs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RoundSpread {
    pub run: f64,
    pub others: f64,
    pub p_value: f64,
}

/// A one-sided F-test this sure that a single run's rounds spread more than the other side's
/// runs' rounds do marks the run as disturbed: compare's note says to run it again, and the
/// op's and each path's test take its value as no surer than its rounds say. In two A/A series
/// of the CI recipe here (38 compares of 18 workloads) it fired on 8 of 684, each a run whose
/// rounds spread 2.8-5x as far as the baseline runs' (23-109% against 8-38%), and never in the
/// power bench.
pub const DISTURBED_ALPHA: f64 = 0.001;

/// Where one side is a single run predicted from the other side's runs: which side ("old" or
/// "new") and its rounds' spread against theirs, when that run was disturbed
/// (`DISTURBED_ALPHA`).
pub fn disturbed_single_run(
    old: &[FileRounds],
    new: &[FileRounds],
) -> Option<(&'static str, RoundSpread)> {
    let (side, run, others) = match (old, new) {
        (many, [one]) if many.len() >= 2 => ("new", one, many),
        ([one], many) if many.len() >= 2 => ("old", one, many),
        _ => return None,
    };
    let spread = round_spread(run, others)?;
    (spread.p_value < DISTURBED_ALPHA && spread.run > spread.others).then_some((side, spread))
}

/// Whether `run` is like `others` in its rounds' spread. The prediction test takes a single
/// run as one more draw from the distribution of the other side's runs; a run whose own rounds
/// disagree far more than theirs was disturbed (two of its four null_call rounds at 2-3x the
/// others in an A/A series here), and its mean is not such a draw. None with fewer than two
/// rounds in `run` or no repeated rounds in `others`.
pub fn round_spread(run: &FileRounds, others: &[FileRounds]) -> Option<RoundSpread> {
    // Each file's rounds relative to its own mean, so runs at different speeds pool.
    let relative_variance = |file: &FileRounds| -> Option<(f64, f64)> {
        let medians = round_medians(file);
        let s = stats::summarize(&medians)?;
        (s.n >= 2 && s.mean != 0.0).then(|| ((s.stdev / s.mean).powi(2), (s.n - 1) as f64))
    };
    let (run_var, run_df) = relative_variance(run)?;
    let (sum, df) = others
        .iter()
        .filter_map(relative_variance)
        .fold((0.0, 0.0), |(sum, df), (v, d)| (sum + v * d, df + d));
    if df == 0.0 || sum == 0.0 {
        return None;
    }
    let others_var = sum / df;
    let f = FisherSnedecor::new(run_df, df).ok()?;
    Some(RoundSpread {
        run: run_var.sqrt(),
        others: others_var.sqrt(),
        p_value: f.sf(run_var / others_var),
    })
}

/// A side's observations at `unit`: every sample, each round's median, or each file's value
/// (the mean of its rounds' medians).
pub fn observations(side: &[FileRounds], unit: Unit) -> Vec<f64> {
    match unit {
        Unit::Sample => side.iter().flatten().flatten().copied().collect(),
        Unit::Round | Unit::Run => side.iter().flat_map(|f| round_medians(f)).collect(),
        Unit::File => side
            .iter()
            .filter_map(|f| stats::mean(&round_medians(f)))
            .collect(),
        // A paired file's rounds keep their places (an empty round stays, as NaN), so round i
        // of one variant meets round i of the other.
        Unit::Pair => side
            .iter()
            .flatten()
            .map(|r| median(r).unwrap_or(f64::NAN))
            .collect(),
    }
}

/// The highest level a side repeats: files, else rounds, else only samples.
pub fn level(side: &[FileRounds]) -> Unit {
    let non_empty = |f: &FileRounds| f.iter().any(|r| !r.is_empty());
    match side.iter().filter(|f| non_empty(f)).count() {
        0 | 1 if side.iter().flatten().filter(|r| !r.is_empty()).count() >= 2 => Unit::Round,
        0 | 1 => Unit::Sample,
        _ => Unit::File,
    }
}

/// The least relative variance one observation at `unit` of `side` can have: what the level
/// below adds to it (a file's value, the mean of its rounds' medians, moves at least by their
/// spread over the rounds it has; a round's median at least by its samples' spread times
/// pi / 2n), pooled over the side's files (or rounds), each around its own mean. It rests on
/// every round measured, not on the few observations: with a baseline of 3 runs whose values
/// agree by chance, their own spread (2 degrees of freedom) can be a fifth of what their rounds
/// say a run's value moves by, and a test on it alone calls the next run a change; and a
/// single run whose rounds disagree has a value that its rounds say little about. 0 where the
/// level below was not repeated.
pub fn variance_floor(side: &[FileRounds], unit: Unit) -> Floor {
    let mut below = Pooled::default();
    let relative = |group: &[f64]| -> Vec<f64> {
        match stats::mean(group) {
            Some(m) if m > 0.0 && m.is_finite() => group.iter().map(|v| v / m).collect(),
            _ => Vec::new(),
        }
    };
    for file in side {
        match unit {
            Unit::File => below.add(&relative(&round_medians(file))),
            Unit::Round | Unit::Run | Unit::Pair => {
                for round in file {
                    below.add(&relative(round));
                }
            }
            Unit::Sample => {}
        }
    }
    if below.df == 0 {
        return Floor::default();
    }
    let size = below.mean_group_size();
    let per_observation = match unit {
        Unit::File => 1.0 / size,
        _ => median_variance_factor(size),
    };
    let variance = below.variance() * per_observation;
    if !variance.is_finite() {
        return Floor::default();
    }
    Floor {
        variance,
        df: below.df as f64,
    }
}

/// The least relative variance of one observation, and the degrees of freedom behind it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Floor {
    pub variance: f64,
    pub df: f64,
}

/// A two-sided test of new against old at one unit: the ratio of their means, on the log
/// scale, so its interval is a ratio that never passes -100%.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    #[serde(flatten)]
    pub ratio: RatioTest,
    /// Welch's test (both sides repeated the unit), or a prediction test: only one side did,
    /// and its spread is taken for the other's (a run against a baseline of several runs).
    pub kind: TestKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    Welch,
    Prediction,
    /// A paired t-test over rounds both variants of a paired run measured.
    Paired,
}

/// Tests the variants of a paired run by their rounds' values, round i against round i (a
/// round missing on either side, NaN, is left out): the ratio of the pairs' means, its
/// variance from how far each pair strays from that ratio (d = new - ratio x old, the ratio
/// estimator), at least what each side's samples add to its rounds (`floors`), with n - 1
/// degrees of freedom. None with fewer than two pairs or a mean that is not positive.
pub fn paired_test(old: &[f64], new: &[f64], floors: (Floor, Floor)) -> Option<Test> {
    let pairs: Vec<(f64, f64)> = old
        .iter()
        .zip(new)
        .filter(|(o, n)| o.is_finite() && n.is_finite())
        .map(|(&o, &n)| (o, n))
        .collect();
    if pairs.len() < 2 {
        return None;
    }
    let count = pairs.len() as f64;
    let (sum_old, sum_new) = pairs
        .iter()
        .fold((0.0, 0.0), |(a, b), (o, n)| (a + o, b + n));
    let mean_new = sum_new / count;
    let ratio = sum_new / sum_old;
    let residuals: Vec<f64> = pairs.iter().map(|(o, n)| n - ratio * o).collect();
    let d = stats::summarize(&residuals)?;
    let per_pair = (d.stdev / mean_new)
        .powi(2)
        .max(floors.0.variance + floors.1.variance);
    let ratio = RatioTest::new(ratio, (per_pair / count).sqrt(), count - 1.0)?;
    Some(Test {
        ratio,
        kind: TestKind::Paired,
    })
}

/// Tests new against old by their observations (at least one side needs two), each side's
/// relative variance of one observation at least its floor (`variance_floor`).
///
/// With two or more on each side: Welch's test of the ratio. With one on a side: is it outside
/// what the other side's spread predicts for one more observation? ln(y / mean) over
/// sqrt(v_y + v / k), v the repeated side's relative variance of one observation, k - 1
/// degrees of freedom; v_y is v, or what the single run's own rounds say its value moves by
/// where that is more (then with Welch-Satterthwaite's degrees of freedom).
pub fn test(old: &Summary, new: &Summary, floors: (Floor, Floor)) -> Option<Test> {
    let floored = |s: &Summary, floor: Floor| Moments {
        variance: s.stdev.powi(2).max(floor.variance * s.mean.powi(2)),
        ..Moments::from(s)
    };
    if old.n >= 2 && new.n >= 2 {
        let ratio = stats::welch_ratio(floored(old, floors.0), floored(new, floors.1))?;
        return Some(Test {
            ratio,
            kind: TestKind::Welch,
        });
    }
    let (repeated, floor, single) = match (old.n, new.n) {
        (k, 1) if k >= 2 => (old, floors.0, floors.1),
        (1, k) if k >= 2 => (new, floors.1, floors.0),
        _ => return None,
    };
    if !(old.mean > 0.0 && new.mean > 0.0) {
        return None;
    }
    let k = repeated.n as f64;
    let v = floored(repeated, floor).relative_variance()?;
    let (v_single, df) = if single.variance > v {
        // The single run's rounds disagree more than the repeated side's runs do.
        let (a, b) = (single.variance, v / k);
        let df = (a + b).powi(2) / (a.powi(2) / single.df + b.powi(2) / (k - 1.0));
        (a, df.clamp(single.df.min(k - 1.0), single.df + k - 1.0))
    } else {
        (v, k - 1.0)
    };
    let ratio = RatioTest::new(new.mean / old.mean, (v_single + v / k).sqrt(), df)?;
    Some(Test {
        ratio,
        kind: TestKind::Prediction,
    })
}

/// What a point's replicates are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Replicate {
    /// The file's rounds (`run --rounds`), each by a fresh runner: the value is the mean of the
    /// rounds' medians.
    Round,
    /// The file's samples, when it records one round: the value is their median (samples share
    /// their run's conditions, so their spread understates the point's).
    Sample,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PointValue {
    pub value: f64,
    pub replicate: Replicate,
    pub replicates: usize,
    /// The standard error of `value` from the replicates' spread (None with one replicate).
    pub standard_error: Option<f64>,
}

/// A point from its samples split by round (one slice when the file records no rounds): with
/// two rounds or more, the file's value as `compare` takes it (the mean of the rounds'
/// medians), with the standard error of that mean.
pub fn point_value(rounds: &[&[f64]]) -> Option<PointValue> {
    let medians = round_medians(rounds);
    if medians.len() >= 2 {
        let s = stats::summarize(&medians)?;
        return Some(PointValue {
            value: s.mean,
            replicate: Replicate::Round,
            replicates: s.n,
            standard_error: Some(s.stdev / (s.n as f64).sqrt()),
        });
    }
    let samples: Vec<f64> = rounds.concat();
    let s = stats::summarize(&samples)?;
    Some(PointValue {
        value: s.median,
        replicate: Replicate::Sample,
        replicates: s.n,
        standard_error: (s.n >= 2).then(|| s.stdev / (s.n as f64).sqrt()),
    })
}

/// Power the minimum detectable effect is stated at.
pub const POWER: f64 = 0.8;

/// The smallest true difference (same scale as `std_error`) that a two-sided t-test at level
/// `alpha` with this standard error and these degrees of freedom detects with probability
/// [`POWER`]: (t(1 - alpha/2) + t(power)) * se.
pub fn minimum_detectable(std_error: f64, df: f64, alpha: f64) -> Option<f64> {
    if !(df > 0.0 && alpha > 0.0 && alpha < 1.0 && std_error.is_finite()) {
        return None;
    }
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((t.inverse_cdf(1.0 - alpha / 2.0) + t.inverse_cdf(POWER)) * std_error)
}

/// The least `mde` (a minimum detectable effect at the file level) could become with
/// unlimited rounds a run: rounds average away their own spread, never the runs'. `file_spread`
/// is the relative spread of the files' values the test used, `between_files` the part of it
/// no number of rounds removes (Kalibera and Jones: repeat at the level where the variance is).
pub fn floor_over_rounds(mde: f64, between_files: f64, file_spread: f64) -> Option<f64> {
    (file_spread > 0.0 && between_files.is_finite())
        .then(|| mde * (between_files / file_spread).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn assert_close(a: f64, b: f64) {
        assert!((a - b).abs() <= 1e-6 * b.abs().max(1e-12), "{a} != {b}");
    }

    fn rounds(medians: &[f64], spread: f64) -> FileRounds {
        medians
            .iter()
            .map(|m| vec![m - spread, *m, m + spread])
            .collect()
    }

    #[test]
    fn components_separate_the_levels() {
        // Two files, two rounds each, three samples a round at +-0.1 around the round's median.
        let a = rounds(&[10.0, 10.4], 0.1);
        let b = rounds(&[11.0, 11.4], 0.1);
        let c = components(&[&[a, b]]);
        // Within rounds: every round has variance 0.01 (ddof 1), so sd 0.1 over a mean 10.7.
        assert_close(c.within_round.unwrap(), 0.1 / 10.7);
        // Round medians 10, 10.4 and 11, 11.4: pooled variance 0.08 less 0.01 * pi / 6.
        let rounds_var = 0.08 - 0.01 * std::f64::consts::PI / 6.0;
        assert_close(c.between_rounds.unwrap(), rounds_var.sqrt() / 10.7);
        // File values 10.2 and 11.2: variance 0.5 less the round values' 0.08 / 2.
        assert_close(c.between_files.unwrap(), (0.5f64 - 0.04).sqrt() / 10.7);
        assert!(c.machine_state_dominates());
    }

    #[test]
    fn components_of_tight_rounds_are_small_and_never_negative() {
        // Round means agree better than their samples would predict: the component is 0.
        let a = rounds(&[10.0, 10.0, 10.0], 1.0);
        let c = components(&[&[a]]);
        // One file: the level between files was not repeated.
        assert_eq!((c.between_rounds, c.between_files), (Some(0.0), None));
        assert!(!c.machine_state_dominates());
        assert_eq!(components(&[]), Components::default());
        // Samples near f64::MAX: relative spreads, never NaN or infinity.
        let huge = vec![vec![1e308, 1.1e308, 0.9e308], vec![1.2e308, 1e308, 1e308]];
        let c = components(&[&[huge]]);
        for v in [c.within_round, c.between_rounds] {
            assert!(v.unwrap().is_finite(), "{c:?}");
        }
    }

    #[test]
    fn the_unit_is_the_highest_level_repeated() {
        let one_round = vec![vec![1.0, 2.0, 3.0]];
        let two_rounds = rounds(&[1.0, 2.0], 0.1);
        assert_eq!(level(std::slice::from_ref(&one_round)), Unit::Sample);
        assert_eq!(level(std::slice::from_ref(&two_rounds)), Unit::Round);
        assert_eq!(level(&[one_round.clone(), one_round]), Unit::File);
        assert_eq!(
            observations(std::slice::from_ref(&two_rounds), Unit::Round),
            vec![1.0, 2.0]
        );
        assert_eq!(observations(&[two_rounds], Unit::File), vec![1.5]);
        // A round's value is its median: one preempted sample does not move it.
        let preempted = vec![vec![1.0, 1.1, 9.0]];
        assert_eq!(observations(&[preempted], Unit::Round), vec![1.1]);
    }

    #[test]
    fn a_single_run_against_several_is_a_prediction_test() {
        // mpmath: y = 11.0 against [10.0, 10.4, 10.2, 9.9]: m = 10.125, s = 0.22174, on the log
        // scale se = (s / m) * sqrt(1 + 1/4) = 0.0244847, t = ln(11 / m) / se = 3.385279,
        // df 3, 2 * t.sf(3.385279, 3) = 0.0429239.
        let old = stats::summarize(&[10.0, 10.4, 10.2, 9.9]).unwrap();
        let new = stats::summarize(&[11.0]).unwrap();
        let none = (Floor::default(), Floor::default());
        let t = test(&old, &new, none).unwrap();
        assert_eq!(t.kind, TestKind::Prediction);
        assert_close(t.ratio.ratio, 11.0 / 10.125);
        assert_close(t.ratio.log_std_error, 0.02448473214920743);
        assert_close(t.ratio.df, 3.0);
        assert!(
            (t.ratio.p_value - 0.0429239).abs() < 1e-6,
            "{}",
            t.ratio.p_value
        );
        // Swapped sides: the same test, the ratio turned over.
        let back = test(&new, &old, none).unwrap();
        assert_close(back.ratio.ratio, 10.125 / 11.0);
        assert_close(back.ratio.p_value, t.ratio.p_value);
        assert!(test(&new, &new, none).is_none());
    }

    #[test]
    fn a_run_s_value_moves_at_least_as_its_rounds_say() {
        // Three baseline runs that agree within 0.3%, but whose rounds each spread +-10%: a
        // run's value (the mean of 4 rounds) moves by about 10% / 2, not 0.3%.
        let baseline: Vec<FileRounds> = [100.0, 100.3, 99.8]
            .iter()
            .map(|m| vec![vec![m * 0.9], vec![m * 1.1], vec![m * 0.95], vec![m * 1.05]])
            .collect();
        let floor = variance_floor(&baseline, Unit::File);
        // Rounds of +-10%, +-5% around their file's mean: relative variance (0.01 + 0.01 +
        // 0.0025 + 0.0025) / 3 a round, over 4 rounds; 3 files of 3 degrees of freedom.
        assert_close(floor.variance, 0.025 / 3.0 / 4.0);
        assert_eq!(floor.df, 9.0);
        let steady = vec![vec![vec![110.0], vec![110.5], vec![109.5], vec![110.0]]];
        let old = stats::summarize(&observations(&baseline, Unit::File)).unwrap();
        let one = stats::summarize(&observations(&steady, Unit::File)).unwrap();
        let new_floor = variance_floor(&steady, Unit::File);
        let bare = test(&old, &one, (Floor::default(), new_floor)).unwrap();
        let floored = test(&old, &one, (floor, new_floor)).unwrap();
        assert!(bare.ratio.p_value < 1e-3, "{bare:?}");
        assert!(floored.ratio.p_value > 0.1, "{floored:?}");
        // A single run whose own rounds disagree: its value is no surer than they say.
        let tight: Vec<FileRounds> = [100.0, 100.3, 99.8, 100.1]
            .iter()
            .map(|m| vec![vec![*m], vec![m * 1.002], vec![m * 0.998], vec![*m]])
            .collect();
        let wild = vec![vec![vec![100.0], vec![250.0], vec![98.0], vec![255.0]]];
        let old = stats::summarize(&observations(&tight, Unit::File)).unwrap();
        let one = stats::summarize(&observations(&wild, Unit::File)).unwrap();
        let floors = (
            variance_floor(&tight, Unit::File),
            variance_floor(&wild, Unit::File),
        );
        let t = test(&old, &one, floors).unwrap();
        assert!(t.ratio.p_value > 0.05, "{t:?}");
        assert!(t.ratio.df >= 3.0 && t.ratio.df < 4.0, "{t:?}");
        // A round's median moves at least by its samples' spread: pi / 2n of their variance.
        let samples = vec![vec![vec![9.0, 10.0, 11.0], vec![18.0, 20.0, 22.0]]];
        let floor = variance_floor(&samples, Unit::Round);
        assert_close(floor.variance, 0.01 * std::f64::consts::PI / 6.0);
        assert_eq!(variance_floor(&samples, Unit::Sample), Floor::default());
    }

    #[test]
    fn rounds_are_the_replicates_when_there_are_several() {
        let p = point_value(&[&[1.0, 2.0, 9.0], &[3.0, 4.0, 5.0], &[5.0, 6.0]]).unwrap();
        // Round medians 2, 4, 5.5: numpy mean 3.8333333333333335,
        // std(ddof=1) / sqrt(3) = 1.0137937550497034.
        assert_eq!((p.replicate, p.replicates), (Replicate::Round, 3));
        assert!((p.value - 3.8333333333333335).abs() < 1e-12);
        assert!((p.standard_error.unwrap() - 1.0137937550497034).abs() < 1e-12);
        // One round: the samples' median, and the samples' standard error.
        let p = point_value(&[&[1.0, 2.0, 9.0]]).unwrap();
        assert_eq!((p.replicate, p.value), (Replicate::Sample, 2.0));
        // numpy: np.std([1, 2, 9], ddof=1) / np.sqrt(3) = 2.5166114784235836
        assert!((p.standard_error.unwrap() - 2.5166114784235836).abs() < 1e-12);
        assert_eq!(point_value(&[&[4.0]]).unwrap().standard_error, None);
        assert_eq!(point_value(&[&[]]), None);
    }

    #[test]
    fn minimum_detectable_effect_matches_scipy() {
        // scipy: (t.ppf(0.975, 6) + t.ppf(0.8, 6)) * 1.0 = 2.446912 + 0.905700
        assert!((minimum_detectable(1.0, 6.0, 0.05).unwrap() - 3.352612).abs() < 1e-5);
        // A stricter alpha (Holm's first step over 15 workloads) needs a larger effect.
        assert!(minimum_detectable(1.0, 6.0, 0.05 / 15.0).unwrap() > 5.0);
        assert!(minimum_detectable(1.0, 0.0, 0.05).is_none());
    }
}
