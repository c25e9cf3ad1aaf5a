//! Match statistics: Elo from a score, confidence intervals from the pentanomial model of paired
//! games (same opening, colours swapped), and the generalized SPRT (GSPRT) log-likelihood ratio.

use crate::error::SpecError;

/// Expected score of a player `elo` points stronger (logistic Elo).
pub fn score_of(elo: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf(-elo / 400.0))
}

/// Elo difference implied by a score in (0, 1); ±infinity at the ends.
pub fn elo_of(score: f64) -> f64 {
    if score <= 0.0 {
        f64::NEG_INFINITY
    } else if score >= 1.0 {
        f64::INFINITY
    } else {
        -400.0 * (1.0 / score - 1.0).log10()
    }
}

/// Counts of game pairs by their combined score: 0, ½, 1, 1½, 2 points out of 2.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pentanomial(pub [u64; 5]);

/// Single games by result: losses, draws, wins (for games that are not paired).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Trinomial(pub [u64; 3]);

/// An Elo estimate with its 95% confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EloEstimate {
    pub score: f64,
    pub elo: f64,
    pub lower: f64,
    pub upper: f64,
}

impl EloEstimate {
    /// Half the width of the interval, for "±" display.
    pub fn margin(&self) -> f64 {
        (self.upper - self.lower) / 2.0
    }
}

const Z95: f64 = 1.959963984540054;

/// Mean and variance of a discrete distribution over per-unit scores.
fn moments(counts: &[u64], values: &[f64]) -> Option<(f64, f64, f64)> {
    let n: u64 = counts.iter().sum();
    if n == 0 {
        return None;
    }
    let n = n as f64;
    let mean = counts.iter().zip(values).map(|(&c, v)| c as f64 * v).sum::<f64>() / n;
    let var = counts.iter().zip(values).map(|(&c, v)| c as f64 * (v - mean).powi(2)).sum::<f64>() / n;
    Some((n, mean, var))
}

fn estimate(n: f64, mean: f64, var: f64) -> EloEstimate {
    let half = Z95 * (var / n).sqrt();
    EloEstimate {
        score: mean,
        elo: elo_of(mean),
        lower: elo_of((mean - half).max(0.0)),
        upper: elo_of((mean + half).min(1.0)),
    }
}

const PENTA_VALUES: [f64; 5] = [0.0, 0.25, 0.5, 0.75, 1.0];
const TRI_VALUES: [f64; 3] = [0.0, 0.5, 1.0];

impl Pentanomial {
    pub fn add_pair(&mut self, points_out_of_two: f64) {
        let i = (points_out_of_two * 2.0).round().clamp(0.0, 4.0) as usize;
        self.0[i] += 1;
    }

    pub fn pairs(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn elo(&self) -> Option<EloEstimate> {
        moments(&self.0, &PENTA_VALUES).map(|(n, m, v)| estimate(n, m, v))
    }

    /// GSPRT log-likelihood ratio of H1 (elo1) against H0 (elo0), normal approximation.
    pub fn llr(&self, elo0: f64, elo1: f64) -> f64 {
        moments(&self.0, &PENTA_VALUES).map_or(0.0, |(n, m, v)| gsprt_llr(n, m, v, elo0, elo1))
    }
}

impl Trinomial {
    pub fn add_game(&mut self, points: f64) {
        let i = (points * 2.0).round().clamp(0.0, 2.0) as usize;
        self.0[i] += 1;
    }

    pub fn games(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn elo(&self) -> Option<EloEstimate> {
        moments(&self.0, &TRI_VALUES).map(|(n, m, v)| estimate(n, m, v))
    }

    pub fn llr(&self, elo0: f64, elo1: f64) -> f64 {
        moments(&self.0, &TRI_VALUES).map_or(0.0, |(n, m, v)| gsprt_llr(n, m, v, elo0, elo1))
    }
}

/// Units (pairs or games) before the normal approximation is trusted: with fewer, a run of
/// identical results has a near-zero sample variance and would end the test at once.
const MIN_UNITS: f64 = 20.0;

fn gsprt_llr(n: f64, mean: f64, var: f64, elo0: f64, elo1: f64) -> f64 {
    if n < MIN_UNITS {
        return 0.0;
    }
    let var = var.max(1e-4);
    let (s0, s1) = (score_of(elo0), score_of(elo1));
    n * (s1 - s0) * (2.0 * mean - s0 - s1) / (2.0 * var)
}

/// An SPRT of elo0 against elo1 with error rates alpha and beta.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sprt {
    pub elo0: f64,
    pub elo1: f64,
    pub alpha: f64,
    pub beta: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SprtDecision {
    /// H1 accepted: the first player is at least elo1 stronger.
    H1,
    /// H0 accepted: not stronger than elo0.
    H0,
    Continue,
}

impl Sprt {
    /// Parses `elo0,elo1,alpha,beta`.
    // `!(elo1 > elo0)` on purpose: a NaN fails the check and is refused.
    #[allow(clippy::neg_cmp_op_on_partial_ord, clippy::nonminimal_bool)]
    pub fn parse(text: &str) -> Result<Sprt, SpecError> {
        let parts: Vec<f64> = text
            .split(',')
            .map(|p| p.trim().parse::<f64>().map_err(|_| SpecError::SprtNumber { text: text.into(), part: p.into() }))
            .collect::<Result<_, _>>()?;
        let [elo0, elo1, alpha, beta] = parts[..] else {
            return Err(SpecError::SprtShape(text.into()));
        };
        if !(elo1 > elo0) || !(0.0 < alpha && alpha < 0.5) || !(0.0 < beta && beta < 0.5) {
            return Err(SpecError::SprtBounds(text.into()));
        }
        Ok(Sprt { elo0, elo1, alpha, beta })
    }

    pub fn bounds(&self) -> (f64, f64) {
        ((self.beta / (1.0 - self.alpha)).ln(), ((1.0 - self.beta) / self.alpha).ln())
    }

    pub fn decide(&self, llr: f64) -> SprtDecision {
        let (lower, upper) = self.bounds();
        if llr >= upper {
            SprtDecision::H1
        } else if llr <= lower {
            SprtDecision::H0
        } else {
            SprtDecision::Continue
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elo_and_score_are_inverse() {
        assert!((elo_of(0.75) - 190.848).abs() < 1e-3);
        assert!((elo_of(0.5)).abs() < 1e-12);
        for elo in [-600.0, -35.0, 0.0, 12.5, 400.0] {
            assert!((elo_of(score_of(elo)) - elo).abs() < 1e-9);
        }
    }

    #[test]
    fn intervals_shrink_and_cover_the_estimate() {
        let small = Trinomial([10, 10, 30]).elo().unwrap();
        let large = Trinomial([100, 100, 300]).elo().unwrap();
        assert!((small.elo - large.elo).abs() < 1e-9);
        assert!(large.margin() < small.margin());
        assert!(small.lower < small.elo && small.elo < small.upper);
        // Paired games whose pairs are all 1–1 are far more certain than the same games unpaired.
        let paired = Pentanomial([0, 0, 50, 0, 0]).elo().unwrap();
        assert_eq!(paired.margin(), 0.0);
        assert!(Pentanomial([5, 10, 20, 10, 5]).elo().unwrap().margin() > 0.0);
    }

    #[test]
    fn sprt_parses_and_bounds() {
        let s = Sprt::parse("0,10,0.05,0.05").unwrap();
        let (lo, hi) = s.bounds();
        assert!((hi - (0.95f64 / 0.05).ln()).abs() < 1e-12 && (lo + hi).abs() < 1e-12);
        assert!(Sprt::parse("10,0,0.05,0.05").is_err());
        assert!(Sprt::parse("0,10,0.05").is_err());
        assert!(Sprt::parse("0,x,0.05,0.05").is_err());
    }
}
