//! Search behaviour with fake evaluators: mates are found (by search, and at expansion without
//! asking the evaluator), hanging kings avoided, visits go to the better move, evaluation mode has
//! no noise and temperature 0 plays the most visited move (temperature 1 samples by visits), tree
//! reuse keeps statistics one and two plies on, Gumbel visits the scheduled number of root moves,
//! and virtual loss spreads a batch over distinct leaves.

use koma_mcts::{EvalError, Evaluation, Evaluator, RootSelection, Search, SearchConfig, Selection, UniformEvaluator};
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, Move, PieceType, Position, Square};
use rand::{RngExt, SeedableRng};

fn sq(s: &str) -> Square {
    Square::from_usi(s).unwrap()
}

/// Scores positions by a fixed feature seen from Black: +0.3 when Black's pawn stands on 7f,
/// −0.3 when it stands on 2f. Priors are uniform (empty priors mean uniform to the search).
struct PawnPlacement;

impl Evaluator for PawnPlacement {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let black_pawn = |s: &str| {
                    p.piece_at(sq(s)).is_some_and(|pc| pc.color() == Color::Black && pc.piece_type() == PieceType::Pawn)
                };
                let black_view = if black_pawn("7f") {
                    0.3
                } else if black_pawn("2f") {
                    -0.3
                } else {
                    0.0
                };
                let v = if p.side_to_move() == Color::Black { black_view } else { -black_view };
                Evaluation { priors: Vec::new(), wdl: [(1.0 + v) / 2.0, 0.0, (1.0 - v) / 2.0] }
            })
            .collect())
    }
}

fn quiet(config: SearchConfig) -> SearchConfig {
    SearchConfig { mate_plies: 0, ..config }
}

#[test]
fn finds_a_mate_in_one_by_search() {
    // Black to move mates with G*5b (the gold is protected by the pawn on 5c).
    let mut pos = Position::from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b G 1").unwrap();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 1);
    search.run(&mut pos, &UniformEvaluator, 400, 8).unwrap();
    assert_eq!(search.select_move(0.0), Move::from_usi("G*5b"));
    assert!(search.root_value() > 0.5, "root value {}", search.root_value());
}

#[test]
fn a_mate_in_one_at_the_root_is_played_without_search() {
    // A position with many legal moves: with one simulation and temperature 1 the search alone
    // would almost never pick G*5b.
    let mut pos = Position::from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b 2G2S 1").unwrap();
    let mate = Move::from_usi("G*5b");
    for seed in 0..8 {
        let mut search = Search::new(SearchConfig::default(), GameRules::default(), seed);
        search.run(&mut pos, &UniformEvaluator, 1, 1).unwrap();
        assert_eq!(search.root_mate(), mate);
        assert_eq!(search.select_move(1.0), mate);
        assert_eq!(search.policy_target(), vec![(mate.unwrap(), 1.0)]);
        assert_eq!((search.root_value(), search.root_wdl()), (1.0, [1.0, 0.0, 0.0]));
    }
    // Switched off, it is up to the search (and the target spreads over the visited moves).
    let mut search = Search::new(quiet(SearchConfig::default()), GameRules::default(), 3);
    search.run(&mut pos, &UniformEvaluator, 1, 1).unwrap();
    assert_eq!(search.root_mate(), None);
    assert!(search.policy_target().len() > 1);
}

#[test]
fn avoids_moves_that_allow_a_mate_in_one() {
    // Random positions where some replies allow the opponent a mate in one and some do not.
    let mut rng = koma_base::Rng::seed_from_u64(11);
    let mut tested = 0;
    for game in 0..400 {
        let mut pos = Position::startpos();
        for _ in 0..(40 + game % 60) {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let captures: Vec<Move> =
                moves.iter().copied().filter(|m| m.is_drop() || pos.piece_at(m.to()).is_some()).collect();
            let m = if !captures.is_empty() && rng.random_bool(0.5) {
                captures[rng.random_range(0..captures.len())]
            } else {
                moves[rng.random_range(0..moves.len())]
            };
            pos.do_move(m);
        }
        if pos.legal_moves().is_empty() || pos.mate_in_one().is_some() {
            continue;
        }
        let moves: Vec<Move> = pos.legal_moves().iter().copied().collect();
        let allows_mate = |pos: &mut Position, m: Move| {
            pos.do_move(m);
            let mate = pos.mate_in_one().is_some();
            pos.undo_move();
            mate
        };
        let bad = moves.iter().filter(|&&m| allows_mate(&mut pos, m)).count();
        if bad == 0 || bad == moves.len() {
            continue;
        }
        let mut search = Search::new(SearchConfig::evaluation(), GameRules::default(), 3);
        search.run(&mut pos, &UniformEvaluator, 600, 8).unwrap();
        let chosen = search.select_move(0.0).unwrap();
        assert!(
            !allows_mate(&mut pos, chosen),
            "{chosen} allows mate in {} ({bad}/{} moves do)",
            pos.to_sfen(),
            moves.len()
        );
        tested += 1;
        if tested == 12 {
            break;
        }
    }
    assert!(tested >= 5, "too few test positions found ({tested})");
}

#[test]
fn visits_concentrate_on_the_better_move() {
    let mut pos = Position::startpos();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 5);
    search.run(&mut pos, &PawnPlacement, 1500, 8).unwrap();
    let children = search.root_children();
    let visits = |usi: &str| children.iter().find(|c| c.mv == Move::from_usi(usi).unwrap()).unwrap().visits;
    let total: u32 = children.iter().map(|c| c.visits).sum();
    assert_eq!(search.select_move(0.0), Move::from_usi("7g7f"));
    assert!(visits("7g7f") as f32 > 0.3 * total as f32, "7g7f got {} of {total}", visits("7g7f"));
    assert!(visits("2g2f") < visits("7g7f") / 10, "2g2f got {}", visits("2g2f"));
}

#[test]
fn evaluation_mode_is_deterministic_and_self_play_adds_noise() {
    let run = |config: SearchConfig, seed| {
        let mut pos = Position::startpos();
        let mut search = Search::new(config, GameRules::default(), seed);
        search.run(&mut pos, &UniformEvaluator, 300, 4).unwrap();
        (search.root_children(), search.select_move(0.0))
    };
    let (a, ma) = run(SearchConfig::evaluation(), 1);
    let (b, mb) = run(SearchConfig::evaluation(), 2);
    assert_eq!(a, b);
    assert_eq!(ma, mb);
    // Temperature off: the most visited move (ties by value), not a draw among visited moves.
    let most_visited = a
        .iter()
        .max_by(|x, y| (x.visits, x.q.unwrap_or(-2.0)).partial_cmp(&(y.visits, y.q.unwrap_or(-2.0))).unwrap())
        .unwrap();
    assert_eq!(ma, Some(most_visited.mv));
    assert!(a.iter().all(|c| (c.prior - 1.0 / 30.0).abs() < 1e-6), "evaluation mode changed the priors");
    let (noisy, _) = run(SearchConfig::default(), 1);
    assert!(noisy.iter().any(|c| (c.prior - 1.0 / 30.0).abs() > 1e-3), "self-play mode added no noise");
    let sum: f32 = noisy.iter().map(|c| c.prior).sum();
    assert!((sum - 1.0).abs() < 1e-4);
}

#[test]
fn temperature_zero_plays_the_most_visited_move_and_one_samples_by_visits() {
    let mut pos = Position::startpos();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 13);
    search.run(&mut pos, &PawnPlacement, 400, 8).unwrap();
    let children = search.root_children();
    let total: u32 = children.iter().map(|c| c.visits).sum();
    let best = children.iter().max_by_key(|c| c.visits).unwrap();
    assert!(best.visits < total, "the test needs visits on more than one move");
    for _ in 0..50 {
        assert_eq!(search.select_move(0.0), Some(best.mv));
    }
    let draws = 4000;
    let mut counts = std::collections::HashMap::new();
    for _ in 0..draws {
        *counts.entry(search.select_move(1.0).unwrap()).or_insert(0u32) += 1;
    }
    for c in &children {
        let seen = counts.get(&c.mv).copied().unwrap_or(0) as f64 / draws as f64;
        let share = c.visits as f64 / total as f64;
        assert!((seen - share).abs() < 0.04, "{}: drawn {seen:.3}, visit share {share:.3}", c.mv);
    }
    // Evaluation-mode Gumbel has no Gumbel noise either: the same choice whatever the seed.
    let gumbel = |seed| {
        let mut pos = Position::startpos();
        let mut search = Search::new(quiet(SearchConfig::gumbel()), GameRules::default(), seed);
        search.run(&mut pos, &PawnPlacement, 65, 4).unwrap();
        (search.root_children(), search.select_move(0.0))
    };
    assert_eq!(gumbel(1), gumbel(2));
}

/// Uniform priors and an even value, and a copy of every position it was asked about.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<Position>>);

impl Evaluator for Recording {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        self.0.lock().unwrap().extend(positions.iter().map(|p| (*p).clone()));
        UniformEvaluator.evaluate(positions)
    }
}

#[test]
fn mate_in_one_at_expansion_is_scored_without_the_network() {
    // White to move: after most of its moves Black mates in one (5c5b or 4d5b+).
    let root = Position::from_sfen("4k2r1/3p1p3/4G4/5N3/9/9/8p/9/8K w - 1").unwrap();
    let allows_mate = |m: Move| {
        let mut p = root.clone();
        p.do_move(m);
        p.mate_in_one().is_some()
    };
    let moves: Vec<Move> = root.legal_moves().iter().copied().collect();
    let bad = moves.iter().filter(|&&m| allows_mate(m)).count();
    assert!(bad > 0 && bad < moves.len(), "{bad} of {} moves allow mate", moves.len());
    let evaluated = |mate_in_one: bool| {
        let recording = Recording::default();
        let mate_plies = if mate_in_one { 1 } else { 0 };
        let mut search =
            Search::new(SearchConfig { mate_plies, ..SearchConfig::evaluation() }, GameRules::default(), 1);
        let mut pos = root.clone();
        search.run(&mut pos, &recording, 300, 8).unwrap();
        let positions = recording.0.into_inner().unwrap();
        let with_mate = positions.iter().filter(|p| (*p).clone().mate_in_one().is_some()).count();
        (positions.len(), with_mate, search.select_move(0.0).unwrap())
    };
    let (asked, with_mate, chosen) = evaluated(true);
    assert!(asked > 0);
    assert_eq!(with_mate, 0, "the network was asked about a position with a mate in one");
    assert!(!allows_mate(chosen), "{chosen} allows mate in one");
    // Without the check such positions do reach the evaluator (so the assertion above can fail).
    let (asked_without, with_mate_without, _) = evaluated(false);
    assert!(with_mate_without > 0, "no position with a mate in one was evaluated ({asked_without} asked)");
}

#[test]
fn tree_reuse_keeps_the_subtree_statistics() {
    let mut pos = Position::startpos();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 9);
    search.run(&mut pos, &PawnPlacement, 2000, 8).unwrap();
    let first = search.select_move(0.0).unwrap();
    let reply = search.children_at(&[first]).unwrap().into_iter().max_by_key(|c| c.visits).unwrap().mv;
    let expected = search.children_at(&[first, reply]).unwrap();
    let expected_visits = search.children_at(&[first]).unwrap().into_iter().find(|c| c.mv == reply).unwrap().visits;
    assert!(expected.iter().map(|c| c.visits).sum::<u32>() > 10);
    pos.do_move(first);
    pos.do_move(reply);
    search.start(&pos, 0);
    assert_eq!(search.root_children(), expected);
    assert_eq!(search.root_visits(), expected_visits);
    // One more move: the reply's subtree again (reuse after a single ply).
    let next = search.select_move(0.0).unwrap();
    let expected = search.children_at(&[next]).unwrap();
    let expected_visits = search.root_children().into_iter().find(|c| c.mv == next).unwrap().visits;
    assert!(expected_visits > 1);
    pos.do_move(next);
    search.start(&pos, 0);
    assert_eq!(search.root_children(), expected);
    assert_eq!(search.root_visits(), expected_visits);
    // An unrelated position starts afresh.
    let other = Position::from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b G 1").unwrap();
    search.start(&other, 0);
    assert_eq!(search.root_visits(), 0);
}

#[test]
fn gumbel_visits_the_scheduled_number_of_root_moves() {
    for (simulations, considered, expected) in [(64u32, 16usize, 16usize), (8, 16, 8), (200, 4, 4)] {
        let config = SearchConfig {
            root: RootSelection::Gumbel { considered_actions: considered, c_visit: 50.0, c_scale: 1.0 },
            ..quiet(SearchConfig::gumbel())
        };
        let mut pos = Position::startpos();
        let mut search = Search::new(config, GameRules::default(), 21);
        search.run(&mut pos, &PawnPlacement, simulations + 1, 4).unwrap();
        let children = search.root_children();
        let visited = children.iter().filter(|c| c.visits > 0).count();
        assert_eq!(visited, expected, "{simulations} simulations, {considered} considered");
        assert_eq!(children.iter().map(|c| c.visits).sum::<u32>(), simulations);
        let target = search.policy_target();
        assert!((target.iter().map(|(_, p)| p).sum::<f32>() - 1.0).abs() < 1e-4);
        let chosen = search.select_move(0.0).unwrap();
        assert!(children.iter().any(|c| c.mv == chosen && c.visits > 0));
    }
}

#[test]
fn virtual_loss_spreads_a_batch_over_distinct_leaves() {
    let mut pos = Position::startpos();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 4);
    search.start(&pos, 100);
    let Selection::Leaf(root) = search.select_leaf(&mut pos, |_| {}) else { panic!("root first") };
    search.complete(root, &Evaluation { priors: Vec::new(), wdl: [0.0, 1.0, 0.0] });
    let mut leaves = Vec::new();
    let mut hashes = Vec::new();
    for _ in 0..16 {
        match search.select_leaf(&mut pos, |leaf| hashes.push(leaf.hash())) {
            Selection::Leaf(id) => leaves.push(id),
            other => panic!("expected a leaf, got {other:?}"),
        }
    }
    assert_eq!(pos.to_sfen(), Position::startpos().to_sfen(), "select_leaf must restore the position");
    let mut unique = hashes.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), 16, "leaves of one batch must differ");
    for id in leaves {
        search.complete(id, &Evaluation { priors: Vec::new(), wdl: [0.0, 1.0, 0.0] });
    }
    assert_eq!(search.root_visits(), 17);
}

#[test]
fn terminal_values_come_from_the_rules() {
    // White to move is mated: no legal moves at the root.
    let mut mated = Position::from_sfen("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 2").unwrap();
    let mut search = Search::new(SearchConfig::evaluation(), GameRules::default(), 1);
    search.start(&mated, 10);
    assert_eq!(search.select_leaf(&mut mated, |_| {}), Selection::NoMoves);
    // A repetition is scored as the cycle's outcome: Black's 5i4i repeats a position (a draw, 0)
    // while every other move reaches a position the evaluator calls lost for Black.
    let mut pos =
        koma_shogi::usi::parse_position("sfen 4k4/9/9/9/9/9/9/9/4K4 b G 1 moves 5i4i 5a4a 4i5i 4a5a").unwrap();
    let mut search = Search::new(quiet(SearchConfig::evaluation()), GameRules::default(), 1);
    search.run(&mut pos, &SideToMoveWins, 300, 1).unwrap();
    let children = search.root_children();
    let repeat = children.iter().find(|c| c.mv == Move::from_usi("5i4i").unwrap()).unwrap();
    assert_eq!(repeat.q, Some(0.0));
    assert_eq!(search.select_move(0.0), Move::from_usi("5i4i"));
    assert!(children.iter().filter(|c| c.mv != repeat.mv).all(|c| c.q.is_none_or(|q| q < -0.4)));
}

/// Every position is judged won for the side to move.
struct SideToMoveWins;

impl Evaluator for SideToMoveWins {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions.iter().map(|_| Evaluation { priors: Vec::new(), wdl: [0.75, 0.0, 0.25] }).collect())
    }
}
