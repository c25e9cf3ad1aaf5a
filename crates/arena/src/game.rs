//! One game between two players, adjudicated by the rules core: an illegal move or a false
//! declaration loses, a player failure (crash, timeout) forfeits, and sennichite, perpetual
//! check, declaration, the Try rule and the move limit end the game as the rules say.

use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, GameResult, Move, Position, Status};

use crate::player::{Action, Player, PlayerError};

/// A finished game.
#[derive(Clone, Debug)]
pub struct PlayedGame {
    pub start: Position,
    pub moves: Vec<Move>,
    pub result: GameResult,
    /// Why a player forfeited, if one did (for the log and the record's comment).
    pub note: Option<String>,
}

/// Plays `black` against `white` from `start` (whoever is to move there moves first). A fatal
/// player error (our own network failing) is returned instead of a game.
pub fn play_game(black: &mut dyn Player, white: &mut dyn Player, start: &Position, rules: &GameRules) -> Result<PlayedGame, PlayerError> {
    black.new_game();
    white.new_game();
    let mut pos = start.clone();
    let mut moves = Vec::new();
    // The record starts at the given position (an opening's own moves are not part of the game).
    let root = start.without_history();
    let finish = |moves: Vec<Move>, result: GameResult, note: Option<String>| Ok(PlayedGame { start: root.clone(), moves, result, note });
    loop {
        let us = pos.side_to_move();
        let status = pos.status(rules);
        if let Some(result) = GameResult::from_status(status, us) {
            return finish(moves, result, None);
        }
        let player: &mut dyn Player = if us == Color::Black { &mut *black } else { &mut *white };
        let lose = |reason| GameResult { winner: Some(!us), reason };
        match player.act(&pos) {
            Err(error) if error.fatal => return Err(error),
            Err(error) => {
                let note = format!("{} ({us:?}) forfeits: {error}", player.name());
                tracing::warn!("{note}");
                let reason = if error.timeout { EndReason::TimeLoss } else { EndReason::Forfeit };
                return finish(moves, lose(reason), Some(note));
            }
            Ok(Action::Resign) => return finish(moves, lose(EndReason::Resignation), None),
            Ok(Action::Declare) => {
                if status == Status::DeclarationWin && !rules.impasse.is_try() {
                    return finish(moves, GameResult { winner: Some(us), reason: EndReason::Declaration }, None);
                }
                let note = format!("{} ({us:?}) declared without the right to", player.name());
                tracing::warn!("{note}");
                return finish(moves, lose(EndReason::IllegalMove), Some(note));
            }
            Ok(Action::Play(m)) => {
                if !pos.is_legal(m) {
                    let note = format!("{} ({us:?}) played the illegal move {m} in {}", player.name(), pos.to_sfen());
                    tracing::warn!("{note}");
                    return finish(moves, lose(EndReason::IllegalMove), Some(note));
                }
                pos.do_move(m);
                moves.push(m);
            }
        }
    }
}
