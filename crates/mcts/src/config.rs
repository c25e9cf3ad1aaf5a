//! Search settings. Every field has the default a shogi self-play run would use; `evaluation()`
//! turns the self-play randomness off for matches and engine play.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How the root chooses which move to explore.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum RootSelection {
    /// AlphaZero PUCT at the root as everywhere else (with Dirichlet noise when enabled).
    Puct,
    /// Gumbel AlphaZero (Danihelka et al., 2022): Gumbel-top-k sampling of `considered_actions`
    /// root moves, sequential halving over the simulation budget, completed-Q policy targets.
    /// Below the root, PUCT.
    Gumbel {
        /// Root moves sampled (Gumbel-top-k) to compete in sequential halving.
        considered_actions: usize,
        /// σ(q) = (c_visit + max visits) · c_scale · q.
        c_visit: f32,
        /// Scale of the completed Q in σ(q) (see `c_visit`).
        c_scale: f32,
    },
}

/// `[selfplay.search]`: the tree search (PUCT below the root; the root as `root` says).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SearchConfig {
    /// PUCT exploration: c(s) = ln((1 + N + c_base) / c_base) + c_init.
    pub c_init: f32,
    /// The visit count at which exploration starts to grow (see `c_init`).
    pub c_base: f32,
    /// First-play urgency: an unvisited move is valued at the parent's value minus this times the
    /// square root of the prior mass already visited (Leela's FPU reduction).
    pub fpu_reduction: f32,
    /// Self-play exploration at the root: Dirichlet noise mixed into the priors of a PUCT root, or
    /// fresh Gumbel draws for a Gumbel root (which then choose the considered moves and the move
    /// played). Off for matches and engine play, where the search must be deterministic.
    pub root_noise: bool,
    /// Concentration of the Dirichlet noise (PUCT root): smaller is spikier.
    pub dirichlet_alpha: f32,
    /// Share of the noise in the noisy priors: (1 − ε)·P + ε·Dir(α).
    pub dirichlet_epsilon: f32,
    /// Each in-flight visit counts as this many lost visits, so one tree yields distinct leaves.
    pub virtual_loss: f32,
    /// Occurrences of a position that search treats as sennichite (2: the first repetition
    /// already scores as the cycle's outcome, as engines do; the game itself ends at 4).
    pub search_repetitions: u32,
    /// Mate search at every new node, in plies: 0 off, 1 a mate in one, 3 a mate in three (as
    /// dlshogi's self-play does). A node with a mate scores as a win without asking the network,
    /// and a mate at the root is played at once.
    pub mate_plies: u32,
    /// Evasions the mate-in-three search may try at one node before it gives up.
    pub mate_max_positions: u32,
    /// KataGo's forced playouts (PUCT root, self-play full searches): a root move with prior P
    /// gets at least sqrt(k · P · total visits) visits; the policy target is then pruned of them.
    /// 0 turns both off.
    pub forced_playouts_k: f32,
    /// How the root chooses the moves it explores: `{ kind = "puct" }` or `{ kind = "gumbel", … }`.
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
            mate_plies: 1,
            mate_max_positions: 2000,
            forced_playouts_k: 0.0,
            root: RootSelection::Puct,
        }
    }
}

impl SearchConfig {
    /// Settings for matches and engine play: no noise, no forced playouts, PUCT root.
    pub fn evaluation() -> SearchConfig {
        SearchConfig { root_noise: false, forced_playouts_k: 0.0, root: RootSelection::Puct, ..SearchConfig::default() }
    }

    /// Settings that cannot work in self-play, as a message naming the field (`prefix` is where
    /// the table lives in the config file, e.g. `selfplay.search.`).
    // `!(x >= 0.0)` on purpose: a NaN fails the check and is refused with the rest.
    #[allow(clippy::neg_cmp_op_on_partial_ord, clippy::nonminimal_bool)]
    pub fn check_for_selfplay(&self, prefix: &str) -> Result<(), String> {
        if !self.root_noise {
            return Err(format!(
                "{prefix}root_noise = false: self-play needs root exploration (Dirichlet noise for a PUCT \
                 root, Gumbel draws for a Gumbel root); without it games repeat each other"
            ));
        }
        if !(self.c_init > 0.0 && self.c_base > 0.0) {
            return Err(format!(
                "{prefix}c_init and c_base must be positive (got {} and {})",
                self.c_init, self.c_base
            ));
        }
        if !(self.fpu_reduction >= 0.0) {
            return Err(format!("{prefix}fpu_reduction = {}: must be 0 or more", self.fpu_reduction));
        }
        if !(self.virtual_loss >= 0.0) {
            return Err(format!("{prefix}virtual_loss = {}: must be 0 or more", self.virtual_loss));
        }
        if !matches!(self.mate_plies, 0 | 1 | 3) {
            return Err(format!("{prefix}mate_plies = {}: expected 0 (off), 1 or 3", self.mate_plies));
        }
        if self.search_repetitions < 2 {
            return Err(format!("{prefix}search_repetitions = {}: must be 2 or more", self.search_repetitions));
        }
        if !(self.forced_playouts_k >= 0.0) {
            return Err(format!("{prefix}forced_playouts_k = {}: must be 0 (off) or more", self.forced_playouts_k));
        }
        match self.root {
            RootSelection::Puct => {
                if !(self.dirichlet_alpha > 0.0 && self.dirichlet_alpha.is_finite())
                    || !(0.0..=1.0).contains(&self.dirichlet_epsilon)
                    || self.dirichlet_epsilon == 0.0
                {
                    return Err(format!(
                        "{prefix}dirichlet_alpha = {} / dirichlet_epsilon = {}: a PUCT root needs a finite alpha > 0 and 0 < epsilon <= 1",
                        self.dirichlet_alpha, self.dirichlet_epsilon
                    ));
                }
            }
            RootSelection::Gumbel { considered_actions, c_visit, c_scale } => {
                if considered_actions < 2 {
                    return Err(format!("{prefix}root.considered_actions = {considered_actions}: must be at least 2"));
                }
                if !(c_visit >= 0.0 && c_scale > 0.0) {
                    return Err(format!(
                        "{prefix}root.c_visit = {c_visit}, c_scale = {c_scale}: c_visit >= 0 and c_scale > 0"
                    ));
                }
                if self.forced_playouts_k > 0.0 {
                    return Err(format!(
                        "{prefix}forced_playouts_k = {}: forced playouts are for a PUCT root; a Gumbel root has its own schedule",
                        self.forced_playouts_k
                    ));
                }
            }
        }
        Ok(())
    }

    /// The Gumbel root with the paper's constants (16 considered moves, c_visit 50, c_scale 1),
    /// deterministic (no Gumbel draws) as for evaluation; self-play turns `root_noise` on.
    pub fn gumbel() -> SearchConfig {
        SearchConfig {
            root_noise: false,
            root: RootSelection::Gumbel { considered_actions: 16, c_visit: 50.0, c_scale: 1.0 },
            ..SearchConfig::default()
        }
    }
}
