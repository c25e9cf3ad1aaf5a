//! The two players. Black (sente, `b` in SFEN) moves first in an even game and plays "up" the
//! board towards rank a; White (gote, `w`) plays towards rank i and moves first in handicap games.

use std::ops::Not;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Color {
    Black = 0,
    White = 1,
}

impl Color {
    pub const ALL: [Color; 2] = [Color::Black, Color::White];

    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The SFEN side-to-move letter.
    pub const fn sfen_char(self) -> char {
        match self {
            Color::Black => 'b',
            Color::White => 'w',
        }
    }

    pub const fn from_sfen_char(c: char) -> Option<Color> {
        match c {
            'b' => Some(Color::Black),
            'w' => Some(Color::White),
            _ => None,
        }
    }
}

impl Not for Color {
    type Output = Color;
    #[inline]
    fn not(self) -> Color {
        match self {
            Color::Black => Color::White,
            Color::White => Color::Black,
        }
    }
}
