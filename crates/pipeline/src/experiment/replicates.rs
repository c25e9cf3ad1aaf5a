//! Elo across replicates: with `replicates = N`, each variant was trained N times; its runs'
//! ratings give a mean, a spread and a 95% interval of the mean (Student's t), and each variant's
//! gain over the first is the difference of the means with Welch's interval. A gain is claimed
//! only when that interval excludes 0: the interval counts run-to-run spread (seeds, the
//! machine's load, the order of the games), which the fit's own intervals, counting only the
//! games' noise, do not.

use serde::{Deserialize, Serialize};

/// One variant's runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicateSummary {
    pub variant: String,
    /// The Elo of each run that has a rating (in the order of the runs).
    pub elos: Vec<f64>,
    pub mean: f64,
    /// Sample standard deviation across the runs (0 with one run).
    pub sd: f64,
    /// Half-width of the 95% interval of the mean (`None` with fewer than 2 runs).
    pub margin: Option<f64>,
    /// Against the first variant: the difference of the means and its 95% Welch interval's
    /// half-width (`None` for the first variant, or with fewer than 2 runs on either side).
    pub gain: Option<f64>,
    pub gain_margin: Option<f64>,
    /// The gain's interval excludes 0 (a gain when `gain` is positive, a loss when negative).
    pub significant: bool,
}

/// The summaries of `families` (name, Elo of each of its runs), the first being the baseline.
pub fn summarize(families: &[(String, Vec<f64>)]) -> Vec<ReplicateSummary> {
    let stats: Vec<(f64, f64, usize)> = families.iter().map(|(_, elos)| mean_sd(elos)).collect();
    families
        .iter()
        .zip(&stats)
        .enumerate()
        .map(|(k, ((name, elos), &(mean, sd, n)))| {
            let margin = (n >= 2).then(|| t_975(n as f64 - 1.0) * sd / (n as f64).sqrt());
            let (gain, gain_margin) = match (k, stats.first()) {
                (0, _) | (_, None) => (None, None),
                (_, Some(&(base_mean, base_sd, base_n))) => {
                    let gain = mean - base_mean;
                    let margin = (n >= 2 && base_n >= 2).then(|| {
                        let (a, b) = (sd * sd / n as f64, base_sd * base_sd / base_n as f64);
                        let se = (a + b).sqrt();
                        // Welch–Satterthwaite degrees of freedom.
                        let df = if a + b > 0.0 {
                            (a + b).powi(2) / (a * a / (n as f64 - 1.0) + b * b / (base_n as f64 - 1.0))
                        } else {
                            (n + base_n - 2) as f64
                        };
                        t_975(df) * se
                    });
                    (Some(gain), margin)
                }
            };
            let significant = matches!((gain, gain_margin), (Some(g), Some(m)) if g.abs() > m);
            ReplicateSummary {
                variant: name.clone(),
                elos: elos.clone(),
                mean,
                sd,
                margin,
                gain,
                gain_margin,
                significant,
            }
        })
        .collect()
}

fn mean_sd(xs: &[f64]) -> (f64, f64, usize) {
    let n = xs.len();
    if n == 0 {
        return (f64::NAN, 0.0, 0);
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let var = if n > 1 { xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
    (mean, var.sqrt(), n)
}

/// The 97.5% quantile of Student's t with `df` degrees of freedom, rounded down to a whole
/// number first: Welch's degrees of freedom are fractional, and with 2 or 3 replicates they lie
/// between 1 and 4, where the quantile falls steeply (6.02 at 1.5, 12.71 at 1). Rounding down
/// widens the interval, the usual conservative choice, so a gain is never claimed on an interval
/// narrower than the data supports. Exact table to 10, then the Cornish–Fisher expansion (within
/// 0.1% beyond).
fn t_975(df: f64) -> f64 {
    const TABLE: [f64; 10] = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228];
    let df = df.floor();
    if df.is_nan() || df < 1.0 {
        return f64::INFINITY;
    }
    if df <= 10.0 {
        return TABLE[df as usize - 1];
    }
    let z: f64 = 1.959964;
    let g1 = (z.powi(3) + z) / 4.0;
    let g2 = (5.0 * z.powi(5) + 16.0 * z.powi(3) + 3.0 * z) / 96.0;
    let g3 = (3.0 * z.powi(7) + 19.0 * z.powi(5) + 17.0 * z.powi(3) - 15.0 * z) / 384.0;
    z + g1 / df + g2 / df.powi(2) + g3 / df.powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_across_runs_decide_the_claim() {
        let families = vec![
            ("base".to_string(), vec![-100.0, -140.0, -120.0]),
            ("better".to_string(), vec![40.0, 0.0, 20.0]),
            ("noisy".to_string(), vec![-300.0, 100.0, -40.0]),
        ];
        let s = summarize(&families);
        assert_eq!(s[0].mean, -120.0);
        assert!((s[0].sd - 20.0).abs() < 1e-9);
        // 95% of the mean with 2 df: 4.303 · 20 / √3.
        assert!((s[0].margin.unwrap() - 4.303 * 20.0 / 3f64.sqrt()).abs() < 1e-9);
        assert_eq!(s[0].gain, None);
        assert_eq!(s[1].gain, Some(140.0));
        assert!(s[1].significant, "{:?}", s[1]);
        assert!((s[2].gain.unwrap() - 40.0).abs() < 1e-9);
        assert!(!s[2].significant, "{:?}", s[2]);
        // One run each: no interval, no claim.
        let one = summarize(&[("a".into(), vec![0.0]), ("b".into(), vec![500.0])]);
        assert_eq!((one[1].gain, one[1].gain_margin, one[1].significant), (Some(500.0), None, false));
        assert!((t_975(30.0) - 2.042).abs() < 0.002 && (t_975(4.0) - 2.776).abs() < 1e-9);
        // Fractional degrees of freedom round down, never to a smaller quantile than the exact one
        // (6.02 at 1.5, 4.30 at 2.0001, 3.58 at 2.5).
        assert_eq!(t_975(1.5), 12.706);
        assert_eq!(t_975(2.0001), 4.303);
        assert!(t_975(2.5) >= 3.58 && t_975(0.5).is_infinite());
        // A variant that is clearly worse is significant, with a negative gain.
        let worse = summarize(&[("a".into(), vec![0.0, 10.0, -10.0]), ("b".into(), vec![-300.0, -310.0, -290.0])]);
        assert!(worse[1].significant && worse[1].gain.unwrap() < 0.0, "{:?}", worse[1]);
    }
}
