//! dlshogi-compatible network input features and move labels.
//!
//! Written from the format's description and checked bit for bit against
//! `cshogi.dlshogi.make_input_features` / `make_move_label` (tests/cshogi_parity.rs and
//! python/tests/test_nn_features.py); docs/nn.md has the tables.
//!
//! Everything is seen from the side to move: "us" is the side to move, and when White is to move
//! every square is rotated 180° (index `sq` becomes `80 - sq`, which flips file and rank).
//! A 9×9 plane is laid out `[file][rank]` (index `file * 9 + rank`, koma's square index), so a
//! plane is 81 consecutive bytes in square order.
//!
//! **input1**, 62 planes = 2 × 31, first "us" then "them":
//! - 14 piece planes, one per [`PieceType`] in koma's (= YaneuraOu's) numbering (pawn, lance,
//!   knight, silver, bishop, rook, gold, king, +pawn, +lance, +knight, +silver, horse, dragon):
//!   1 on the squares holding such a piece of that colour;
//! - 14 attack planes, same order: 1 on every square a piece of that type and colour attacks
//!   (occupancy of both colours blocks sliders; the squares of blockers, own or enemy, count);
//! - 3 attack-count planes: plane k is 1 where at least k+1 pieces of that colour attack.
//!
//! **input2**, 57 planes (each plane all 0 or all 1): 2 × 28 hand planes, "us" then "them": pawn
//! 8, lance 4, knight 4, silver 4, gold 4, bishop 2, rook 2, where the first n planes of a kind
//! are 1 when the hand holds n (capped at the plane count); then 1 plane that is 1 when the side
//! to move is in check.
//!
//! **Move labels**: `direction * 81 + to`, with `to` rotated like the board and 27 directions:
//! 0 up, 1 up-left, 2 up-right, 3 left, 4 right, 5 down, 6 down-left, 7 down-right,
//! 8 knight up-left, 9 knight up-right (as seen by the mover, "left" = towards file 9 for
//! Black), +10 for promotions, 20 + kind for drops in piece-type order (pawn, lance, knight,
//! silver, bishop, rook, gold; note: not the order of the hand planes, which put gold before
//! bishop).

use std::borrow::Borrow;

use koma_shogi::attacks;
use koma_shogi::{Bitboard, Color, Move, PieceType, Position, Square};
use rayon::prelude::*;

/// Name and version of the encoding, recorded in every checkpoint.
pub const ENCODING_NAME: &str = "dlshogi";
pub const ENCODING_VERSION: u32 = 1;

/// Squares per plane.
pub const SQUARES: usize = 81;
/// Board planes (`input1`).
pub const FEATURES1_NUM: usize = 62;
/// Hand and check planes (`input2`).
pub const FEATURES2_NUM: usize = 57;
/// Bytes of one position's `input1` / `input2`.
pub const INPUT1_LEN: usize = FEATURES1_NUM * SQUARES;
pub const INPUT2_LEN: usize = FEATURES2_NUM * SQUARES;
/// Move directions (10 board moves, 10 promoting, 7 drops).
pub const MOVE_DIRECTIONS: usize = 27;
/// Policy outputs: `MOVE_DIRECTIONS * 81`.
pub const MOVE_LABELS: usize = MOVE_DIRECTIONS * SQUARES;

const PIECE_TYPES: usize = 14;
/// Planes per colour in input1: pieces, attacks, attack counts.
const PLANES1_PER_COLOR: usize = PIECE_TYPES * 2 + MAX_ATTACK_NUM;
const MAX_ATTACK_NUM: usize = 3;
/// Planes per colour in input2.
const PLANES2_PER_COLOR: usize = 28;
/// The in-check plane of input2.
const CHECK_PLANE: usize = 2 * PLANES2_PER_COLOR;

/// Hand kinds in plane order, with their first plane and plane count within a colour's 28.
pub const HAND_PLANES: [(PieceType, usize, usize); 7] = [
    (PieceType::Pawn, 0, 8),
    (PieceType::Lance, 8, 4),
    (PieceType::Knight, 12, 4),
    (PieceType::Silver, 16, 4),
    (PieceType::Gold, 20, 4),
    (PieceType::Bishop, 24, 2),
    (PieceType::Rook, 26, 2),
];

/// Direction numbers of board moves (add [`PROMOTE_OFFSET`] for promotions).
pub mod direction {
    pub const UP: usize = 0;
    pub const UP_LEFT: usize = 1;
    pub const UP_RIGHT: usize = 2;
    pub const LEFT: usize = 3;
    pub const RIGHT: usize = 4;
    pub const DOWN: usize = 5;
    pub const DOWN_LEFT: usize = 6;
    pub const DOWN_RIGHT: usize = 7;
    pub const UP2_LEFT: usize = 8;
    pub const UP2_RIGHT: usize = 9;
    /// Added to a board move's direction when it promotes.
    pub const PROMOTE_OFFSET: usize = 10;
    /// Direction of a drop of kind `pt` is `DROP + drop_index(pt)` (see [`super::drop_index`]).
    pub const DROP: usize = 20;
}

/// Index of a hand kind in drop-label order: pawn 0, lance 1, knight 2, silver 3, bishop 4,
/// rook 5, gold 6 (piece-type order, `PieceType as usize - 1`).
#[inline]
pub const fn drop_index(pt: PieceType) -> usize {
    debug_assert!((pt as usize) >= 1 && (pt as usize) <= 7);
    pt as usize - 1
}

/// The square index as seen by `us` (rotated 180° for White).
#[inline(always)]
fn view(sq: usize, us: Color) -> usize {
    match us {
        Color::Black => sq,
        Color::White => 80 - sq,
    }
}

/// Writes the features of `pos` into `input1` (`INPUT1_LEN` bytes) and `input2` (`INPUT2_LEN`
/// bytes), overwriting them completely. Values are 0 or 1.
///
/// Works on bitboards (pieces, attacks, and saturating attack counters per colour): the planes
/// are zeroed, then only groups of eight squares holding a 1 are written, eight bytes at a time.
pub fn encode_position(pos: &Position, input1: &mut [u8], input2: &mut [u8]) {
    let input1 = &mut input1[..INPUT1_LEN];
    let input2 = &mut input2[..INPUT2_LEN];
    input1.fill(0);
    let us = pos.side_to_move();
    let occ = pos.occupied();
    let write = match us {
        Color::Black => write_plane,
        Color::White => write_plane_rotated,
    };

    for (group, color) in [(0usize, us), (1usize, !us)] {
        let planes = &mut input1[group * PLANES1_PER_COLOR * SQUARES..(group + 1) * PLANES1_PER_COLOR * SQUARES];
        let mut attacked = [Bitboard::EMPTY; PIECE_TYPES];
        // at_least[k]: squares attacked by at least k+1 pieces of `color`.
        let mut at_least = [Bitboard::EMPTY; MAX_ATTACK_NUM];
        for (t, pt) in PieceType::ALL.into_iter().enumerate() {
            let pieces = pos.pieces(color, pt);
            if pieces.is_empty() {
                continue;
            }
            write(&mut planes[t * SQUARES..(t + 1) * SQUARES], pieces);
            for sq in pieces {
                let a = attacks::attacks(color, pt, sq, occ);
                attacked[t] |= a;
                at_least[2] |= at_least[1] & a;
                at_least[1] |= at_least[0] & a;
                at_least[0] |= a;
            }
        }
        for (t, &a) in attacked.iter().enumerate() {
            let p = PIECE_TYPES + t;
            write(&mut planes[p * SQUARES..(p + 1) * SQUARES], a);
        }
        for (k, &a) in at_least.iter().enumerate() {
            let p = 2 * PIECE_TYPES + k;
            write(&mut planes[p * SQUARES..(p + 1) * SQUARES], a);
        }

        let hand = pos.hand(color);
        let base = group * PLANES2_PER_COLOR;
        for (pt, first, max) in HAND_PLANES {
            let n = (hand.count(pt) as usize).min(max);
            let kind = &mut input2[(base + first) * SQUARES..(base + first + max) * SQUARES];
            kind[..n * SQUARES].fill(1);
            kind[n * SQUARES..].fill(0);
        }
    }
    input2[CHECK_PLANE * SQUARES..(CHECK_PLANE + 1) * SQUARES].fill(pos.in_check() as u8);
}

/// Byte `i` of `EXPAND[b]` is bit `i` of `b`: eight squares' 0/1 bytes at once.
const EXPAND: [u64; 256] = expand_table(false);
/// Byte `i` of `EXPAND_REVERSED[b]` is bit `7 − i` of `b` (for the rotated view).
const EXPAND_REVERSED: [u64; 256] = expand_table(true);

const fn expand_table(reversed: bool) -> [u64; 256] {
    let mut table = [0u64; 256];
    let mut i = 0;
    while i < 256 {
        let mut v = 0u64;
        let mut bit = 0;
        while bit < 8 {
            if (i >> bit) & 1 == 1 {
                let byte = if reversed { 7 - bit } else { bit };
                v |= 1 << (8 * byte);
            }
            bit += 1;
        }
        table[i] = v;
        i += 1;
    }
    table
}

/// Sets the 0/1 bytes of a zeroed 81-byte plane from a bitboard, square `i` at byte `i`. Only
/// groups of eight squares with a bit set are written.
#[inline(always)]
fn write_plane(out: &mut [u8], bb: Bitboard) {
    let out: &mut [u8; SQUARES] = out.try_into().expect("a plane is 81 bytes");
    let bytes = bb.0.to_le_bytes();
    for k in 0..10 {
        if bytes[k] != 0 {
            out[8 * k..8 * k + 8].copy_from_slice(&EXPAND[bytes[k] as usize].to_le_bytes());
        }
    }
    out[80] = bytes[10] & 1;
}

/// Like [`write_plane`] with the board rotated 180°: square `i` at byte `80 − i`.
#[inline(always)]
fn write_plane_rotated(out: &mut [u8], bb: Bitboard) {
    let out: &mut [u8; SQUARES] = out.try_into().expect("a plane is 81 bytes");
    let bytes = bb.0.to_le_bytes();
    for k in 0..10 {
        if bytes[k] != 0 {
            // Squares 8k..8k+7 land on bytes 80−8k … 73−8k.
            out[73 - 8 * k..81 - 8 * k].copy_from_slice(&EXPAND_REVERSED[bytes[k] as usize].to_le_bytes());
        }
    }
    out[0] = bytes[10] & 1;
}

/// The policy label (0..2187) of `m` played by `color`.
#[inline]
pub fn move_label(m: Move, color: Color) -> usize {
    let to = view(m.to().index(), color);
    let dir = match m.drop_piece_type() {
        Some(pt) => direction::DROP + drop_index(pt),
        None => {
            let from = view(m.from().index(), color);
            // File and rank differences from the mover's point of view: dr > 0 moves "up".
            let df = (from / 9) as i32 - (to / 9) as i32;
            let dr = (from % 9) as i32 - (to % 9) as i32;
            use direction::*;
            let d = if dr == 2 && df == -1 {
                UP2_LEFT
            } else if dr == 2 && df == 1 {
                UP2_RIGHT
            } else {
                match (df.signum(), dr.signum()) {
                    (0, 1) => UP,
                    (-1, 1) => UP_LEFT,
                    (1, 1) => UP_RIGHT,
                    (-1, 0) => LEFT,
                    (1, 0) => RIGHT,
                    (0, -1) => DOWN,
                    (-1, -1) => DOWN_LEFT,
                    (1, -1) => DOWN_RIGHT,
                    _ => UP, // from == to: no such move
                }
            };
            if m.is_promotion() {
                d + PROMOTE_OFFSET
            } else {
                d
            }
        }
    };
    dir * SQUARES + to
}

/// The move `label` stands for in `pos`, if a legal move has that label.
pub fn move_from_label(pos: &Position, label: usize) -> Option<Move> {
    let us = pos.side_to_move();
    pos.legal_moves().iter().copied().find(|&m| move_label(m, us) == label)
}

/// Labels of `moves` (played by the side to move of `pos`), appended to `out` in the same order.
pub fn legal_labels(pos: &Position, moves: &[Move], out: &mut Vec<u16>) {
    let us = pos.side_to_move();
    out.extend(moves.iter().map(|&m| move_label(m, us) as u16));
}

/// A 0/1 mask over the 2187 labels: 1 for every legal move of `pos`. `mask` must hold
/// `MOVE_LABELS` bytes; it is overwritten.
pub fn legal_mask(pos: &Position, mask: &mut [u8]) {
    let mask = &mut mask[..MOVE_LABELS];
    mask.fill(0);
    let us = pos.side_to_move();
    for &m in pos.legal_moves().iter() {
        mask[move_label(m, us)] = 1;
    }
}

/// The logits of the given labels, in order (`out` is cleared first).
pub fn gather_logits(policy_logits: &[f32], labels: &[u16], out: &mut Vec<f32>) {
    out.clear();
    out.extend(labels.iter().map(|&l| policy_logits[l as usize]));
}

/// Softmax in place (numerically stable); an empty slice stays empty.
pub fn softmax_in_place(xs: &mut [f32]) {
    let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        // All -inf (or NaN): fall back to uniform rather than NaN priors.
        let n = xs.len() as f32;
        xs.iter_mut().for_each(|x| *x = 1.0 / n);
        return;
    }
    let mut sum = 0.0f32;
    for x in xs.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    let inv = 1.0 / sum;
    xs.iter_mut().for_each(|x| *x *= inv);
}

/// Priors over the legal moves: softmax of their logits (policy temperature 1).
pub fn legal_priors(policy_logits: &[f32], labels: &[u16], out: &mut Vec<f32>) {
    gather_logits(policy_logits, labels, out);
    softmax_in_place(out);
}

/// A reusable, growable batch of encoded positions: `input1` is `(N, 62, 9, 9)` and `input2`
/// `(N, 57, 9, 9)`, row-major u8. Encoding into it allocates nothing once it has grown to the
/// largest batch used.
#[derive(Debug, Default, Clone)]
pub struct InputBatch {
    input1: Vec<u8>,
    input2: Vec<u8>,
    len: usize,
}

impl InputBatch {
    pub fn new() -> InputBatch {
        InputBatch::default()
    }

    pub fn with_capacity(positions: usize) -> InputBatch {
        let mut b = InputBatch::new();
        b.reserve(positions);
        b
    }

    /// Makes room for `positions` without reallocating later.
    pub fn reserve(&mut self, positions: usize) {
        if self.input1.len() < positions * INPUT1_LEN {
            self.input1.resize(positions * INPUT1_LEN, 0);
            self.input2.resize(positions * INPUT2_LEN, 0);
        }
    }

    /// Positions held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions it can hold without growing.
    pub fn capacity(&self) -> usize {
        self.input1.len() / INPUT1_LEN
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Replaces the contents with `positions`, encoded in parallel (rayon) above a small batch
    /// size and on this thread below it.
    pub fn encode<P: Borrow<Position> + Sync>(&mut self, positions: &[P]) {
        self.len = 0;
        self.reserve(positions.len());
        let n = positions.len();
        let in1 = &mut self.input1[..n * INPUT1_LEN];
        let in2 = &mut self.input2[..n * INPUT2_LEN];
        if n >= PARALLEL_MIN {
            in1.par_chunks_mut(INPUT1_LEN * PARALLEL_CHUNK)
                .zip(in2.par_chunks_mut(INPUT2_LEN * PARALLEL_CHUNK))
                .zip(positions.par_chunks(PARALLEL_CHUNK))
                .for_each(|((a, b), ps)| {
                    for ((a, b), p) in a.chunks_mut(INPUT1_LEN).zip(b.chunks_mut(INPUT2_LEN)).zip(ps) {
                        encode_position(p.borrow(), a, b);
                    }
                });
        } else {
            for ((a, b), p) in in1.chunks_mut(INPUT1_LEN).zip(in2.chunks_mut(INPUT2_LEN)).zip(positions) {
                encode_position(p.borrow(), a, b);
            }
        }
        self.len = n;
    }

    /// Appends one position (serially); for gathering leaves one at a time.
    pub fn push(&mut self, pos: &Position) {
        let i = self.len;
        if self.capacity() <= i {
            self.reserve((i + 1).max(2 * self.capacity()));
        }
        let (a, b) = (
            &mut self.input1[i * INPUT1_LEN..(i + 1) * INPUT1_LEN],
            &mut self.input2[i * INPUT2_LEN..(i + 1) * INPUT2_LEN],
        );
        encode_position(pos, a, b);
        self.len += 1;
    }

    /// Appends already encoded features (`INPUT1_LEN` and `INPUT2_LEN` bytes).
    pub fn push_encoded(&mut self, input1: &[u8], input2: &[u8]) {
        let i = self.len;
        if self.capacity() <= i {
            self.reserve((i + 1).max(2 * self.capacity()));
        }
        self.input1[i * INPUT1_LEN..(i + 1) * INPUT1_LEN].copy_from_slice(&input1[..INPUT1_LEN]);
        self.input2[i * INPUT2_LEN..(i + 1) * INPUT2_LEN].copy_from_slice(&input2[..INPUT2_LEN]);
        self.len += 1;
    }

    /// Makes this a copy of `other`, reusing its own buffers.
    pub fn copy_from(&mut self, other: &InputBatch) {
        self.len = 0;
        self.reserve(other.len);
        self.input1[..other.input1().len()].copy_from_slice(other.input1());
        self.input2[..other.input2().len()].copy_from_slice(other.input2());
        self.len = other.len;
    }

    /// `(N, 62, 9, 9)` bytes of the positions held.
    #[inline]
    pub fn input1(&self) -> &[u8] {
        &self.input1[..self.len * INPUT1_LEN]
    }

    /// `(N, 57, 9, 9)` bytes of the positions held.
    #[inline]
    pub fn input2(&self) -> &[u8] {
        &self.input2[..self.len * INPUT2_LEN]
    }

    /// Features of position `i`.
    pub fn get(&self, i: usize) -> (&[u8], &[u8]) {
        assert!(i < self.len);
        (&self.input1[i * INPUT1_LEN..(i + 1) * INPUT1_LEN], &self.input2[i * INPUT2_LEN..(i + 1) * INPUT2_LEN])
    }
}

/// Batches at least this large are encoded with rayon.
pub(crate) const PARALLEL_MIN: usize = 32;
/// Positions per rayon task.
pub(crate) const PARALLEL_CHUNK: usize = 8;

/// The destination square (board coordinates) of a label for a move by `us`.
pub fn label_square(label: usize, us: Color) -> Square {
    Square::from_index(view(label % SQUARES, us) as u8).expect("label < 2187")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The straightforward per-square version of [`encode_position`], kept to cross-check the
    /// bitboard one.
    fn encode_reference(pos: &Position, input1: &mut [u8], input2: &mut [u8]) {
        input1.fill(0);
        input2.fill(0);
        let us = pos.side_to_move();
        let occ = pos.occupied();
        for (group, color) in [(0usize, us), (1usize, !us)] {
            let planes = &mut input1[group * PLANES1_PER_COLOR * SQUARES..(group + 1) * PLANES1_PER_COLOR * SQUARES];
            let mut counts = [0u8; SQUARES];
            for sq in pos.pieces_of(color) {
                let pt = pos.piece_at(sq).unwrap().piece_type();
                let t = pt as usize - 1;
                planes[t * SQUARES + view(sq.index(), us)] = 1;
                for to in attacks::attacks(color, pt, sq, occ) {
                    let v = view(to.index(), us);
                    planes[(PIECE_TYPES + t) * SQUARES + v] = 1;
                    counts[v] += 1;
                }
            }
            for (v, &n) in counts.iter().enumerate() {
                for k in 0..(n as usize).min(MAX_ATTACK_NUM) {
                    planes[(2 * PIECE_TYPES + k) * SQUARES + v] = 1;
                }
            }
            let hand = pos.hand(color);
            for (pt, first, max) in HAND_PLANES {
                let n = (hand.count(pt) as usize).min(max);
                let base = group * PLANES2_PER_COLOR + first;
                input2[base * SQUARES..(base + n) * SQUARES].fill(1);
            }
        }
        if pos.in_check() {
            input2[CHECK_PLANE * SQUARES..(CHECK_PLANE + 1) * SQUARES].fill(1);
        }
    }

    #[test]
    fn bitboard_encoder_matches_reference() {
        // Random playouts from the start and from a position with big hands, both sides.
        let mut seed = 12345u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let starts = [
            koma_shogi::STARTPOS_SFEN,
            "4k4/9/9/9/9/9/9/9/4K4 w 2R2B4G4S4N4L9P9p 1",
            "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1",
        ];
        let (mut a, mut b) = (vec![0u8; INPUT1_LEN], vec![0u8; INPUT2_LEN]);
        let (mut c, mut d) = (vec![0u8; INPUT1_LEN], vec![0u8; INPUT2_LEN]);
        let mut checked = 0;
        for start in starts {
            for _ in 0..20 {
                let mut pos = Position::from_sfen(start).unwrap();
                for _ in 0..(next() % 120) {
                    // Garbage in the buffers must not leak into the output.
                    a.fill(9);
                    b.fill(9);
                    encode_position(&pos, &mut a, &mut b);
                    encode_reference(&pos, &mut c, &mut d);
                    assert_eq!((&a, &b), (&c, &d), "{}", pos.to_sfen());
                    checked += 1;
                    let moves = pos.legal_moves();
                    if moves.is_empty() {
                        break;
                    }
                    pos.do_move(moves[(next() % moves.len() as u64) as usize]);
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    fn features(sfen: &str) -> (Vec<u8>, Vec<u8>) {
        let pos = Position::from_sfen(sfen).unwrap();
        let mut a = vec![7u8; INPUT1_LEN];
        let mut b = vec![7u8; INPUT2_LEN];
        encode_position(&pos, &mut a, &mut b);
        (a, b)
    }

    fn set_squares(plane: &[u8]) -> Vec<usize> {
        plane.iter().enumerate().filter(|(_, &v)| v != 0).map(|(i, _)| i).collect()
    }

    #[test]
    fn rook_and_kings_black_to_move() {
        // Values checked against cshogi by hand (see docs/nn.md).
        let (a, b) = features("4k4/9/4p4/9/4R4/9/9/9/4K4 b - 1");
        assert!(a.iter().all(|&v| v <= 1));
        let plane = |p: usize| set_squares(&a[p * 81..(p + 1) * 81]);
        assert_eq!(plane(5), vec![4 * 9 + 4]); // our rook on 5e
        assert_eq!(plane(7), vec![4 * 9 + 8]); // our king on 5i
                                               // Rook attacks include our own king's square and the blocking enemy pawn's.
        assert_eq!(plane(19).len(), 14);
        assert!(plane(19).contains(&(4 * 9 + 8)) && plane(19).contains(&(4 * 9 + 2)));
        assert_eq!(plane(31), vec![4 * 9 + 2]); // their pawn on 5c
        assert_eq!(plane(31 + 14), vec![4 * 9 + 3]); // which attacks 5d
        assert_eq!(plane(29), vec![4 * 9 + 7]); // 5h attacked twice (rook, king)
        assert!(plane(30).is_empty());
        assert_eq!(plane(31 + 7), vec![4 * 9]); // their king on 5a
        assert!(b.iter().all(|&v| v == 0));
    }

    #[test]
    fn white_to_move_rotates_and_hands() {
        let (a, b) = features("4k4/9/9/9/4R4/9/9/9/4K4 w 2P3p2B 1");
        let plane = |p: usize| set_squares(&a[p * 81..(p + 1) * 81]);
        assert_eq!(plane(7), vec![80 - 4 * 9]); // our (White's) king, rotated
        assert_eq!(plane(31 + 5), vec![80 - (4 * 9 + 4)]); // their rook
        let full: Vec<usize> = (0..57).filter(|&p| b[p * 81..(p + 1) * 81].iter().all(|&v| v == 1)).collect();
        let any: Vec<usize> = (0..57).filter(|&p| b[p * 81..(p + 1) * 81].contains(&1)).collect();
        assert_eq!(full, any);
        // us: 3 pawns; them: 2 pawns, 2 bishops; White is in check from the rook.
        assert_eq!(full, vec![0, 1, 2, 28, 29, 52, 53, 56]);
    }

    #[test]
    fn labels_of_start_moves() {
        let pos = Position::startpos();
        let us = pos.side_to_move();
        let lab = |usi: &str| move_label(Move::from_usi(usi).unwrap(), us);
        // 7g7f: up, to 7f = file index 6, rank index 5.
        assert_eq!(lab("7g7f"), 6 * 9 + 5);
        // 2h3h (rook one to the left as Black sees it? file 2 → 3 is towards file 9: left).
        assert_eq!(lab("2h3h"), direction::LEFT * 81 + 2 * 9 + 7);
        let w = Color::White;
        // White's 3c3d is "up" for White; 3d rotated = 80 - (2*9+3).
        assert_eq!(move_label(Move::from_usi("3c3d").unwrap(), w), 80 - (2 * 9 + 3));
        assert_eq!(move_label(Move::from_usi("P*5e").unwrap(), Color::Black), 20 * 81 + 4 * 9 + 4);
        assert_eq!(move_label(Move::from_usi("R*1a").unwrap(), Color::White), 25 * 81 + 80);
        assert_eq!(move_label(Move::from_usi("G*9i").unwrap(), Color::Black), 26 * 81 + 80);
        assert_eq!(move_label(Move::from_usi("B*9i").unwrap(), Color::Black), 24 * 81 + 80);
    }

    #[test]
    fn labels_are_unique_among_legal_moves() {
        for sfen in [
            koma_shogi::STARTPOS_SFEN,
            "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1",
            "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1",
        ] {
            let pos = Position::from_sfen(sfen).unwrap();
            let mut labels = Vec::new();
            legal_labels(&pos, &pos.legal_moves(), &mut labels);
            let mut sorted = labels.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), labels.len(), "{sfen}");
            assert!(labels.iter().all(|&l| (l as usize) < MOVE_LABELS));
            for (&m, &l) in pos.legal_moves().iter().zip(&labels) {
                assert_eq!(move_from_label(&pos, l as usize), Some(m));
            }
        }
    }

    #[test]
    fn batch_encoding_matches_single_and_reuses_memory() {
        let mut positions = Vec::new();
        let mut pos = Position::startpos();
        for usi in ["7g7f", "3c3d", "8h2b+", "3a2b", "B*4e", "8b8h"] {
            positions.push(pos.clone());
            pos.do_move(Move::from_usi(usi).unwrap());
        }
        let many: Vec<Position> = positions.iter().cycle().take(100).cloned().collect();
        let mut batch = InputBatch::with_capacity(100);
        let ptr = batch.input1().as_ptr();
        batch.encode(&many);
        assert_eq!(batch.len(), 100);
        assert_eq!(batch.input1().as_ptr(), ptr);
        for (i, p) in many.iter().enumerate() {
            let mut a = vec![0u8; INPUT1_LEN];
            let mut b = vec![0u8; INPUT2_LEN];
            encode_position(p, &mut a, &mut b);
            assert_eq!(batch.get(i), (&a[..], &b[..]), "position {i}");
        }
        batch.encode(&many[..3]);
        assert_eq!(batch.len(), 3);
        assert_eq!(batch.input1().len(), 3 * INPUT1_LEN);
    }

    #[test]
    fn mask_and_priors() {
        let pos = Position::startpos();
        let mut mask = vec![0u8; MOVE_LABELS];
        legal_mask(&pos, &mut mask);
        assert_eq!(mask.iter().map(|&v| v as usize).sum::<usize>(), 30);
        let logits: Vec<f32> = (0..MOVE_LABELS).map(|i| (i % 7) as f32 * 0.1).collect();
        let mut labels = Vec::new();
        legal_labels(&pos, &pos.legal_moves(), &mut labels);
        let mut priors = Vec::new();
        legal_priors(&logits, &labels, &mut priors);
        assert_eq!(priors.len(), 30);
        assert!((priors.iter().sum::<f32>() - 1.0).abs() < 1e-5);
    }
}
