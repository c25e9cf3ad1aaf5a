//! The USI client against scripted engines: a well-behaved one plays, misbehaving ones (crash,
//! silence, illegal move, garbage) forfeit and the match goes on.

use std::time::Duration;

use koma_arena::game::play_game;
use koma_arena::player::{Player, RandomPlayer};
use koma_arena::usi_client::{GoLimit, UsiEngine, UsiEngineConfig};
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, Position};

/// A bash USI "engine" whose answer to `go` is `on_go` (shell code).
fn scripted(on_go: &str) -> UsiEngineConfig {
    let script = format!(
        r#"while read -r cmd rest; do
  case "$cmd" in
    usi) echo "id name scripted"; echo usiok ;;
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
    }
}

fn play_against_random(config: UsiEngineConfig) -> koma_arena::game::PlayedGame {
    let mut engine = UsiEngine::start(config).unwrap();
    assert_eq!(engine.name(), "scripted");
    play_game(&mut engine, &mut RandomPlayer::new(1), &Position::startpos(), &GameRules::default()).unwrap()
}

#[test]
fn a_scripted_engine_plays_and_resigns() {
    // Plays 7g7f, then resigns.
    let g = play_against_random(scripted(r#"if [ -z "$moved" ]; then echo "info depth 1"; echo "bestmove 7g7f"; moved=1; else echo "bestmove resign"; fi"#));
    assert_eq!(g.moves.len(), 2);
    assert_eq!(g.result.reason, EndReason::Resignation);
    assert_eq!(g.result.winner, Some(Color::White));
}

#[test]
fn misbehaving_engines_forfeit() {
    for (on_go, reason, words) in [
        ("exit 3", EndReason::Forfeit, "crashed"),
        ("sleep 5", EndReason::TimeLoss, "in time"),
        ("echo 'bestmove 7g7e'", EndReason::IllegalMove, "illegal move"),
        ("echo 'bestmove banana'", EndReason::Forfeit, "not a USI move"),
        ("echo 'bestmove win'", EndReason::IllegalMove, "declared"),
    ] {
        let g = play_against_random(scripted(on_go));
        assert_eq!(g.result.winner, Some(Color::White), "{on_go}");
        assert_eq!(g.result.reason, reason, "{on_go}");
        assert!(g.note.as_deref().unwrap_or("").contains(words), "{on_go}: {:?}", g.note);
    }
}

#[test]
fn an_engine_that_never_starts_is_reported() {
    let mut config = scripted("true");
    config.args = vec!["-c".into(), "sleep 10".into()];
    config.startup_timeout = Duration::from_millis(300);
    let err = UsiEngine::start(config).err().unwrap();
    assert!(err.contains("no answer in time"), "{err}");
    let mut missing = scripted("true");
    missing.command = "/nonexistent/engine".into();
    assert!(UsiEngine::start(missing).err().unwrap().contains("cannot start"));
}
