//! What a search found: the root's moves with their statistics, the root value, the move to play
//! and the principal variation.

use koma_shogi::Move;
use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::RngExt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::gumbel::mixed_value;
use super::Search;
use crate::tree::{Tree, NONE};

/// Ways to value the root after a search, for the side to move. Each is an estimate of what the
/// game is worth; they differ in bias when few simulations back them (docs/mcts.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RootValue {
    /// The network's own value of the root, before any search.
    Network,
    /// The mean over the root's visits (AlphaZero's root value; with forced playouts, over the
    /// pruned visits).
    Visits,
    /// Gumbel AlphaZero's v_mix: the prior policy's value, each visited move's searched value in
    /// place of its network value, mixed with the network's root value by visit count.
    Mixed,
    /// A Gumbel root: the improved policy's value Σ π′(a)·q̂(a). The improved policy is nearly
    /// a max over q̂, which a move or two visits each make noisy: biased towards the side to move.
    /// A PUCT root: the mean over its visits.
    Improved,
}

impl RootValue {
    /// Every kind, in the order shards store them (`root_values` columns, docs/data-format.md).
    pub const ALL: [RootValue; 4] = [RootValue::Network, RootValue::Visits, RootValue::Mixed, RootValue::Improved];

    pub fn name(self) -> &'static str {
        match self {
            RootValue::Network => "network",
            RootValue::Visits => "visits",
            RootValue::Mixed => "mixed",
            RootValue::Improved => "improved",
        }
    }
}

/// Statistics of one root move.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RootChild {
    pub mv: Move,
    pub visits: u32,
    pub prior: f32,
    /// Mean value for the side to move at the root, in [-1, 1] (`None` if unvisited).
    pub q: Option<f32>,
    /// Mean draw probability below this move (`None` if unvisited).
    pub draw: Option<f32>,
}

impl Search {
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
                let c = (e.child != NONE).then(|| &self.tree.nodes[e.child as usize]).filter(|c| c.visits > 0);
                RootChild {
                    mv: e.mv,
                    visits: c.map_or(0, |c| c.visits),
                    prior: e.prior,
                    q: c.map(|c| c.value_sum / c.visits as f32),
                    draw: c.map(|c| (c.draw_sum / c.visits as f32).clamp(0.0, 1.0)),
                }
            })
            .collect();
        Some(children)
    }

    /// Visits made through the root so far.
    pub fn root_visits(&self) -> u32 {
        self.tree.nodes.first().map_or(0, |n| n.visits)
    }

    /// The root's value for its side to move, in [-1, 1]: a win with a mate at the root, the
    /// improved policy's value for a Gumbel root, else the mean over the root's visits.
    pub fn root_value(&self) -> f32 {
        self.root_value_as(RootValue::Improved)
    }

    /// The root's win/draw/loss estimate for its side to move (see [`Search::root_value`]): the
    /// search's part of the value target.
    pub fn root_wdl(&self) -> [f32; 3] {
        self.root_wdl_as(RootValue::Improved)
    }

    /// The root's value for its side to move as `kind` estimates it (see [`RootValue`]): in
    /// [-1, 1], 0 before any visit, a win with a mate at the root.
    pub fn root_value_as(&self, kind: RootValue) -> f32 {
        self.root_value_and_draw_as(kind).map_or(0.0, |(v, _)| v)
    }

    /// The root's win/draw/loss estimate as `kind` values it: the search's part of the value
    /// target ([`Search::root_wdl`] for [`RootValue::Improved`]).
    pub fn root_wdl_as(&self, kind: RootValue) -> [f32; 3] {
        match self.root_value_and_draw_as(kind) {
            Some((v, d)) => {
                let w = ((1.0 - d + v) / 2.0).clamp(0.0, 1.0);
                let l = ((1.0 - d - v) / 2.0).clamp(0.0, 1.0);
                [w, d, l]
            }
            None => [0.0, 1.0, 0.0],
        }
    }

    fn root_value_and_draw_as(&self, kind: RootValue) -> Option<(f32, f32)> {
        if self.root_mate.is_some() {
            return Some((1.0, 0.0));
        }
        let root = self.tree.nodes.first().filter(|n| n.visits > 0)?;
        match kind {
            RootValue::Network => return Some((root.net_value, root.net_draw.clamp(0.0, 1.0))),
            RootValue::Mixed => {
                let children = self.root_children();
                let priors = || children.iter().map(|c| c.prior);
                let value = mixed_value(priors(), &children, root.net_value, |c| c.q);
                let draw = mixed_value(priors(), &children, root.net_draw, |c| c.draw);
                return Some((value.clamp(-1.0, 1.0), draw.clamp(0.0, 1.0)));
            }
            RootValue::Improved => {
                if let Some(g) = &self.gumbel {
                    return Some(g.improved_value(&self.root_children(), root.net_value, root.net_draw));
                }
            }
            RootValue::Visits => {}
        }
        if self.forced_playouts() {
            // Forced playouts visit bad moves on purpose: value the root by the pruned visits.
            let children = self.root_children();
            let visits = self.target_visits(&children);
            let total: f32 = visits.iter().sum();
            if total > 0.0 {
                let mean = |x: fn(&RootChild) -> Option<f32>| {
                    children.iter().zip(&visits).filter_map(|(c, n)| x(c).map(|x| x * n)).sum::<f32>() / total
                };
                return Some((mean(|c| c.q), mean(|c| c.draw).clamp(0.0, 1.0)));
            }
        }
        let visits = root.visits as f32;
        Some((-root.value_sum / visits, (root.draw_sum / visits).clamp(0.0, 1.0)))
    }

    /// A mate found at the root by the last `start` (with `mate_plies` > 0).
    pub fn root_mate(&self) -> Option<Move> {
        self.root_mate
    }

    /// The move to play: a mate at the root when there is one; the Gumbel choice for a Gumbel
    /// root (its draws are the self-play exploration, so temperature does not apply); otherwise
    /// the most visited move at temperature 0, or a move drawn with probability ∝
    /// visits^(1/temperature).
    pub fn select_move(&mut self, temperature: f32) -> Option<Move> {
        if let Some(mate) = self.root_mate {
            return Some(mate);
        }
        let children = self.root_children();
        if children.is_empty() {
            return None;
        }
        if let Some(g) = &self.gumbel {
            let net_value = self.tree.nodes[Tree::ROOT as usize].net_value;
            return Some(children[g.best_action(&children, net_value)].mv);
        }
        // With forced playouts on, the forced visits are pruned from the choice too (KataGo).
        let visits = self.target_visits(&children);
        if temperature <= 1e-3 {
            let value = |i: usize| children[i].q.unwrap_or(-2.0);
            let best = (0..children.len())
                .max_by(|&a, &b| visits[a].total_cmp(&visits[b]).then(value(a).total_cmp(&value(b))));
            return best.map(|i| children[i].mv);
        }
        let weights = visits.iter().map(|&n| (n as f64).powf(1.0 / temperature as f64));
        // No visits, or weights past f64's range: any move.
        let i = match WeightedIndex::new(weights) {
            Ok(weighted) => weighted.sample(&mut self.rng),
            Err(_) => self.rng.random_range(0..children.len()),
        };
        Some(children[i].mv)
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
}
