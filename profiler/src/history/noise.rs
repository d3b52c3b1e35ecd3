//! A point of a history from its own replicates, and the noise of a series at two levels:
//! within a point (how precisely its replicates give its value) and between points (how much
//! the points of one level scatter, which is what a step must beat: runs differ by their
//! placement, frequency and layout far more than one run's samples do). Pure functions.
use serde::Serialize;

use crate::{replication, stats};

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
    let medians = replication::round_medians(rounds);
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

/// The noise of a series whose levels change at `bounds` (segment starts, then its length).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Noise {
    /// Standard deviation of the points around their level's mean (pooled over levels).
    pub between_points_sd: f64,
    /// Its degrees of freedom: points less levels.
    pub df: usize,
    /// Root mean square of the points' standard errors from their own replicates.
    pub within_point_se: Option<f64>,
    /// The part of the between-point variance that the points' own replicates do not explain
    /// (method of moments, never below 0), as a standard deviation.
    pub excess_sd: Option<f64>,
}

impl Noise {
    /// The standard deviation a step is measured against: the points' scatter, and never less
    /// than their own replicates say a point varies (a few points can agree by chance).
    pub fn sd(&self) -> f64 {
        self.between_points_sd
            .max(self.within_point_se.unwrap_or(0.0))
    }
}

/// None when no level has two points (nothing to estimate the scatter from).
pub fn noise(points: &[PointValue], bounds: &[usize]) -> Option<Noise> {
    let mut squares = 0.0;
    let mut df = 0;
    for level in bounds.windows(2) {
        let values: Vec<f64> = points[level[0]..level[1]].iter().map(|p| p.value).collect();
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        squares += values.iter().map(|v| (v - mean).powi(2)).sum::<f64>();
        df += values.len() - 1;
    }
    if df == 0 {
        return None;
    }
    let between_points_sd = (squares / df as f64).sqrt();
    let errors: Vec<f64> = points.iter().filter_map(|p| p.standard_error).collect();
    let within_point_se = (!errors.is_empty())
        .then(|| (errors.iter().map(|e| e * e).sum::<f64>() / errors.len() as f64).sqrt());
    Some(Noise {
        between_points_sd,
        df,
        within_point_se,
        excess_sd: within_point_se.map(|w| (between_points_sd.powi(2) - w * w).max(0.0).sqrt()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn points(values: &[f64], se: f64) -> Vec<PointValue> {
        values
            .iter()
            .map(|&value| PointValue {
                value,
                replicate: Replicate::Round,
                replicates: 3,
                standard_error: Some(se),
            })
            .collect()
    }

    #[test]
    fn the_scatter_is_pooled_within_levels_and_split_into_components() {
        let p = points(&[10.0, 11.0, 12.0, 20.0, 22.0], 0.5);
        let n = noise(&p, &[0, 3, 5]).unwrap();
        // numpy: sqrt((sum((a - a.mean())**2) + sum((b - b.mean())**2)) / (5 - 2))
        //   with a = [10, 11, 12], b = [20, 22]: sqrt(4 / 3) = 1.1547005383792515
        assert!((n.between_points_sd - 1.1547005383792515).abs() < 1e-12);
        assert_eq!(n.df, 3);
        assert_eq!(n.within_point_se, Some(0.5));
        // sqrt(4/3 - 0.25) = 1.0408329997330663
        assert!((n.excess_sd.unwrap() - 1.0408329997330663).abs() < 1e-12);
        assert_eq!(n.sd(), n.between_points_sd);
        // Points that agree better than their own replicates allow: the replicates win.
        let n = noise(&points(&[10.0, 10.1, 10.0], 0.5), &[0, 3]).unwrap();
        assert_eq!((n.sd(), n.excess_sd), (0.5, Some(0.0)));
        assert_eq!(noise(&points(&[10.0, 12.0], 0.5), &[0, 1, 2]), None);
    }
}
