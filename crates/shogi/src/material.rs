//! Material: the conventional piece values of shogi engines, in pawns. The rules never need them;
//! the `greedy` and `mcts-material` reference players and the trainer's material value target
//! (docs/training.md) do, and they must agree on one table.

use crate::{Color, PieceType, Position};

/// Material value of a piece type, in pawns (hand pieces count as their unpromoted type; the
/// king counts 0).
pub fn piece_value(pt: PieceType) -> i32 {
    match pt {
        PieceType::Pawn => 1,
        PieceType::Lance => 3,
        PieceType::Knight => 4,
        PieceType::Silver => 5,
        PieceType::Gold => 6,
        PieceType::Bishop => 8,
        PieceType::Rook => 10,
        PieceType::King => 0,
        PieceType::ProPawn | PieceType::ProLance | PieceType::ProKnight | PieceType::ProSilver => 6,
        PieceType::Horse => 10,
        PieceType::Dragon => 12,
    }
}

/// Material balance for `color`, board and hand, in pawns: its pieces minus the opponent's.
pub fn material(pos: &Position, color: Color) -> i32 {
    let mut total = 0;
    for c in Color::ALL {
        let sign = if c == color { 1 } else { -1 };
        for pt in PieceType::ALL {
            total += sign * piece_value(pt) * pos.pieces(c, pt).count() as i32;
        }
        for pt in PieceType::HAND {
            total += sign * piece_value(pt) * pos.hand(c).count(pt) as i32;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Move;

    #[test]
    fn the_start_is_even_and_a_capture_moves_the_balance_by_twice_nothing_but_the_piece() {
        let start = Position::startpos();
        assert_eq!(material(&start, Color::Black), 0);
        // Rook and bishop in hand against nothing: 18 for the owner, −18 for the other side.
        let pos = Position::from_sfen("4k4/9/9/9/9/9/9/9/4K4 b RB 1").unwrap();
        assert_eq!(material(&pos, Color::Black), 18);
        assert_eq!(material(&pos, Color::White), -18);
        // A dragon on the board counts 12; capturing a pawn adds 1 and takes a pawn from the
        // opponent's side of the balance (the pawn goes to the hand as a pawn).
        let mut pos = Position::from_sfen("4k4/9/4p4/9/9/9/9/4R4/4K4 b - 1").unwrap();
        assert_eq!(material(&pos, Color::Black), 10 - 1);
        pos.do_move(Move::from_usi("5h5c+").unwrap());
        assert_eq!(material(&pos, Color::Black), 12 + 1);
    }
}
