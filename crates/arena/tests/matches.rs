//! A short match between reference players: pairs share openings with colours swapped, results
//! land in JSONL, statistics add up, and SPRT stops a lopsided match early. A torn results file
//! is read and appended to cleanly; a cancel stops a match within a move.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

mod common;

use common::{greedy, random};
use koma_arena::matches::{run_match, MatchConfig, PlayerFactory};
use koma_arena::openings::{generate_suite, SuiteSpec};
use koma_arena::player::{Action, MaterialEvaluator, MctsPlayer, Player, PlayerError, RandomPlayer};
use koma_arena::ratings::read_results;
use koma_arena::stats::{Sprt, SprtDecision};
use koma_shogi::rules::GameRules;
use koma_shogi::OpeningSuite;

#[test]
fn paired_match_with_results_file() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("arena/results.jsonl");
    let suite = generate_suite(
        &SuiteSpec { count: 4, plies: 6, max_abs_value: 0.5, simulations: 16, seed: 3 },
        &MaterialEvaluator,
    )
    .unwrap();
    assert_eq!(suite.len(), 4);
    let openings = OpeningSuite::parse(&suite.join("\n"), "generated").unwrap().positions().to_vec();
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
    // Every game was saved as KIF and reads back to the same moves.
    let kifs: Vec<_> = std::fs::read_dir(dir.path().join("arena/games")).unwrap().flatten().collect();
    assert_eq!(kifs.len(), 8);
    for entry in kifs {
        let games = koma_shogi::record::read_file(&entry.path(), koma_shogi::record::Format::Kifu).unwrap();
        let moves: Vec<String> = games[0].moves.iter().map(|m| m.mv.to_usi()).collect();
        assert!(
            lines.iter().any(|l| l["moves"] == moves.join(" ")),
            "{} matches no result line",
            entry.path().display()
        );
        assert!(games[0].result.is_some());
    }
}

/// Matches of one pairing saving records into one folder at once (two arenas beside each other,
/// games of a few plies, so that saves land together): every game gets a name of its own, none
/// overwrites another.
#[test]
fn matches_saving_into_one_folder_at_once_keep_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("games");
    let config = MatchConfig {
        games: 40,
        concurrency: 4,
        rules: GameRules { max_plies: 4, ..GameRules::default() },
        openings: vec![],
        sprt: None,
        results: None,
        records: Some(records.clone()),
        cancel: None,
    };
    std::thread::scope(|scope| {
        for _ in 0..3 {
            scope.spawn(|| assert_eq!(run_match(random(), random(), &config, &mut |_, _| {}).unwrap().played, 40));
        }
    });
    let kifs: Vec<_> = std::fs::read_dir(&records).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(kifs.len(), 120, "records were overwritten");
    for path in kifs {
        let games = koma_shogi::record::read_file(&path, koma_shogi::record::Format::Kifu).unwrap();
        assert!(games[0].result.is_some(), "{}", path.display());
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
    fn evaluate(
        &self,
        positions: &[&koma_shogi::Position],
    ) -> Result<Vec<koma_mcts::Evaluation>, koma_mcts::EvalError> {
        if self
            .0
            .fetch_update(std::sync::atomic::Ordering::SeqCst, std::sync::atomic::Ordering::SeqCst, |n| {
                n.checked_sub(1)
            })
            .is_err()
        {
            return Err(koma_mcts::EvalError::NonFinite { evaluator: "model-00000300".into(), bad: 3, positions: 8 });
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
        Ok(Box::new(koma_arena::player::MctsPlayer::new("net@8", evaluator.clone(), 8, 4, GameRules::default(), seed))
            as Box<dyn Player>)
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
    let error =
        run_match(net, greedy(), &config, &mut |_, _| {}).expect_err("the match scored a broken network's games");
    let message = error.to_string();
    assert!(
        message.contains("net@8") && message.contains("non-finite") && message.contains("the match stopped after"),
        "{message}"
    );
    // The games finished before the failure are in the results file, none forfeited for it.
    let lines = std::fs::read_to_string(&results).unwrap();
    assert!(!lines.is_empty() && lines.lines().count() < 40);
    assert!(!lines.contains("forfeits"), "{lines}");
}

/// Log output captured from the current thread.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

/// Runs `f` and returns its value with what it logged.
fn logged<T>(f: impl FnOnce() -> T) -> (T, String) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt().with_writer(captured.clone()).with_ansi(false).finish();
    let value = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    (value, text)
}

#[test]
fn a_torn_or_garbled_results_file_is_read_and_appended_to_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results.jsonl");
    let game = |winner: &str| {
        format!(r#"{{"pair":0,"black":"greedy","white":"random","winner":"{winner}","reason":"Checkmate"}}"#)
    };
    // A garbled line in the middle, and a last line torn by a kill (no newline).
    let torn = r#"{"pair":1,"black":"random","white":"gre"#;
    std::fs::write(&results, format!("{}\nnot json at all\n{}\n{torn}", game("black"), game("white"))).unwrap();
    let (games, log) = logged(|| read_results(&results).unwrap());
    assert_eq!(games.len(), 2, "the good lines are kept");
    assert_eq!((games[0].score, games[1].score), (1.0, 0.0));
    let path = results.display().to_string();
    assert!(log.contains(&format!("{path}: line 2")) && log.contains(&format!("{path}: line 4")), "{log}");

    // Appending cuts off the torn tail first, so the new games start on lines of their own.
    let config = MatchConfig {
        games: 2,
        concurrency: 1,
        rules: GameRules { max_plies: 100, ..GameRules::default() },
        openings: vec![],
        sprt: None,
        results: Some(results.clone()),
        records: None,
        cancel: None,
    };
    let (played, log) = logged(|| run_match(greedy(), random(), &config, &mut |_, _| {}).unwrap());
    assert_eq!(played.played, 2);
    assert!(log.contains("torn last line"), "{log}");
    let text = std::fs::read_to_string(&results).unwrap();
    assert!(text.ends_with('\n') && !text.contains(torn), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5);
    let unparsable: Vec<&str> =
        lines.iter().copied().filter(|l| serde_json::from_str::<serde_json::Value>(l).is_err()).collect();
    assert_eq!(unparsable, ["not json at all"], "only the garbled line is left as it was");
    assert_eq!(read_results(&results).unwrap().len(), 4);
}

/// Random moves, each after `delay`: a game far longer than the test.
struct Slow(Duration, RandomPlayer);

impl Player for Slow {
    fn name(&self) -> String {
        "slow".into()
    }
    fn act(&mut self, pos: &koma_shogi::Position, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        std::thread::sleep(self.0);
        self.1.act(pos, cancel)
    }
}

/// A network that takes `delay` for every batch.
struct SlowNetwork(Duration);

impl koma_mcts::Evaluator for SlowNetwork {
    fn evaluate(
        &self,
        positions: &[&koma_shogi::Position],
    ) -> Result<Vec<koma_mcts::Evaluation>, koma_mcts::EvalError> {
        std::thread::sleep(self.0);
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

#[test]
fn a_cancelled_match_stops_within_a_move_and_scores_no_half_game() {
    let slow_mover: PlayerFactory =
        Arc::new(|seed| Ok(Box::new(Slow(Duration::from_millis(200), RandomPlayer::new(seed))) as Box<dyn Player>));
    // A million simulations a move at 50 ms a batch: only the search watching the cancel ends it.
    let slow_searcher: PlayerFactory = Arc::new(|seed| {
        let network = Arc::new(SlowNetwork(Duration::from_millis(50)));
        Ok(Box::new(MctsPlayer::new("net", network, 1_000_000, 4, GameRules::default(), seed)) as Box<dyn Player>)
    });
    for (name, player) in [("slow mover", slow_mover), ("slow searcher", slow_searcher)] {
        let dir = tempfile::tempdir().unwrap();
        let results = dir.path().join("results.jsonl");
        let cancel = Arc::new(AtomicBool::new(false));
        let config = MatchConfig {
            games: 4,
            concurrency: 2,
            rules: GameRules { max_plies: 10_000, ..GameRules::default() },
            openings: vec![],
            sprt: None,
            results: Some(results.clone()),
            records: Some(dir.path().join("games")),
            cancel: Some(cancel.clone()),
        };
        // The match runs on a thread of its own, so that one that does not stop fails the test
        // instead of hanging it.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(run_match(player, random(), &config, &mut |_, _| {}));
        });
        std::thread::sleep(Duration::from_millis(500));
        cancel.store(true, Ordering::SeqCst);
        let state = finished
            .recv_timeout(Duration::from_secs(2))
            .unwrap_or_else(|_| panic!("{name}: the match went on 2 s after the cancel"))
            .unwrap();
        assert_eq!(state.played, 0, "{name}: a cut-short game was scored");
        assert_eq!(std::fs::read_to_string(&results).unwrap(), "", "{name}: a cut-short game was written");
        assert!(!dir.path().join("games").exists(), "{name}: a cut-short game was saved");
    }
}
