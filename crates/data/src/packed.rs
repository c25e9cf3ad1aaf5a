//! A position packed into 40 bytes ("koma-packed-v1"), the form samples are stored in.
//!
//! Bit stream, least significant bit of byte 0 first:
//! - side to move (1 bit: 0 Black, 1 White);
//! - Black's and White's king squares (7 bits each);
//! - for each other square in index order (1a, 1b, …, 9i): `0` if empty, else `1` followed by
//!   5 bits: colour (1 bit, then) piece type − 1 (4 bits);
//! - for Black then White, for pawn, lance, knight, silver, bishop, rook, gold: the count in
//!   unary (that many `1`s, then a `0`).
//!
//! A full shogi set needs at most 306 of the 320 bits; the rest is zero. Positions with more
//! pieces than a set (some perft test positions) may not fit and are refused.

use koma_shogi::{Color, Hand, Piece, PieceType, Position, Square};
use thiserror::Error;

pub const PACKED_BYTES: usize = 40;
pub const PACKED_ENCODING: &str = "koma-packed-v1";

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PackedPosition(pub [u8; PACKED_BYTES]);

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PackError {
    #[error("position has too many pieces to pack into {PACKED_BYTES} bytes: {0}")]
    TooLarge(String),
    #[error("packed position is corrupt: {0}")]
    Corrupt(String),
}

const HAND_ORDER: [PieceType; 7] = PieceType::HAND;

struct BitWriter {
    bytes: [u8; PACKED_BYTES],
    bit: usize,
}

impl BitWriter {
    fn push(&mut self, value: u32, width: usize) -> bool {
        if self.bit + width > PACKED_BYTES * 8 {
            return false;
        }
        for i in 0..width {
            if (value >> i) & 1 != 0 {
                self.bytes[(self.bit + i) / 8] |= 1 << ((self.bit + i) % 8);
            }
        }
        self.bit += width;
        true
    }
}

struct BitReader<'a> {
    bytes: &'a [u8; PACKED_BYTES],
    bit: usize,
}

impl BitReader<'_> {
    fn read(&mut self, width: usize) -> Result<u32, PackError> {
        if self.bit + width > PACKED_BYTES * 8 {
            return Err(PackError::Corrupt("bit stream ends early".into()));
        }
        let mut value = 0;
        for i in 0..width {
            value |= (((self.bytes[(self.bit + i) / 8] >> ((self.bit + i) % 8)) & 1) as u32) << i;
        }
        self.bit += width;
        Ok(value)
    }
}

impl PackedPosition {
    pub fn pack(pos: &Position) -> Result<PackedPosition, PackError> {
        let mut w = BitWriter { bytes: [0; PACKED_BYTES], bit: 0 };
        let too_large = || PackError::TooLarge(pos.to_sfen());
        w.push(pos.side_to_move() as u32, 1);
        let kings = [pos.king_square(Color::Black), pos.king_square(Color::White)];
        w.push(kings[0].index() as u32, 7);
        w.push(kings[1].index() as u32, 7);
        for sq in Square::all() {
            if kings.contains(&sq) {
                continue;
            }
            let ok = match pos.piece_at(sq) {
                None => w.push(0, 1),
                Some(p) => w.push(1 | (p.color() as u32) << 1 | (p.piece_type() as u32 - 1) << 2, 6),
            };
            if !ok {
                return Err(too_large());
            }
        }
        for color in Color::ALL {
            let hand = pos.hand(color);
            for pt in HAND_ORDER {
                let n = hand.count(pt) as usize;
                let ones = if n == 0 { 0 } else { u32::MAX >> (32 - n) };
                if !(w.push(ones, n) && w.push(0, 1)) {
                    return Err(too_large());
                }
            }
        }
        Ok(PackedPosition(w.bytes))
    }

    /// Rebuilds the position (move number 1; samples keep the ply separately) and validates it.
    pub fn unpack(&self) -> Result<Position, PackError> {
        let mut r = BitReader { bytes: &self.0, bit: 0 };
        let side = if r.read(1)? == 0 { Color::Black } else { Color::White };
        let mut board: [Option<Piece>; 81] = [None; 81];
        let mut kings = [0usize; 2];
        for (i, color) in Color::ALL.into_iter().enumerate() {
            let sq = r.read(7)? as usize;
            if sq >= 81 || board[sq].is_some() {
                return Err(PackError::Corrupt(format!("king square {sq}")));
            }
            board[sq] = Some(Piece::new(color, PieceType::King));
            kings[i] = sq;
        }
        for (sq, cell) in board.iter_mut().enumerate() {
            if kings.contains(&sq) {
                continue;
            }
            if r.read(1)? == 1 {
                let code = r.read(5)?;
                let color = if code & 1 == 0 { Color::Black } else { Color::White };
                let pt = PieceType::from_u8((code >> 1) as u8 + 1)
                    .filter(|&pt| pt != PieceType::King)
                    .ok_or_else(|| PackError::Corrupt(format!("piece code {code}")))?;
                *cell = Some(Piece::new(color, pt));
            }
        }
        let mut hands = [Hand::EMPTY; 2];
        for hand in &mut hands {
            for pt in HAND_ORDER {
                let mut n = 0;
                while r.read(1)? == 1 {
                    n += 1;
                    if n > 31 {
                        return Err(PackError::Corrupt("hand count".into()));
                    }
                }
                hand.set(pt, n);
                // A count beyond what a hand stores would be silently truncated: refuse it.
                if hand.count(pt) != n {
                    return Err(PackError::Corrupt(format!("{n} of {pt:?} in hand")));
                }
            }
        }
        Position::from_board(board, hands, side, 1).map_err(|e| PackError::Corrupt(e.to_string()))
    }
}

impl std::fmt::Debug for PackedPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.unpack() {
            Ok(pos) => write!(f, "PackedPosition({})", pos.to_sfen()),
            Err(e) => write!(f, "PackedPosition(<{e}>)"),
        }
    }
}
