//! Piece types and coloured pieces. Promotion adds 8 to a type (pawn 1 → tokin 9), as in
//! YaneuraOu's numbering, so promote/unpromote are single arithmetic operations.

use std::fmt;
use std::num::NonZeroU8;

use crate::color::Color;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PieceType {
    Pawn = 1,
    Lance = 2,
    Knight = 3,
    Silver = 4,
    Bishop = 5,
    Rook = 6,
    Gold = 7,
    King = 8,
    ProPawn = 9,
    ProLance = 10,
    ProKnight = 11,
    ProSilver = 12,
    Horse = 13,
    Dragon = 14,
}

impl PieceType {
    pub const ALL: [PieceType; 14] = [
        PieceType::Pawn,
        PieceType::Lance,
        PieceType::Knight,
        PieceType::Silver,
        PieceType::Bishop,
        PieceType::Rook,
        PieceType::Gold,
        PieceType::King,
        PieceType::ProPawn,
        PieceType::ProLance,
        PieceType::ProKnight,
        PieceType::ProSilver,
        PieceType::Horse,
        PieceType::Dragon,
    ];

    /// The seven kinds a player can hold in hand, in the SFEN order of hands (R B G S N L P reversed
    /// is the print order; this is the internal order, by type number).
    pub const HAND: [PieceType; 7] = [
        PieceType::Pawn,
        PieceType::Lance,
        PieceType::Knight,
        PieceType::Silver,
        PieceType::Bishop,
        PieceType::Rook,
        PieceType::Gold,
    ];

    /// The order hands are written in SFEN, CSA, KIF and diagrams: R B G S N L P.
    pub const HAND_WRITE_ORDER: [PieceType; 7] = [
        PieceType::Rook,
        PieceType::Bishop,
        PieceType::Gold,
        PieceType::Silver,
        PieceType::Knight,
        PieceType::Lance,
        PieceType::Pawn,
    ];

    #[inline]
    pub const fn from_u8(v: u8) -> Option<PieceType> {
        if v >= 1 && v <= 14 {
            Some(PieceType::ALL[v as usize - 1])
        } else {
            None
        }
    }

    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    #[inline]
    pub const fn can_promote(self) -> bool {
        (self as u8) < 8 && !matches!(self, PieceType::Gold)
    }

    #[inline]
    pub const fn is_promoted(self) -> bool {
        (self as u8) > 8
    }

    /// The promoted type; `self` when the type cannot promote.
    #[inline]
    pub const fn promote(self) -> PieceType {
        if self.can_promote() {
            PieceType::ALL[self as usize + 7]
        } else {
            self
        }
    }

    /// The type a captured piece becomes in hand (king stays king).
    #[inline]
    pub const fn unpromote(self) -> PieceType {
        if self.is_promoted() {
            PieceType::ALL[self as usize - 9]
        } else {
            self
        }
    }

    /// Moves like a gold general (gold and the four promoted minor pieces).
    #[inline]
    pub const fn moves_like_gold(self) -> bool {
        matches!(
            self,
            PieceType::Gold | PieceType::ProPawn | PieceType::ProLance | PieceType::ProKnight | PieceType::ProSilver
        )
    }

    /// Upper-case SFEN letter of the unpromoted type (promoted types are written `+` and this).
    pub const fn sfen_letter(self) -> char {
        match self.unpromote() {
            PieceType::Pawn => 'P',
            PieceType::Lance => 'L',
            PieceType::Knight => 'N',
            PieceType::Silver => 'S',
            PieceType::Bishop => 'B',
            PieceType::Rook => 'R',
            PieceType::Gold => 'G',
            _ => 'K',
        }
    }

    /// The unpromoted type named by an SFEN letter (either case).
    pub const fn from_sfen_letter(c: char) -> Option<PieceType> {
        match c.to_ascii_uppercase() {
            'P' => Some(PieceType::Pawn),
            'L' => Some(PieceType::Lance),
            'N' => Some(PieceType::Knight),
            'S' => Some(PieceType::Silver),
            'B' => Some(PieceType::Bishop),
            'R' => Some(PieceType::Rook),
            'G' => Some(PieceType::Gold),
            'K' => Some(PieceType::King),
            _ => None,
        }
    }
}

/// A coloured piece, one byte: type + 16 × colour. `Option<Piece>` is also one byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Piece(NonZeroU8);

impl Piece {
    #[inline]
    pub const fn new(color: Color, piece_type: PieceType) -> Piece {
        match NonZeroU8::new(piece_type as u8 + 16 * color as u8) {
            Some(v) => Piece(v),
            None => unreachable!(),
        }
    }

    #[inline]
    pub const fn color(self) -> Color {
        if self.0.get() >= 16 {
            Color::White
        } else {
            Color::Black
        }
    }

    #[inline]
    pub const fn piece_type(self) -> PieceType {
        match PieceType::from_u8(self.0.get() & 15) {
            Some(pt) => pt,
            None => unreachable!(),
        }
    }

    /// Dense index 0..28 (type − 1 + 14 × colour), for tables such as Zobrist keys.
    #[inline]
    pub const fn index(self) -> usize {
        (self.0.get() & 15) as usize - 1 + 14 * (self.0.get() >> 4) as usize
    }

    /// SFEN text: `P`, `+p`, ….
    pub fn sfen(self) -> String {
        let mut s = String::new();
        if self.piece_type().is_promoted() {
            s.push('+');
        }
        let c = self.piece_type().sfen_letter();
        s.push(if self.color() == Color::Black { c } else { c.to_ascii_lowercase() });
        s
    }
}

impl fmt::Debug for Piece {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sfen())
    }
}

impl fmt::Display for Piece {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.sfen())
    }
}
