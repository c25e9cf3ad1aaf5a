//! koma-mcts: Monte Carlo tree search for shogi over any [`Evaluator`].
//!
//! PUCT with AlphaZero's growing exploration constant, first-play urgency reduction, Dirichlet root
//! noise, virtual loss for batched leaves, an optional Gumbel AlphaZero root, a bounded evaluation
//! cache, tree reuse between moves, terminal values from the rules and mate-in-one at expansion.
//! [`InferenceServer`] batches the leaves of many searches into one evaluator call on its own thread.
//! The crate never depends on a network library: evaluators live elsewhere.

mod cache;
mod config;
mod evaluator;
mod inference;
mod search;
mod tree;

pub use cache::{EvalCache, EVAL_CACHE_ENTRY_BYTES};
pub use config::{RootSelection, SearchConfig};
pub use evaluator::{check_evaluations, EvalError, Evaluation, Evaluator, UniformEvaluator};
pub use inference::{EvaluatorSlot, InferenceClient, InferenceCounts, InferenceServer, InferenceStats, Pending};
pub use search::{LeafId, RootChild, RootValue, Search, Selection};
pub use tree::{EDGE_BYTES, NODE_BYTES};
