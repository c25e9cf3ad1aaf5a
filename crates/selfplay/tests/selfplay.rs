//! Self-play with a zero-cost evaluator: every game ends legally, with the result the rules give,
//! and its recorded moves and samples replay exactly.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use koma_data::{flags, GameSamples};
use koma_mcts::{EvaluatorSlot, UniformEvaluator};
use koma_selfplay::{run, SelfPlayConfig, StartPositions};
use koma_shogi::rules::Repetition;
use koma_shogi::{EndReason, Position, Status};

fn play(
    config: &SelfPlayConfig,
    games: usize,
    starts: StartPositions,
) -> (Vec<GameSamples>, koma_selfplay::SelfPlayStats) {
    let (sender, receiver) = crossbeam::channel::unbounded();
    let slot = EvaluatorSlot::new(Arc::new(UniformEvaluator), "uniform");
    let stats = run(
        config,
        starts,
        slot,
        games,
        sender,
        Arc::new(AtomicBool::new(false)),
        Duration::from_secs(60),
        &mut |_| {},
    )
    .unwrap();
    (receiver.try_iter().collect(), stats)
}

fn check_game(game: &GameSamples, config: &SelfPlayConfig) {
    let rules = config.rules().unwrap();
    let mut pos = Position::from_sfen(&game.start_sfen).unwrap();
    let mut sample_iter = game.samples.iter().peekable();
    for (ply, &mv) in game.moves.iter().enumerate() {
        assert!(pos.is_legal(mv), "illegal move {mv} at ply {ply} from {}", game.start_sfen);
        if let Some(s) = sample_iter.peek() {
            if s.ply as usize == ply {
                assert_eq!(
                    s.position.unpack().unwrap().to_sfen().rsplit_once(' ').unwrap().0,
                    pos.to_sfen().rsplit_once(' ').unwrap().0
                );
                assert_eq!(s.played, Some(mv));
                assert!(s.flags & flags::FULL_SEARCH != 0);
                let total: f32 = s.policy.iter().map(|p| p.1).sum();
                assert!((total - 1.0).abs() < 1e-3, "policy sums to {total}");
                assert!(s.policy.iter().all(|&(m, _)| pos.is_legal(m)));
                let expected = match game.result.winner {
                    None => 0,
                    Some(w) if w == pos.side_to_move() => 1,
                    Some(_) => -1,
                };
                assert_eq!(s.result, expected);
                sample_iter.next();
            }
        }
        // No move may be played after the game was already over.
        assert!(!pos.status(&rules).is_terminal(), "game went on after {:?} at ply {ply}", pos.status(&rules));
        pos.do_move(mv);
    }
    // A resigning player's last search is a sample of the final position, with no move played.
    if let Some(s) = sample_iter.next() {
        assert_eq!(game.result.reason, EndReason::Resignation, "samples beyond the game");
        assert_eq!((s.ply as usize, s.played), (game.moves.len(), None));
        assert_eq!(s.result, -1, "the resigning side lost");
    }
    assert!(sample_iter.next().is_none(), "samples beyond the game");
    assert_eq!(game.length as usize, game.moves.len());
    let status = pos.status(&rules);
    let to_move = pos.side_to_move();
    match game.result.reason {
        EndReason::Checkmate => {
            assert_eq!(status, Status::Checkmate);
            assert_eq!(game.result.winner, Some(!to_move));
        }
        EndReason::Repetition => {
            assert_eq!(pos.repetition(4), Repetition::Draw);
            assert_eq!(game.result.winner, None);
        }
        EndReason::PerpetualCheck => assert!(matches!(status, Status::PerpetualCheckWin | Status::PerpetualCheckLoss)),
        EndReason::MaxMoves => {
            assert_eq!(status, Status::MaxMovesDraw);
            assert_eq!(game.result.winner, None);
        }
        EndReason::Declaration => {
            assert_eq!(status, Status::DeclarationWin);
            assert_eq!(game.result.winner, Some(to_move));
        }
        EndReason::Resignation => assert!(game.result.winner.is_some()),
        other => panic!("unexpected ending {other:?}"),
    }
}

#[test]
fn games_end_legally_with_the_rules_result() {
    let config = SelfPlayConfig {
        workers: 2,
        games_per_worker: 4,
        simulations: 24,
        cheap_simulations: 6,
        full_search_fraction: 0.5,
        max_plies: 160,
        handicap_fraction: 0.3,
        ..SelfPlayConfig::default()
    };
    let (games, stats) = play(&config, 20, StartPositions::new(0.3, 0.0));
    assert_eq!(games.len(), 20);
    assert_eq!(stats.games, 20);
    assert_eq!(stats.black_wins + stats.white_wins + stats.draws, 20);
    assert_eq!(stats.samples, games.iter().map(|g| g.samples.len()).sum::<usize>());
    for g in &games {
        check_game(g, &config);
    }
    assert!(games.iter().any(|g| !g.start_sfen.starts_with("lnsgkgsnl/1r5b1")), "no handicap start in 20 games");
}

#[test]
fn openings_suite_is_used_and_errors_name_the_line() {
    let suite = "# test suite\nstartpos moves 7g7f 3c3d\n\nstartpos moves 2g2f 8c8d\n";
    let starts = StartPositions::new(0.0, 1.0).with_suite(suite).unwrap();
    let config = SelfPlayConfig { simulations: 8, cheap_simulations: 2, max_plies: 40, ..SelfPlayConfig::default() };
    let (games, _) = play(&config, 4, starts);
    for g in &games {
        assert!(g.start_sfen.ends_with(" 3"), "game did not start from the suite: {}", g.start_sfen);
        check_game(g, &config);
    }
    let err = StartPositions::new(0.0, 1.0).with_suite("startpos\nstartpos moves 7g7f 7g7f\n").unwrap_err();
    assert!(err.contains("line 2"), "{err}");
}
