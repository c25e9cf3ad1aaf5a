//! Checking a mate line without trusting the solver that produced it.

use std::collections::HashSet;

use koma_shogi::{Move, Position};

/// Replays `line` from `pos` (the attacker to move) and checks that it is a mate: every move is
/// legal, every attacker move gives check, no position repeats (a repetition is never a forced
/// mate), and the last position has no legal move. It checks the line, not that every defence
/// was considered: that is the solver's proof.
pub fn verify_mate_line(pos: &Position, line: &[Move]) -> Result<(), String> {
    if line.len().is_multiple_of(2) {
        return Err(format!("a mate line has an odd number of moves, this one {}", line.len()));
    }
    let mut pos = pos.clone();
    let mut seen = HashSet::from([pos.hash()]);
    for (i, &m) in line.iter().enumerate() {
        if !pos.is_legal(m) {
            return Err(format!("move {} ({m}) is not legal in {}", i + 1, pos.to_sfen()));
        }
        if i % 2 == 0 && !pos.gives_check(m) {
            return Err(format!("attacker move {} ({m}) does not give check in {}", i + 1, pos.to_sfen()));
        }
        pos.do_move(m);
        if !seen.insert(pos.hash()) {
            return Err(format!("the position after move {} ({m}) repeats an earlier one", i + 1));
        }
    }
    if pos.has_legal_move() {
        return Err(format!("the defender still has a legal move at the end: {}", pos.to_sfen()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moves(usi: &str) -> Vec<Move> {
        usi.split_whitespace().map(|m| Move::from_usi(m).unwrap()).collect()
    }

    #[test]
    fn accepts_a_mate_and_names_what_is_wrong_otherwise() {
        let pos = Position::from_sfen("4k4/9/4P4/9/9/9/9/9/4K4 b G 1").unwrap();
        assert_eq!(verify_mate_line(&pos, &moves("G*5b")), Ok(()));
        // Not mate: the king escapes.
        let err = verify_mate_line(&pos, &moves("G*4b")).unwrap_err();
        assert!(err.contains("still has a legal move"), "{err}");
        // Not a check.
        let err = verify_mate_line(&pos, &moves("G*9a")).unwrap_err();
        assert!(err.contains("does not give check"), "{err}");
        // Not legal (no rook in hand).
        let err = verify_mate_line(&pos, &moves("R*5b")).unwrap_err();
        assert!(err.contains("not legal"), "{err}");
        assert!(verify_mate_line(&pos, &[]).unwrap_err().contains("odd number"));
    }
}
