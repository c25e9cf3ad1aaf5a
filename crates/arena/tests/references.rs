//! Reference players and adjudication: every game ends legally with the rules' result, the
//! stronger references beat the weaker ones, and misbehaving players lose.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use koma_arena::game::play_game;
use koma_arena::player::{Action, GreedyPlayer, MaterialEvaluator, MctsPlayer, Player, PlayerError, RandomPlayer};
use koma_mcts::SearchConfig;
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, Move, Position};

fn score(a: &mut dyn Player, b: &mut dyn Player, games: usize, rules: &GameRules) -> f64 {
    let mut points = 0.0;
    for g in 0..games {
        let start = Position::startpos();
        let (black, white): (&mut dyn Player, &mut dyn Player) =
            if g % 2 == 0 { (&mut *a, &mut *b) } else { (&mut *b, &mut *a) };
        let played = play_game(black, white, &start, rules, &AtomicBool::new(false)).unwrap();
        let a_color = if g % 2 == 0 { Color::Black } else { Color::White };
        // Replay: every move legal, and the result is what the final position says.
        let mut pos = start.clone();
        for &m in &played.moves {
            assert!(pos.is_legal(m));
            pos.do_move(m);
        }
        points += match played.result.winner {
            Some(w) if w == a_color => 1.0,
            None => 0.5,
            _ => 0.0,
        };
    }
    points / games as f64
}

#[test]
fn greedy_and_mcts_material_beat_random() {
    let rules = GameRules { max_plies: 256, ..GameRules::default() };
    let s = score(&mut GreedyPlayer::new(1), &mut RandomPlayer::new(2), 20, &rules);
    assert!(s >= 0.8, "greedy scored {s} against random");
    let mut mcts = MctsPlayer::new("mcts-material", Arc::new(MaterialEvaluator), 200, 8, rules, 3);
    let s = score(&mut mcts, &mut RandomPlayer::new(4), 6, &rules);
    assert!(s >= 0.8, "mcts-material scored {s} against random");
}

#[test]
fn mcts_material_takes_a_free_rook() {
    // Black's bishop on 5e can take White's undefended rook on 2b.
    let pos = Position::from_sfen("4k4/7r1/9/9/4B4/9/9/9/4K4 b - 1").unwrap();
    let mut mcts = MctsPlayer::new("mcts-material", Arc::new(MaterialEvaluator), 400, 8, GameRules::default(), 1);
    let action = mcts.act(&pos, &AtomicBool::new(false)).unwrap();
    assert!(matches!(action, Action::Play(m) if m.to_usi().starts_with("5e2b")), "{action:?}");
}

#[test]
fn a_gumbel_root_takes_a_free_rook() {
    // The same position as above, searched by sequential halving over 32 simulations.
    let pos = Position::from_sfen("4k4/7r1/9/9/4B4/9/9/9/4K4 b - 1").unwrap();
    let mut player = MctsPlayer::new("gumbel", Arc::new(MaterialEvaluator), 32, 4, GameRules::default(), 1)
        .with_search(SearchConfig { root_noise: true, ..SearchConfig::gumbel() });
    assert!(!player.search_config().root_noise, "a match player searched with self-play noise");
    let action = player.act(&pos, &AtomicBool::new(false)).unwrap();
    assert!(matches!(action, Action::Play(m) if m.to_usi().starts_with("5e2b")), "{action:?}");
}

struct Scripted(Vec<Result<Action, PlayerError>>);

impl Player for Scripted {
    fn name(&self) -> String {
        "scripted".into()
    }
    fn act(&mut self, _: &Position, _: &AtomicBool) -> Result<Action, PlayerError> {
        if self.0.is_empty() {
            Ok(Action::Resign)
        } else {
            self.0.remove(0)
        }
    }
}

#[test]
fn misbehaving_players_lose() {
    let rules = GameRules::default();
    let start = Position::startpos();
    let cases: Vec<(Result<Action, PlayerError>, EndReason)> = vec![
        (Ok(Action::Play(Move::from_usi("7g7e").unwrap())), EndReason::IllegalMove),
        (Ok(Action::Declare), EndReason::IllegalMove),
        (Err(PlayerError::failure("engine crashed")), EndReason::Forfeit),
        (Err(PlayerError::timeout("no bestmove in time")), EndReason::TimeLoss),
        (Ok(Action::Resign), EndReason::Resignation),
    ];
    for (action, reason) in cases {
        let played = play_game(
            &mut Scripted(vec![action.clone()]),
            &mut RandomPlayer::new(1),
            &start,
            &rules,
            &AtomicBool::new(false),
        )
        .unwrap();
        assert_eq!(played.result.winner, Some(Color::White), "{action:?}");
        assert_eq!(played.result.reason, reason, "{action:?}");
        assert!(played.moves.is_empty());
    }
}

#[test]
fn a_time_budget_searches_for_about_that_long() {
    use koma_arena::player::Budget;
    let pos = Position::from_sfen("4k4/7r1/9/9/4B4/9/9/9/4K4 b - 1").unwrap();
    let mut mcts =
        MctsPlayer::with_budget("timed", Arc::new(MaterialEvaluator), Budget::Millis(150), 8, GameRules::default(), 1);
    let start = std::time::Instant::now();
    let action = mcts.act(&pos, &AtomicBool::new(false)).unwrap();
    let elapsed = start.elapsed().as_millis();
    assert!(elapsed >= 150, "searched only {elapsed} ms");
    assert!(matches!(action, Action::Play(m) if m.to_usi().starts_with("5e2b")), "{action:?}");
}
