//! The left–right reflection of the board (file f ↔ file 10 − f). Every rule of shogi is symmetric
//! under it (piece moves, promotion zones, nifu by file, uchifuzume, impasse points, the Try squares
//! on file 5, repetition), so a mirrored position has exactly the mirrored legal moves and the same
//! game-theoretic value. Training uses it to double its data (`[train] mirror`); the start position
//! is not symmetric (rook on 2h, bishop on 8h), so the mirrored positions are new ones.

use crate::color::Color;
use crate::mv::Move;
use crate::position::Position;
use crate::square::Square;

impl Square {
    /// The square reflected left to right (`7g` ↔ `3g`; file 5 stays).
    #[inline]
    pub const fn mirror(self) -> Square {
        Square::from_index_unchecked((8 - self.file_index()) * 9 + self.rank_index())
    }
}

impl Move {
    /// The move reflected left to right: its squares mirrored, the promotion flag and the dropped
    /// kind kept.
    pub fn mirror(self) -> Move {
        match self.drop_piece_type() {
            Some(pt) => Move::drop(pt, self.to().mirror()),
            None => Move::board(self.from().mirror(), self.to().mirror(), self.is_promotion()),
        }
    }
}

impl Position {
    /// The position reflected left to right: same hands, side to move and move number. Its
    /// history starts here (repetitions are not carried over).
    pub fn mirror(&self) -> Position {
        let mut board = [None; Square::NUM];
        for index in 0..Square::NUM as u8 {
            let sq = Square::from_index_unchecked(index);
            board[sq.mirror().index()] = self.piece_at(sq);
        }
        let hands = [self.hand(Color::Black), self.hand(Color::White)];
        Position::from_board(board, hands, self.side_to_move(), self.move_number())
            .expect("the reflection of a valid position is valid: the rules are symmetric")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn squares_and_moves_reflect_across_file_five() {
        let sq = |s: &str| Square::from_usi(s).unwrap();
        assert_eq!(sq("7g").mirror(), sq("3g"));
        assert_eq!(sq("5e").mirror(), sq("5e"));
        assert_eq!(sq("9a").mirror(), sq("1a"));
        let m = |s: &str| Move::from_usi(s).unwrap();
        assert_eq!(m("7g7f").mirror(), m("3g3f"));
        assert_eq!(m("8h2b+").mirror(), m("2h8b+"));
        assert_eq!(m("P*5e").mirror(), m("P*5e"));
        assert_eq!(m("N*1c").mirror(), m("N*9c"));
        for i in 0..81u8 {
            let s = Square::from_index(i).unwrap();
            assert_eq!(s.mirror().mirror(), s);
        }
    }

    #[test]
    fn the_start_position_mirrors_to_rook_and_bishop_swapped_files() {
        let mirrored = Position::startpos().mirror();
        assert_eq!(mirrored.to_sfen(), "lnsgkgsnl/1b5r1/ppppppppp/9/9/9/PPPPPPPPP/1R5B1/LNSGKGSNL b - 1");
        assert_eq!(mirrored.mirror().to_sfen(), Position::startpos().to_sfen());
    }
}
