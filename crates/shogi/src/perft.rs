//! perft: the number of leaf nodes of the legal-move tree to a given depth, counted in bulk at the
//! last level (the length of the move list, without playing the moves).

use crate::movelist::MoveList;
use crate::position::Position;

pub fn perft(pos: &mut Position, depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    let mut list = MoveList::new();
    pos.generate_legal(&mut list);
    if depth == 1 {
        return list.len() as u64;
    }
    let mut nodes = 0;
    for &m in list.iter() {
        pos.do_move(m);
        nodes += perft(pos, depth - 1);
        pos.undo_move();
    }
    nodes
}

/// perft split by first move, sorted by USI text (for debugging against another engine).
pub fn divide(pos: &mut Position, depth: u32) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if depth == 0 {
        return out;
    }
    for m in pos.legal_moves().iter().copied() {
        pos.do_move(m);
        out.push((m.to_usi(), perft(pos, depth - 1)));
        pos.undo_move();
    }
    out.sort();
    out
}
