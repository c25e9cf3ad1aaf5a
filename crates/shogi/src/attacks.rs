//! Attack tables, all computed at compile time.
//!
//! Step pieces use one table per colour, kind and square. Sliding pieces use the squares of one
//! line at a time: the line's inner occupancy (at most 7 bits) is gathered into a small index by a
//! single 64×64→128-bit multiplication (the bits sit at a fixed stride, so a constant multiplier
//! lines them up without carries), and a per-position pattern table gives the attacked squares of
//! the line. The tables are a few tens of KiB and stay in cache; no magic numbers are searched for.

use crate::bitboard::Bitboard;
use crate::color::Color;
use crate::piece::PieceType;
use crate::square::Square;

/// The eight directions as (file step, rank step); rank step −1 is towards rank a (Black's forward).
/// Directions come in opposite pairs: `d ^ 1` is the opposite of `d`.
const DIRS: [(i8, i8); 8] = [(0, -1), (0, 1), (-1, 0), (1, 0), (-1, -1), (1, 1), (-1, 1), (1, -1)];
const NORTH: usize = 0;
const SOUTH: usize = 1;

const fn offset(sq: usize, df: i8, dr: i8) -> Option<usize> {
    let f = (sq / 9) as i8 + df;
    let r = (sq % 9) as i8 + dr;
    if f >= 0 && f < 9 && r >= 0 && r < 9 {
        Some((f * 9 + r) as usize)
    } else {
        None
    }
}

const fn step_table(steps: &[(i8, i8)], color: Color) -> [u128; 81] {
    let mut table = [0u128; 81];
    let mut sq = 0;
    while sq < 81 {
        let mut i = 0;
        while i < steps.len() {
            let (df, dr) = steps[i];
            let dr = if matches!(color, Color::White) { -dr } else { dr };
            if let Some(to) = offset(sq, df, dr) {
                table[sq] |= 1u128 << to;
            }
            i += 1;
        }
        sq += 1;
    }
    table
}

const PAWN_STEPS: [(i8, i8); 1] = [(0, -1)];
const KNIGHT_STEPS: [(i8, i8); 2] = [(-1, -2), (1, -2)];
const SILVER_STEPS: [(i8, i8); 5] = [(-1, -1), (0, -1), (1, -1), (-1, 1), (1, 1)];
const GOLD_STEPS: [(i8, i8); 6] = [(-1, -1), (0, -1), (1, -1), (-1, 0), (1, 0), (0, 1)];
const KING_STEPS: [(i8, i8); 8] = DIRS;

static PAWN: [[u128; 81]; 2] = [step_table(&PAWN_STEPS, Color::Black), step_table(&PAWN_STEPS, Color::White)];
static KNIGHT: [[u128; 81]; 2] = [step_table(&KNIGHT_STEPS, Color::Black), step_table(&KNIGHT_STEPS, Color::White)];
static SILVER: [[u128; 81]; 2] = [step_table(&SILVER_STEPS, Color::Black), step_table(&SILVER_STEPS, Color::White)];
static GOLD: [[u128; 81]; 2] = [step_table(&GOLD_STEPS, Color::Black), step_table(&GOLD_STEPS, Color::White)];
static KING: [u128; 81] = step_table(&KING_STEPS, Color::Black);

const fn ray_table() -> [[u128; 81]; 8] {
    let mut table = [[0u128; 81]; 8];
    let mut d = 0;
    while d < 8 {
        let mut sq = 0;
        while sq < 81 {
            let mut cur = sq;
            while let Some(next) = offset(cur, DIRS[d].0, DIRS[d].1) {
                table[d][sq] |= 1u128 << next;
                cur = next;
            }
            sq += 1;
        }
        d += 1;
    }
    table
}

/// Squares from a square to the edge in each direction (the square itself excluded).
static RAYS: [[u128; 81]; 8] = ray_table();

const fn direction_table() -> [[u8; 81]; 81] {
    let mut table = [[0u8; 81]; 81];
    let mut d = 0;
    while d < 8 {
        let mut sq = 0;
        while sq < 81 {
            let mut cur = sq;
            while let Some(next) = offset(cur, DIRS[d].0, DIRS[d].1) {
                table[sq][next] = d as u8 + 1;
                cur = next;
            }
            sq += 1;
        }
        d += 1;
    }
    table
}

/// `DIRECTION[a][b]` is 1 + the direction from `a` to `b` when they share a line, else 0.
static DIRECTION: [[u8; 81]; 81] = direction_table();

// ---- sliding pieces: line index extraction -------------------------------------------------

/// Multiplier that gathers bits at `stride × m` (m = 0..7) into bits 63 + m of the product.
const fn gather_multiplier(stride: u32) -> u64 {
    let mut mul = 0u64;
    let mut m = 0;
    while m < 7 {
        mul |= 1u64 << (63 - (stride - 1) * m);
        m += 1;
    }
    mul
}

const fn stride_mask(stride: u32, count: u32) -> u64 {
    let mut mask = 0u64;
    let mut m = 0;
    while m < count {
        mask |= 1u64 << (stride * m);
        m += 1;
    }
    mask
}

/// Attacked positions along a 9-square line for a slider at `pos` with inner occupancy `idx`
/// (bit m = position m + 1 occupied), as bits at `stride × position`.
const fn line_pattern(pos: u32, idx: u32, stride: u32) -> u128 {
    let mut bits = 0u128;
    let mut p = pos as i32 + 1;
    while p <= 8 {
        bits |= 1u128 << (stride as i32 * p);
        if p >= 1 && p <= 7 && (idx >> (p - 1)) & 1 != 0 {
            break;
        }
        p += 1;
    }
    let mut p = pos as i32 - 1;
    while p >= 0 {
        bits |= 1u128 << (stride as i32 * p);
        if p >= 1 && p <= 7 && (idx >> (p - 1)) & 1 != 0 {
            break;
        }
        p -= 1;
    }
    bits
}

const fn pattern_table(stride: u32) -> [[u128; 128]; 9] {
    let mut table = [[0u128; 128]; 9];
    let mut pos = 0;
    while pos < 9 {
        let mut idx = 0;
        while idx < 128 {
            table[pos][idx] = line_pattern(pos as u32, idx as u32, stride);
            idx += 1;
        }
        pos += 1;
    }
    table
}

const fn file_pattern_table() -> [[u16; 128]; 9] {
    let full = pattern_table(1);
    let mut table = [[0u16; 128]; 9];
    let mut pos = 0;
    while pos < 9 {
        let mut idx = 0;
        while idx < 128 {
            table[pos][idx] = full[pos][idx] as u16;
            idx += 1;
        }
        pos += 1;
    }
    table
}

static FILE_PATTERN: [[u16; 128]; 9] = file_pattern_table();
static RANK_PATTERN: [[u128; 128]; 9] = pattern_table(9);
static DIAG10_PATTERN: [[u128; 128]; 9] = pattern_table(10);
static DIAG8_PATTERN: [[u128; 128]; 9] = pattern_table(8);

const RANK_MUL: u64 = gather_multiplier(9);
const DIAG10_MUL: u64 = gather_multiplier(10);
const DIAG8_MUL: u64 = gather_multiplier(8);
const RANK_INNER: u64 = stride_mask(9, 7);

/// Where a square sits on one of its diagonals.
#[derive(Clone, Copy)]
struct DiagonalSlot {
    /// Index of the line's first (lowest) square.
    base: u8,
    /// Position of the square along the line.
    pos: u8,
    /// Inner squares of the line, as bits at the stride, relative to the square after `base`.
    inner: u64,
    /// All squares of the line except this one.
    line: u128,
}

const fn diagonal_slots(stride: u32) -> [DiagonalSlot; 81] {
    let empty = DiagonalSlot { base: 0, pos: 0, inner: 0, line: 0 };
    let mut slots = [empty; 81];
    let (df, dr): (i8, i8) = if stride == 10 { (1, 1) } else { (1, -1) };
    let mut sq = 0;
    while sq < 81 {
        // Walk back to the start of the line, then forward to its end.
        let mut base = sq;
        let mut pos = 0;
        while let Some(prev) = offset(base, -df, -dr) {
            base = prev;
            pos += 1;
        }
        let mut len = 1;
        let mut line = 1u128 << base;
        let mut cur = base;
        while let Some(next) = offset(cur, df, dr) {
            line |= 1u128 << next;
            cur = next;
            len += 1;
        }
        let inner = if len >= 3 { stride_mask(stride, len - 2) } else { 0 };
        slots[sq] = DiagonalSlot { base: base as u8, pos, inner, line: line & !(1u128 << sq) };
        sq += 1;
    }
    slots
}

static DIAG10_SLOTS: [DiagonalSlot; 81] = diagonal_slots(10);
static DIAG8_SLOTS: [DiagonalSlot; 81] = diagonal_slots(8);

#[inline]
fn gather(bits: u64, mul: u64) -> usize {
    ((((bits as u128) * (mul as u128)) >> 63) as usize) & 0x7f
}

/// Attacks along the file through `sq`, both ways.
#[inline]
pub fn file_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    let f = sq.file_index() as u32 * 9;
    let idx = ((occ.0 >> (f + 1)) as usize) & 0x7f;
    Bitboard((FILE_PATTERN[sq.rank_index() as usize][idx] as u128) << f)
}

/// Attacks along the rank through `sq`, both ways.
#[inline]
pub fn rank_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    let r = sq.rank_index() as u32;
    let idx = gather(((occ.0 >> (r + 9)) as u64) & RANK_INNER, RANK_MUL);
    Bitboard(RANK_PATTERN[sq.file_index() as usize][idx] << r)
}

#[inline]
fn diagonal_attacks(slot: &DiagonalSlot, stride: u32, mul: u64, pattern: &[[u128; 128]; 9], occ: Bitboard) -> Bitboard {
    let base = slot.base as u32;
    let idx = gather(((occ.0 >> (base + stride)) as u64) & slot.inner, mul);
    Bitboard((pattern[slot.pos as usize][idx] << base) & slot.line)
}

#[inline]
pub fn bishop_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    diagonal_attacks(&DIAG10_SLOTS[sq.index()], 10, DIAG10_MUL, &DIAG10_PATTERN, occ)
        | diagonal_attacks(&DIAG8_SLOTS[sq.index()], 8, DIAG8_MUL, &DIAG8_PATTERN, occ)
}

#[inline]
pub fn rook_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    file_attacks(sq, occ) | rank_attacks(sq, occ)
}

#[inline]
pub fn lance_attacks(color: Color, sq: Square, occ: Bitboard) -> Bitboard {
    file_attacks(sq, occ) & lance_ray(color, sq)
}

/// A lance's reach on an empty board.
#[inline]
pub fn lance_ray(color: Color, sq: Square) -> Bitboard {
    Bitboard(RAYS[if color == Color::Black { NORTH } else { SOUTH }][sq.index()])
}

#[inline]
pub fn pawn_attacks(color: Color, sq: Square) -> Bitboard {
    Bitboard(PAWN[color.index()][sq.index()])
}

#[inline]
pub fn knight_attacks(color: Color, sq: Square) -> Bitboard {
    Bitboard(KNIGHT[color.index()][sq.index()])
}

#[inline]
pub fn silver_attacks(color: Color, sq: Square) -> Bitboard {
    Bitboard(SILVER[color.index()][sq.index()])
}

#[inline]
pub fn gold_attacks(color: Color, sq: Square) -> Bitboard {
    Bitboard(GOLD[color.index()][sq.index()])
}

#[inline]
pub fn king_attacks(sq: Square) -> Bitboard {
    Bitboard(KING[sq.index()])
}

#[inline]
pub fn horse_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    bishop_attacks(sq, occ) | king_attacks(sq)
}

#[inline]
pub fn dragon_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    rook_attacks(sq, occ) | king_attacks(sq)
}

/// Squares a piece of `color` and `piece_type` on `sq` attacks, given the occupancy.
#[inline]
pub fn attacks(color: Color, piece_type: PieceType, sq: Square, occ: Bitboard) -> Bitboard {
    match piece_type {
        PieceType::Pawn => pawn_attacks(color, sq),
        PieceType::Lance => lance_attacks(color, sq, occ),
        PieceType::Knight => knight_attacks(color, sq),
        PieceType::Silver => silver_attacks(color, sq),
        PieceType::Bishop => bishop_attacks(sq, occ),
        PieceType::Rook => rook_attacks(sq, occ),
        PieceType::King => king_attacks(sq),
        PieceType::Horse => horse_attacks(sq, occ),
        PieceType::Dragon => dragon_attacks(sq, occ),
        _ => gold_attacks(color, sq),
    }
}

/// Squares strictly between `a` and `b` when they share a line, else empty.
#[inline]
pub fn between(a: Square, b: Square) -> Bitboard {
    let d = DIRECTION[a.index()][b.index()];
    if d == 0 {
        Bitboard::EMPTY
    } else {
        let d = d as usize - 1;
        Bitboard(RAYS[d][a.index()] & RAYS[d ^ 1][b.index()])
    }
}

/// The whole line through `a` and `b` (edge to edge) when they share one, else empty.
#[inline]
pub fn line(a: Square, b: Square) -> Bitboard {
    let d = DIRECTION[a.index()][b.index()];
    if d == 0 {
        Bitboard::EMPTY
    } else {
        let d = d as usize - 1;
        Bitboard(RAYS[d][a.index()] | RAYS[d ^ 1][a.index()] | (1u128 << a.index()))
    }
}

/// Whether `c` lies on the line through `a` and `b`.
#[inline]
pub fn aligned(a: Square, b: Square, c: Square) -> bool {
    line(a, b).contains(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slide(sq: Square, occ: Bitboard, dirs: &[usize]) -> Bitboard {
        let mut out = Bitboard::EMPTY;
        for &d in dirs {
            let mut cur = sq.index();
            while let Some(next) = offset(cur, DIRS[d].0, DIRS[d].1) {
                out = out.with(Square::from_index(next as u8).unwrap());
                if occ.contains(Square::from_index(next as u8).unwrap()) {
                    break;
                }
                cur = next;
            }
        }
        out
    }

    #[test]
    fn sliders_match_a_naive_ray_walk() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..3000 {
            let density = next() % 4;
            let mut occ = Bitboard((next() as u128) | ((next() as u128) << 64)) & Bitboard::ALL;
            for _ in 0..density {
                occ &= Bitboard((next() as u128) | ((next() as u128) << 64));
            }
            for sq in Square::all() {
                assert_eq!(rook_attacks(sq, occ), slide(sq, occ, &[0, 1, 2, 3]), "rook {sq} {occ:?}");
                assert_eq!(bishop_attacks(sq, occ), slide(sq, occ, &[4, 5, 6, 7]), "bishop {sq} {occ:?}");
                assert_eq!(lance_attacks(Color::Black, sq, occ), slide(sq, occ, &[0]));
                assert_eq!(lance_attacks(Color::White, sq, occ), slide(sq, occ, &[1]));
            }
        }
    }

    #[test]
    fn between_and_line() {
        let sq = |s: &str| Square::from_usi(s).unwrap();
        assert_eq!(between(sq("5e"), sq("5a")).count(), 3);
        assert_eq!(between(sq("1a"), sq("9i")).count(), 7);
        assert_eq!(between(sq("1a"), sq("2c")), Bitboard::EMPTY);
        assert_eq!(line(sq("1a"), sq("9i")).count(), 9);
        assert!(aligned(sq("5e"), sq("5a"), sq("5i")));
        assert!(!aligned(sq("5e"), sq("5a"), sq("4i")));
    }

    #[test]
    fn step_pieces() {
        let sq = |s: &str| Square::from_usi(s).unwrap();
        assert_eq!(pawn_attacks(Color::Black, sq("7g")), Bitboard::from_square(sq("7f")));
        assert_eq!(pawn_attacks(Color::White, sq("3c")), Bitboard::from_square(sq("3d")));
        assert_eq!(
            knight_attacks(Color::Black, sq("8i")),
            Bitboard::from_square(sq("7g")) | Bitboard::from_square(sq("9g"))
        );
        assert_eq!(gold_attacks(Color::White, sq("5a")).count(), 5);
        assert_eq!(silver_attacks(Color::Black, sq("5e")).count(), 5);
        assert_eq!(king_attacks(sq("1a")).count(), 3);
    }
}
