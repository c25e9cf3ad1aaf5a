//! The USI protocol end to end through the engine loop (in-memory pipes): handshake, options,
//! positions, every kind of `go`, stop/ponderhit/quit at any time, mate, declaration, resignation.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use koma_engine::{EngineConfig, LoadedNet, Options};
use koma_mcts::{EvalError, Evaluation, Evaluator};
use koma_shogi::usi::parse_position;
use koma_shogi::{Color, Move, Position};

const SHORT: Duration = Duration::from_secs(10);

fn assert_legal(pos: &Position, line: &str) -> Move {
    let m = best_of(line).unwrap_or_else(|| panic!("expected a move, got {line:?}"));
    assert!(pos.is_legal(m), "{line:?} is illegal in {}", pos.to_sfen());
    m
}

#[test]
fn handshake_lists_options_and_answers_readyok() {
    let mut e = Harness::new();
    e.send("usi");
    let lines = e.until(SHORT, |l| l == "usiok");
    assert!(lines[0].starts_with("id name koma"), "{lines:?}");
    assert!(lines[1].starts_with("id author"), "{lines:?}");
    for name in [
        "Model",
        "Device",
        "Threads",
        "BatchSize",
        "NNCacheSize",
        "USI_Hash",
        "Playouts",
        "USI_Ponder",
        "MultiPV",
        "ResignThreshold",
        "ByoyomiMargin",
        "EvalCoef",
        "MateHash",
        "MateRootPlies",
        "MateRootNodes",
    ] {
        assert!(lines.iter().any(|l| l.starts_with(&format!("option name {name} type "))), "{name} missing: {lines:?}");
    }
    // Without a model: a warning, then readyok.
    let lines = e.ready();
    assert!(lines.iter().any(|l| l.starts_with("info string") && l.contains("no model")), "{lines:?}");
    // A second isready answers at once.
    assert_eq!(e.ready(), vec!["readyok"]);
    e.send("quit");
    assert!(e.wait_exit(SHORT));
}

#[test]
fn go_before_position_and_stop_without_search() {
    let mut e = Harness::new();
    e.send("stop");
    e.send("ponderhit");
    e.send("gameover win");
    assert_eq!(e.ready(), vec!["info string no model: playing with uniform priors and an even value (UniformStandIn), which is only good for testing", "readyok"]);
    e.send("go byoyomi 200");
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    let last = info.iter().rev().find(|l| l.starts_with("info depth")).expect("an info line");
    for key in ["depth", "seldepth", "score", "nodes", "nps", "time", "hashfull", "pv"] {
        assert!(info_field(last, key).is_some(), "{key} missing in {last:?}");
    }
    assert_eq!(info_field(last, "score"), Some("cp"));
    // Nothing else pending: stop now prints nothing.
    e.send("stop");
    assert!(e.silent_for(Duration::from_millis(300)));
}

/// The `nodes` of the last `info` line before `bestmove`.
fn final_nodes(info: &[String]) -> u64 {
    info_field(info.last().expect("an info line"), "nodes").expect("nodes").parse().expect("a number")
}

/// Asserts that the engine prints nothing but `info` lines for `time` (a search waiting for `stop`).
fn only_info_for(e: &mut Harness, time: Duration) {
    let t = Instant::now();
    while t.elapsed() < time {
        if let Some(line) = e.recv(Duration::from_millis(100)) {
            assert!(line.starts_with("info"), "{line:?} before stop");
        }
    }
}

#[test]
fn infinite_search_waits_for_stop_and_quit_works_mid_search() {
    let mut e = Harness::new();
    e.ready();
    e.send("position startpos moves 7g7f 3c3d");
    e.send("go infinite");
    only_info_for(&mut e, Duration::from_millis(1500));
    e.send("stop");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&parse_position("startpos moves 7g7f 3c3d").unwrap(), &best);

    e.send("go infinite");
    std::thread::sleep(Duration::from_millis(200));
    e.send("quit");
    assert!(e.wait_exit(SHORT), "quit did not end the engine mid-search");

    let mut e = Harness::new();
    e.send("go infinite");
    std::thread::sleep(Duration::from_millis(200));
    assert!(e.close(SHORT), "end of input did not end the engine mid-search");
}

#[test]
fn a_node_limit_ends_an_infinite_search_and_playouts_do_not() {
    let mut e = Harness::new();
    e.ready();
    e.send("position startpos");
    // An analysis to 40 nodes: the answer comes without `stop`.
    e.send("go nodes 40 infinite");
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    let nodes = final_nodes(&info);
    assert!((1..=60).contains(&nodes), "{nodes}");
    // The Playouts option is no `go` limit: `go infinite` still waits for stop.
    e.send("setoption name Playouts value 20");
    e.send("go infinite");
    only_info_for(&mut e, Duration::from_millis(800));
    e.send("stop");
    assert_legal(&Position::startpos(), &e.bestmove(SHORT).0);
}

#[test]
fn go_nodes_movetime_and_playouts() {
    let mut e = Harness::new();
    e.ready();
    e.send("position startpos");
    e.send("go nodes 50");
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    let nodes = final_nodes(&info);
    assert!((1..=60).contains(&nodes), "{nodes}");

    let slack = e.scheduling_slack().as_millis();
    let t = Instant::now();
    e.send("go movetime 500");
    e.bestmove(SHORT);
    let ms = t.elapsed().as_millis();
    assert!((100..=700 + slack).contains(&ms), "movetime 500 took {ms} ms (scheduling slack {slack} ms)");

    e.send("setoption name Playouts value 30");
    e.send("go btime 100000 wtime 100000 byoyomi 10000");
    let (_, info) = e.bestmove(SHORT);
    let nodes = final_nodes(&info);
    assert!(nodes <= 40, "{nodes}");
    // Bare `go` with a playout limit: the limit alone decides.
    e.send("go");
    e.bestmove(SHORT);
}

#[test]
fn multipv_and_ponder_move() {
    let mut e = Harness::new();
    e.send("setoption name MultiPV value 3");
    e.send("setoption name USI_Ponder value true");
    e.ready();
    e.send("position startpos");
    e.send("go nodes 300");
    let (best, info) = e.bestmove(SHORT);
    let final_lines: Vec<&String> = info.iter().rev().take(3).collect();
    for k in 1..=3 {
        assert!(final_lines.iter().any(|l| info_field(l, "multipv") == Some(&k.to_string())), "multipv {k}: {info:?}");
    }
    let m = assert_legal(&Position::startpos(), &best);
    let p = ponder_of(&best).expect("a ponder move with USI_Ponder and a PV of two moves");
    let mut pos = Position::startpos();
    pos.do_move(m);
    assert!(pos.is_legal(p));
}

#[test]
fn ponder_then_ponderhit_answers_within_the_time() {
    let mut e = Harness::new();
    e.send("setoption name USI_Ponder value true");
    e.ready();
    let slack = e.scheduling_slack();
    e.send("position startpos moves 7g7f 3c3d");
    e.send("go ponder btime 0 wtime 0 byoyomi 600");
    // Pondering goes on past the byoyomi: no bestmove yet.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(1200) {
        if let Some(line) = e.recv(Duration::from_millis(100)) {
            assert!(!line.starts_with("bestmove"), "bestmove while pondering: {line}");
        }
    }
    let hit = Instant::now();
    e.send("ponderhit");
    let (best, _) = e.bestmove(SHORT);
    assert!(
        hit.elapsed() < Duration::from_millis(600) + slack,
        "ponderhit to bestmove {:?} ({slack:?} slack)",
        hit.elapsed()
    );
    assert_legal(&parse_position("startpos moves 7g7f 3c3d").unwrap(), &best);

    // A ponder miss: stop answers at once (the GUI ignores that move).
    e.send("position startpos moves 7g7f 3c3d 2g2f");
    e.send("go ponder btime 0 wtime 0 byoyomi 600");
    std::thread::sleep(Duration::from_millis(200));
    e.send("stop");
    e.bestmove(SHORT);
    // gameover during a ponder search also ends it with a bestmove (match runners wait for it).
    e.send("go ponder btime 0 wtime 0 byoyomi 600");
    std::thread::sleep(Duration::from_millis(100));
    e.send("gameover lose");
    e.bestmove(SHORT);
}

#[test]
fn second_go_abandons_the_first_search() {
    let mut e = Harness::new();
    e.ready();
    e.send("go infinite");
    std::thread::sleep(Duration::from_millis(100));
    e.send("position startpos moves 2g2f");
    e.send("go nodes 20");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&parse_position("startpos moves 2g2f").unwrap(), &best);
    // Exactly one bestmove.
    e.send("stop");
    assert!(e.silent_for(Duration::from_millis(300)), "{:?}", e.log);
}

#[test]
fn bad_positions_and_options_are_reported_and_survived() {
    let mut e = Harness::new();
    e.ready();
    // An illegal move: the position stops before it.
    e.send("position startpos moves 7g7f 3c3d 7f7e 8h2b+");
    let lines = e.until(SHORT, |l| l.starts_with("info string"));
    assert!(lines[0].contains("move 4"), "{lines:?}");
    e.send("go nodes 20");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&parse_position("startpos moves 7g7f 3c3d 7f7e").unwrap(), &best);
    // Not a move at all; a bad SFEN; an unknown start word.
    for bad in [
        "position startpos moves 7g7x",
        "position sfen 9/9 b - 1",
        "position banana",
        "position",
        "position startpos 7g7f",
    ] {
        e.send(bad);
        let line = e.until(SHORT, |l| l.starts_with("info string")).pop().unwrap();
        assert!(line.contains("position"), "{bad}: {line}");
    }
    // After a bad base position the engine plays from the start position.
    e.send("position sfen lnsgkgsnl/9/9/9/9/9/9/9/9 b");
    e.send("go nodes 10");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    // Options: unknown, malformed, out of range; a file name with spaces.
    e.send("setoption name NoSuch value 1");
    e.send("setoption name MultiPV value lots");
    e.send("setoption name MultiPV value 0");
    e.send("setoption value 3");
    let lines = e.until(SHORT, |l| l.contains("setoption value 3"));
    assert_eq!(lines.len(), 4, "{lines:?}");
    e.send("setoption name Model value /no/such dir/model.safetensors");
    // The missing model: an error at isready (readyok all the same, so no GUI hangs), and at
    // every go, which resigns rather than play a guess.
    let lines = e.ready();
    assert!(
        lines.iter().any(|l| l.starts_with("info string error: cannot load model /no/such dir/model.safetensors")),
        "{lines:?}"
    );
    e.send("position startpos");
    e.send("go nodes 10");
    let (best, info) = e.bestmove(SHORT);
    assert_eq!(best, "bestmove resign");
    assert!(info.iter().any(|l| l.starts_with("info string error: cannot load model")), "{info:?}");
}

#[test]
fn without_a_model_it_says_so_and_resigns_unless_the_stand_in_is_asked_for() {
    let mut e = Harness::with_options(Options::default());
    let lines = e.ready();
    assert!(lines.iter().any(|l| l.starts_with("info string error: no model set")), "{lines:?}");
    e.send("position startpos");
    e.send("go byoyomi 500");
    let (best, info) = e.bestmove(SHORT);
    assert_eq!(best, "bestmove resign");
    assert!(info.iter().any(|l| l.contains("no model set")), "{info:?}");
    // Asked for explicitly: the uniform stand-in plays legal moves.
    e.send("setoption name UniformStandIn value true");
    let lines = e.ready();
    assert!(lines.iter().any(|l| l.contains("UniformStandIn")), "{lines:?}");
    e.send("go nodes 10");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
}

/// A network that fails after its first `good` batches.
struct BreaksAfter {
    good: AtomicUsize,
}

impl Evaluator for BreaksAfter {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        if self.good.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
            return Err(EvalError::failed("forward pass failed: CUDA out of memory"));
        }
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

#[test]
fn a_network_failing_mid_search_is_reported_and_nothing_is_guessed() {
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(|_key| {
        Ok(LoadedNet {
            evaluator: Arc::new(BreaksAfter { good: AtomicUsize::new(3) }),
            description: "breaks".into(),
            cuda: false,
            cpu_threads: None,
        })
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value breaks");
    e.send("setoption name MateSearchPlies value 0");
    e.ready();
    e.send("position startpos");
    e.send("go nodes 400");
    // The visits made before the failure decide the move.
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    assert!(
        info.iter()
            .any(|l| l.starts_with("info string error: network evaluation failed") && l.contains("CUDA out of memory")),
        "{info:?}"
    );
    // Now it fails at once: no visits, no guess, a resignation.
    e.send("position startpos moves 7g7f");
    e.send("go nodes 400");
    let (best, _) = e.bestmove(SHORT);
    assert_eq!(best, "bestmove resign");
}

#[test]
fn resigns_when_mated_declares_when_it_can_and_mates_in_one() {
    let mut e = Harness::new();
    e.ready();
    let slack = e.scheduling_slack();
    // White to move is checkmated: resign.
    e.send("position sfen 4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1");
    e.send("go byoyomi 1000");
    assert_eq!(e.bestmove(SHORT).0, "bestmove resign");
    // Black may declare under the CSA 27-point rule: win.
    let declare = "position sfen 4K4/1R5B1/PPPP1PPPP/9/9/9/9/9/4k4 b RB 1";
    e.send(declare);
    e.send("go byoyomi 1000");
    assert_eq!(e.bestmove(SHORT).0, "bestmove win");
    // ... but not without an impasse rule.
    e.send("setoption name ImpasseRule value none");
    e.send(declare);
    e.send("go nodes 10");
    let (best, _) = e.bestmove(SHORT);
    assert_legal(&Position::from_sfen("4K4/1R5B1/PPPP1PPPP/9/9/9/9/9/4k4 b RB 1").unwrap(), &best);
    e.send("setoption name ImpasseRule value csa27");
    // Mate in one: played at once with a mate score.
    e.send("position sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1");
    let t = Instant::now();
    e.send("go btime 0 wtime 0 byoyomi 5000");
    let (best, info) = e.bestmove(SHORT);
    assert_eq!(best, "bestmove G*5b");
    assert!(t.elapsed() < Duration::from_millis(1000) + slack, "{:?} ({slack:?} slack)", t.elapsed());
    assert!(info.iter().any(|l| l.contains("score mate 1 ") && l.ends_with("pv G*5b")), "{info:?}");
    // Mate in three found by the quick mate search.
    let mate3 = "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157";
    e.send(&format!("position sfen {mate3}"));
    e.send("go btime 0 wtime 0 byoyomi 3000");
    let (best, info) = e.bestmove(SHORT);
    assert!(info.iter().any(|l| l.contains("score mate 3 ")), "{info:?}");
    assert_legal(&Position::from_sfen(mate3).unwrap(), &best);
}

#[test]
fn go_mate_answers_checkmate_lines() {
    let mut e = Harness::new();
    let slack = e.scheduling_slack();
    let mate3 = "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157";
    e.send(&format!("position sfen {mate3}"));
    e.send("go mate 5000");
    let line = e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap();
    let moves: Vec<Move> = line.split_whitespace().skip(1).map(|t| Move::from_usi(t).expect(t)).collect();
    assert_eq!(moves.len(), 3, "{line}");
    let mut pos = Position::from_sfen(mate3).unwrap();
    for m in moves {
        assert!(pos.is_legal(m));
        pos.do_move(m);
    }
    assert!(pos.legal_moves().is_empty());
    // No check at all in the start position: nomate.
    e.send("position startpos");
    e.send("go mate 1000");
    assert_eq!(e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap(), "checkmate nomate");
    // A long mate with many pieces in hand (df-pn finds one of 9 plies; the exact search of
    // earlier versions gave up): a line that replays to mate.
    let long = "4k4/9/9/9/9/9/9/9/4K4 b RBGSNL 1";
    e.send(&format!("position sfen {long}"));
    e.send("go mate 5000");
    let line = e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap();
    let moves: Vec<Move> = line.split_whitespace().skip(1).map(|t| Move::from_usi(t).expect(t)).collect();
    assert!(moves.len() >= 5, "{line}");
    let mut pos = Position::from_sfen(long).unwrap();
    for m in moves {
        assert!(pos.is_legal(m), "{line}");
        pos.do_move(m);
    }
    assert!(pos.legal_moves().is_empty(), "{line}");
    // A lone rook in hand checks forever and never mates: no answer within the time but timeout
    // (or a proof).
    e.send("position sfen 4k4/9/9/9/9/9/9/9/4K4 b R 1");
    let t = Instant::now();
    e.send("go mate 500");
    let line = e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap();
    assert!(line == "checkmate timeout" || line == "checkmate nomate", "{line}");
    assert!(t.elapsed() < Duration::from_millis(900) + slack, "{:?} ({slack:?} slack)", t.elapsed());
    // go mate infinite: stop ends the search with a timeout...
    e.send("go mate infinite");
    std::thread::sleep(Duration::from_millis(300));
    e.send("stop");
    let line = e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap();
    assert!(line == "checkmate timeout" || line == "checkmate nomate", "{line}");
    // ...and a mate found answers at once, without waiting for stop (GUIs wait for `checkmate`).
    e.send(&format!("position sfen {mate3}"));
    e.send("go mate infinite");
    let line = e.until(SHORT, |l| l.starts_with("checkmate")).pop().unwrap();
    assert_eq!(line.split_whitespace().count(), 4, "{line}");
}

/// Black always loses (from either side's point of view): a hopeless position for Black.
struct BlackLoses;

impl Evaluator for BlackLoses {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let n = p.legal_moves().len().max(1);
                let wdl = if p.side_to_move() == Color::Black { [0.0, 0.0, 1.0] } else { [1.0, 0.0, 0.0] };
                Evaluation { priors: vec![1.0 / n as f32; n], wdl }
            })
            .collect())
    }
}

#[test]
fn resigns_below_the_threshold_and_uses_the_loader() {
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(move |key| {
        counter.fetch_add(1, Ordering::SeqCst);
        assert_eq!(key.model.as_deref(), Some("fake model"));
        Ok(LoadedNet {
            evaluator: Arc::new(BlackLoses),
            description: "black loses".into(),
            cuda: false,
            cpu_threads: None,
        })
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value fake model");
    e.ready();
    e.send("position startpos");
    e.send("go nodes 50");
    let (best, info) = e.bestmove(SHORT);
    assert_eq!(best, "bestmove resign");
    // Said with the answer (not when the search ends: the root's df-pn may still prove a mate).
    assert!(info.last().is_some_and(|l| l.starts_with("info string resigning: win rate")), "{info:?}");
    e.send("setoption name ResignThreshold value 0");
    e.send("go nodes 50");
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&Position::startpos(), &best);
    let cp: i32 = info_field(info.last().unwrap(), "cp").unwrap().parse().unwrap();
    assert!(cp < -5000, "{cp}");
    // White is winning: no resignation.
    e.send("setoption name ResignThreshold value 5");
    e.send("position startpos moves 7g7f");
    e.send("go nodes 50");
    let (best, info) = e.bestmove(SHORT);
    assert_legal(&parse_position("startpos moves 7g7f").unwrap(), &best);
    let cp: i32 = info_field(info.last().unwrap(), "cp").unwrap().parse().unwrap();
    assert!(cp > 5000, "{cp}");
    // Loaded once: the options did not change.
    e.ready();
    assert_eq!(loads.load(Ordering::SeqCst), 1);
}

#[test]
fn a_failed_load_is_tried_again_at_the_next_isready() {
    // The first load fails (a model still being copied, a GPU still busy); the second works.
    let loads = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&loads);
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(move |_key| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            Err(koma_engine::LoadError::WarmUp(EvalError::failed("CUDA out of memory")))
        } else {
            Ok(LoadedNet::uniform("second try"))
        }
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value flaky");
    e.send("isready");
    let lines = e.until(SHORT, |l| l == "readyok");
    assert!(lines.iter().any(|l| l.contains("error") && l.contains("CUDA out of memory")), "{lines:?}");
    e.send("position startpos");
    e.send("go nodes 20");
    assert_eq!(e.bestmove(SHORT).0, "bestmove resign");
    // A go does not reload (it would stall every move); the next isready does.
    assert_eq!(loads.load(Ordering::SeqCst), 1);
    e.ready();
    assert_eq!(loads.load(Ordering::SeqCst), 2);
    e.send("go nodes 20");
    assert_legal(&Position::startpos(), &e.bestmove(SHORT).0);
}

#[test]
fn slow_loads_keep_the_loop_responsive() {
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(|_key| {
        std::thread::sleep(Duration::from_millis(1500));
        Ok(LoadedNet::uniform("slow"))
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value slow");
    e.send("isready");
    // The loop still answers while loading; readyok comes when the load is done.
    e.send("usi");
    let lines = e.until(SHORT, |l| l == "usiok" || l == "readyok");
    assert_eq!(lines.last().unwrap(), "usiok", "{lines:?}");
    let t = Instant::now();
    e.until(SHORT, |l| l == "readyok");
    assert!(t.elapsed() > Duration::from_millis(500));
    let slack = e.scheduling_slack();

    // quit during a load ends the engine at once.
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(|_key| {
        std::thread::sleep(Duration::from_secs(5));
        Ok(LoadedNet::uniform("slower"))
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value slower");
    e.send("isready");
    std::thread::sleep(Duration::from_millis(100));
    e.send("quit");
    assert!(e.wait_exit(Duration::from_secs(2)));

    // go without waiting for readyok: an answer in time, and no move that no network chose.
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(|_key| {
        std::thread::sleep(Duration::from_secs(3));
        Ok(LoadedNet::uniform("slowest"))
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value slowest");
    let t = Instant::now();
    e.send("go byoyomi 800");
    let (best, lines) = e.bestmove(SHORT);
    assert!(t.elapsed() < Duration::from_millis(800) + slack, "{:?} ({slack:?} slack)", t.elapsed());
    assert!(lines.iter().any(|l| l.contains("not ready in time")), "{lines:?}");
    assert_eq!(best, "bestmove resign");
}

#[test]
fn plays_with_a_real_network() {
    let dir = tempfile::tempdir().unwrap();
    let model = tiny_model(dir.path());
    let options = Options { model: Some(model), device: "cpu".into(), threads: 1, ..Options::default() };
    let mut e = Harness::with_options(options);
    let lines = e.ready();
    assert!(lines.iter().any(|l| l.starts_with("info string loaded")), "{lines:?}");
    let mut pos = Position::startpos();
    for _ in 0..6 {
        e.send(&format!("position {}", position_args(&pos)));
        e.send("go btime 0 wtime 0 byoyomi 300");
        let (best, _) = e.bestmove(SHORT);
        let m = assert_legal(&pos, &best);
        pos.do_move(m);
    }
    // Back-to-back go commands never find the previous search still running.
    assert!(!e.log.iter().any(|l| l.contains("abandoned")), "{:?}", e.log);
}

/// A network that takes its time, so that several search threads have batches in flight at once.
struct Slow;

impl Evaluator for Slow {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        std::thread::sleep(Duration::from_millis(5));
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

/// A network whose `at`-th call panics (a bug in an evaluator, a libtorch abort turned panic).
struct PanicsAt {
    calls: AtomicUsize,
    at: usize,
}

impl Evaluator for PanicsAt {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) + 1 == self.at {
            panic!("evaluator bug");
        }
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

fn engine_with(evaluator: Arc<dyn Evaluator>, threads: usize) -> Harness {
    let mut config = EngineConfig::new(Options::default());
    config.loader = Arc::new(move |_key| {
        Ok(LoadedNet { evaluator: Arc::clone(&evaluator), description: "test".into(), cuda: false, cpu_threads: None })
    });
    let mut e = Harness::with_config(config);
    e.send("setoption name Model value test");
    e.send(&format!("setoption name SearchThreads value {threads}"));
    e.send("setoption name BatchSize value 4");
    e.send("setoption name MateSearchPlies value 0");
    e.ready();
    e
}

#[test]
fn node_limits_are_exact_with_several_search_threads() {
    for threads in [1, 4] {
        let mut e = engine_with(Arc::new(Slow), threads);
        // Positions of their own, so that no tree is reused.
        for (moves, limit) in [("7g7f", 50u64), ("2g2f", 37), ("5g5f", 1)] {
            e.send(&format!("position startpos moves {moves}"));
            e.send(&format!("go nodes {limit}"));
            let (best, info) = e.bestmove(SHORT);
            assert_legal(&parse_position(&format!("startpos moves {moves}")).unwrap(), &best);
            let nodes = final_nodes(&info);
            assert_eq!(nodes, limit, "{threads} threads, go nodes {limit}");
        }
        // `go nodes 0` still asks the network once (the root), and plays a legal move.
        e.send("position startpos moves 1g1f");
        e.send("go nodes 0");
        let (best, info) = e.bestmove(SHORT);
        assert_legal(&parse_position("startpos moves 1g1f").unwrap(), &best);
        let nodes = final_nodes(&info);
        assert_eq!(nodes, 1, "{threads} threads, go nodes 0");
    }
}

#[test]
fn a_panicking_network_ends_the_search_with_an_answer_and_the_engine_goes_on() {
    for threads in [1, 4] {
        // Early (the root's batch, on the deciding thread) and late (any thread's batch).
        for at in [1, 7] {
            let mut e = engine_with(Arc::new(PanicsAt { calls: AtomicUsize::new(0), at }), threads);
            e.send("position startpos");
            e.send("go nodes 400");
            let (best, info) = e.bestmove(SHORT);
            // Whichever thread made the call, the search records the panic as its failure and
            // answers from the visits made so far (none: a resignation).
            assert!(info.iter().any(|l| l.contains("error: a search thread panicked")), "{info:?}");
            if at == 1 {
                assert_eq!(best, "bestmove resign", "{threads} threads: no visit was made");
            } else {
                assert_legal(&Position::startpos(), &best);
            }
            // The next search works (from a fresh tree) and keeps its limit.
            e.send("position startpos moves 7g7f");
            e.send("go nodes 30");
            let (best, info) = e.bestmove(SHORT);
            assert_legal(&parse_position("startpos moves 7g7f").unwrap(), &best);
            let nodes = final_nodes(&info);
            assert_eq!(nodes, 30, "{threads} threads, panic at call {at}");
        }
    }
}

/// Every test of this file again with four search threads sharing the tree (the test binary
/// re-runs itself with `KOMA_TEST_SEARCH_THREADS=4`): stop, ponder, ponderhit, quit, a second
/// `go`, a failing network and the limits must behave the same as with one.
#[test]
fn every_protocol_test_with_four_search_threads() {
    if std::env::var_os("KOMA_TEST_SEARCH_THREADS").is_some() {
        return;
    }
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .env("KOMA_TEST_SEARCH_THREADS", "4")
        .args(["--test-threads", "2"])
        .output()
        .expect("running the protocol tests again");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "with four search threads:\n{text}");
    let passed: usize = text
        .lines()
        .filter_map(|l| l.strip_prefix("test result: ok. "))
        .filter_map(|l| l.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert!(passed >= 15, "with four search threads, only {passed} tests ran:\n{text}");
}

/// A network on its own inference thread whose batches after the first `free` wait for `release`
/// (a forward pass slowed to a crawl by a CPU shared with other engines).
struct HeldAfter {
    calls: AtomicUsize,
    free: usize,
    release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl Evaluator for HeldAfter {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        if self.calls.fetch_add(1, Ordering::SeqCst) >= self.free {
            let _ = self.release.lock().unwrap().recv();
        }
        koma_mcts::UniformEvaluator.evaluate(positions)
    }
}

#[test]
fn a_batch_slower_than_the_time_left_is_abandoned_at_the_hard_limit() {
    for (threads, free) in [(1, 3), (4, 3), (1, 0)] {
        let (release, held) = std::sync::mpsc::channel();
        let network = HeldAfter { calls: AtomicUsize::new(0), free, release: std::sync::Mutex::new(held) };
        let server = koma_mcts::InferenceServer::spawn(koma_mcts::EvaluatorSlot::new(Arc::new(network), "held"), 64);
        let mut e = engine_with(Arc::new(server.client()), threads);
        e.send("position startpos");
        e.send("go byoyomi 400");
        // Without giving up, no answer would come before the batch is released.
        let (best, info) = e.bestmove(SHORT);
        assert_legal(&Position::startpos(), &best);
        assert!(
            info.iter().any(|l| l.contains("hard time limit came during a network batch")),
            "{threads} threads: {info:?}"
        );
        // Without even the root's evaluation, the move is said to be unsearched.
        let unsearched = info.iter().any(|l| l.contains("a legal move without search"));
        assert_eq!(unsearched, free == 0, "{threads} threads, {free} batches answered: {info:?}");
        // Released, the network answers again, and the next search starts a fresh tree.
        for _ in 0..1000 {
            release.send(()).unwrap();
        }
        e.send("position startpos moves 7g7f");
        e.send("go nodes 20");
        let (best, info) = e.bestmove(SHORT);
        assert_legal(&parse_position("startpos moves 7g7f").unwrap(), &best);
        assert_eq!(final_nodes(&info), 20, "{threads} threads");
        e.send("quit");
        assert!(e.wait_exit(SHORT));
        drop(release);
    }
}
