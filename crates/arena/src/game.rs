//! One game between two players, adjudicated by the rules core: an illegal move or a false
//! declaration loses, a player failure (crash, timeout) forfeits, and sennichite, perpetual
//! check, declaration, the Try rule and the move limit end the game as the rules say.

use std::sync::atomic::{AtomicBool, Ordering};

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

/// Why [`play_game`] returned no game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Unfinished {
    /// A fatal player error (our own network failing, an engine that cannot play on): no result
    /// can be trusted, so the match stops with it.
    Failed(PlayerError),
    /// The match was cancelled mid-game. Half a game has no result: it is dropped, not scored.
    Cancelled,
}

/// Plays `black` against `white` from `start` (whoever is to move there moves first). `cancel`
/// is looked at before every move and passed to the players, so a cancelled match stops within a
/// move (or sooner, for players that watch it while thinking).
pub fn play_game(
    black: &mut dyn Player,
    white: &mut dyn Player,
    start: &Position,
    rules: &GameRules,
    cancel: &AtomicBool,
) -> Result<PlayedGame, Unfinished> {
    // Any failure while the match is being cancelled is the cancel's doing, not the player's.
    let unfinished = |error: PlayerError| {
        if cancel.load(Ordering::Relaxed) {
            Unfinished::Cancelled
        } else {
            Unfinished::Failed(error)
        }
    };
    black.new_game(cancel).map_err(unfinished)?;
    white.new_game(cancel).map_err(unfinished)?;
    let mut pos = start.clone();
    let mut moves = Vec::new();
    // The record starts at the given position (an opening's own moves are not part of the game).
    let root = start.without_history();
    let finish = |moves: Vec<Move>, result: GameResult, note: Option<String>| {
        Ok(PlayedGame { start: root.clone(), moves, result, note })
    };
    loop {
        if cancel.load(Ordering::Relaxed) {
            return Err(Unfinished::Cancelled);
        }
        let us = pos.side_to_move();
        let status = pos.status(rules);
        if let Some(result) = GameResult::from_status(status, us) {
            return finish(moves, result, None);
        }
        let player: &mut dyn Player = if us == Color::Black { &mut *black } else { &mut *white };
        let lose = |reason| GameResult { winner: Some(!us), reason };
        match player.act(&pos, cancel) {
            Err(error) if error.fatal || cancel.load(Ordering::Relaxed) => return Err(unfinished(error)),
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
