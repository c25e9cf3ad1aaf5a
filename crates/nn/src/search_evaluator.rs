//! The network as the search's [`koma_mcts::Evaluator`]: the same legal-move order, priors and
//! W/D/L, so self-play, the arena and the engine search with a network through one trait.

use koma_mcts::{EvalError, Evaluation, Evaluator};
use koma_shogi::Position;

use crate::inference::SharedNetwork;

impl Evaluator for SharedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        SharedNetwork::evaluate(self, positions).map_err(|e| EvalError(e.to_string()))
    }
}
