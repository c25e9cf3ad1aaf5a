//! The Gumbel AlphaZero root (Danihelka, Guez, Schrittwieser, Silver, ICLR 2022): sample
//! `considered_actions` root moves without replacement by Gumbel-top-k over the prior logits, spend
//! the simulation budget on them by sequential halving, keep the best by g + logits + σ(q̂), and
//! train towards softmax(logits + σ(completed Q)).

use std::collections::VecDeque;

use crate::rng::Rng;
use crate::search::RootChild;

pub(crate) struct GumbelRoot {
    logits: Vec<f32>,
    gumbel: Vec<f32>,
    /// Root move indices still in the race.
    remaining: Vec<usize>,
    /// Visits scheduled for the current phase, in round-robin order.
    queue: VecDeque<usize>,
    budget_left: u32,
    phases_left: u32,
    c_visit: f32,
    c_scale: f32,
}

/// q in [-1, 1] mapped to [0, 1], the scale σ is defined on.
fn unit(q: f32) -> f32 {
    (q + 1.0) * 0.5
}

impl GumbelRoot {
    pub(crate) fn new(priors: &[f32], considered: usize, budget: u32, c_visit: f32, c_scale: f32, rng: Option<&mut Rng>) -> GumbelRoot {
        let logits: Vec<f32> = priors.iter().map(|&p| p.max(1e-12).ln()).collect();
        let gumbel: Vec<f32> = match rng {
            Some(rng) => (0..priors.len()).map(|_| rng.gumbel() as f32).collect(),
            None => vec![0.0; priors.len()],
        };
        let mut order: Vec<usize> = (0..priors.len()).collect();
        order.sort_by(|&a, &b| (gumbel[b] + logits[b]).total_cmp(&(gumbel[a] + logits[a])));
        order.truncate(considered.clamp(1, priors.len().max(1)));
        let phases = (order.len() as f32).log2().ceil().max(1.0) as u32;
        let mut root = GumbelRoot {
            logits,
            gumbel,
            remaining: order,
            queue: VecDeque::new(),
            budget_left: budget,
            phases_left: phases,
            c_visit,
            c_scale,
        };
        root.plan_phase();
        root
    }

    fn plan_phase(&mut self) {
        let k = self.remaining.len() as u32;
        if k == 0 || self.budget_left == 0 {
            return;
        }
        let total = if self.phases_left <= 1 || k == 1 {
            self.budget_left
        } else {
            let per_action = (self.budget_left / self.phases_left / k).max(1);
            (per_action * k).min(self.budget_left)
        };
        for i in 0..total as usize {
            self.queue.push_back(self.remaining[i % k as usize]);
        }
        self.budget_left -= total;
        self.phases_left = self.phases_left.saturating_sub(1);
    }

    fn sigma(&self, q_unit: f32, max_visits: u32) -> f32 {
        (self.c_visit + max_visits as f32) * self.c_scale * q_unit
    }

    fn score(&self, a: usize, children: &[RootChild], max_visits: u32) -> f32 {
        let q = children[a].q.map(unit).unwrap_or(0.0);
        self.gumbel[a] + self.logits[a] + self.sigma(q, max_visits)
    }

    /// The next root move to visit. `None` while the phase's visits are still being evaluated
    /// (`pending` is true) or when the whole budget has been spent.
    pub(crate) fn next_action(&mut self, children: &[RootChild], pending: bool) -> Option<usize> {
        if let Some(a) = self.queue.pop_front() {
            return Some(a);
        }
        if self.budget_left == 0 || pending {
            return None;
        }
        let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
        let mut ranked = self.remaining.clone();
        ranked.sort_by(|&a, &b| self.score(b, children, max_visits).total_cmp(&self.score(a, children, max_visits)));
        ranked.truncate(ranked.len().div_ceil(2).max(1));
        self.remaining = ranked;
        self.plan_phase();
        self.queue.pop_front()
    }

    pub(crate) fn finished(&self) -> bool {
        self.queue.is_empty() && self.budget_left == 0
    }

    /// The move to play: the best remaining move by g + logits + σ(q̂).
    pub(crate) fn best_action(&self, children: &[RootChild]) -> usize {
        let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
        self.remaining
            .iter()
            .copied()
            .max_by(|&a, &b| self.score(a, children, max_visits).total_cmp(&self.score(b, children, max_visits)))
            .unwrap_or(0)
    }

    /// softmax(logits + σ(completed q̂)): visited moves use their q̂, the others the mixed value
    /// v_mix of the paper's appendix D.
    pub(crate) fn completed_q_policy(&self, children: &[RootChild], root_value: f32) -> Vec<f32> {
        let priors: Vec<f32> = self.logits.iter().map(|l| l.exp()).collect();
        let total_visits: u32 = children.iter().map(|c| c.visits).sum();
        let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
        let (mut visited_prior, mut weighted_q) = (0.0f32, 0.0f32);
        for (c, p) in children.iter().zip(&priors) {
            if let (true, Some(q)) = (c.visits > 0, c.q) {
                visited_prior += p;
                weighted_q += p * unit(q);
            }
        }
        let v_hat = unit(root_value);
        let v_mix = if visited_prior > 0.0 {
            (v_hat + total_visits as f32 / visited_prior * weighted_q) / (1.0 + total_visits as f32)
        } else {
            v_hat
        };
        let scores: Vec<f32> = children
            .iter()
            .zip(&self.logits)
            .map(|(c, l)| {
                let q = if c.visits > 0 { c.q.map(unit).unwrap_or(v_mix) } else { v_mix };
                l + self.sigma(q, max_visits)
            })
            .collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f32 = exps.iter().sum();
        exps.iter().map(|e| e / sum).collect()
    }
}
