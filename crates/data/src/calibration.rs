//! How well the root value estimates in shards predict the games' results: for each estimate,
//! the mean value it predicted against the mean result, overall and by ply. An estimate biased
//! towards the side to move (a max over noisy values) predicts more than the results give; the
//! value target should be one that does not (docs/mcts.md, "Which root value").

use serde::Serialize;

use crate::sample::{RootValues, PLY_UNKNOWN, ROOT_VALUE_NAMES};

/// Plies per row of the by-ply table; positions from `LAST_PLY_ROW` on share the last row.
const PLY_ROW: u16 = 20;
const LAST_PLY_ROW: u16 = 200;

/// Sums over the samples of one estimate.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sums {
    samples: u64,
    predicted: f64,
    result: f64,
    squared_error: f64,
}

impl Sums {
    fn add(&mut self, predicted: f64, result: f64) {
        self.samples += 1;
        self.predicted += predicted;
        self.result += result;
        self.squared_error += (predicted - result) * (predicted - result);
    }

    fn merge(&mut self, other: &Sums) {
        self.samples += other.samples;
        self.predicted += other.predicted;
        self.result += other.result;
        self.squared_error += other.squared_error;
    }
}

/// One estimate over all samples that have it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EstimateFit {
    pub estimate: String,
    pub samples: u64,
    /// Mean predicted value in [-1, 1] for the side to move.
    pub mean_predicted: f64,
    /// Mean game result (1 win, 0 draw, −1 loss) of the same samples.
    pub mean_result: f64,
    /// `mean_predicted − mean_result`: above 0, the estimate promises the side to move more than it
    /// gets.
    pub bias: f64,
    /// Mean squared error against the result (lower is a better target).
    pub mse: f64,
}

/// One row of the by-ply table: plies `from..to`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlyRow {
    pub from: u16,
    /// Exclusive; `u16::MAX` for the open last row.
    pub to: u16,
    pub samples: u64,
    pub mean_result: f64,
    /// Each estimate's mean over the row's samples that have it (in [`Calibration::estimates`]'
    /// order; `None` where none has it).
    pub mean_predicted: Vec<Option<f64>>,
}

/// The calibration table of a set of shards.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Calibration {
    /// `target` (the stored `root_wdl` as win − loss: the value target's search part), then
    /// [`ROOT_VALUE_NAMES`].
    pub estimates: Vec<String>,
    pub overall: Vec<EstimateFit>,
    pub by_ply: Vec<PlyRow>,
}

/// Estimates per sample: the stored target, then the root value columns.
const ESTIMATES: usize = 1 + ROOT_VALUE_NAMES.len();

/// Collects samples, then [`CalibrationSums::finish`]es into a [`Calibration`].
#[derive(Clone, Debug, Default)]
pub struct CalibrationSums {
    /// `rows[r][k]`: estimate k over the samples of ply row r (the last row: ply unknown).
    rows: Vec<[Sums; ESTIMATES]>,
    /// Samples and result sums per row, whatever the estimates.
    results: Vec<Sums>,
}

fn row_of(ply: u16) -> usize {
    let last = (LAST_PLY_ROW / PLY_ROW) as usize;
    if ply == PLY_UNKNOWN {
        last + 1
    } else {
        ((ply / PLY_ROW) as usize).min(last)
    }
}

impl CalibrationSums {
    /// One sample: its ply, result for the side to move, stored value target (W/D/L, all zero
    /// when none) and root value estimates (when the shard has them; NaN where a game had none).
    pub fn add(&mut self, ply: u16, result: i8, root_wdl: [f32; 3], root_values: Option<&RootValues>) {
        let row = row_of(ply);
        if self.rows.len() <= row {
            self.rows.resize(row + 1, Default::default());
            self.results.resize(row + 1, Default::default());
        }
        let z = result.clamp(-1, 1) as f64;
        self.results[row].add(0.0, z);
        let wdl_sum: f32 = root_wdl.iter().sum();
        if wdl_sum > 0.0 && wdl_sum.is_finite() {
            self.rows[row][0].add(((root_wdl[0] - root_wdl[2]) / wdl_sum) as f64, z);
        }
        for (k, &v) in root_values.into_iter().flatten().enumerate() {
            if v.is_finite() {
                self.rows[row][k + 1].add(v as f64, z);
            }
        }
    }

    /// `None` when no sample had any estimate.
    pub fn finish(&self) -> Option<Calibration> {
        let mut estimates = vec!["target".to_string()];
        estimates.extend(ROOT_VALUE_NAMES.iter().map(|s| s.to_string()));
        let mut totals = [Sums::default(); ESTIMATES];
        for row in &self.rows {
            for (t, s) in totals.iter_mut().zip(row) {
                t.merge(s);
            }
        }
        if totals.iter().all(|t| t.samples == 0) {
            return None;
        }
        let overall = estimates
            .iter()
            .zip(&totals)
            .filter(|(_, t)| t.samples > 0)
            .map(|(name, t)| {
                let n = t.samples as f64;
                EstimateFit {
                    estimate: name.clone(),
                    samples: t.samples,
                    mean_predicted: t.predicted / n,
                    mean_result: t.result / n,
                    bias: (t.predicted - t.result) / n,
                    mse: t.squared_error / n,
                }
            })
            .collect();
        let last = (LAST_PLY_ROW / PLY_ROW) as usize;
        let by_ply = self
            .rows
            .iter()
            .zip(&self.results)
            .enumerate()
            .filter(|(r, (_, results))| *r <= last && results.samples > 0)
            .map(|(r, (row, results))| PlyRow {
                from: r as u16 * PLY_ROW,
                to: if r == last { u16::MAX } else { (r as u16 + 1) * PLY_ROW },
                samples: results.samples,
                mean_result: results.result / results.samples as f64,
                mean_predicted: row.iter().map(|s| (s.samples > 0).then(|| s.predicted / s.samples as f64)).collect(),
            })
            .collect();
        Some(Calibration { estimates, overall, by_ply })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_that_promises_the_side_to_move_more_shows_a_bias() {
        let mut sums = CalibrationSums::default();
        // Two positions of one game, one for each side: results +1 and −1. `improved` says +0.5
        // for both sides (biased), `network` the results' own sign at half strength (unbiased).
        for (ply, z) in [(10u16, 1i8), (11, -1)] {
            let network = z as f32 * 0.5;
            sums.add(ply, z, [0.75, 0.0, 0.25], Some(&[network, 0.0, f32::NAN, 0.5]));
        }
        sums.add(PLY_UNKNOWN, 1, [0.0; 3], None);
        let c = sums.finish().unwrap();
        let fit = |name: &str| c.overall.iter().find(|f| f.estimate == name).cloned();
        let improved = fit("improved").unwrap();
        assert_eq!(improved.samples, 2);
        assert!((improved.bias - 0.5).abs() < 1e-12 && (improved.mse - 1.25).abs() < 1e-12);
        let network = fit("network").unwrap();
        assert!(network.bias.abs() < 1e-12 && (network.mse - 0.25).abs() < 1e-12);
        assert!((fit("target").unwrap().mean_predicted - 0.5).abs() < 1e-12);
        assert!(fit("mixed").is_none(), "NaN values are left out");
        // One by-ply row (plies 0–19); the sample of unknown ply is in no row.
        assert_eq!(c.by_ply.len(), 1);
        assert_eq!((c.by_ply[0].from, c.by_ply[0].to, c.by_ply[0].samples), (0, 20, 2));
        assert_eq!(c.by_ply[0].mean_predicted[4], Some(0.5));
        assert_eq!(c.by_ply[0].mean_predicted[3], None);
        assert_eq!(CalibrationSums::default().finish(), None);
    }
}
