//! A reproducible problem set for the solvers' tests and `koma bench mate`: positions from
//! seeded random games that favour captures (so hands fill and mates appear), each with the side
//! to move holding at least one check.

use koma_shogi::{Move, Position};

/// `count` positions from random games played with `seed` (without their history).
pub fn random_problems(count: usize, seed: u64) -> Vec<Position> {
    // xorshift needs a nonzero state. Odd seeds are used as they are; an even one gets its top
    // bit flipped and its low bit set, so that it differs from its odd neighbour (`seed | 1` made
    // seeds 2 and 3 the same set).
    let mut state = if seed % 2 == 1 { seed } else { seed ^ 0x8000_0000_0000_0001 };
    let mut below = |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut pos = Position::startpos();
        let plies = 40 + below(120);
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let captures: Vec<Move> = moves.iter().copied().filter(|m| pos.piece_at(m.to()).is_some()).collect();
            let m = if !captures.is_empty() && below(4) > 0 {
                captures[below(captures.len())]
            } else {
                moves[below(moves.len())]
            };
            pos.do_move(m);
        }
        if pos.has_legal_move() && !pos.checking_moves().is_empty() {
            out.push(pos.without_history());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_problems_with_checks() {
        let a = random_problems(12, 7);
        let b = random_problems(12, 7);
        assert_eq!(
            a.iter().map(Position::to_sfen).collect::<Vec<_>>(),
            b.iter().map(Position::to_sfen).collect::<Vec<_>>()
        );
        assert!(a.iter().all(|p| !p.checking_moves().is_empty() && p.has_legal_move()));
        assert_ne!(a[0].to_sfen(), random_problems(1, 8)[0].to_sfen());
        assert_ne!(random_problems(1, 2)[0].to_sfen(), random_problems(1, 3)[0].to_sfen());
    }
}
