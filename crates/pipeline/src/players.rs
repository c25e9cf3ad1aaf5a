//! Arena players from their names: the built-in references (`random`, `greedy`,
//! `mcts-material[@N]`, `alphabeta@D`) and checkpoints searched with MCTS. Shared by `koma arena`, the
//! gatekeeper and the end-of-run report.

use std::path::Path;
use std::sync::Arc;

use koma_arena::alphabeta::{AlphaBetaPlayer, MAX_DEPTH};
use koma_arena::matches::PlayerFactory;
use koma_arena::player::{Budget, GreedyPlayer, MaterialEvaluator, MctsPlayer, Player, RandomPlayer};
use koma_mcts::{Evaluator, InferenceServer, SearchConfig};
use koma_nn::{Network, RunOptions, SharedNetwork};
use koma_shogi::rules::GameRules;

pub use crate::error::PlayerNameError;
use crate::error::Result;

/// The rule a checkpoint's search uses at the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlayRoot {
    /// PUCT, as in self-play without noise: the most visited move is played.
    Puct,
    /// Gumbel AlphaZero's root without draws: sequential halving over the 16 likeliest moves,
    /// the move played chosen by prior and value.
    Gumbel,
}

impl PlayRoot {
    pub const ALL: [PlayRoot; 2] = [PlayRoot::Puct, PlayRoot::Gumbel];

    pub fn name(self) -> &'static str {
        match self {
            PlayRoot::Puct => "puct",
            PlayRoot::Gumbel => "gumbel",
        }
    }
}

impl std::str::FromStr for PlayRoot {
    type Err = String;
    fn from_str(text: &str) -> std::result::Result<PlayRoot, String> {
        let wanted = text.trim().to_ascii_lowercase();
        PlayRoot::ALL
            .into_iter()
            .find(|root| root.name() == wanted)
            .ok_or_else(|| format!("unknown root `{text}` (use puct or gumbel)"))
    }
}

/// How a checkpoint player searches each move: the root's rule and the leaves one search adds
/// to a batch. Both change what a fixed number of simulations is worth, not only its speed. The
/// default is the Gumbel root: at 32 simulations it scored 0.95-0.98 against `greedy` where PUCT
/// scored 0.76-0.78, on final models of two independent runs (docs/benchmarks.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlaySearch {
    pub root: PlayRoot,
    /// Leaves one search adds to a batch (virtual loss keeps them distinct): fewer make each
    /// batch choose with the values of the one before, more evaluate faster.
    pub leaves: usize,
}

impl Default for PlaySearch {
    fn default() -> PlaySearch {
        PlaySearch { root: PlayRoot::Gumbel, leaves: 16 }
    }
}

impl PlaySearch {
    pub fn config(&self) -> SearchConfig {
        match self.root {
            PlayRoot::Puct => SearchConfig::evaluation(),
            PlayRoot::Gumbel => SearchConfig::gumbel(),
        }
    }
}

/// `NAME@800` (simulations) or `NAME@500ms` (time per move); no `@`: `default_simulations`.
pub fn split_budget(spec: &str, default_simulations: u32) -> std::result::Result<(&str, Budget), PlayerNameError> {
    match spec.split_once('@') {
        Some((name, b)) => {
            let parsed = match b.strip_suffix("ms") {
                Some(ms) => ms.parse::<u64>().map(Budget::Millis),
                None => b.parse::<u32>().map(Budget::Simulations),
            };
            parsed
                .map(|budget| (name, budget))
                .map_err(|_| PlayerNameError::Budget { spec: spec.into(), budget: b.into() })
        }
        None => Ok((spec, Budget::Simulations(default_simulations))),
    }
}

/// `800` or `500ms`, as player names carry it.
pub fn budget_label(budget: Budget) -> String {
    match budget {
        Budget::Simulations(n) => n.to_string(),
        Budget::Millis(ms) => format!("{ms}ms"),
    }
}

/// A built-in reference player; an error for any other name.
pub fn reference_factory(
    spec: &str,
    default_simulations: u32,
    rules: GameRules,
) -> std::result::Result<PlayerFactory, PlayerNameError> {
    if spec == "alphabeta" || spec.starts_with("alphabeta@") {
        return alphabeta_factory(spec, &spec["alphabeta".len()..], rules);
    }
    let (name, budget) = split_budget(spec, default_simulations)?;
    let label = format!("{name}@{}", budget_label(budget));
    match name {
        "random" => Ok(Arc::new(|seed| Ok(Box::new(RandomPlayer::new(seed)) as Box<dyn Player>))),
        "greedy" => Ok(Arc::new(|seed| Ok(Box::new(GreedyPlayer::new(seed)) as Box<dyn Player>))),
        "mcts-material" => Ok(Arc::new(move |seed| {
            Ok(Box::new(MctsPlayer::with_budget(&label, Arc::new(MaterialEvaluator), budget, 8, rules, seed))
                as Box<dyn Player>)
        })),
        _ => Err(PlayerNameError::NotReference(spec.into())),
    }
}

/// `alphabeta@D`: the depth is part of the name, never a default.
fn alphabeta_factory(spec: &str, depth: &str, rules: GameRules) -> std::result::Result<PlayerFactory, PlayerNameError> {
    let refuse = |message: String| PlayerNameError::Depth { spec: spec.into(), message };
    let depth: u8 = depth
        .strip_prefix('@')
        .and_then(|d| d.parse().ok())
        .ok_or_else(|| refuse(format!("give the depth in plies, alphabeta@1 to alphabeta@{MAX_DEPTH}")))?;
    AlphaBetaPlayer::new(depth, rules, 0).map_err(refuse)?;
    Ok(Arc::new(move |seed| {
        let player = AlphaBetaPlayer::new(depth, rules, seed).expect("depth checked above");
        Ok(Box::new(player) as Box<dyn Player>)
    }))
}

/// The name a checkpoint plays under: `model-STEP@BUDGET` (what results and ratings record).
pub fn checkpoint_player_name(path: &Path, budget: Budget) -> String {
    format!(
        "{}@{}",
        path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default(),
        budget_label(budget)
    )
}

/// A checkpoint searched with MCTS as `search` says, named by [`checkpoint_player_name`]. All
/// games of the factory share one inference thread, so the leaves of concurrent games merge into
/// its batches.
pub fn checkpoint_factory(
    path: &Path,
    budget: Budget,
    search: PlaySearch,
    rules: GameRules,
    options: &RunOptions,
) -> Result<PlayerFactory> {
    let network = Network::load(path, options)?;
    let label = checkpoint_player_name(path, budget);
    let slot = SharedNetwork::slot(network, &label);
    let server = InferenceServer::spawn(slot, 1024);
    Ok(Arc::new(move |seed| {
        let evaluator: Arc<dyn Evaluator> = Arc::new(server.client());
        let player =
            MctsPlayer::with_budget(&label, evaluator, budget, search.leaves, rules, seed).with_search(search.config());
        Ok(Box::new(player) as Box<dyn Player>)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_parse_and_bad_ones_are_named() {
        assert_eq!(split_budget("greedy", 50).unwrap(), ("greedy", Budget::Simulations(50)));
        assert_eq!(split_budget("m@800", 50).unwrap(), ("m", Budget::Simulations(800)));
        assert_eq!(split_budget("m@20ms", 50).unwrap(), ("m", Budget::Millis(20)));
        assert!(split_budget("m@fast", 50).unwrap_err().to_string().contains("fast"));
        assert!(reference_factory("greedy", 8, GameRules::default()).is_ok());
        assert!(reference_factory("model-1.safetensors", 8, GameRules::default()).is_err());
        let alphabeta = reference_factory("alphabeta@2", 8, GameRules::default()).unwrap();
        assert_eq!(alphabeta(3).unwrap().name(), "alphabeta@2");
        // A checkpoint whose path starts with the word is not taken for the player.
        assert!(matches!(
            reference_factory("alphabeta-runs/model-1.safetensors", 8, GameRules::default()),
            Err(PlayerNameError::NotReference(_))
        ));
        for bad in ["alphabeta", "alphabeta@", "alphabeta@0", "alphabeta@9", "alphabeta@two"] {
            let error = reference_factory(bad, 8, GameRules::default()).err().unwrap();
            assert!(matches!(error, PlayerNameError::Depth { .. }), "{bad}: {error}");
            assert!(error.to_string().contains(bad), "{error}");
        }
    }

    #[test]
    fn roots_read_their_names_and_refuse_others() {
        for root in PlayRoot::ALL {
            assert_eq!(root.name().parse::<PlayRoot>(), Ok(root));
        }
        assert_eq!(" Gumbel ".parse::<PlayRoot>(), Ok(PlayRoot::Gumbel));
        assert!("alphabeta".parse::<PlayRoot>().unwrap_err().contains("alphabeta"));
        assert_ne!(
            PlaySearch { root: PlayRoot::Gumbel, leaves: 16 }.config(),
            PlaySearch { root: PlayRoot::Puct, leaves: 16 }.config()
        );
    }
}
