//! One training sample and one finished game's worth of samples.

use koma_shogi::{Color, EndReason, GameResult, Move};

use crate::packed::{PackError, PackedPosition};

/// Sample flags (bit set).
pub mod flags {
    /// The move got a full search: use it for training (playout cap randomization).
    pub const FULL_SEARCH: u8 = 1;
    /// The game was played with resignation disabled (to measure false resignations).
    pub const NO_RESIGN: u8 = 2;
    /// The sample was imported (game records, hcpe): its policy is the move played, not a search.
    pub const IMPORTED: u8 = 4;
}

/// `Sample::ply` when the ply is not known (hcpe records). Above any `early_plies`, so such
/// samples are never down-weighted as early ones.
pub const PLY_UNKNOWN: u16 = u16::MAX;

/// A training sample: a position, what search thought of it, and how the game ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub position: PackedPosition,
    /// The move played from this position (`None` for a final position).
    pub played: Option<Move>,
    /// The search policy target over legal moves: (move, weight), weights summing to 1.
    pub policy: Vec<(Move, f32)>,
    /// Win/draw/loss probabilities from the search's root, for the side to move.
    pub root_wdl: [f32; 3],
    /// Game result for the side to move: 1 win, 0 draw, −1 loss.
    pub result: i8,
    /// Plies played before this position.
    pub ply: u16,
    pub flags: u8,
}

impl Sample {
    /// The sample reflected left to right (`Position::mirror`): the position, the played move and
    /// the policy target's moves mirrored, everything else kept. Shogi's rules are symmetric under
    /// the reflection, so it is as valid a training sample as the original.
    pub fn mirror(&self) -> Result<Sample, PackError> {
        Ok(Sample {
            position: PackedPosition::pack(&self.position.unpack()?.mirror())?,
            played: self.played.map(Move::mirror),
            policy: self.policy.iter().map(|&(m, w)| (m.mirror(), w)).collect(),
            ..self.clone()
        })
    }
}

/// A finished game: its start, result and samples (in game order).
#[derive(Clone, Debug, PartialEq)]
pub struct GameSamples {
    /// SFEN of the start position.
    pub start_sfen: String,
    pub result: GameResult,
    /// Plies played.
    pub length: u16,
    /// The model that played it (checkpoint name), empty if none.
    pub model: String,
    /// Every move of the game, recorded or not (cheap-search moves make no sample).
    pub moves: Vec<Move>,
    pub samples: Vec<Sample>,
    /// The search's estimates of each sample's root value ([`ROOT_VALUE_NAMES`]), one per sample
    /// when the games were searched (self-play), else empty: what `koma data stats` calibrates
    /// against the results.
    pub root_values: Vec<RootValues>,
}

/// The root value estimates a shard keeps per sample (`root_values` columns), each in [-1, 1] for
/// the side to move: the network's value, the mean over the root's visits, Gumbel's v_mix and
/// the improved policy's value (koma-mcts's `RootValue`, docs/mcts.md).
pub const ROOT_VALUE_NAMES: [&str; 4] = ["network", "visits", "mixed", "improved"];

/// One sample's [`ROOT_VALUE_NAMES`] estimates.
pub type RootValues = [f32; ROOT_VALUE_NAMES.len()];

/// Stable one-byte codes for how a game ended, as stored in shards.
pub fn end_reason_code(reason: EndReason) -> u8 {
    match reason {
        EndReason::Checkmate => 0,
        EndReason::Resignation => 1,
        EndReason::Repetition => 2,
        EndReason::PerpetualCheck => 3,
        EndReason::Declaration => 4,
        EndReason::Try => 5,
        EndReason::MaxMoves => 6,
        EndReason::TimeLoss => 7,
        EndReason::IllegalMove => 8,
        EndReason::Abort => 9,
        EndReason::Forfeit => 10,
    }
}

/// A short name of an end reason (as in stats and the Python reader).
pub fn end_reason_name(reason: EndReason) -> &'static str {
    match reason {
        EndReason::Checkmate => "checkmate",
        EndReason::Resignation => "resignation",
        EndReason::Repetition => "repetition",
        EndReason::PerpetualCheck => "perpetual_check",
        EndReason::Declaration => "declaration",
        EndReason::Try => "try",
        EndReason::MaxMoves => "max_moves",
        EndReason::TimeLoss => "time_loss",
        EndReason::IllegalMove => "illegal_move",
        EndReason::Abort => "abort",
        EndReason::Forfeit => "forfeit",
    }
}

pub fn end_reason_from_code(code: u8) -> Option<EndReason> {
    Some(match code {
        0 => EndReason::Checkmate,
        1 => EndReason::Resignation,
        2 => EndReason::Repetition,
        3 => EndReason::PerpetualCheck,
        4 => EndReason::Declaration,
        5 => EndReason::Try,
        6 => EndReason::MaxMoves,
        7 => EndReason::TimeLoss,
        8 => EndReason::IllegalMove,
        9 => EndReason::Abort,
        10 => EndReason::Forfeit,
        _ => return None,
    })
}

/// Winner code: 1 Black, −1 White, 0 none.
pub fn winner_code(winner: Option<Color>) -> i8 {
    match winner {
        Some(Color::Black) => 1,
        Some(Color::White) => -1,
        None => 0,
    }
}

pub fn winner_from_code(code: i8) -> Option<Color> {
    match code {
        1 => Some(Color::Black),
        -1 => Some(Color::White),
        _ => None,
    }
}

/// The result for the side to move, from the game's winner.
pub fn result_for(side_to_move: Color, winner: Option<Color>) -> i8 {
    match winner {
        None => 0,
        Some(w) if w == side_to_move => 1,
        Some(_) => -1,
    }
}

#[cfg(test)]
mod tests {
    use koma_shogi::Position;

    use super::*;

    #[test]
    fn a_mirrored_sample_is_a_valid_sample_of_the_mirrored_position() {
        let pos = Position::from_sfen("ln1g1g1nl/1r1s1k1b1/p1pp1pppp/4p4/1p7/2P3P2/PP1PPP2P/1BG4R1/LN1SK1SNL b Sp 15")
            .unwrap();
        let moves: Vec<Move> = pos.legal_moves().iter().copied().collect();
        let sample = Sample {
            position: PackedPosition::pack(&pos).unwrap(),
            played: Some(moves[0]),
            policy: moves.iter().take(5).map(|&m| (m, 0.2)).collect(),
            root_wdl: [0.5, 0.1, 0.4],
            result: -1,
            ply: 14,
            flags: flags::FULL_SEARCH,
        };
        let mirrored = sample.mirror().unwrap();
        let mirrored_pos = mirrored.position.unpack().unwrap();
        // Packed positions keep no move number: compare board, side and hands.
        let without_number = |p: &Position| p.to_sfen().rsplit_once(' ').unwrap().0.to_string();
        assert_eq!(without_number(&mirrored_pos), without_number(&pos.mirror()));
        assert!(mirrored.policy.iter().all(|&(m, _)| mirrored_pos.is_legal(m)));
        assert!(mirrored_pos.is_legal(mirrored.played.unwrap()));
        assert_eq!(
            (mirrored.root_wdl, mirrored.result, mirrored.ply, mirrored.flags),
            (sample.root_wdl, sample.result, sample.ply, sample.flags)
        );
        assert_eq!(mirrored.mirror().unwrap(), sample);
    }
}
