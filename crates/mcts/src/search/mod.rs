//! The search driver. One `Search` owns one tree. Simulations are driven step by step so that a
//! self-play worker can gather leaves from many games into one network batch:
//!
//! 1. [`Search::start`] prepares the root for a position (reusing the subtree when the position
//!    follows the previous root by a move or two).
//! 2. [`Search::select_leaf`] walks down with PUCT (or the Gumbel schedule at the root), applying
//!    virtual loss. Terminal nodes and cache hits are backed up at once; a new leaf is shown to the
//!    caller's closure while the position stands on it (to encode it in place), then the position
//!    is walked back to the root.
//! 3. [`Search::complete`] takes the leaf's evaluation, sets the priors and backs the value up.
//!
//! [`Search::run`] does all of that with any [`Evaluator`] for callers that need no batching
//! across trees. The walk is in `selection.rs`, value backup and terminal values in `backup.rs`,
//! root statistics and the move choice in `results.rs`, training targets in `targets.rs`, the Gumbel
//! root in `gumbel.rs` and root noise in `noise.rs`.

mod backup;
mod gumbel;
mod noise;
mod results;
mod selection;
mod targets;

use koma_base::Rng;
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, MoveList, Position};
use rand::SeedableRng;

use crate::cache::EvalCache;
use crate::config::{RootSelection, SearchConfig};
use crate::evaluator::{EvalError, Evaluation, Evaluator};
use crate::tree::{NodeState, Tree, NONE};
use gumbel::GumbelRoot;
use noise::dirichlet_noise;

pub use results::{RootChild, RootValue};

/// What one call of [`Search::select_leaf`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// A new leaf awaits evaluation: pass its evaluation to [`Search::complete`].
    Leaf(LeafId),
    /// The walk ended on a known result (terminal node or cached evaluation): one simulation done.
    Resolved,
    /// The walk ran into a leaf already waiting for evaluation (virtual loss could not steer it
    /// elsewhere): evaluate the pending leaves first.
    Collision,
    /// A Gumbel root has nothing to schedule: its phase waits for pending evaluations before it
    /// can halve, or its whole budget is spent.
    Waiting,
    /// The root has no legal move: there is nothing to search.
    NoMoves,
}

/// A leaf waiting for its evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeafId(u32);

pub struct Search {
    config: SearchConfig,
    rules: GameRules,
    tree: Tree,
    rng: Rng,
    /// Hash of the root position, to tell whether a kept tree still fits.
    root_hash: u64,
    /// Hashes of pending leaves (for the cache), by node index.
    pending: Vec<(u32, u64)>,
    cache: Option<EvalCache>,
    gumbel: Option<GumbelRoot>,
    /// Simulations asked for by the current `start`.
    budget: u32,
    /// A cheap search (playout cap randomization): no Dirichlet noise and no forced playouts.
    cheap: bool,
    /// A mate found at the root by `start` (with `mate_plies` > 0): played at once.
    root_mate: Option<Move>,
    moves: MoveList,
}

impl Search {
    pub fn new(config: SearchConfig, rules: GameRules, seed: u64) -> Search {
        Search {
            config,
            rules,
            tree: Tree::default(),
            rng: Rng::seed_from_u64(seed),
            root_hash: 0,
            pending: Vec::new(),
            cache: None,
            gumbel: None,
            budget: 0,
            cheap: false,
            root_mate: None,
            moves: MoveList::new(),
        }
    }

    /// Adds a bounded evaluation cache of `capacity` entries.
    pub fn with_cache(mut self, capacity: usize) -> Search {
        self.cache = Some(EvalCache::new(capacity));
        self
    }

    pub fn config(&self) -> &SearchConfig {
        &self.config
    }

    pub fn cache(&self) -> Option<&EvalCache> {
        self.cache.as_ref()
    }

    /// Forgets the tree: the next `start` searches afresh. Self-play does this before every full
    /// search so that its training targets hold only that search's visits (cached evaluations
    /// still spare the network the positions it has seen).
    pub fn clear_tree(&mut self) {
        self.tree.clear();
        self.pending.clear();
        self.gumbel = None;
    }

    /// Forgets the tree and the cached evaluations: for a new network, whose judgements differ.
    pub fn clear_evaluations(&mut self) {
        self.clear_tree();
        if let Some(cache) = self.cache.as_mut() {
            cache.clear();
        }
    }

    /// Makes the next searches cheap (playout cap randomization): no Dirichlet noise, no forced
    /// playouts. A Gumbel root keeps its draws, since they choose the move to play.
    pub fn set_cheap(&mut self, cheap: bool) {
        self.cheap = cheap;
    }

    /// Prepares a search of `simulations` visits from `pos`. When `pos` follows the previous
    /// root by one or two moves that the tree already explored, that subtree is kept (tree reuse);
    /// otherwise the tree starts afresh.
    pub fn start(&mut self, pos: &Position, simulations: u32) {
        if !self.pending.is_empty() {
            self.clear_tree();
        }
        if !self.tree.is_empty() && self.root_hash != pos.hash() {
            self.reuse_subtree(pos);
        }
        self.root_hash = pos.hash();
        self.budget = simulations;
        self.gumbel = None;
        self.root_mate = self.short_mate(&mut pos.clone());
        if self.tree.is_empty() {
            pos.generate_legal(&mut self.moves);
            self.tree.add_node(NONE, &self.moves);
        } else if self.root_state() == NodeState::Expanded {
            self.prepare_root(simulations);
        }
    }

    /// Keeps the subtree for `pos` if the old root is one or two plies back in its history.
    fn reuse_subtree(&mut self, pos: &Position) {
        let back = (1..=2).find(|&k| pos.history_hash(k) == Some(self.root_hash));
        let Some(back) = back else {
            self.tree.clear();
            return;
        };
        let mut node = Tree::ROOT;
        for k in (0..back).rev() {
            let Some(mv) = pos.history_move(k) else {
                self.tree.clear();
                return;
            };
            let child =
                self.tree.edges[self.tree.edge_range(node)].iter().find(|e| e.mv == mv).map_or(NONE, |e| e.child);
            if child == NONE || self.tree.nodes[child as usize].state != NodeState::Expanded {
                self.tree.clear();
                return;
            }
            node = child;
        }
        self.tree.keep_subtree(node);
    }

    fn root_state(&self) -> NodeState {
        self.tree.nodes[Tree::ROOT as usize].state
    }

    /// Root noise (PUCT) or the Gumbel schedule for `visits` more visits, once the root's priors
    /// are known.
    fn prepare_root(&mut self, visits: u32) {
        let range = self.tree.edge_range(Tree::ROOT);
        if range.is_empty() {
            return;
        }
        match self.config.root {
            RootSelection::Puct if self.config.root_noise && !self.cheap => {
                let noise = dirichlet_noise(&mut self.rng, self.config.dirichlet_alpha as f64, range.len());
                let eps = self.config.dirichlet_epsilon;
                for (e, eta) in self.tree.edges[range].iter_mut().zip(noise) {
                    e.prior = (1.0 - eps) * e.prior + eps * eta as f32;
                }
            }
            RootSelection::Puct => {}
            RootSelection::Gumbel { considered_actions, c_visit, c_scale } => {
                let priors: Vec<f32> = self.tree.edges[range].iter().map(|e| e.prior).collect();
                let rng = if self.config.root_noise { Some(&mut self.rng) } else { None };
                // With fewer simulations than considered moves, consider as many as can be visited.
                let considered = considered_actions.min(visits.max(2) as usize);
                self.gumbel = Some(GumbelRoot::new(&priors, considered, visits, c_visit, c_scale, rng));
            }
        }
    }

    /// Takes the evaluation of a pending leaf and backs its value up.
    pub fn complete(&mut self, leaf: LeafId, evaluation: &Evaluation) {
        let node = leaf.0;
        let Some(i) = self.pending.iter().position(|&(n, _)| n == node) else { return };
        let (_, hash) = self.pending.swap_remove(i);
        self.expand(node, evaluation);
        if let Some(cache) = self.cache.as_mut() {
            cache.insert(hash, evaluation.clone());
        }
        if node == Tree::ROOT {
            // The root's own evaluation was the first of the budget's simulations.
            self.prepare_root(self.budget.saturating_sub(1));
        }
        let (value, draw) = value_and_draw(evaluation);
        self.backup(node, value, draw);
    }

    /// Runs `simulations` visits from `pos` with `evaluator`, batching up to `batch` leaves. An
    /// evaluator error ends the search with it (the tree keeps the visits completed before).
    pub fn run(
        &mut self,
        pos: &mut Position,
        evaluator: &dyn Evaluator,
        simulations: u32,
        batch: usize,
    ) -> Result<(), EvalError> {
        self.start(pos, simulations);
        let mut done = 0u32;
        let mut leaves = Vec::with_capacity(batch);
        let mut snapshots: Vec<Position> = Vec::with_capacity(batch);
        while done < simulations {
            leaves.clear();
            snapshots.clear();
            let mut waiting = false;
            while leaves.len() < batch.max(1) && done + (leaves.len() as u32) < simulations {
                match self.select_leaf(pos, |leaf| snapshots.push(leaf.without_history())) {
                    Selection::Leaf(id) => leaves.push(id),
                    Selection::Resolved => done += 1,
                    Selection::Collision => break,
                    Selection::Waiting => {
                        waiting = true;
                        break;
                    }
                    Selection::NoMoves => return Ok(()),
                }
            }
            if leaves.is_empty() {
                // Nothing pending and nothing to schedule: the Gumbel budget is spent.
                if waiting && self.pending.is_empty() {
                    return Ok(());
                }
                continue;
            }
            let refs: Vec<&Position> = snapshots.iter().collect();
            let evaluations = evaluator.evaluate(&refs)?;
            if evaluations.len() != leaves.len() {
                return Err(EvalError::WrongCount {
                    evaluator: "the evaluator".into(),
                    answered: evaluations.len(),
                    positions: leaves.len(),
                });
            }
            for (&leaf, e) in leaves.iter().zip(&evaluations) {
                self.complete(leaf, e);
                done += 1;
            }
        }
        Ok(())
    }

    fn expand(&mut self, node: u32, evaluation: &Evaluation) {
        let range = self.tree.edge_range(node);
        let priors = &evaluation.priors;
        let uniform = 1.0 / range.len().max(1) as f32;
        for (k, e) in self.tree.edges[range].iter_mut().enumerate() {
            e.prior = priors.get(k).copied().filter(|p| p.is_finite() && *p >= 0.0).unwrap_or(uniform);
        }
        let n = &mut self.tree.nodes[node as usize];
        n.state = NodeState::Expanded;
        (n.net_value, n.net_draw) = value_and_draw(evaluation);
    }

    /// Nodes in the tree (visited positions).
    pub fn node_count(&self) -> usize {
        self.tree.nodes.len()
    }

    /// Bytes held by the tree's arenas.
    pub fn memory_bytes(&self) -> usize {
        self.tree.nodes.len() * crate::tree::NODE_BYTES + self.tree.edges.len() * crate::tree::EDGE_BYTES
    }
}

/// An evaluation's value and draw share, a draw if it is not finite: a NaN must never reach the
/// tree's sums (evaluators report non-finite outputs as errors; this keeps search sound anyway).
pub(super) fn value_and_draw(evaluation: &Evaluation) -> (f32, f32) {
    let (value, draw) = (evaluation.value(), evaluation.wdl[1]);
    if value.is_finite() && draw.is_finite() {
        (value.clamp(-1.0, 1.0), draw.clamp(0.0, 1.0))
    } else {
        (0.0, 1.0)
    }
}
