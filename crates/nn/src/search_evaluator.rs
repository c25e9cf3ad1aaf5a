//! The network as the search's [`koma_mcts::Evaluator`]: the same legal-move order, priors and
//! W/D/L, so self-play, the arena and the engine search with a network through one trait; and in
//! an [`EvaluatorSlot`], the model an inference service runs, named for the games it plays.

use std::sync::Arc;

use koma_mcts::{EvalError, Evaluation, Evaluator, EvaluatorSlot};
use koma_shogi::Position;

use crate::network::{Network, SharedNetwork};

impl SharedNetwork {
    /// A slot holding `network` as model `name`.
    pub fn slot(network: Network, name: &str) -> Arc<EvaluatorSlot> {
        EvaluatorSlot::new(Arc::new(SharedNetwork::new(network)), name)
    }

    /// Switches `slot` to `network` as model `name` (batches already running finish with the old).
    pub fn replace_in(slot: &EvaluatorSlot, network: Network, name: &str) {
        slot.replace(Arc::new(SharedNetwork::new(network)), name);
    }
}

impl Evaluator for SharedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        SharedNetwork::evaluate(self, positions).map_err(EvalError::failed)
    }
}
