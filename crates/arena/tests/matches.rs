//! A short match between reference players: pairs share openings with colours swapped, results
//! land in JSONL, statistics add up, and SPRT stops a lopsided match early.

use std::sync::Arc;

use koma_arena::matches::{run_match, MatchConfig, PlayerFactory};
use koma_arena::openings::{generate_suite, read_suite, SuiteSpec};
use koma_arena::player::{GreedyPlayer, MaterialEvaluator, Player, RandomPlayer};
use koma_arena::stats::{Sprt, SprtDecision};
use koma_shogi::rules::GameRules;

fn greedy() -> PlayerFactory {
    Arc::new(|seed| Ok(Box::new(GreedyPlayer::new(seed)) as Box<dyn Player>))
}

fn random() -> PlayerFactory {
    Arc::new(|seed| Ok(Box::new(RandomPlayer::new(seed)) as Box<dyn Player>))
}

#[test]
fn paired_match_with_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("arena/results.jsonl");
    let suite = generate_suite(&SuiteSpec { count: 4, plies: 6, max_abs_value: 0.5, simulations: 16, seed: 3 }, &MaterialEvaluator).unwrap();
    assert_eq!(suite.len(), 4);
    let openings = read_suite(&suite.join("\n")).unwrap();
    let config = MatchConfig {
        games: 8,
        concurrency: 2,
        rules: GameRules { max_plies: 200, ..GameRules::default() },
        openings,
        sprt: None,
        results: Some(results.clone()),
        records: Some(dir.path().join("arena/games")),
        cancel: None,
    };
    let mut seen = 0;
    let state = run_match(greedy(), random(), &config, &mut |_, s| seen = s.played).unwrap();
    assert_eq!((state.played, seen), (8, 8));
    assert_eq!(state.wins + state.draws + state.losses, 8);
    assert_eq!(state.penta.pairs(), 4);
    assert_eq!(state.by_colour[0].1, 4);
    assert!(state.score() > 0.7, "greedy scored {}", state.score());
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&results).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 8);
    for pair in 0..4 {
        let games: Vec<&serde_json::Value> = lines.iter().filter(|l| l["pair"] == pair).collect();
        assert_eq!(games.len(), 2);
        assert_eq!(games[0]["start"], games[1]["start"], "a pair starts from one opening");
        assert_ne!(games[0]["start"], koma_shogi::STARTPOS_SFEN, "the opening's position is the start");
        assert_ne!(games[0]["black"], games[1]["black"], "colours swap within a pair");
    }
    assert!(read_suite("startpos\nfoo\n").unwrap_err().contains("line 2"));
    // Every game was saved as KIF and reads back to the same moves.
    let kifs: Vec<_> = std::fs::read_dir(dir.path().join("arena/games")).unwrap().flatten().collect();
    assert_eq!(kifs.len(), 8);
    for entry in kifs {
        let games = koma_shogi::record::read_file(&entry.path(), koma_shogi::record::Format::Kifu).unwrap();
        let moves: Vec<String> = games[0].moves.iter().map(|m| m.mv.to_usi()).collect();
        assert!(lines.iter().any(|l| l["moves"] == moves.join(" ")), "{} matches no result line", entry.path().display());
        assert!(games[0].result.is_some());
    }
}

#[test]
fn sprt_stops_a_lopsided_match() {
    let config = MatchConfig {
        games: 400,
        concurrency: 2,
        rules: GameRules { max_plies: 200, ..GameRules::default() },
        openings: vec![],
        sprt: Some(Sprt::parse("0,50,0.05,0.05").unwrap()),
        results: None,
        records: None,
        cancel: None,
    };
    let state = run_match(greedy(), random(), &config, &mut |_, _| {}).unwrap();
    assert_eq!(state.decision, Some(SprtDecision::H1));
    assert!(state.played < 400, "played all {} games", state.played);
}

/// A network that answers `good` batches, then fails.
struct BreaksAfter(std::sync::atomic::AtomicUsize);

impl koma_mcts::Evaluator for BreaksAfter {
    fn evaluate(&self, positions: &[&koma_shogi::Position]) -> Result<Vec<koma_mcts::Evaluation>, koma_mcts::EvalError> {
        if self.0.fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
            return Err(koma_mcts::EvalError("model-00000300 returned non-finite values (NaN or infinity) for 3 of 8 positions".into()));
        }
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

#[test]
fn a_failing_network_stops_the_match_with_its_error_and_keeps_the_games_played() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let evaluator = Arc::new(BreaksAfter(std::sync::atomic::AtomicUsize::new(400)));
    let net: PlayerFactory = Arc::new(move |seed| {
        Ok(Box::new(koma_arena::player::MctsPlayer::new("net@8", evaluator.clone(), 8, 4, GameRules::default(), seed)) as Box<dyn Player>)
    });
    let config = MatchConfig {
        games: 40,
        concurrency: 1,
        rules: GameRules { max_plies: 60, ..GameRules::default() },
        openings: vec![],
        sprt: None,
        results: Some(results.clone()),
        records: None,
        cancel: None,
    };
    let error = run_match(net, greedy(), &config, &mut |_, _| {}).expect_err("the match scored a broken network's games");
    assert!(error.contains("net@8") && error.contains("non-finite") && error.contains("the match stopped after"), "{error}");
    // The games finished before the failure are in the results file, none forfeited for it.
    let lines = std::fs::read_to_string(&results).unwrap();
    assert!(!lines.is_empty() && lines.lines().count() < 40);
    assert!(!lines.contains("forfeits"), "{lines}");
}
