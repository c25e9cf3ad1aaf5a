//! Checking a mate line without trusting the solver that produced it.

use std::collections::HashSet;

use koma_shogi::{Move, Position};

/// Replays `line` from `pos` (the attacker to move) and checks that it is a mate: every move is
/// legal, every attacker move gives check, no position repeats (a repetition is never a forced
/// mate), and the last position has no legal move. It checks the line, not that every defence
/// was considered: that is the solver's proof.
pub fn verify_mate_line(pos: &Position, line: &[Move]) -> Result<(), NotMate> {
    if line.len().is_multiple_of(2) {
        return Err(NotMate::EvenLength(line.len()));
    }
    let mut pos = pos.clone();
    let mut seen = HashSet::from([pos.hash()]);
    for (i, &m) in line.iter().enumerate() {
        let ply = i + 1;
        if !pos.is_legal(m) {
            return Err(NotMate::Illegal { ply, mv: m, sfen: pos.to_sfen() });
        }
        if i % 2 == 0 && !pos.gives_check(m) {
            return Err(NotMate::NoCheck { ply, mv: m, sfen: pos.to_sfen() });
        }
        pos.do_move(m);
        if !seen.insert(pos.hash()) {
            return Err(NotMate::Repetition { ply, mv: m });
        }
    }
    if pos.has_legal_move() {
        return Err(NotMate::Escape { sfen: pos.to_sfen() });
    }
    Ok(())
}

/// Why a line is not a mate: what [`verify_mate_line`] found, and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotMate {
    #[error("a mate line has an odd number of moves, this one {0}")]
    EvenLength(usize),
    #[error("move {ply} ({mv}) is not legal in {sfen}")]
    Illegal { ply: usize, mv: Move, sfen: String },
    #[error("attacker move {ply} ({mv}) does not give check in {sfen}")]
    NoCheck { ply: usize, mv: Move, sfen: String },
    #[error("the position after move {ply} ({mv}) repeats an earlier one")]
    Repetition { ply: usize, mv: Move },
    #[error("the defender still has a legal move at the end: {sfen}")]
    Escape { sfen: String },
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
        assert!(matches!(err, NotMate::Escape { .. }) && err.to_string().contains("still has a legal move"), "{err}");
        // Not a check.
        let err = verify_mate_line(&pos, &moves("G*9a")).unwrap_err();
        assert!(matches!(err, NotMate::NoCheck { ply: 1, .. }) && err.to_string().contains("does not give check"));
        // Not legal (no rook in hand).
        let err = verify_mate_line(&pos, &moves("R*5b")).unwrap_err();
        assert!(matches!(err, NotMate::Illegal { ply: 1, .. }) && err.to_string().contains("not legal"), "{err}");
        assert_eq!(verify_mate_line(&pos, &[]), Err(NotMate::EvenLength(0)));
        assert!(NotMate::EvenLength(0).to_string().contains("odd number"));
    }
}
