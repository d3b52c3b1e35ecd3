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
//! moments) and reported, and so is the smallest change the test could detect.
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor, StudentsT};

use crate::stats::{self, Summary};

/// The samples of one file, round by round.
pub type FileRounds = Vec<Vec<f64>>;

/// What one observation of a comparison is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// One run of one round on each side: nothing measures the spread between runs.
    Sample,
    /// A round's median (one file a side, several rounds; or imported data whose samples are
    /// separate runs, each its own round).
    Round,
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
    /// disagree by more than 5% and by more than twice what samples of one round do.
    pub fn machine_state_dominates(&self) -> bool {
        let between = self.between().unwrap_or(0.0);
        between > 0.05 && between > 2.0 * self.within_round.unwrap_or(0.0)
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
            if let Some(m) = mean(&values) {
                file_values.push(m);
            }
        }
        files.add(&file_values);
        grand.extend(file_values);
    }
    let Some(scale) = mean(&grand).map(f64::abs).filter(|m| *m > 0.0) else {
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
        let Some(m) = mean(group) else { return };
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

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
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
        Unit::Round => side.iter().flat_map(|f| round_medians(f)).collect(),
        Unit::File => side
            .iter()
            .filter_map(|f| mean(&round_medians(f)))
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

/// A two-sided test of new against old at one unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Test {
    /// mean(new) - mean(old) of the observations.
    pub difference: f64,
    pub std_error: f64,
    pub df: f64,
    /// Two-sided p-value (before any adjustment over workloads).
    pub p_value: f64,
    /// 95% interval of the difference.
    pub ci: (f64, f64),
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
/// round missing on either side, NaN, is left out): a one-sample t-test of the differences,
/// n - 1 degrees of freedom. None with fewer than two pairs.
pub fn paired_test(old: &[f64], new: &[f64]) -> Option<Test> {
    let differences: Vec<f64> = old
        .iter()
        .zip(new)
        .filter(|(o, n)| o.is_finite() && n.is_finite())
        .map(|(o, n)| n - o)
        .collect();
    let d = stats::summarize(&differences).filter(|d| d.n >= 2)?;
    let std_error = d.stdev / (d.n as f64).sqrt();
    t_test(d.mean, std_error, d.n as f64 - 1.0, TestKind::Paired)
}

/// `stats::t_test` as a `Test` of this kind (a zero standard error is recorded as 0).
fn t_test(difference: f64, std_error: f64, df: f64, kind: TestKind) -> Option<Test> {
    let std_error = if std_error.is_finite() {
        std_error
    } else {
        0.0
    };
    let t = stats::t_test(difference, std_error, df)?;
    Some(Test {
        difference,
        std_error,
        df,
        p_value: t.p_value,
        ci: t.ci,
        kind,
    })
}

/// Tests new against old by their observations (at least one side needs two).
///
/// With two or more on each side: Welch's t-test. With one on a side: is it outside what the
/// other side's spread predicts for one more observation? t = (y - mean) / (s * sqrt(1 + 1/k)),
/// k - 1 degrees of freedom.
pub fn test(old: &Summary, new: &Summary) -> Option<Test> {
    if old.n >= 2 && new.n >= 2 {
        let w = stats::welch(old, new)?;
        return Some(Test {
            difference: w.difference,
            std_error: w.std_error,
            df: w.df,
            p_value: w.p_value,
            ci: w.ci,
            kind: TestKind::Welch,
        });
    }
    let repeated = match (old.n, new.n) {
        (k, 1) if k >= 2 => old,
        (1, k) if k >= 2 => new,
        _ => return None,
    };
    let difference = new.mean - old.mean;
    let k = repeated.n as f64;
    let std_error = repeated.stdev * (1.0 + 1.0 / k).sqrt();
    t_test(difference, std_error, k - 1.0, TestKind::Prediction)
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
        // scipy: y = 11.0 against [10.0, 10.4, 10.2, 9.9]: m = 10.125, s = 0.22174,
        // se = s * sqrt(1 + 1/4) = 0.247908, t = 3.529536, df 3,
        // 2 * t.sf(3.529536, 3) = 0.0386521.
        let old = stats::summarize(&[10.0, 10.4, 10.2, 9.9]).unwrap();
        let new = stats::summarize(&[11.0]).unwrap();
        let t = test(&old, &new).unwrap();
        assert_eq!(t.kind, TestKind::Prediction);
        assert_close(t.difference, 0.875);
        assert_close(t.std_error, 0.2479079);
        assert_close(t.df, 3.0);
        assert!((t.p_value - 0.0386521).abs() < 1e-6, "{}", t.p_value);
        // Swapped sides: the same test, the difference's sign turned.
        let back = test(&new, &old).unwrap();
        assert_close(back.difference, -0.875);
        assert_close(back.p_value, t.p_value);
        assert!(test(&new, &new).is_none());
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
