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

    /// Expected score for the side to move in [0, 1]: P(win) + P(draw)/2 (the exported ONNX
    /// `output_value`).
    pub fn score(&self) -> f32 {
        self.wdl[0] + 0.5 * self.wdl[1]
    }
}

/// Why an evaluator could not judge a batch: the network failed, returned non-finite numbers, or
/// its service has stopped. Search stops with it; nothing guessed takes the network's place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError(pub String);

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

impl EvalError {
    /// The error of an evaluator that panicked (libtorch panics on CUDA out-of-memory, for one),
    /// from the payload `catch_unwind` returns.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> EvalError {
        EvalError(format!("the evaluator panicked: {}", koma_base::stop::panic_message(payload)))
    }
}

/// Judges batches of positions. `evaluate` must return one evaluation per position, in order, with
/// finite numbers, or an error.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError>;
}

/// Checks an evaluator's answer against the contract: one evaluation per position, every prior
/// and W/D/L share finite. `source` names the evaluator in the error.
pub fn check_evaluations(source: &str, positions: usize, evaluations: &[Evaluation]) -> Result<(), EvalError> {
    if evaluations.len() != positions {
        return Err(EvalError(format!(
            "{source} answered {} evaluations for {positions} positions",
            evaluations.len()
        )));
    }
    let bad = evaluations.iter().filter(|e| !e.wdl.iter().chain(&e.priors).all(|x| x.is_finite())).count();
    if bad > 0 {
        return Err(EvalError(format!(
            "{source} returned non-finite values (NaN or infinity) for {bad} of {positions} positions"
        )));
    }
    Ok(())
}

/// Uniform priors and an even value: a zero-cost evaluator for measuring search speed and for
/// tests where only the rules should decide.
#[derive(Clone, Copy, Debug, Default)]
pub struct UniformEvaluator;

impl Evaluator for UniformEvaluator {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|pos| {
                let n = pos.legal_moves().len().max(1);
                Evaluation { priors: vec![1.0 / n as f32; n], wdl: [0.0, 1.0, 0.0] }
            })
            .collect())
    }
}
