//! The network as the search's [`koma_mcts::Evaluator`]: the same legal-move order, priors and
//! W/D/L, so self-play, the arena and the engine search with a network through one trait; and in
//! an [`EvaluatorSlot`], the model an inference service runs, named for the games it plays.

use std::sync::atomic::{AtomicUsize, Ordering};
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

/// How many libtorch intra-op threads a CPU network's next batch should use (0: leave them).
pub trait ThreadBudget: Send + Sync {
    fn threads(&self) -> usize;
}

/// A number someone else sets (the engine, at each `go`).
impl ThreadBudget for AtomicUsize {
    fn threads(&self) -> usize {
        self.load(Ordering::Relaxed)
    }
}

/// A CPU network whose intra-op threads follow a [`ThreadBudget`], read before each batch. libtorch
/// takes the count into each thread once, so it is set here, on the thread that runs the batch
/// (an inference service's), and only when it changed.
pub struct ThreadedNetwork {
    network: SharedNetwork,
    budget: Arc<dyn ThreadBudget>,
    applied: AtomicUsize,
}

impl ThreadedNetwork {
    pub fn new(network: Network, budget: Arc<dyn ThreadBudget>) -> ThreadedNetwork {
        ThreadedNetwork { network: SharedNetwork::new(network), budget, applied: AtomicUsize::new(0) }
    }
}

impl Evaluator for ThreadedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let wanted = self.budget.threads();
        if wanted > 0 && self.applied.swap(wanted, Ordering::Relaxed) != wanted {
            crate::device::set_cpu_threads(wanted);
        }
        self.network.evaluate(positions).map_err(EvalError::failed)
    }
}
