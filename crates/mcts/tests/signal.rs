//! The training signal a self-play search produces: Gumbel draws that vary with the seed, the
//! completed-Q policy of the current root after tree reuse, the improved policy's value as the
//! value target, Gumbel visits kept across collisions, forced playouts and their pruning, and the
//! mate-in-three shortcut. Expected values are computed here from the papers' formulas.

use koma_mcts::{EvalError, Evaluation, Evaluator, LeafId, RootChild, RootSelection, Search, SearchConfig, Selection};
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, Move, Position};

/// Uniform priors and a value drawn from the position's hash, in [-0.8, 0.8], with a draw
/// probability of 0.1: every position gets its own deterministic value.
struct HashValue;

fn hash_value(p: &Position) -> f32 {
    ((p.hash() % 1601) as f32 / 1000.0) - 0.8
}

impl Evaluator for HashValue {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let v = hash_value(p);
                let d = 0.1;
                Evaluation { priors: Vec::new(), wdl: [(1.0 - d + v) / 2.0, d, (1.0 - d - v) / 2.0] }
            })
            .collect())
    }
}

fn gumbel(root_noise: bool, considered: usize) -> SearchConfig {
    SearchConfig {
        root_noise,
        mate_plies: 0,
        root: RootSelection::Gumbel { considered_actions: considered, c_visit: 50.0, c_scale: 1.0 },
        ..SearchConfig::default()
    }
}

/// The paper's improved policy softmax(logits + σ(completed q̂)) and its value, written out
/// independently of the crate (q̂ in [0, 1], σ = (50 + max N) · q̂).
fn improved(children: &[RootChild], net_value: f32) -> (Vec<f32>, f32) {
    let unit = |q: f32| (q + 1.0) / 2.0;
    let n: f32 = children.iter().map(|c| c.visits as f32).sum();
    let max_n = children.iter().map(|c| c.visits).max().unwrap() as f32;
    let visited: Vec<&RootChild> = children.iter().filter(|c| c.visits > 0).collect();
    let p_visited: f32 = visited.iter().map(|c| c.prior).sum();
    let pq: f32 = visited.iter().map(|c| c.prior * unit(c.q.unwrap())).sum();
    let v_mix = (unit(net_value) + n / p_visited * pq) / (1.0 + n);
    let completed: Vec<f32> = children.iter().map(|c| if c.visits > 0 { unit(c.q.unwrap()) } else { v_mix }).collect();
    let logits: Vec<f32> = children.iter().zip(&completed).map(|(c, q)| c.prior.ln() + (50.0 + max_n) * q).collect();
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
    let policy: Vec<f32> = logits.iter().map(|l| (l - max).exp() / sum).collect();
    let value = policy.iter().zip(&completed).map(|(p, q)| p * q).sum::<f32>() * 2.0 - 1.0;
    (policy, value)
}

#[test]
fn gumbel_draws_vary_with_the_seed_and_are_off_for_evaluation() {
    let pos = Position::startpos();
    let search = |config: SearchConfig, seed: u64| {
        let mut s = Search::new(config, GameRules::default(), seed);
        s.run(&mut pos.clone(), &HashValue, 17, 4).unwrap();
        (s.select_move(1.0).unwrap(), s.policy_target())
    };
    let chosen: std::collections::HashSet<Move> = (0..12).map(|seed| search(gumbel(true, 16), seed).0).collect();
    assert!(chosen.len() >= 4, "self-play Gumbel roots chose only {chosen:?} over 12 seeds");
    // Without root noise (matches, the engine) the search is the same for every seed.
    let (a, b) = (search(gumbel(false, 16), 1), search(gumbel(false, 16), 2));
    assert_eq!(a, b);
}

#[test]
fn cheap_searches_keep_the_gumbel_draws_but_drop_dirichlet_noise() {
    let pos = Position::startpos();
    let mut chosen = std::collections::HashSet::new();
    for seed in 0..12 {
        let mut s = Search::new(gumbel(true, 16), GameRules::default(), seed);
        s.set_cheap(true);
        s.run(&mut pos.clone(), &HashValue, 5, 4).unwrap();
        chosen.insert(s.select_move(1.0).unwrap());
    }
    assert!(chosen.len() >= 3, "cheap Gumbel searches chose only {chosen:?}");
    // A cheap PUCT search has no noise: the root priors are the network's.
    let config = SearchConfig { mate_plies: 0, ..SearchConfig::default() };
    let mut s = Search::new(config.clone(), GameRules::default(), 3);
    s.set_cheap(true);
    s.run(&mut pos.clone(), &HashValue, 5, 1).unwrap();
    let n = s.root_children().len() as f32;
    assert!(s.root_children().iter().all(|c| (c.prior - 1.0 / n).abs() < 1e-6));
    let mut s = Search::new(config, GameRules::default(), 3);
    s.run(&mut pos.clone(), &HashValue, 5, 1).unwrap();
    assert!(s.root_children().iter().any(|c| (c.prior - 1.0 / n).abs() > 1e-3), "a full search mixes in noise");
}

#[test]
fn completed_q_uses_the_network_value_of_the_current_root_after_tree_reuse() {
    let mut pos = Position::startpos();
    let mut s = Search::new(gumbel(false, 4), GameRules::default(), 5);
    s.run(&mut pos, &HashValue, 200, 4).unwrap();
    let first = s.select_move(0.0).unwrap();
    let reply = s.children_at(&[first]).unwrap().into_iter().max_by_key(|c| c.visits).unwrap().mv;
    pos.do_move(first);
    pos.do_move(reply);
    // Reuse the subtree and add a few visits: the root is now a node evaluated as a leaf earlier.
    s.run(&mut pos, &HashValue, 8, 1).unwrap();
    let children = s.root_children();
    assert!(children.iter().any(|c| c.visits == 0), "some moves must be unvisited for the test to bite");
    let net_value = hash_value(&pos);
    let (policy, value) = improved(&children, net_value);
    let target = s.policy_target();
    for ((mv, p), (c, expected)) in target.iter().zip(children.iter().zip(&policy)) {
        assert_eq!(*mv, c.mv);
        assert!((p - expected).abs() <= 1e-6 + 1e-3 * expected, "{mv}: target {p}, expected {expected}");
    }
    assert!((s.root_value() - value).abs() < 1e-4, "root value {} expected {value}", s.root_value());
    // The old root's value would give another target (so the assertions above can fail).
    let old = hash_value(&Position::startpos());
    assert!((old - net_value).abs() > 0.05);
    let (stale, _) = improved(&children, old);
    assert!(stale.iter().zip(&policy).any(|(a, b)| (a / b - 1.0).abs() > 0.02), "{stale:?} vs {policy:?}");
}

/// From the start position only 7g7f is good: a position with Black's pawn on 7f is worth 0.9 to
/// Black, every other one is even.
struct OneGoodMove;

impl Evaluator for OneGoodMove {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let pawn_on_7f = |p: &Position| {
            p.piece_at(koma_shogi::Square::from_usi("7f").unwrap())
                .is_some_and(|pc| pc.color() == Color::Black && pc.piece_type() == koma_shogi::PieceType::Pawn)
        };
        Ok(positions
            .iter()
            .map(|p| {
                let black = if pawn_on_7f(p) { 0.9 } else { 0.0 };
                let v = if p.side_to_move() == Color::Black { black } else { -black };
                let d = 0.05;
                Evaluation { priors: Vec::new(), wdl: [(1.0 - d + v) / 2.0, d, (1.0 - d - v) / 2.0] }
            })
            .collect())
    }
}

#[test]
fn the_gumbel_value_target_is_the_improved_policys_value_not_the_mean_of_halving_visits() {
    let mut pos = Position::startpos();
    // All 30 moves considered (uniform priors and no draws would otherwise pick the first 16).
    let mut s = Search::new(gumbel(false, 32), GameRules::default(), 1);
    s.run(&mut pos, &OneGoodMove, 64, 4).unwrap();
    let children = s.root_children();
    let good = children.iter().find(|c| c.mv == Move::from_usi("7g7f").unwrap()).unwrap();
    assert!(good.visits > 0 && good.q.unwrap() > 0.85, "{good:?}");
    let visits: u32 = children.iter().map(|c| c.visits).sum();
    let mean = children.iter().filter_map(|c| c.q.map(|q| q * c.visits as f32)).sum::<f32>() / visits as f32;
    let (_, value) = improved(&children, 0.0);
    assert!((s.root_value() - value).abs() < 1e-4, "root value {} expected {value}", s.root_value());
    assert!(s.root_value() > 0.8, "the improved policy plays the winning move: {}", s.root_value());
    assert!(mean < 0.6, "the mean over halving visits is pessimistic ({mean}), so the test bites");
    let [w, d, l] = s.root_wdl();
    assert!((w - l - s.root_value()).abs() < 1e-4 && (w + d + l - 1.0).abs() < 1e-4, "{:?}", s.root_wdl());
}

#[test]
fn a_gumbel_visit_that_collides_is_made_later() {
    // Two considered moves, three visits: a, b, a. The second visit to a meets a's leaf still
    // pending and must wait rather than be lost.
    let mut pos = Position::startpos();
    let mut s = Search::new(gumbel(false, 2), GameRules::default(), 1);
    s.start(&pos, 4);
    let even = Evaluation { priors: Vec::new(), wdl: [0.45, 0.1, 0.45] };
    let Selection::Leaf(root) = s.select_leaf(&mut pos, |_| {}) else { panic!("root first") };
    s.complete(root, &even);
    let mut leaves: Vec<LeafId> = Vec::new();
    let mut collided = false;
    for _ in 0..3 {
        match s.select_leaf(&mut pos, |_| {}) {
            Selection::Leaf(id) => leaves.push(id),
            Selection::Collision => collided = true,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(collided && leaves.len() == 2, "{leaves:?} collided {collided}");
    for id in leaves.drain(..) {
        s.complete(id, &even);
    }
    loop {
        match s.select_leaf(&mut pos, |_| {}) {
            Selection::Leaf(id) => s.complete(id, &even),
            Selection::Resolved => {}
            Selection::Waiting => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(s.root_children().iter().map(|c| c.visits).sum::<u32>(), 3);
}

#[test]
fn forced_playouts_are_made_and_pruned_from_the_policy_target() {
    let pos = Position::startpos();
    let config = SearchConfig { mate_plies: 0, forced_playouts_k: 2.0, ..SearchConfig::default() };
    let mut forced_runs = 0;
    for seed in 0..6 {
        let mut s = Search::new(config.clone(), GameRules::default(), seed);
        s.run(&mut pos.clone(), &HashValue, 400, 1).unwrap();
        let children = s.root_children();
        let total: u32 = children.iter().map(|c| c.visits).sum();
        // Every visited move with a noised prior P has about sqrt(2·P·N) visits or more.
        for c in children.iter().filter(|c| c.visits > 0) {
            let floor = (2.0 * c.prior * total as f32).sqrt().floor() - 2.0;
            assert!(c.visits as f32 >= floor.min(total as f32), "{c:?} with {total} visits");
        }
        let target = s.policy_target();
        let best = children.iter().max_by_key(|c| c.visits).unwrap();
        let share = |mv: Move| target.iter().find(|(m, _)| *m == mv).unwrap().1;
        // The best move keeps its visits; the target puts more weight on it than raw shares do.
        assert!(share(best.mv) >= best.visits as f32 / total as f32 - 1e-6);
        let pruned = children.iter().filter(|c| c.visits > 0 && share(c.mv) == 0.0).count();
        forced_runs += (pruned > 0) as u32;
        assert!((target.iter().map(|(_, p)| p).sum::<f32>() - 1.0).abs() < 1e-4);
    }
    assert!(forced_runs > 0, "pruning never removed a forced move");
    // Cheap searches and evaluation force nothing and prune nothing: the target is visit shares.
    let mut s = Search::new(config, GameRules::default(), 1);
    s.set_cheap(true);
    s.run(&mut pos.clone(), &HashValue, 100, 1).unwrap();
    let children = s.root_children();
    let total: u32 = children.iter().map(|c| c.visits).sum();
    for ((_, p), c) in s.policy_target().iter().zip(&children) {
        assert!((p - c.visits as f32 / total as f32).abs() < 1e-6);
    }
}

#[test]
fn a_mate_in_three_scores_as_a_win_and_is_played_at_the_root() {
    // No mate in one here, a mate in three (cshogi's mate_move(3) agrees).
    let sfen = "2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157";
    let mut pos = Position::from_sfen(sfen).unwrap();
    assert_eq!(pos.mate_in_one(), None);
    let mate = pos.mate_in_three(100_000).expect("a mate in three");
    // The line is forced: after the check every evasion allows a mate in one.
    let mut after = pos.clone();
    after.do_move(mate);
    assert!(after.in_check());
    for e in after.legal_moves().iter().copied() {
        let mut p = after.clone();
        p.do_move(e);
        assert!(p.mate_in_one().is_some(), "{e} escapes");
    }
    let config = SearchConfig { mate_plies: 3, ..SearchConfig::default() };
    let mut s = Search::new(config.clone(), GameRules::default(), 1);
    s.run(&mut pos, &HashValue, 1, 1).unwrap();
    assert_eq!(s.root_mate(), Some(mate));
    assert_eq!(s.select_move(1.0), Some(mate));
    assert_eq!(s.policy_target(), vec![(mate, 1.0)]);
    assert_eq!(s.root_wdl(), [1.0, 0.0, 0.0]);
    // With a mate in one only, the search does not see it.
    let mut s = Search::new(SearchConfig { mate_plies: 1, ..config }, GameRules::default(), 1);
    s.run(&mut pos, &HashValue, 1, 1).unwrap();
    assert_eq!(s.root_mate(), None);
    // The start position has no mate in three, and a tiny budget gives up rather than guess.
    assert_eq!(Position::startpos().mate_in_three(100_000), None);
    assert_eq!(pos.mate_in_three(0), None);
}

/// The first legal move has prior 0.9, the others share 0.1; every value is even.
struct PeakedPriors;

impl Evaluator for PeakedPriors {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let n = p.legal_moves().len();
                let priors = (0..n).map(|i| if i == 0 { 0.9 } else { 0.1 / (n - 1) as f32 }).collect();
                Evaluation { priors, wdl: [0.45, 0.1, 0.45] }
            })
            .collect())
    }
}

#[test]
fn forced_playouts_leave_unvisited_moves_alone_at_small_budgets() {
    // Over 100 legal moves (drops) and 24 simulations: forcing every move with a prior would
    // spread the budget one visit each. Only moves PUCT already visited are forced.
    let pos = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K4 b 2G2S 1").unwrap();
    assert!(pos.legal_moves().len() > 100);
    let config = SearchConfig { mate_plies: 0, forced_playouts_k: 2.0, ..SearchConfig::default() };
    for seed in 0..8 {
        let mut s = Search::new(config.clone(), GameRules::default(), seed);
        s.run(&mut pos.clone(), &PeakedPriors, 24, 1).unwrap();
        let children = s.root_children();
        let visited = children.iter().filter(|c| c.visits > 0).count();
        let best = children.iter().max_by_key(|c| c.visits).unwrap();
        assert!(visited <= 12, "seed {seed}: {visited} moves visited");
        assert!(best.visits >= 8, "seed {seed}: the favourite has only {} visits", best.visits);
        // The move played comes from the pruned visits, never a pruned one.
        let target = s.policy_target();
        let played = s.select_move(1.0).unwrap();
        assert!(target.iter().any(|&(m, p)| m == played && p > 0.0), "seed {seed}: played a pruned move {played}");
    }
}

/// The improved policy's value is nearly a max over values backed by a visit or two: with values
/// that are noise around 0 for every position, it promises the side to move far more than 0 (a
/// winner's curse), while the visits' mean, v_mix and the network's own value stay near 0. This
/// is why self-play's value target and resignation read the visits' mean (`[selfplay]
/// root_value`, docs/mcts.md). v_mix is the paper's formula, written out independently.
#[test]
fn the_improved_value_is_biased_and_the_visits_mean_is_not() {
    use koma_mcts::RootValue;
    let mut sums = [0.0f64; 4];
    let mut count = 0;
    let mut rng_state = 12345u64;
    for game in 0..60u64 {
        let mut pos = Position::startpos();
        for ply in 0..40 {
            rng_state = rng_state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let moves = pos.legal_moves().to_vec();
            if moves.is_empty() {
                break;
            }
            if ply % 10 == 9 {
                let mut s = Search::new(gumbel(true, 16), GameRules::default(), game * 100 + ply);
                s.run(&mut pos.clone(), &HashValue, 24, 8).unwrap();
                for (k, kind) in RootValue::ALL.iter().enumerate() {
                    sums[k] += s.root_value_as(*kind) as f64;
                }
                let net = hash_value(&pos);
                assert!((s.root_value_as(RootValue::Network) - net).abs() < 1e-6);
                let (_, improved_value) = improved(&s.root_children(), net);
                assert!((s.root_value_as(RootValue::Improved) - improved_value).abs() < 1e-4);
                // v_mix in [-1, 1]: (v̂ + N / Σ_visited π · Σ_visited π·q) / (1 + N).
                let children = s.root_children();
                let n: f32 = children.iter().map(|c| c.visits as f32).sum();
                let visited = children.iter().filter(|c| c.visits > 0);
                let p: f32 = visited.clone().map(|c| c.prior).sum();
                let pq: f32 = visited.map(|c| c.prior * c.q.unwrap()).sum();
                let v_mix = (net + n / p * pq) / (1.0 + n);
                assert!((s.root_value_as(RootValue::Mixed) - v_mix).abs() < 1e-4);
                count += 1;
            }
            pos.do_move(moves[(rng_state >> 33) as usize % moves.len()]);
        }
    }
    let mean = |k: usize| sums[k] / count as f64;
    let (network, visits, mixed, improved) = (mean(0), mean(1), mean(2), mean(3));
    assert!(improved > 0.2, "improved {improved:.3}");
    for (name, m) in [("network", network), ("visits", visits), ("mixed", mixed)] {
        assert!(m.abs() < 0.1, "{name} {m:.3} (improved {improved:.3})");
    }
}
