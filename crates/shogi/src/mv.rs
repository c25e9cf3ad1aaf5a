//! A move in 16 bits: destination (7 bits), origin or dropped kind (7 bits), promotion flag,
//! drop flag. Compact enough for move lists, search trees and training records.

use std::fmt;

use crate::piece::PieceType;
use crate::square::Square;

const PROMOTE: u16 = 1 << 14;
const DROP: u16 = 1 << 15;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Move(u16);

impl Move {
    /// A board move from `from` to `to`, promoting if `promote`.
    #[inline]
    pub const fn board(from: Square, to: Square, promote: bool) -> Move {
        Move(to.index() as u16 | ((from.index() as u16) << 7) | if promote { PROMOTE } else { 0 })
    }

    /// A drop of `piece_type` (an unpromoted kind other than king) on `to`.
    #[inline]
    pub const fn drop(piece_type: PieceType, to: Square) -> Move {
        Move(to.index() as u16 | ((piece_type as u16) << 7) | DROP)
    }

    #[inline]
    pub const fn to(self) -> Square {
        Square::from_index_unchecked((self.0 & 0x7f) as u8)
    }

    /// The origin square of a board move (meaningless for drops).
    #[inline]
    pub const fn from(self) -> Square {
        Square::from_index_unchecked(((self.0 >> 7) & 0x7f) as u8)
    }

    #[inline]
    pub const fn is_drop(self) -> bool {
        self.0 & DROP != 0
    }

    #[inline]
    pub const fn is_promotion(self) -> bool {
        self.0 & PROMOTE != 0
    }

    /// The kind dropped, for drops.
    #[inline]
    pub fn drop_piece_type(self) -> Option<PieceType> {
        if self.is_drop() {
            PieceType::from_u8(((self.0 >> 7) & 0x7f) as u8)
        } else {
            None
        }
    }

    /// The raw 16-bit code, for compact storage.
    #[inline]
    pub const fn to_u16(self) -> u16 {
        self.0
    }

    /// Rebuilds a move from [`Move::to_u16`], rejecting codes no move produces.
    pub fn from_u16(code: u16) -> Option<Move> {
        let to = (code & 0x7f) as u8;
        let from = ((code >> 7) & 0x7f) as u8;
        if to >= 81 {
            return None;
        }
        if code & DROP != 0 {
            let pt = PieceType::from_u8(from)?;
            if code & PROMOTE != 0 || !PieceType::HAND.contains(&pt) {
                return None;
            }
        } else if from >= 81 || from == to {
            return None;
        }
        Some(Move(code))
    }

    /// Parses USI move text (`7g7f`, `8h2b+`, `P*5e`) without checking it against a position.
    pub fn from_usi(s: &str) -> Option<Move> {
        let b = s.as_bytes();
        if b.len() == 4 && b[1] == b'*' {
            let pt = PieceType::from_sfen_letter(b[0] as char)?;
            if !b[0].is_ascii_uppercase() || pt == PieceType::King {
                return None;
            }
            return Some(Move::drop(pt, Square::from_usi(&s[2..4])?));
        }
        let promote = match b.len() {
            4 => false,
            5 if b[4] == b'+' => true,
            _ => return None,
        };
        let from = Square::from_usi(s.get(0..2)?)?;
        let to = Square::from_usi(s.get(2..4)?)?;
        if from == to {
            return None;
        }
        Some(Move::board(from, to, promote))
    }

    /// USI move text.
    pub fn to_usi(self) -> String {
        let mut s = String::with_capacity(5);
        self.write_usi(&mut s);
        s
    }

    pub fn write_usi(self, out: &mut String) {
        if let Some(pt) = self.drop_piece_type() {
            out.push(pt.sfen_letter());
            out.push('*');
        } else {
            self.from().write_usi(out);
        }
        self.to().write_usi(out);
        if self.is_promotion() {
            out.push('+');
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_usi())
    }
}

impl fmt::Debug for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_usi())
    }
}
