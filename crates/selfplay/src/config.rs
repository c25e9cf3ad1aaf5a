//! Self-play settings; each has the default a small CPU run would use.

use koma_mcts::{RootValue, SearchConfig};
use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A game's evaluation cache holds at most this many entries: a search of a few hundred
/// simulations, and the positions it revisits, fit in it.
pub const MAX_CACHE_ENTRIES_PER_GAME: usize = 4096;

/// `[selfplay]`: how games are played and which moves become training samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SelfPlayConfig {
    /// Worker threads; each plays `games_per_worker` games at once. In the pipeline on a lone CPU
    /// with `[run] selfplay_uses_idle_cores`, each worker (up to the cores) gets its own
    /// inference service.
    pub workers: usize,
    /// Games each worker plays at once (their leaves share the worker's batches).
    pub games_per_worker: usize,
    /// Leaves one game may add to a batch per round (virtual loss keeps them distinct).
    pub leaves_per_game: usize,
    /// Largest batch an inference service evaluates at once (it merges workers' requests).
    pub max_batch: usize,
    /// Inference services per device, each with its own thread and staging buffers, taking turns
    /// on the device: while one batch is on an accelerator, the other services encode and decode
    /// theirs. 0 chooses: 2 on an accelerator (dlshogi's default, and the count the simulated
    /// device measured best, docs/benchmarks.md), 1 on a CPU device (where the pipeline gives each
    /// worker a network of its own instead).
    pub inference_services: usize,
    /// Simulations of a full search (the recorded moves).
    pub simulations: u32,
    /// Playout cap randomization (KataGo): the share of moves that get a full search and become
    /// training samples; the others get `cheap_simulations`, no noise, and are not recorded.
    pub full_search_fraction: f32,
    /// Simulations of a cheap search (the moves that are not recorded).
    pub cheap_simulations: u32,
    /// Moves are drawn ∝ visits^(1/temperature) for the first `temperature_plies` plies, then the
    /// most visited move is played.
    pub temperature: f32,
    /// Plies from the start of a game that draw their move with `temperature`.
    pub temperature_plies: u32,
    /// Resign when the root value and the best (most visited) move's searched value, in [-1, 1],
    /// are both below this for `resign_consecutive` moves in a row (AlphaGo Zero's rule).
    pub resign_value: f32,
    /// Moves in a row below `resign_value` before the side resigns.
    pub resign_consecutive: u32,
    /// Share of games played without resignation, to measure false resignations.
    pub no_resign_fraction: f32,
    /// The false-resignation rate to keep under: the threshold starts at `resign_value` and is
    /// adjusted during the run from the no-resign games (AlphaGo Zero's 5%; docs/pipeline.md, "Resignation").
    /// 0: `resign_value` stays fixed.
    pub resign_false_target: f32,
    /// Share of games started from a handicap position, and from the opening suite.
    pub handicap_fraction: f32,
    /// Share of games started from a position of the opening suite (`[run] openings`).
    pub openings_fraction: f32,
    /// Game length limit in plies (a draw when reached).
    pub max_plies: u32,
    /// At the move limit: `draw`, or `checks` (JSA: play on while the checking side keeps checking).
    pub max_moves_rule: String,
    /// Impasse rule: csa27, jsa24, try, try-unconditional, jishogi or none.
    pub impasse: String,
    /// Seeds the games' randomness (noise, temperature, openings, resignation-free games); each
    /// worker derives its own. Unset (the default): every self-play process draws a fresh seed
    /// from its host, process, Slurm task, start time and the OS's randomness, so that processes
    /// sharing a run never replay each other's games. The seed used is logged and kept in every
    /// shard's `selfplay_seed` attribute: set it to replay a process. Processes given one seed
    /// play the same games.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Which estimate of the root's value becomes the search part of the value target and decides
    /// resignation: `visits` (the mean over the root's visits), `improved` (Gumbel's Σ π′·q̂,
    /// biased towards the side to move), `mixed` (Gumbel's v_mix) or `network`. docs/mcts.md says
    /// how they were compared.
    pub root_value: RootValue,
    /// Memory of the evaluation caches of all games together, MiB (each game's cache: its share,
    /// at most 4096 entries; 0: no cache). Caches are cleared when the model changes.
    pub eval_cache_mib: usize,
    /// The tree search of every move.
    pub search: SearchConfig,
}

impl Default for SelfPlayConfig {
    fn default() -> SelfPlayConfig {
        SelfPlayConfig {
            workers: 1,
            games_per_worker: 16,
            leaves_per_game: 4,
            max_batch: 128,
            inference_services: 0,
            simulations: 64,
            full_search_fraction: 0.25,
            cheap_simulations: 16,
            temperature: 1.0,
            temperature_plies: 20,
            resign_value: -0.95,
            resign_consecutive: 3,
            no_resign_fraction: 0.1,
            resign_false_target: 0.05,
            handicap_fraction: 0.05,
            openings_fraction: 0.0,
            max_plies: 512,
            max_moves_rule: "draw".into(),
            impasse: "csa27".into(),
            seed: None,
            // The estimate with the lowest error against the results, and little bias
            // (docs/mcts.md, "Which root value").
            root_value: RootValue::Visits,
            eval_cache_mib: 256,
            search: SearchConfig::default(),
        }
    }
}

impl SelfPlayConfig {
    /// This config with its seed decided: the configured one, else a fresh one
    /// ([`crate::seed::fresh_seed`]).
    pub fn seeded(&self) -> SelfPlayConfig {
        SelfPlayConfig { seed: Some(self.seed.unwrap_or_else(crate::seed::fresh_seed)), ..self.clone() }
    }

    /// Inference services per device: the configured count, or the default for the device kind
    /// (see `inference_services`).
    pub fn services_per_device(&self, accelerator: bool) -> usize {
        match self.inference_services {
            0 if accelerator => 2,
            0 => 1,
            n => n,
        }
    }

    /// Checks the settings as a whole; the error names the field. Combinations that would run but
    /// teach nothing (no root exploration, no recorded searches, …) are errors too.
    pub fn validate(&self) -> Result<(), String> {
        self.rules()?;
        self.search.check_for_selfplay("search.")?;
        for (name, value) in [
            ("workers", self.workers),
            ("games_per_worker", self.games_per_worker),
            ("leaves_per_game", self.leaves_per_game),
            ("max_batch", self.max_batch),
        ] {
            if value == 0 {
                return Err(format!("{name} = 0: must be at least 1"));
            }
        }
        if self.simulations < 2 {
            return Err(format!(
                "simulations = {}: a full search needs at least 2 (one evaluates the root; the target needs visits)",
                self.simulations
            ));
        }
        if !(self.full_search_fraction > 0.0 && self.full_search_fraction <= 1.0) {
            return Err(format!(
                "full_search_fraction = {}: must be in (0, 1]; only full searches become training samples",
                self.full_search_fraction
            ));
        }
        if self.full_search_fraction < 1.0 && !(1..=self.simulations).contains(&self.cheap_simulations) {
            return Err(format!(
                "cheap_simulations = {}: must be between 1 and simulations ({}) when full_search_fraction < 1",
                self.cheap_simulations, self.simulations
            ));
        }
        if !(self.temperature >= 0.0 && self.temperature.is_finite()) {
            return Err(format!("temperature = {}: must be 0 or more", self.temperature));
        }
        for (name, value) in [
            ("no_resign_fraction", self.no_resign_fraction),
            ("resign_false_target", self.resign_false_target),
            ("handicap_fraction", self.handicap_fraction),
            ("openings_fraction", self.openings_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(format!("{name} = {value}: must be in [0, 1]"));
            }
        }
        if self.handicap_fraction + self.openings_fraction > 1.0 {
            return Err(format!(
                "handicap_fraction + openings_fraction = {}: the shares of games cannot exceed 1",
                self.handicap_fraction + self.openings_fraction
            ));
        }
        if self.resign_value.is_nan() {
            return Err("resign_value is NaN".into());
        }
        if self.max_plies == 0 {
            return Err("max_plies = 0: games need at least one move".into());
        }
        Ok(())
    }

    /// Evaluation-cache entries of each game: the games' share of `eval_cache_mib`, at most
    /// [`MAX_CACHE_ENTRIES_PER_GAME`], so that the caches of all games stay within the budget.
    pub fn cache_entries_per_game(&self) -> usize {
        let games = (self.workers * self.games_per_worker).max(1);
        ((self.eval_cache_mib << 20) / koma_mcts::EVAL_CACHE_ENTRY_BYTES / games).min(MAX_CACHE_ENTRIES_PER_GAME)
    }

    /// The game rules these settings play under.
    pub fn rules(&self) -> Result<GameRules, String> {
        let impasse = ImpasseRule::from_name(&self.impasse)
            .ok_or_else(|| format!("impasse = {:?}: expected {}", self.impasse, ImpasseRule::expected()))?;
        let max_moves_rule = MaxMovesRule::from_name(&self.max_moves_rule)
            .ok_or_else(|| format!("max_moves_rule = {:?}: expected draw or checks", self.max_moves_rule))?;
        Ok(GameRules { max_plies: self.max_plies, max_moves_rule, impasse, repetitions: 4 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_caches_of_all_games_stay_within_their_budget() {
        let config =
            SelfPlayConfig { workers: 8, games_per_worker: 256, eval_cache_mib: 256, ..SelfPlayConfig::default() };
        let per_game = config.cache_entries_per_game();
        assert_eq!(per_game, 256);
        assert!(per_game * 2048 * koma_mcts::EVAL_CACHE_ENTRY_BYTES <= 256 << 20);
        let small =
            SelfPlayConfig { workers: 1, games_per_worker: 32, eval_cache_mib: 256, ..SelfPlayConfig::default() };
        assert_eq!(small.cache_entries_per_game(), MAX_CACHE_ENTRIES_PER_GAME);
        assert_eq!(SelfPlayConfig { eval_cache_mib: 0, ..small }.cache_entries_per_game(), 0);
    }
}
