//! One game between two players, adjudicated by the rules core: an illegal move or a false
//! declaration loses, a player failure (crash, timeout) forfeits, and sennichite, perpetual
//! check, declaration, the Try rule and the move limit end the game as the rules say. A player
//! with a time control plays on a clock kept with wall time around its turns: a move later than
//! the clock allows (plus the player's margin) loses on time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use koma_shogi::rules::GameRules;
use koma_shogi::{Color, EndReason, GameResult, Move, Position, Status};

use crate::clock::{Clock, TurnClock};
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
    // Each side's clock and margin. Facing an untimed player, a timed one is shown its own clock
    // for both sides.
    let timings = [black.timing(), white.timing()];
    let mut clocks = timings.map(|t| t.map(|t| Clock::new(t.control)));
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
        let side = us.index();
        let started = Instant::now();
        let acted = match clocks[side] {
            Some(own) => {
                let turn = TurnClock { side: us, black: clocks[0].unwrap_or(own), white: clocks[1].unwrap_or(own) };
                player.act_on_clock(&pos, &turn, cancel)
            }
            None => player.act(&pos, cancel),
        };
        if let (Some(clock), Some(timing)) = (clocks[side].as_mut(), timings[side]) {
            let took = started.elapsed();
            let charged = clock.charge(took, timing.margin);
            let late = match (&acted, charged) {
                (Err(error), _) if error.fatal || cancel.load(Ordering::Relaxed) => None,
                (_, Err(overrun)) => Some(overrun.to_string()),
                // The player gave up waiting at its own deadline, a hair before ours.
                (Err(error), Ok(())) if error.timeout => Some(format!("{error}")),
                _ => None,
            };
            if let Some(why) = late {
                let note = format!("{} ({us:?}) lost on time ({}): {why}", player.name(), timing.control);
                tracing::warn!("{note}");
                return finish(moves, lose(EndReason::TimeLoss), Some(note));
            }
        }
        match acted {
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
