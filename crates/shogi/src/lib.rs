//! koma-shogi: the rules of shogi for koma.
//!
//! Squares and moves use USI coordinates; positions come from SFEN (or a handicap) and are always
//! legal. Move generation is complete and strictly legal; [`rules`] decides how games end.
//!
//! ```
//! use koma_shogi::{Position, perft};
//! let mut pos = Position::startpos();
//! assert_eq!(pos.legal_moves().len(), 30);
//! assert_eq!(perft(&mut pos, 3), 25470);
//! ```

pub mod attacks;
mod bitboard;
mod checks;
mod color;
mod diagram;
mod hand;
mod handicap;
pub mod material;
mod mirror;
mod movegen;
mod movelist;
mod mv;
pub mod openings;
mod perft;
mod piece;
mod position;
pub mod record;
pub mod rules;
mod sfen;
mod square;
pub mod usi;
mod zobrist;

pub use bitboard::Bitboard;
pub use checks::KingEscapes;
pub use color::Color;
pub use hand::Hand;
pub use handicap::Handicap;
pub use movelist::{MoveList, MAX_MOVES};
pub use mv::Move;
pub use openings::OpeningSuite;
pub use perft::{divide, perft};
pub use piece::{Piece, PieceType};
pub use position::Position;
pub use record::{Format, GameRecord, RecordMove};
pub use rules::{EndReason, GameResult, GameRules, ImpasseRule, MaxMovesRule, Status};
pub use sfen::{SfenError, STARTPOS_SFEN};
pub use square::Square;
