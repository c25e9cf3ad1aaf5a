//! The policy training target: visit shares for a PUCT root (pruned of forced playouts when they
//! were on), the improved policy for a Gumbel root, all on the move when the root has a mate.
//! The value target's search part is [`Search::root_wdl`].

use koma_shogi::Move;

use super::{RootChild, Search};
use crate::tree::Tree;

impl Search {
    /// The policy training target over the root's moves.
    pub fn policy_target(&self) -> Vec<(Move, f32)> {
        if let Some(mate) = self.root_mate {
            return vec![(mate, 1.0)];
        }
        let children = self.root_children();
        if let Some(g) = &self.gumbel {
            let net_value = self.tree.nodes[Tree::ROOT as usize].net_value;
            let probs = g.improved_policy(&children, net_value);
            return children.iter().zip(probs).map(|(c, p)| (c.mv, p)).collect();
        }
        let visits = self.target_visits(&children);
        let total: f32 = visits.iter().sum();
        if total <= 0.0 {
            return children.iter().map(|c| (c.mv, c.prior)).collect();
        }
        children.iter().zip(visits).map(|(c, n)| (c.mv, n / total)).collect()
    }

    /// The visits that count for the target, the move choice and the value of a PUCT root: the
    /// visits pruned of forced playouts when they were on, else the visits.
    pub(super) fn target_visits(&self, children: &[RootChild]) -> Vec<f32> {
        if self.forced_playouts() {
            self.pruned_visits(children)
        } else {
            children.iter().map(|c| c.visits as f32).collect()
        }
    }

    /// KataGo's policy-target pruning: every move but the most visited one loses up to its forced
    /// playouts, sqrt(k · P · Σ visits), as long as its PUCT score stays below the best move's;
    /// a move left with a single visit is dropped.
    fn pruned_visits(&self, children: &[RootChild]) -> Vec<f32> {
        let mut visits: Vec<f32> = children.iter().map(|c| c.visits as f32).collect();
        let value = |c: &RootChild| c.q.unwrap_or(-2.0);
        let most_visited = |&a: &usize, &b: &usize| {
            children[a].visits.cmp(&children[b].visits).then(value(&children[a]).total_cmp(&value(&children[b])))
        };
        let Some(best) = (0..children.len()).max_by(most_visited) else { return visits };
        let total = self.root_visits() as f32;
        let c_sqrt = self.exploration(self.root_visits() as f32);
        let puct = |c: &RootChild, n: f32| c.q.unwrap_or(-1.0) + c_sqrt * c.prior / (1.0 + n);
        let best_score = puct(&children[best], visits[best]);
        for (i, c) in children.iter().enumerate() {
            if i == best || c.visits == 0 {
                continue;
            }
            let forced = (self.config.forced_playouts_k * c.prior * total).sqrt();
            let gap = best_score - c.q.unwrap_or(-1.0);
            // The fewest visits n at which c's score q + c_sqrt·P/(1 + n) stays below the best's.
            let floor = if gap > 0.0 { (c_sqrt * c.prior / gap - 1.0).max(0.0).floor() + 1.0 } else { visits[i] };
            let kept = (visits[i] - forced).max(floor).min(visits[i]);
            visits[i] = if kept <= 1.0 { 0.0 } else { kept };
        }
        visits
    }
}
