//! The interface between search and whatever judges positions (a network, a material count, a
//! test double). Search never depends on tch: it only sees this trait.

use koma_shogi::Position;

/// What an evaluator says about a position, from the side to move's point of view.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Prior probability of each legal move, in the order of `Position::legal_moves()`.
    pub priors: Vec<f32>,
    /// Probabilities of win, draw and loss for the side to move.
    pub wdl: [f32; 3],
}

impl Evaluation {
    /// The scalar value in [-1, 1] that search backs up: P(win) − P(loss).
    #[inline]
    pub fn value(&self) -> f32 {
        self.wdl[0] - self.wdl[2]
    }
}

/// Judges batches of positions. `evaluate` must return one evaluation per position, in order.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, positions: &[&Position]) -> Vec<Evaluation>;
}

/// Uniform priors and an even value: a zero-cost evaluator for measuring search speed and for
/// tests where only the rules should decide.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformEvaluator;

impl Evaluator for UniformEvaluator {
    fn evaluate(&self, positions: &[&Position]) -> Vec<Evaluation> {
        positions
            .iter()
            .map(|pos| {
                let n = pos.legal_moves().len().max(1);
                Evaluation { priors: vec![1.0 / n as f32; n], wdl: [0.0, 1.0, 0.0] }
            })
            .collect()
    }
}
