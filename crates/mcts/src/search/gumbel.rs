//! The Gumbel AlphaZero root (Danihelka, Guez, Schrittwieser, Silver, ICLR 2022): sample
//! `considered_actions` root moves without replacement by Gumbel-top-k over the prior logits, spend
//! the simulation budget on them by sequential halving, keep the best by g + logits + σ(q̂), and
//! train towards the improved policy softmax(logits + σ(completed Q)), whose value is the value
//! target. Without draws (evaluation) the same schedule is deterministic.

use std::collections::VecDeque;

use koma_base::Rng;

use super::noise::gumbel_noise;
use super::RootChild;

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
    pub(crate) fn new(
        priors: &[f32],
        considered: usize,
        budget: u32,
        c_visit: f32,
        c_scale: f32,
        rng: Option<&mut Rng>,
    ) -> GumbelRoot {
        let logits: Vec<f32> = priors.iter().map(|&p| p.max(1e-12).ln()).collect();
        let gumbel: Vec<f32> = match rng {
            Some(rng) => gumbel_noise(rng, priors.len()),
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

    /// g + logits + σ(completed q̂) of every root move.
    fn scores(&self, children: &[RootChild], net_value: f32) -> Vec<f32> {
        let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
        let completed = completed_q(&self.logits, children, net_value);
        (0..children.len()).map(|a| self.gumbel[a] + self.logits[a] + self.sigma(completed[a], max_visits)).collect()
    }

    /// The next root move to visit. `None` while the phase's visits are still being evaluated
    /// (`pending` is true) or when the whole budget has been spent.
    pub(crate) fn next_action(&mut self, children: &[RootChild], net_value: f32, pending: bool) -> Option<usize> {
        if let Some(a) = self.queue.pop_front() {
            return Some(a);
        }
        if self.budget_left == 0 || pending {
            return None;
        }
        let scores = self.scores(children, net_value);
        let mut ranked = self.remaining.clone();
        ranked.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
        ranked.truncate(ranked.len().div_ceil(2).max(1));
        self.remaining = ranked;
        self.plan_phase();
        self.queue.pop_front()
    }

    /// Puts back a visit that `next_action` handed out but the walk could not make.
    pub(crate) fn reschedule(&mut self, action: usize) {
        self.queue.push_front(action);
    }

    /// The move to play: the best remaining move by g + logits + σ(completed q̂).
    pub(crate) fn best_action(&self, children: &[RootChild], net_value: f32) -> usize {
        let scores = self.scores(children, net_value);
        self.remaining.iter().copied().max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap_or(0)
    }

    /// The improved policy softmax(logits + σ(completed q̂)): the policy target.
    pub(crate) fn improved_policy(&self, children: &[RootChild], net_value: f32) -> Vec<f32> {
        let max_visits = children.iter().map(|c| c.visits).max().unwrap_or(0);
        let completed = completed_q(&self.logits, children, net_value);
        let scores: Vec<f32> =
            self.logits.iter().zip(&completed).map(|(l, &q)| l + self.sigma(q, max_visits)).collect();
        let max = scores.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let exps: Vec<f32> = scores.iter().map(|s| (s - max).exp()).collect();
        let sum: f32 = exps.iter().sum();
        exps.iter().map(|e| e / sum).collect()
    }

    /// The value and draw probability of the improved policy, Σ π'(a)·completed(a), in [-1, 1]
    /// and [0, 1]: the root value of a Gumbel search. The mean over all root visits would count
    /// sequential halving's forced visits to moves it went on to eliminate.
    pub(crate) fn improved_value(&self, children: &[RootChild], net_value: f32, net_draw: f32) -> (f32, f32) {
        let policy = self.improved_policy(children, net_value);
        let values = completed_q(&self.logits, children, net_value);
        let draws = completed(&self.logits, children, net_draw, |c| c.draw);
        let value: f32 = policy.iter().zip(&values).map(|(p, q)| p * q).sum();
        let draw: f32 = policy.iter().zip(&draws).map(|(p, d)| p * d).sum();
        (2.0 * value - 1.0, draw.clamp(0.0, 1.0))
    }
}

/// Completed q̂ in [0, 1] (the paper's appendix D): a visited move's own mean, the mixed value
/// v_mix for the others.
fn completed_q(logits: &[f32], children: &[RootChild], net_value: f32) -> Vec<f32> {
    completed(logits, children, unit(net_value), |c| c.q.map(unit))
}

/// Visited moves keep `own`; unvisited ones get [`mixed_value`].
fn completed(
    logits: &[f32],
    children: &[RootChild],
    network: f32,
    own: impl Fn(&RootChild) -> Option<f32>,
) -> Vec<f32> {
    let mixed = mixed_value(logits.iter().map(|l| l.exp()), children, network, &own);
    children.iter().map(|c| if c.visits > 0 { own(c).unwrap_or(mixed) } else { mixed }).collect()
}

/// The paper's v_mix: (v̂ + N / Σ_visited π · Σ_visited π·own) / (1 + N), where v̂ is the network's
/// estimate for the root, N the root's visits and π the prior (`priors`, one per child): the
/// prior policy's value, its visited moves' searched values standing in for their network values.
pub(crate) fn mixed_value(
    priors: impl Iterator<Item = f32>,
    children: &[RootChild],
    network: f32,
    own: impl Fn(&RootChild) -> Option<f32>,
) -> f32 {
    let total_visits: u32 = children.iter().map(|c| c.visits).sum();
    let (mut visited_prior, mut weighted) = (0.0f32, 0.0f32);
    for (c, p) in children.iter().zip(priors) {
        if let (true, Some(x)) = (c.visits > 0, own(c)) {
            visited_prior += p;
            weighted += p * x;
        }
    }
    if visited_prior > 0.0 {
        (network + total_visits as f32 / visited_prior * weighted) / (1.0 + total_visits as f32)
    } else {
        network
    }
}
