//! Players and match settings shared by the arena's integration tests.
#![allow(dead_code)] // each test binary uses its own part

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use koma_arena::matches::{MatchConfig, PlayerFactory};
use koma_arena::player::{GreedyPlayer, Player, RandomPlayer};
use koma_arena::usi_client::{GoLimit, UsiEngine, UsiEngineConfig};
use koma_shogi::rules::GameRules;

pub fn greedy() -> PlayerFactory {
    Arc::new(|seed| Ok(Box::new(GreedyPlayer::new(seed)) as Box<dyn Player>))
}

pub fn random() -> PlayerFactory {
    Arc::new(|seed| Ok(Box::new(RandomPlayer::new(seed)) as Box<dyn Player>))
}

/// A bash USI "engine" called `name` whose answer to `go` is `on_go` (shell code), on 100 ms a
/// move with a 400 ms margin.
pub fn scripted(name: &str, on_go: &str) -> UsiEngineConfig {
    let script = format!(
        r#"while read -r cmd rest; do
  case "$cmd" in
    usi) echo "id name {name}"; echo usiok ;;
    isready) echo readyok ;;
    go) {on_go} ;;
    quit) exit 0 ;;
  esac
done"#
    );
    UsiEngineConfig {
        name: String::new(),
        command: "bash".into(),
        args: vec!["-c".into(), script],
        options: vec![],
        limit: GoLimit::MoveTime(100),
        margin: Duration::from_millis(400),
        startup_timeout: Duration::from_secs(5),
        working_dir: None,
    }
}

pub fn engine_factory(config: UsiEngineConfig) -> PlayerFactory {
    Arc::new(move |_| Ok(Box::new(UsiEngine::start(config.clone())?) as Box<dyn Player>))
}

/// `games` games (in colour-swapped pairs), one at a time, from the normal position.
pub fn match_config(games: usize, results: Option<PathBuf>) -> MatchConfig {
    MatchConfig {
        games,
        concurrency: 1,
        rules: GameRules::default(),
        openings: vec![],
        sprt: None,
        results,
        records: None,
        cancel: None,
    }
}
