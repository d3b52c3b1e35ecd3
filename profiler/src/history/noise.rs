//! The noise of a series of points (each valued from its own replicates by
//! `replication::point_value`) at two levels:
//! within a point (how precisely its replicates give its value) and between points (how much
//! the points of one level scatter, which is what a step must beat: runs differ by their
//! placement, frequency and layout far more than one run's samples do). Pure functions.
use serde::Serialize;

use crate::stats::replication::PointValue;

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
    use crate::stats::replication::Replicate;

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
