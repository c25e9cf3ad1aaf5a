//! The network as the search's [`koma_mcts::Evaluator`]: the same legal-move order, priors and
//! W/D/L, so self-play, the arena and the engine search with a network through one trait.

use koma_mcts::{EvalError, Evaluation as SearchEvaluation, Evaluator};
use koma_shogi::Position;

use crate::inference::SharedNetwork;

impl Evaluator for SharedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<SearchEvaluation>, EvalError> {
        let evaluations = SharedNetwork::evaluate(self, positions).map_err(|e| EvalError(e.to_string()))?;
        Ok(evaluations.into_iter().map(|e| SearchEvaluation { priors: e.priors, wdl: e.wdl }).collect())
    }
}
