//! The `alphabeta@D` reference players: a full-width alpha-beta search of material to a fixed
//! depth of `D` plies, captures (and check evasions) extended by a quiescence search. Each depth
//! is a rung of known strength that never changes, so a model's score against the ladder means
//! the same across runs, machines and months, where `greedy` and `mcts-material@32` saturate.
//!
//! The search itself is deterministic (captures first, most valuable victim and least valuable
//! attacker first, then the generator's order); the player's random numbers only break ties
//! between root moves of equal value, which are many in quiet positions, so that games from one
//! opening differ. (The arena seeds each of its workers' players once, so which tie-breaks a game
//! gets depends on the games its worker played before.)

use std::sync::atomic::{AtomicBool, Ordering};

use koma_base::Rng;
use koma_shogi::material::{material, piece_value};
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, MoveList, Position, Status};
use rand::{RngExt, SeedableRng};

use crate::player::{Action, Player, PlayerError};

/// The deepest rung: depth 4 already takes seconds a move in middle games full of drops.
pub const MAX_DEPTH: u8 = 4;

/// A mate found `ply` plies from the root scores `MATE - ply` (nearer mates first); no material
/// balance comes near it.
const MATE: i32 = 1_000_000;

/// Quiescence plies before the static value is taken as it is. Captures alone always end (each
/// takes a piece off the board), but evasions by a drop can put one back.
const QUIESCENCE_PLIES: u32 = 16;

/// How often (in nodes) the search looks at the cancel flag.
const CANCEL_CHECK_NODES: u64 = 4096;

/// A material alpha-beta player of fixed depth.
#[derive(Debug)]
pub struct AlphaBetaPlayer {
    depth: u8,
    rules: GameRules,
    rng: Rng,
}

/// The root's verdict: the best value for the side to move and every move that reaches it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootValue {
    pub value: i32,
    pub best: Vec<Move>,
    /// Positions searched, quiescence included.
    pub nodes: u64,
}

struct Cancelled;

impl AlphaBetaPlayer {
    /// A player searching `depth` plies (1 to [`MAX_DEPTH`]).
    pub fn new(depth: u8, rules: GameRules, seed: u64) -> Result<AlphaBetaPlayer, String> {
        if !(1..=MAX_DEPTH).contains(&depth) {
            return Err(format!("alphabeta depth {depth}: expected 1 to {MAX_DEPTH} plies"));
        }
        Ok(AlphaBetaPlayer { depth, rules, rng: Rng::seed_from_u64(seed) })
    }

    pub fn depth(&self) -> u8 {
        self.depth
    }
}

impl Player for AlphaBetaPlayer {
    fn name(&self) -> String {
        format!("alphabeta@{}", self.depth)
    }

    fn act(&mut self, pos: &Position, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        if pos.declaration(self.rules.impasse) == Some(Status::DeclarationWin) && !self.rules.impasse.is_try() {
            return Ok(Action::Declare);
        }
        let root = search_root(pos, self.depth, cancel)
            .ok_or_else(|| PlayerError::failure(format!("{}: the match was cancelled", self.name())))?;
        if root.best.is_empty() {
            return Ok(Action::Resign);
        }
        Ok(Action::Play(root.best[self.rng.random_range(0..root.best.len())]))
    }
}

/// Searches `pos` to `depth` plies and returns its value for the side to move with every root
/// move of that value (empty when there is no legal move); None when `cancel` was raised.
pub fn search_root(pos: &Position, depth: u8, cancel: &AtomicBool) -> Option<RootValue> {
    let mut search = Search { pos: pos.without_history(), nodes: 0, cancel };
    let mut moves = MoveList::new();
    search.pos.generate_legal(&mut moves);
    let moves = search.ordered(&moves);
    let mut best = Vec::new();
    let mut value = -MATE;
    for m in moves {
        search.pos.do_move(m);
        // A window just below the best so far: a move that ties it gets its exact value.
        let score = search.negamax(u32::from(depth) - 1, 1, -MATE - 1, -(value - 1)).ok().map(|s| -s);
        search.pos.undo_move();
        let score = score?;
        if score > value || best.is_empty() {
            value = score;
            best.clear();
        }
        if score == value {
            best.push(m);
        }
    }
    Some(RootValue { value, best, nodes: search.nodes })
}

struct Search<'a> {
    pos: Position,
    nodes: u64,
    cancel: &'a AtomicBool,
}

impl Search<'_> {
    fn visit(&mut self) -> Result<(), Cancelled> {
        self.nodes += 1;
        if self.nodes.is_multiple_of(CANCEL_CHECK_NODES) && self.cancel.load(Ordering::Relaxed) {
            return Err(Cancelled);
        }
        Ok(())
    }

    /// Fail-soft negamax: the value for the side to move, exact inside (alpha, beta).
    fn negamax(&mut self, depth: u32, ply: u32, alpha: i32, beta: i32) -> Result<i32, Cancelled> {
        if depth == 0 {
            return self.quiescence(0, ply, alpha, beta);
        }
        self.visit()?;
        let mut list = MoveList::new();
        self.pos.generate_legal(&mut list);
        if list.is_empty() {
            // No legal move loses in shogi, in check or not.
            return Ok(-MATE + ply as i32);
        }
        self.best_of(&list, -MATE, alpha, beta, |search, a, b| search.negamax(depth - 1, ply + 1, a, b))
    }

    /// Captures until the position is quiet; the side to move may stand on its material, except
    /// in check, where every evasion is searched and none means mate.
    fn quiescence(&mut self, qply: u32, ply: u32, mut alpha: i32, beta: i32) -> Result<i32, Cancelled> {
        self.visit()?;
        let in_check = self.pos.in_check();
        let stand = material(&self.pos, self.pos.side_to_move());
        if qply >= QUIESCENCE_PLIES {
            return Ok(stand);
        }
        // No legal move loses in shogi, in check or not: a side with nothing to play cannot stand
        // on its material (in check, the evasions below are all its moves).
        if !in_check && !self.pos.has_legal_move() {
            return Ok(-MATE + ply as i32);
        }
        let mut best = -MATE;
        if !in_check {
            best = stand;
            if stand >= beta {
                return Ok(stand);
            }
            alpha = alpha.max(stand);
        }
        let mut list = MoveList::new();
        self.pos.generate_captures(&mut list);
        if in_check && list.is_empty() {
            return Ok(-MATE + ply as i32);
        }
        self.best_of(&list, best, alpha, beta, |search, a, b| search.quiescence(qply + 1, ply + 1, a, b))
    }

    /// The moves of `list` in order, each valued by `child` (the position after it, searched
    /// for the opponent in the window given, negated back), raising `best` from what the caller
    /// already has until one reaches `beta`.
    fn best_of(
        &mut self,
        list: &MoveList,
        mut best: i32,
        mut alpha: i32,
        beta: i32,
        mut child: impl FnMut(&mut Self, i32, i32) -> Result<i32, Cancelled>,
    ) -> Result<i32, Cancelled> {
        for m in self.ordered(list) {
            self.pos.do_move(m);
            let score = child(self, -beta, -alpha);
            self.pos.undo_move();
            let score = -score?;
            if score > best {
                best = score;
                alpha = alpha.max(score);
                if alpha >= beta {
                    break;
                }
            }
        }
        Ok(best)
    }

    /// Captures first, most valuable victim then least valuable attacker, then promotions, then
    /// the rest in the generator's order (a stable sort: the order is a pure function of the
    /// position).
    fn ordered(&self, list: &MoveList) -> Vec<Move> {
        let mut moves: Vec<Move> = list.iter().copied().collect();
        moves.sort_by_cached_key(|&m| {
            let victim = if m.is_drop() { None } else { self.pos.piece_at(m.to()) };
            match victim {
                Some(victim) => {
                    let attacker = self.pos.piece_at(m.from()).map_or(0, |p| piece_value(p.piece_type()));
                    (0, -piece_value(victim.piece_type()), attacker, !m.is_promotion())
                }
                None => (1, 0, 0, !m.is_promotion()),
            }
        });
        moves
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(sfen: &str, depth: u8) -> RootValue {
        search_root(&Position::from_sfen(sfen).unwrap(), depth, &AtomicBool::new(false)).unwrap()
    }

    /// Plain minimax with the same quiescence and no pruning: alpha-beta must agree with it.
    fn minimax(pos: &mut Position, depth: u32, ply: u32) -> i32 {
        let cancel = AtomicBool::new(false);
        if depth == 0 {
            let mut search = Search { pos: pos.clone(), nodes: 0, cancel: &cancel };
            return search.quiescence(0, ply, -MATE - 1, MATE + 1).ok().unwrap();
        }
        let moves = pos.legal_moves();
        if moves.is_empty() {
            return -MATE + ply as i32;
        }
        let mut best = -MATE;
        for &m in moves.iter() {
            pos.do_move(m);
            best = best.max(-minimax(pos, depth - 1, ply + 1));
            pos.undo_move();
        }
        best
    }

    #[test]
    fn depths_outside_the_ladder_are_refused() {
        assert!(AlphaBetaPlayer::new(0, GameRules::default(), 1).unwrap_err().contains("depth 0"));
        assert!(AlphaBetaPlayer::new(MAX_DEPTH + 1, GameRules::default(), 1).is_err());
        assert_eq!(AlphaBetaPlayer::new(2, GameRules::default(), 1).unwrap().name(), "alphabeta@2");
    }

    #[test]
    fn takes_a_hanging_rook_at_depth_one_and_sees_the_recapture_through_quiescence() {
        // Black's rook on 5h can take the rook on 5c, promoting; nothing defends it.
        let free = root("4k4/9/4r4/9/9/9/9/4R4/4K4 b - 1", 1);
        assert_eq!(free.best.iter().map(|m| m.to_usi()).collect::<Vec<_>>(), ["5h5c+"]);
        assert_eq!(free.value, 12 + 10);
        // A gold on 4b defends it: quiescence sees the gold take back, so no move gains anything
        // over the balance of -6 (rook against rook and gold).
        assert_eq!(root("4k4/5g3/4r4/9/9/9/9/4R4/4K4 b - 1", 1).value, -6);
    }

    #[test]
    fn mates_in_one_and_a_mated_side_has_nothing_to_play() {
        // A gold dropped on 5b, supported by the pawn on 5c, mates the bare king on 5a.
        let mate = root("4k4/9/4P4/9/9/9/9/9/4K4 b G 1", 1);
        assert_eq!(mate.value, MATE - 1);
        assert!(mate.best.iter().any(|m| m.to_usi() == "G*5b"), "{:?}", mate.best);
        // At depth 2 the same mate is found, not a slower one.
        assert_eq!(root("4k4/9/4P4/9/9/9/9/9/4K4 b G 1", 2).value, MATE - 1);
        // The mated side: no legal move, nothing to play.
        let mated = root("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1", 2);
        assert!(mated.best.is_empty());
        assert_eq!(mated.value, -MATE);
        // Not in check and nothing to play also loses: the silver stepping to 2c leaves the king
        // on 1a every square covered, and quiescence must see that rather than stand on material.
        assert!(root("8k/6G2/7S1/9/9/9/9/9/4K4 w - 1", 1).best.is_empty());
        assert_eq!(root("8k/6G2/9/7S1/9/9/9/9/4K4 b - 1", 1).value, MATE - 1);
        let mut player = AlphaBetaPlayer::new(1, GameRules::default(), 1).unwrap();
        let pos = Position::from_sfen("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1").unwrap();
        assert_eq!(player.act(&pos, &AtomicBool::new(false)).unwrap(), Action::Resign);
    }

    /// Positions of random games from the start, captures favoured so hands fill.
    fn random_positions(count: usize) -> Vec<Position> {
        let mut rng = Rng::seed_from_u64(5);
        (0..count)
            .map(|k| {
                let mut pos = Position::startpos();
                for _ in 0..20 + 6 * k {
                    let moves = pos.legal_moves();
                    if moves.is_empty() {
                        break;
                    }
                    let captures: Vec<Move> =
                        moves.iter().copied().filter(|m| !m.is_drop() && pos.piece_at(m.to()).is_some()).collect();
                    let m = if !captures.is_empty() && rng.random_range(0..2) == 0 {
                        captures[rng.random_range(0..captures.len())]
                    } else {
                        moves[rng.random_range(0..moves.len())]
                    };
                    pos.do_move(m);
                }
                pos
            })
            .collect()
    }

    #[test]
    fn pruning_changes_no_value() {
        for pos in random_positions(8) {
            for depth in 1..=2u8 {
                let expected = minimax(&mut pos.without_history(), u32::from(depth), 0);
                let found = search_root(&pos, depth, &AtomicBool::new(false)).unwrap();
                assert_eq!(found.value, expected, "depth {depth} in {}", pos.to_sfen());
                // Every move reported best reaches the value on its own.
                for &m in &found.best {
                    let mut child = pos.without_history();
                    child.do_move(m);
                    assert_eq!(-minimax(&mut child, u32::from(depth) - 1, 1), expected, "{m} in {}", pos.to_sfen());
                }
            }
        }
    }

    #[test]
    fn the_seed_only_breaks_ties_and_the_search_is_reproducible() {
        let start = koma_shogi::STARTPOS_SFEN;
        let a = root(start, 2);
        assert_eq!(a, root(start, 2));
        assert_eq!(a.value, 0);
        assert!(a.best.len() > 10, "quiet opening moves all tie: {}", a.best.len());
        let pos = Position::from_sfen(start).unwrap();
        let cancel = AtomicBool::new(false);
        let moves = |seed| {
            let mut player = AlphaBetaPlayer::new(2, GameRules::default(), seed).unwrap();
            (0..4).map(|_| player.act(&pos, &cancel).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(moves(7), moves(7));
        assert_ne!(moves(7), moves(8));
    }

    #[test]
    fn a_raised_cancel_flag_stops_the_search() {
        let cancel = AtomicBool::new(true);
        let pos = Position::startpos();
        assert!(search_root(&pos, MAX_DEPTH, &cancel).is_none());
        let mut player = AlphaBetaPlayer::new(MAX_DEPTH, GameRules::default(), 1).unwrap();
        assert!(player.act(&pos, &cancel).unwrap_err().message.contains("cancelled"));
    }
}
