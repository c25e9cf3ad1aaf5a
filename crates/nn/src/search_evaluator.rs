//! The network as the search's [`koma_mcts::Evaluator`]: the same legal-move order, priors and
//! W/D/L, so self-play, the arena and the engine search with a network through one trait.

use koma_mcts::{Evaluation as SearchEvaluation, Evaluator};
use koma_shogi::Position;

use crate::inference::SharedNetwork;

impl Evaluator for SharedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Vec<SearchEvaluation> {
        match SharedNetwork::evaluate(self, positions) {
            Ok(evaluations) => evaluations.into_iter().map(|e| SearchEvaluation { priors: e.priors, wdl: e.wdl }).collect(),
            Err(e) => {
                // Never silently: a failing network is logged on every batch, and search falls
                // back to uniform priors and an even value rather than taking the process down.
                tracing::error!("network evaluation failed: {e}");
                positions.iter().map(|_| SearchEvaluation { priors: Vec::new(), wdl: [0.0, 1.0, 0.0] }).collect()
            }
        }
    }
}
