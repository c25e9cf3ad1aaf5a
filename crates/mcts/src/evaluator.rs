//! The interface between search and whatever judges positions (a network, a material count, a
//! test double). Search never depends on tch: it only sees this trait.

use std::sync::Arc;

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
/// Cloned to every search that waits on the failed batch, so causes are shared, not boxed.
#[derive(Clone, Debug, thiserror::Error)]
pub enum EvalError {
    /// The evaluator's own failure (a forward pass, CUDA out of memory), its cause kept.
    #[error("{0}")]
    Failed(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The evaluator panicked (libtorch panics on CUDA out-of-memory, for one).
    #[error("the evaluator panicked: {0}")]
    Panicked(String),
    #[error("{evaluator} answered {answered} evaluations for {positions} positions")]
    WrongCount { evaluator: String, answered: usize, positions: usize },
    #[error("{evaluator} returned non-finite values (NaN or infinity) for {bad} of {positions} positions")]
    NonFinite { evaluator: String, bad: usize, positions: usize },
    /// The inference service has stopped (its thread ended) without a recorded failure.
    #[error("the inference thread has stopped")]
    Stopped,
    /// Whoever owns the search stopped it (a match cancelled, an engine's `stop`).
    #[error("{0}")]
    Cancelled(&'static str),
    /// A failure of the named model.
    #[error("model {model}: {source}")]
    Model { model: String, source: Box<EvalError> },
}

impl EvalError {
    /// An evaluator's failure from any error or message.
    pub fn failed(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> EvalError {
        EvalError::Failed(Arc::from(cause.into()))
    }

    /// The error of an evaluator that panicked, from the payload `catch_unwind` returns.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> EvalError {
        EvalError::Panicked(koma_base::stop::panic_message(payload))
    }
}

/// Judges batches of positions. `evaluate` must return one evaluation per position, in order, with
/// finite numbers, or an error.
pub trait Evaluator: Send + Sync {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError>;

    /// Like `evaluate`, but an evaluator that works elsewhere (on an inference thread) stops
    /// waiting for its answer once `give_up()` says so, with [`EvalError::Cancelled`]: a search
    /// with a hard deadline answers on time even when a forward pass is slow (a CPU shared with
    /// other engines). The batch's work is lost. Evaluators that compute on the caller's thread
    /// cannot be interrupted and just evaluate.
    fn evaluate_until(
        &self,
        positions: &[&Position],
        give_up: &dyn Fn() -> bool,
    ) -> Result<Vec<Evaluation>, EvalError> {
        let _ = give_up;
        self.evaluate(positions)
    }
}

/// Checks an evaluator's answer against the contract: one evaluation per position, every prior
/// and W/D/L share finite. `source` names the evaluator in the error.
pub fn check_evaluations(source: &str, positions: usize, evaluations: &[Evaluation]) -> Result<(), EvalError> {
    if evaluations.len() != positions {
        return Err(EvalError::WrongCount { evaluator: source.into(), answered: evaluations.len(), positions });
    }
    let bad = evaluations.iter().filter(|e| !e.wdl.iter().chain(&e.priors).all(|x| x.is_finite())).count();
    if bad > 0 {
        return Err(EvalError::NonFinite { evaluator: source.into(), bad, positions });
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
