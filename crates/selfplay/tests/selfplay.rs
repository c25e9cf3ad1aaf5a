//! Self-play with a zero-cost evaluator: every game ends legally, with the result the rules give,
//! and its recorded moves and samples replay exactly.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use koma_data::{flags, GameSamples};
use koma_mcts::{EvaluatorSlot, UniformEvaluator};
use koma_selfplay::{run, InferenceDevice, SelfPlayConfig, StartPositions};
use koma_shogi::rules::Repetition;
use koma_shogi::{EndReason, OpeningSuite, Position, Status};

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
        &[InferenceDevice::cpu(slot)],
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

/// Counts the positions it evaluates (uniform answers).
#[derive(Default)]
struct Counting(std::sync::atomic::AtomicUsize);

impl koma_mcts::Evaluator for Counting {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<koma_mcts::Evaluation>, koma_mcts::EvalError> {
        self.0.fetch_add(positions.len(), std::sync::atomic::Ordering::Relaxed);
        UniformEvaluator.evaluate(positions)
    }
}

/// Several devices: each slot (one per device) gets its own inference service and its share of
/// the workers, every game is complete, and a device without a worker is refused.
#[test]
fn workers_spread_over_several_devices() {
    use koma_mcts::Evaluator;
    let config = SelfPlayConfig {
        workers: 3,
        games_per_worker: 2,
        simulations: 16,
        cheap_simulations: 4,
        max_plies: 60,
        ..SelfPlayConfig::default()
    };
    let devices: Vec<Arc<Counting>> = (0..2).map(|_| Arc::new(Counting::default())).collect();
    // The first an accelerator: its two workers (0 and 2) get a service each, taking turns on it.
    let slots: Vec<InferenceDevice> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| InferenceDevice {
            slot: EvaluatorSlot::new(d.clone() as Arc<dyn Evaluator>, "m"),
            accelerator: i == 0,
        })
        .collect();
    let (sender, receiver) = crossbeam::channel::unbounded();
    let mut progress_positions = 0;
    let stats = run(
        &config,
        StartPositions::new(0.0, 0.0),
        &slots,
        12,
        sender,
        Arc::new(AtomicBool::new(false)),
        Duration::from_millis(1),
        &mut |p| progress_positions = p.inference.positions,
    )
    .unwrap();
    let games: Vec<GameSamples> = receiver.try_iter().collect();
    assert_eq!((stats.games, games.len()), (12, 12));
    for g in &games {
        check_game(g, &config);
    }
    let counts: Vec<usize> = devices.iter().map(|d| d.0.load(std::sync::atomic::Ordering::Relaxed)).collect();
    assert!(counts.iter().all(|&c| c > 0), "every device evaluated positions: {counts:?}");
    assert!(progress_positions as usize <= counts.iter().sum::<usize>());

    let one_worker = SelfPlayConfig { workers: 1, ..config };
    let (sender, _receiver) = crossbeam::channel::unbounded();
    let err = run(
        &one_worker,
        StartPositions::new(0.0, 0.0),
        &slots,
        1,
        sender,
        Arc::new(AtomicBool::new(false)),
        Duration::from_secs(1),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(err.to_string().contains("2 devices but 1 worker"), "{err}");
}

#[test]
fn games_start_from_the_opening_suite() {
    let suite = "# test suite\nstartpos moves 7g7f 3c3d\n\nstartpos moves 2g2f 8c8d\n";
    let starts = StartPositions::new(0.0, 1.0).with_suite(&OpeningSuite::parse(suite, "test").unwrap());
    let config = SelfPlayConfig { simulations: 8, cheap_simulations: 2, max_plies: 40, ..SelfPlayConfig::default() };
    let (games, _) = play(&config, 4, starts);
    for g in &games {
        assert!(g.start_sfen.ends_with(" 3"), "game did not start from the suite: {}", g.start_sfen);
        check_game(g, &config);
    }
}

/// Two self-play processes of one run must not replay each other's games: without a seed each
/// run draws its own streams; given the same seed, a run is replayed move for move. Each sample
/// carries every root value estimate, the configured one being its value target.
#[test]
fn unseeded_runs_play_different_games_and_a_seed_replays_one() {
    let config = SelfPlayConfig {
        workers: 1,
        games_per_worker: 2,
        simulations: 8,
        cheap_simulations: 2,
        max_plies: 24,
        handicap_fraction: 0.0,
        ..SelfPlayConfig::default()
    };
    assert_eq!(config.seed, None, "the default draws a fresh seed per process");
    // The Gumbel improved value is biased (koma-mcts's signal tests): the target is the visits'.
    assert_eq!(config.root_value, koma_mcts::RootValue::Visits);
    let moves = |config: &SelfPlayConfig| {
        let (games, _) = play(config, 2, StartPositions::new(0.0, 0.0));
        let mut moves: Vec<Vec<koma_shogi::Move>> = games.iter().map(|g| g.moves.clone()).collect();
        moves.sort();
        (moves, games)
    };
    let (first, games) = moves(&config);
    let (second, _) = moves(&config);
    assert_ne!(first, second, "two unseeded runs played the same games");
    let seeded = SelfPlayConfig { seed: Some(42), ..config.clone() };
    assert_eq!(moves(&seeded).0, moves(&seeded).0, "one seed, two different runs");
    assert_ne!(config.seeded().seed, config.seeded().seed);
    assert_eq!(seeded.seeded().seed, Some(42));

    for game in &games {
        assert_eq!(game.root_values.len(), game.samples.len());
        for (sample, values) in game.samples.iter().zip(&game.root_values) {
            assert!(values.iter().all(|v| (-1.0..=1.0).contains(v)), "{values:?}");
            // The value target's search part is the configured estimate.
            let k = koma_mcts::RootValue::ALL.iter().position(|&k| k == config.root_value).unwrap();
            let [w, _, l] = sample.root_wdl;
            assert!((w - l - values[k]).abs() < 1e-5, "{:?} vs {values:?}", sample.root_wdl);
        }
    }
    let names: Vec<&str> = koma_mcts::RootValue::ALL.iter().map(|k| k.name()).collect();
    assert_eq!(names, koma_data::ROOT_VALUE_NAMES);
}
