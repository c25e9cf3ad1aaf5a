//! The walk from the root to a leaf: PUCT below the root (with first-play urgency and virtual
//! loss), the Gumbel schedule or PUCT with KataGo's forced playouts at the root.

use koma_shogi::Position;

use super::{value_and_draw, LeafId, Search, Selection};
use crate::config::RootSelection;
use crate::tree::{NodeState, Tree, NONE};

/// Where the walk stopped before reaching a leaf.
enum Stop {
    Collision,
    Waiting,
}

impl Search {
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
                return Selection::Collision;
            }
            // A fresh tree over a position evaluated before (self-play's full searches).
            if let Some(e) = self.cache.as_mut().and_then(|c| c.get(pos.hash())).cloned() {
                self.expand(Tree::ROOT, &e);
                self.prepare_root(self.budget.saturating_sub(1));
                let (value, draw) = value_and_draw(&e);
                self.backup(Tree::ROOT, value, draw);
                return Selection::Resolved;
            }
            on_leaf(pos);
            self.pending.push((Tree::ROOT, pos.hash()));
            return Selection::Leaf(LeafId(Tree::ROOT));
        }
        let mut node = Tree::ROOT;
        let mut depth = 0usize;
        // The root move a Gumbel schedule handed out for this walk, given back if the walk fails.
        let mut scheduled: Option<usize> = None;
        let outcome = loop {
            match self.tree.nodes[node as usize].state {
                NodeState::Terminal => {
                    let value = self.tree.nodes[node as usize].terminal_value as f32;
                    self.backup(node, value, if value == 0.0 { 1.0 } else { 0.0 });
                    break Ok(Selection::Resolved);
                }
                NodeState::Pending => {
                    self.revert_virtual_visits(node);
                    break Err(Stop::Collision);
                }
                NodeState::Expanded => {}
            }
            let edge = if node == Tree::ROOT && self.gumbel.is_some() {
                match self.gumbel_edge() {
                    Some(k) => {
                        scheduled = Some(k);
                        self.tree.edge_range(Tree::ROOT).start + k
                    }
                    None => {
                        self.revert_virtual_visits(node);
                        break Err(Stop::Waiting);
                    }
                }
            } else {
                self.puct_edge(node)
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
                break Ok(Selection::Resolved);
            }
            let hash = pos.hash();
            if let Some(e) = self.cache.as_mut().and_then(|c| c.get(hash)).cloned() {
                self.expand(new, &e);
                let (value, draw) = value_and_draw(&e);
                self.backup(new, value, draw);
                break Ok(Selection::Resolved);
            }
            on_leaf(pos);
            self.pending.push((new, hash));
            break Ok(Selection::Leaf(LeafId(new)));
        };
        for _ in 0..depth {
            pos.undo_move();
        }
        match outcome {
            Ok(selection) => selection,
            Err(Stop::Collision) => {
                // The scheduled visit was not made: the schedule keeps it for the next walk.
                if let (Some(k), Some(g)) = (scheduled, self.gumbel.as_mut()) {
                    g.reschedule(k);
                }
                Selection::Collision
            }
            Err(Stop::Waiting) => Selection::Waiting,
        }
    }

    /// The root move the Gumbel schedule visits next (an index into the root's edges).
    fn gumbel_edge(&mut self) -> Option<usize> {
        let children = self.root_children();
        let pending = !self.pending.is_empty();
        let net_value = self.tree.nodes[Tree::ROOT as usize].net_value;
        self.gumbel.as_mut().and_then(|g| g.next_action(&children, net_value, pending))
    }

    /// PUCT's exploration factor c(s)·sqrt(N(s)) for a node with `parent_visits` visits.
    pub(super) fn exploration(&self, parent_visits: f32) -> f32 {
        let c = ((1.0 + parent_visits + self.config.c_base) / self.config.c_base).ln() + self.config.c_init;
        c * parent_visits.max(1.0).sqrt()
    }

    /// Whether this search forces playouts at the root (KataGo): a PUCT root in a full
    /// self-play search with `forced_playouts_k` > 0.
    pub(super) fn forced_playouts(&self) -> bool {
        self.config.forced_playouts_k > 0.0
            && self.config.root_noise
            && !self.cheap
            && self.config.root == RootSelection::Puct
    }

    /// The edge PUCT follows from an expanded node.
    fn puct_edge(&self, node: u32) -> usize {
        let range = self.tree.edge_range(node);
        let parent = self.tree.nodes[node as usize];
        let parent_n = (parent.visits + parent.virtual_visits) as f32;
        let c_sqrt = self.exploration(parent_n);
        let parent_q = if parent.visits > 0 { -parent.value_sum / parent.visits as f32 } else { 0.0 };
        let visited_prior: f32 = self.tree.edges[range.clone()]
            .iter()
            .filter(|e| e.child != NONE && self.tree.nodes[e.child as usize].visits > 0)
            .map(|e| e.prior)
            .sum();
        let fpu = parent_q - self.config.fpu_reduction * visited_prior.sqrt();
        let vl = self.config.virtual_loss;
        // KataGo: a root child with fewer than sqrt(k · P · Σ visits) visits goes first.
        let forced_total = if node == Tree::ROOT && self.forced_playouts() {
            Some(self.config.forced_playouts_k * parent.visits as f32)
        } else {
            None
        };
        let mut best = range.start;
        let mut best_score = (false, f32::NEG_INFINITY);
        for (i, e) in self.tree.edges[range.clone()].iter().enumerate() {
            let (q, n, in_flight) = if e.child == NONE {
                (fpu, 0.0, 0.0)
            } else {
                let c = &self.tree.nodes[e.child as usize];
                let n = c.visits as f32 + vl * c.virtual_visits as f32;
                let q = if n > 0.0 { (c.value_sum - vl * c.virtual_visits as f32) / n } else { fpu };
                (q, n, (c.visits + c.virtual_visits) as f32)
            };
            // Only moves already visited are forced (KataGo): new ones keep PUCT's own urgency.
            let forced = forced_total.is_some_and(|t| in_flight > 0.0 && in_flight < (t * e.prior).sqrt());
            let score = (forced, q + c_sqrt * e.prior / (1.0 + n));
            if score > best_score {
                best_score = score;
                best = range.start + i;
            }
        }
        best
    }
}
