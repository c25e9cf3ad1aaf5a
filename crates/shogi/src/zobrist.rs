//! Zobrist keys for board, hands and side to move, generated at compile time by a fixed PRNG so
//! hashes are identical across runs and machines (they are written into training data).

use crate::color::Color;
use crate::piece::{Piece, PieceType};
use crate::square::Square;

const fn splitmix(state: u64) -> (u64, u64) {
    let state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (state, z ^ (z >> 31))
}

struct Keys {
    board: [[u64; 81]; 28],
    /// `hand[color][piece type][n]`: XORed in while the hand holds at least `n` of the kind.
    hand: [[[u64; 32]; 8]; 2],
    /// `hand_total[color][piece type][n]`: the XOR of `hand[color][piece type][1..=n]`, the part
    /// of the hash a hand holding `n` of the kind contributes.
    hand_total: [[[u64; 32]; 8]; 2],
    side: u64,
}

const fn make_keys() -> Keys {
    let mut keys = Keys { board: [[0; 81]; 28], hand: [[[0; 32]; 8]; 2], hand_total: [[[0; 32]; 8]; 2], side: 0 };
    let mut state = 0x6b6f_6d61_u64; // "koma"
    let mut p = 0;
    while p < 28 {
        let mut sq = 0;
        while sq < 81 {
            let (s, k) = splitmix(state);
            state = s;
            keys.board[p][sq] = k;
            sq += 1;
        }
        p += 1;
    }
    let mut c = 0;
    while c < 2 {
        let mut pt = 1;
        while pt < 8 {
            let mut n = 1;
            while n < 32 {
                let (s, k) = splitmix(state);
                state = s;
                keys.hand[c][pt][n] = k;
                keys.hand_total[c][pt][n] = keys.hand_total[c][pt][n - 1] ^ k;
                n += 1;
            }
            pt += 1;
        }
        c += 1;
    }
    let (_, side) = splitmix(state);
    keys.side = side;
    keys
}

static KEYS: Keys = make_keys();

#[inline]
pub(crate) fn piece_square(piece: Piece, sq: Square) -> u64 {
    KEYS.board[piece.index()][sq.index()]
}

/// The key toggled when a hand's count of `pt` changes between `n - 1` and `n`.
#[inline]
pub(crate) fn hand(color: Color, pt: PieceType, n: u32) -> u64 {
    KEYS.hand[color.index()][pt.index()][n as usize]
}

/// The part of the hash that `color` holding `n` of `pt` in hand contributes.
#[inline]
pub(crate) fn hand_total(color: Color, pt: PieceType, n: u32) -> u64 {
    KEYS.hand_total[color.index()][pt.index()][n as usize]
}

#[inline]
pub(crate) fn side() -> u64 {
    KEYS.side
}
