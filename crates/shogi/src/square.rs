//! Squares in USI coordinates. File 1–9 counts right to left from Black's side, rank a–i top to
//! bottom. Internally a square is `(file - 1) * 9 + (rank - 1)`, so a file is 9 consecutive bits
//! of a bitboard (the layout YaneuraOu and cshogi use), which keeps lance and rook file attacks cheap.

use std::fmt;

use crate::color::Color;

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Square(u8);

impl Square {
    pub const NUM: usize = 81;

    /// The square at `file_index` (0 = file 1) and `rank_index` (0 = rank a), if both are on the board.
    #[inline]
    pub const fn new(file_index: u8, rank_index: u8) -> Option<Square> {
        if file_index < 9 && rank_index < 9 {
            Some(Square(file_index * 9 + rank_index))
        } else {
            None
        }
    }

    #[inline]
    pub const fn from_index(index: u8) -> Option<Square> {
        if index < 81 {
            Some(Square(index))
        } else {
            None
        }
    }

    /// # Safety-free internal constructor: callers guarantee `index < 81`.
    #[inline]
    pub(crate) const fn from_index_unchecked(index: u8) -> Square {
        debug_assert!(index < 81);
        Square(index)
    }

    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// 0 for file 1 … 8 for file 9.
    #[inline]
    pub const fn file_index(self) -> u8 {
        self.0 / 9
    }

    /// 0 for rank a … 8 for rank i.
    #[inline]
    pub const fn rank_index(self) -> u8 {
        self.0 % 9
    }

    /// The rank as seen by `color`: 0 is that player's farthest rank (a for Black, i for White).
    #[inline]
    pub const fn relative_rank(self, color: Color) -> u8 {
        match color {
            Color::Black => self.rank_index(),
            Color::White => 8 - self.rank_index(),
        }
    }

    /// The square as seen from the other side (rotated 180°).
    #[inline]
    pub const fn flip(self) -> Square {
        Square(80 - self.0)
    }

    /// Whether a piece of `color` on this square is in its promotion zone (the far three ranks).
    #[inline]
    pub const fn in_promotion_zone(self, color: Color) -> bool {
        self.relative_rank(color) < 3
    }

    /// Parses USI coordinates such as `7g`.
    pub fn from_usi(s: &str) -> Option<Square> {
        let b = s.as_bytes();
        if b.len() != 2 {
            return None;
        }
        let file = b[0].wrapping_sub(b'1');
        let rank = b[1].wrapping_sub(b'a');
        Square::new(file, rank)
    }

    /// Iterates over all 81 squares in index order (1a, 1b, …, 9i).
    pub fn all() -> impl Iterator<Item = Square> {
        (0..81u8).map(Square)
    }

    pub(crate) fn write_usi(self, out: &mut String) {
        out.push((b'1' + self.file_index()) as char);
        out.push((b'a' + self.rank_index()) as char);
    }
}

impl fmt::Display for Square {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", (b'1' + self.file_index()) as char, (b'a' + self.rank_index()) as char)
    }
}

impl fmt::Debug for Square {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
