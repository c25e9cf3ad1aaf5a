//! Search settings. Every field has the default a shogi self-play run would use; `evaluation()`
//! turns the self-play randomness off for matches and engine play.

use serde::{Deserialize, Serialize};

/// How the root chooses which move to explore.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RootSelection {
    /// AlphaZero PUCT at the root as everywhere else (with Dirichlet noise when enabled).
    Puct,
    /// Gumbel AlphaZero (Danihelka et al., 2022): Gumbel-top-k sampling of `considered_actions`
    /// root moves, sequential halving over the simulation budget, completed-Q policy targets.
    /// Below the root, PUCT.
    Gumbel {
        considered_actions: usize,
        /// σ(q) = (c_visit + max visits) · c_scale · q.
        c_visit: f32,
        c_scale: f32,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// PUCT exploration: c(s) = ln((1 + N + c_base) / c_base) + c_init.
    pub c_init: f32,
    pub c_base: f32,
    /// First-play urgency: an unvisited move is valued at the parent's value minus this times the
    /// square root of the prior mass already visited (Leela's FPU reduction).
    pub fpu_reduction: f32,
    /// Dirichlet noise mixed into the root priors (self-play exploration).
    pub root_noise: bool,
    pub dirichlet_alpha: f32,
    pub dirichlet_epsilon: f32,
    /// Each in-flight visit counts as this many lost visits, so one tree yields distinct leaves.
    pub virtual_loss: f32,
    /// Occurrences of a position that search treats as sennichite (2: the first repetition
    /// already scores as the cycle's outcome, as engines do; the game itself ends at 4).
    pub search_repetitions: u32,
    /// Check every new node for a mate in one and score it as a win without asking the network.
    pub mate_in_one: bool,
    pub root: RootSelection,
}

impl Default for SearchConfig {
    fn default() -> SearchConfig {
        SearchConfig {
            c_init: 1.25,
            c_base: 19652.0,
            fpu_reduction: 0.2,
            root_noise: true,
            dirichlet_alpha: 0.15,
            dirichlet_epsilon: 0.25,
            virtual_loss: 1.0,
            search_repetitions: 2,
            mate_in_one: true,
            root: RootSelection::Puct,
        }
    }
}

impl SearchConfig {
    /// Settings for matches and engine play: no noise, PUCT root.
    pub fn evaluation() -> SearchConfig {
        SearchConfig { root_noise: false, root: RootSelection::Puct, ..SearchConfig::default() }
    }

    /// The Gumbel root with the paper's constants (16 considered moves, c_visit 50, c_scale 1).
    pub fn gumbel() -> SearchConfig {
        SearchConfig {
            root_noise: false,
            root: RootSelection::Gumbel { considered_actions: 16, c_visit: 50.0, c_scale: 1.0 },
            ..SearchConfig::default()
        }
    }
}
