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
//! across trees.

use koma_shogi::rules::{try_square, GameRules, ImpasseRule, Repetition};
use koma_shogi::{Move, MoveList, Position, Status};

use crate::cache::EvalCache;
use crate::config::{RootSelection, SearchConfig};
use crate::evaluator::{Evaluation, Evaluator};
use crate::gumbel::GumbelRoot;
use crate::rng::Rng;
use crate::tree::{NodeState, Tree, NONE};

/// What one call of [`Search::select_leaf`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// A new leaf awaits evaluation: pass its evaluation to [`Search::complete`].
    Leaf(LeafId),
    /// The walk ended on a known result (terminal node or cached evaluation): one simulation done.
    Resolved,
    /// The walk ran into a leaf already waiting for evaluation: evaluate the pending leaves first.
    Busy,
    /// The root has no legal move: there is nothing to search.
    NoMoves,
}

/// A leaf waiting for its evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LeafId(u32);

/// Statistics of one root move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RootChild {
    pub mv: Move,
    pub visits: u32,
    pub prior: f32,
    /// Mean value for the side to move at the root, in [-1, 1] (`None` if unvisited).
    pub q: Option<f32>,
}

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
    /// A mate in one at the root (with `mate_in_one` on): played at once, whatever the visits.
    root_mate: Option<Move>,
    /// The network's value of the root (for Gumbel's completed Q).
    root_network_value: f32,
    moves: MoveList,
}

impl Search {
    pub fn new(config: SearchConfig, rules: GameRules, seed: u64) -> Search {
        Search {
            config,
            rules,
            tree: Tree::default(),
            rng: Rng::seeded(seed),
            root_hash: 0,
            pending: Vec::new(),
            cache: None,
            gumbel: None,
            budget: 0,
            root_mate: None,
            root_network_value: 0.0,
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

    /// Prepares a search of `simulations` visits from `pos`. When `pos` follows the previous
    /// root by one or two moves that the tree already explored, that subtree is kept (tree reuse);
    /// otherwise the tree starts afresh.
    pub fn start(&mut self, pos: &Position, simulations: u32) {
        if !self.pending.is_empty() {
            self.tree.clear();
            self.pending.clear();
        }
        if !self.tree.is_empty() && self.root_hash != pos.hash() {
            self.reuse_subtree(pos);
        }
        self.root_hash = pos.hash();
        self.budget = simulations;
        self.gumbel = None;
        self.root_mate = if self.config.mate_in_one { pos.clone().mate_in_one() } else { None };
        if self.tree.is_empty() {
            pos.generate_legal(&mut self.moves);
            self.tree.add_node(NONE, &self.moves);
        } else if self.root_state() == NodeState::Expanded {
            self.prepare_root();
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
            let child = self.tree.edges[self.tree.edge_range(node)].iter().find(|e| e.mv == mv).map_or(NONE, |e| e.child);
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

    /// Root noise (PUCT) or the Gumbel schedule, once the root's priors are known.
    fn prepare_root(&mut self) {
        let range = self.tree.edge_range(Tree::ROOT);
        if range.is_empty() {
            return;
        }
        match self.config.root {
            RootSelection::Puct if self.config.root_noise => {
                let noise = self.rng.dirichlet(self.config.dirichlet_alpha as f64, range.len());
                let eps = self.config.dirichlet_epsilon;
                for (e, eta) in self.tree.edges[range].iter_mut().zip(noise) {
                    e.prior = (1.0 - eps) * e.prior + eps * eta as f32;
                }
            }
            RootSelection::Puct => {}
            RootSelection::Gumbel { considered_actions, c_visit, c_scale } => {
                let priors: Vec<f32> = self.tree.edges[range].iter().map(|e| e.prior).collect();
                let rng = if self.config.root_noise { Some(&mut self.rng) } else { None };
                self.gumbel = Some(GumbelRoot::new(&priors, considered_actions, self.budget, c_visit, c_scale, rng));
            }
        }
    }

    /// Walks from the root to a leaf; see [`Selection`]. `pos` must be the root position and is
    /// returned to it; `on_leaf` sees the position at a new leaf.
    pub fn select_leaf(&mut self, pos: &mut Position, on_leaf: impl FnOnce(&Position)) -> Selection {
        if self.tree.is_empty() {
            return Selection::NoMoves;
        }
        let root = self.tree.nodes[Tree::ROOT as usize];
        if root.num_edges == 0 {
            return Selection::NoMoves;
        }
        // Every walk holds a virtual visit on each node of its path until it is backed up.
        self.tree.nodes[Tree::ROOT as usize].virtual_visits += 1;
        if root.state == NodeState::Pending {
            if self.pending.iter().any(|&(n, _)| n == Tree::ROOT) {
                self.revert_virtual_visits(Tree::ROOT);
                return Selection::Busy;
            }
            on_leaf(pos);
            self.pending.push((Tree::ROOT, pos.hash()));
            return Selection::Leaf(LeafId(Tree::ROOT));
        }
        let mut node = Tree::ROOT;
        let mut depth = 0usize;
        let outcome = loop {
            match self.tree.nodes[node as usize].state {
                NodeState::Terminal => {
                    let value = self.tree.nodes[node as usize].terminal_value as f32;
                    self.backup(node, value, if value == 0.0 { 1.0 } else { 0.0 });
                    break Selection::Resolved;
                }
                NodeState::Pending => {
                    self.revert_virtual_visits(node);
                    break Selection::Busy;
                }
                NodeState::Expanded => {}
            }
            let Some(edge) = self.pick_edge(node) else {
                self.revert_virtual_visits(node);
                break Selection::Busy;
            };
            pos.do_move(self.tree.edges[edge].mv);
            depth += 1;
            let child = self.tree.edges[edge].child;
            if child != NONE {
                self.tree.nodes[child as usize].virtual_visits += 1;
                node = child;
                continue;
            }
            // A new node: terminal, cached, or a leaf for the evaluator.
            pos.generate_legal(&mut self.moves);
            let new = self.tree.add_node(node, &self.moves);
            self.tree.edges[edge].child = new;
            self.tree.nodes[new as usize].virtual_visits += 1;
            if let Some(value) = self.terminal_value(pos) {
                let n = &mut self.tree.nodes[new as usize];
                n.state = NodeState::Terminal;
                n.terminal_value = value;
                self.backup(new, value as f32, if value == 0 { 1.0 } else { 0.0 });
                break Selection::Resolved;
            }
            let hash = pos.hash();
            if let Some(e) = self.cache.as_mut().and_then(|c| c.get(hash)).cloned() {
                self.expand(new, &e);
                self.backup(new, e.value(), e.wdl[1]);
                break Selection::Resolved;
            }
            on_leaf(pos);
            self.pending.push((new, hash));
            break Selection::Leaf(LeafId(new));
        };
        for _ in 0..depth {
            pos.undo_move();
        }
        outcome
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
            self.root_network_value = evaluation.value();
            self.prepare_root();
        }
        self.backup(node, evaluation.value(), evaluation.wdl[1]);
    }

    /// Runs `simulations` visits from `pos` with `evaluator`, batching up to `batch` leaves.
    pub fn run(&mut self, pos: &mut Position, evaluator: &dyn Evaluator, simulations: u32, batch: usize) {
        self.start(pos, simulations);
        let mut done = 0u32;
        let mut leaves = Vec::with_capacity(batch);
        let mut snapshots: Vec<Position> = Vec::with_capacity(batch);
        while done < simulations {
            leaves.clear();
            snapshots.clear();
            while leaves.len() < batch.max(1) && done + (leaves.len() as u32) < simulations {
                match self.select_leaf(pos, |leaf| snapshots.push(leaf.without_history())) {
                    Selection::Leaf(id) => leaves.push(id),
                    Selection::Resolved => done += 1,
                    Selection::Busy => break,
                    Selection::NoMoves => return,
                }
            }
            if leaves.is_empty() {
                // Busy with nothing pending: the Gumbel schedule has spent its budget.
                if self.pending.is_empty() && self.gumbel.as_ref().is_none_or(|g| g.finished()) {
                    return;
                }
                continue;
            }
            let refs: Vec<&Position> = snapshots.iter().collect();
            let evaluations = evaluator.evaluate(&refs);
            for (&leaf, e) in leaves.iter().zip(&evaluations) {
                self.complete(leaf, e);
                done += 1;
            }
        }
    }

    fn expand(&mut self, node: u32, evaluation: &Evaluation) {
        let range = self.tree.edge_range(node);
        let priors = &evaluation.priors;
        let uniform = 1.0 / range.len().max(1) as f32;
        for (k, e) in self.tree.edges[range].iter_mut().enumerate() {
            e.prior = priors.get(k).copied().filter(|p| p.is_finite() && *p >= 0.0).unwrap_or(uniform);
        }
        self.tree.nodes[node as usize].state = NodeState::Expanded;
    }

    /// The value of a new node if search should not look further: game over by the rules, the
    /// first repetition, a winning declaration, or a mate in one for the side to move.
    fn terminal_value(&mut self, pos: &mut Position) -> Option<i8> {
        let us = pos.side_to_move();
        if self.rules.impasse == ImpasseRule::Try && pos.king_square(!us) == try_square(!us) {
            return Some(-1);
        }
        if self.moves.is_empty() {
            return Some(-1);
        }
        match pos.repetition(self.config.search_repetitions) {
            Repetition::None => {}
            Repetition::Draw => return Some(0),
            Repetition::OpponentPerpetualCheck => return Some(1),
            Repetition::OwnPerpetualCheck => return Some(-1),
        }
        if pos.move_number() - 1 >= self.rules.max_plies {
            return Some(0);
        }
        if pos.declaration(self.rules.impasse) == Some(Status::DeclarationWin) {
            return Some(1);
        }
        if self.config.mate_in_one && pos.mate_in_one().is_some() {
            return Some(1);
        }
        None
    }

    /// Adds a visit with `value` (for the side to move at `node`) to `node` and each ancestor,
    /// releasing the walk's virtual visit on each.
    fn backup(&mut self, node: u32, value: f32, draw: f32) {
        let mut v = -value;
        let mut n = node;
        while n != NONE {
            let entry = &mut self.tree.nodes[n as usize];
            entry.visits += 1;
            entry.value_sum += v;
            entry.draw_sum += draw;
            entry.virtual_visits = entry.virtual_visits.saturating_sub(1);
            n = entry.parent;
            v = -v;
        }
    }

    /// Releases the virtual visits of an abandoned walk that ended at `node`.
    fn revert_virtual_visits(&mut self, node: u32) {
        let mut n = node;
        while n != NONE {
            let entry = &mut self.tree.nodes[n as usize];
            entry.virtual_visits = entry.virtual_visits.saturating_sub(1);
            n = entry.parent;
        }
    }

    /// The edge to follow from an expanded node: the Gumbel schedule at the root, else PUCT.
    fn pick_edge(&mut self, node: u32) -> Option<usize> {
        let range = self.tree.edge_range(node);
        if node == Tree::ROOT && self.gumbel.is_some() {
            let children = self.root_children();
            let pending = !self.pending.is_empty();
            let g = self.gumbel.as_mut().expect("checked");
            return g.next_action(&children, pending).map(|k| range.start + k);
        }
        let parent = self.tree.nodes[node as usize];
        let parent_n = (parent.visits + parent.virtual_visits) as f32;
        let c = ((1.0 + parent_n + self.config.c_base) / self.config.c_base).ln() + self.config.c_init;
        let c_sqrt = c * parent_n.max(1.0).sqrt();
        let parent_q = if parent.visits > 0 { -parent.value_sum / parent.visits as f32 } else { 0.0 };
        let visited_prior: f32 = self.tree.edges[range.clone()]
            .iter()
            .filter(|e| e.child != NONE && self.tree.nodes[e.child as usize].visits > 0)
            .map(|e| e.prior)
            .sum();
        let fpu = parent_q - self.config.fpu_reduction * visited_prior.sqrt();
        let vl = self.config.virtual_loss;
        let mut best = range.start;
        let mut best_score = f32::NEG_INFINITY;
        for (i, e) in self.tree.edges[range.clone()].iter().enumerate() {
            let (q, n) = if e.child == NONE {
                (fpu, 0.0)
            } else {
                let c = &self.tree.nodes[e.child as usize];
                let n = c.visits as f32 + vl * c.virtual_visits as f32;
                if n > 0.0 {
                    ((c.value_sum - vl * c.virtual_visits as f32) / n, n)
                } else {
                    (fpu, 0.0)
                }
            };
            let score = q + c_sqrt * e.prior / (1.0 + n);
            if score > best_score {
                best_score = score;
                best = range.start + i;
            }
        }
        Some(best)
    }

    // ---- results ----------------------------------------------------------------------------

    /// Visits, priors and values of the root's moves, in move-generation order.
    pub fn root_children(&self) -> Vec<RootChild> {
        self.children_at(&[]).unwrap_or_default()
    }

    /// The statistics of the moves below the node reached from the root by `path` (values for
    /// the side to move at that node), if the tree has that node.
    pub fn children_at(&self, path: &[Move]) -> Option<Vec<RootChild>> {
        if self.tree.is_empty() {
            return None;
        }
        let mut node = Tree::ROOT;
        for &mv in path {
            let child = self.tree.edges[self.tree.edge_range(node)].iter().find(|e| e.mv == mv)?.child;
            if child == NONE {
                return None;
            }
            node = child;
        }
        let children = self.tree.edges[self.tree.edge_range(node)]
            .iter()
            .map(|e| {
                let (visits, q) = if e.child == NONE {
                    (0, None)
                } else {
                    let c = &self.tree.nodes[e.child as usize];
                    (c.visits, (c.visits > 0).then(|| c.value_sum / c.visits as f32))
                };
                RootChild { mv: e.mv, visits, prior: e.prior, q }
            })
            .collect();
        Some(children)
    }

    /// Visits made through the root so far.
    pub fn root_visits(&self) -> u32 {
        self.tree.nodes.first().map_or(0, |n| n.visits)
    }

    /// The root's value for its side to move, in [-1, 1].
    pub fn root_value(&self) -> f32 {
        if self.root_mate.is_some() {
            return 1.0;
        }
        match self.tree.nodes.first() {
            Some(n) if n.visits > 0 => -n.value_sum / n.visits as f32,
            _ => 0.0,
        }
    }

    /// The root's win/draw/loss estimate for its side to move (mean over the search).
    pub fn root_wdl(&self) -> [f32; 3] {
        if self.root_mate.is_some() {
            return [1.0, 0.0, 0.0];
        }
        match self.tree.nodes.first() {
            Some(n) if n.visits > 0 => {
                let v = -n.value_sum / n.visits as f32;
                let d = (n.draw_sum / n.visits as f32).clamp(0.0, 1.0);
                let w = ((1.0 - d + v) / 2.0).clamp(0.0, 1.0);
                let l = ((1.0 - d - v) / 2.0).clamp(0.0, 1.0);
                [w, d, l]
            }
            _ => [0.0, 1.0, 0.0],
        }
    }

    /// Turns root noise (Dirichlet, or Gumbel sampling) on or off for the next `start`; self-play
    /// turns it off for cheap searches (playout cap randomization).
    pub fn set_root_noise(&mut self, on: bool) {
        self.config.root_noise = on;
    }

    /// A mate in one found at the root by the last `start` (with `mate_in_one` on).
    pub fn root_mate(&self) -> Option<Move> {
        self.root_mate
    }

    /// The policy training target: visit shares for PUCT, the completed-Q policy for Gumbel; all
    /// on the mating move when the root has a mate in one.
    pub fn policy_target(&self) -> Vec<(Move, f32)> {
        if let Some(mate) = self.root_mate {
            return vec![(mate, 1.0)];
        }
        let children = self.root_children();
        if let (Some(g), RootSelection::Gumbel { .. }) = (&self.gumbel, self.config.root) {
            let probs = g.completed_q_policy(&children, self.root_network_value);
            return children.iter().zip(probs).map(|(c, p)| (c.mv, p)).collect();
        }
        let total: u32 = children.iter().map(|c| c.visits).sum();
        if total == 0 {
            return children.iter().map(|c| (c.mv, c.prior)).collect();
        }
        children.iter().map(|c| (c.mv, c.visits as f32 / total as f32)).collect()
    }

    /// The move to play: a mate in one at the root when there is one; the Gumbel choice for a
    /// Gumbel root; otherwise the most visited move at temperature 0, or a move drawn with
    /// probability ∝ visits^(1/temperature).
    pub fn select_move(&mut self, temperature: f32) -> Option<Move> {
        if let Some(mate) = self.root_mate {
            return Some(mate);
        }
        let children = self.root_children();
        if children.is_empty() {
            return None;
        }
        if let Some(g) = &self.gumbel {
            return Some(children[g.best_action(&children)].mv);
        }
        if temperature <= 1e-3 {
            return children
                .iter()
                .max_by(|a, b| (a.visits, a.q.unwrap_or(-2.0)).partial_cmp(&(b.visits, b.q.unwrap_or(-2.0))).expect("no NaN"))
                .map(|c| c.mv);
        }
        let weights: Vec<f64> = children.iter().map(|c| (c.visits as f64).powf(1.0 / temperature as f64)).collect();
        let total: f64 = weights.iter().sum();
        if total <= 0.0 {
            return Some(children[self.rng.below(children.len())].mv);
        }
        let mut x = self.rng.uniform() * total;
        for (c, w) in children.iter().zip(&weights) {
            if x < *w {
                return Some(c.mv);
            }
            x -= w;
        }
        children.last().map(|c| c.mv)
    }

    /// The most visited line from the root.
    pub fn principal_variation(&self) -> Vec<Move> {
        let mut pv = Vec::new();
        let mut node = Tree::ROOT;
        while !self.tree.is_empty() {
            let best = self.tree.edges[self.tree.edge_range(node)]
                .iter()
                .filter(|e| e.child != NONE)
                .max_by_key(|e| self.tree.nodes[e.child as usize].visits);
            match best {
                Some(e) if self.tree.nodes[e.child as usize].visits > 0 => {
                    pv.push(e.mv);
                    node = e.child;
                }
                _ => break,
            }
        }
        pv
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
