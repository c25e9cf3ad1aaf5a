//! Pieces in hand, packed into one `u32` so that copying, comparing and hashing a hand is one word.

use std::fmt;

use crate::piece::PieceType;

/// Bit offset and width of each hand kind, indexed by `PieceType as usize` (pawn 1 … gold 7).
/// Widths hold the maximum counts (18 pawns, 4 lances/knights/silvers/golds, 2 bishops/rooks).
const SHIFT: [u32; 8] = [0, 0, 8, 12, 16, 20, 24, 28];
const MASK: [u32; 8] = [0, 0x1f, 0x7, 0x7, 0x7, 0x3, 0x3, 0x7];
/// The most pieces of each kind a position may hold, on the board and in hands together: what the
/// packed hand can store. A shogi set has fewer (18, 4, 4, 4, 2, 2, 4), but published perft test
/// positions use extra rooks and bishops, so only the storage limit is enforced.
pub const CAPACITY: [u32; 8] = MASK;

#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Hand(u32);

impl Hand {
    pub const EMPTY: Hand = Hand(0);

    /// How many pieces of `pt` (an unpromoted kind other than king) the hand holds.
    #[inline]
    pub const fn count(self, pt: PieceType) -> u32 {
        (self.0 >> SHIFT[pt as usize]) & MASK[pt as usize]
    }

    #[inline]
    pub const fn has(self, pt: PieceType) -> bool {
        self.count(pt) != 0
    }

    #[inline]
    pub fn add(&mut self, pt: PieceType) {
        debug_assert!(self.count(pt) < MASK[pt as usize]);
        self.0 += 1 << SHIFT[pt as usize];
    }

    #[inline]
    pub fn remove(&mut self, pt: PieceType) {
        debug_assert!(self.count(pt) > 0);
        self.0 -= 1 << SHIFT[pt as usize];
    }

    /// Sets a count; the caller checks it against [`CAPACITY`].
    pub fn set(&mut self, pt: PieceType, n: u32) {
        let s = SHIFT[pt as usize];
        self.0 = (self.0 & !(MASK[pt as usize] << s)) | ((n & MASK[pt as usize]) << s);
    }

    #[inline]
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether this hand holds at least as many of every kind as `other`. One subtraction: each
    /// kind's field has a free guard bit above it, and the lowest kind that `other` holds more of
    /// borrows into its own guard bit.
    #[inline]
    pub const fn dominates(self, other: Hand) -> bool {
        const GUARDS: u32 = 1 << 5 | 1 << 11 | 1 << 15 | 1 << 19 | 1 << 22 | 1 << 26 | 1 << 31;
        self.0.wrapping_sub(other.0) & GUARDS == 0
    }

    /// Total number of pieces in hand.
    pub fn total(self) -> u32 {
        PieceType::HAND.iter().map(|&pt| self.count(pt)).sum()
    }
}

impl fmt::Debug for Hand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_map();
        for pt in PieceType::HAND {
            if self.has(pt) {
                list.entry(&pt, &self.count(pt));
            }
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `dominates` agrees with a kind-by-kind comparison on random hands within capacity,
    /// including hands that differ in one kind only (where one borrow decides).
    #[test]
    fn dominates_is_the_kind_by_kind_comparison() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u32| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % (n as u64 + 1)) as u32
        };
        let (mut yes, mut no) = (0, 0);
        for round in 0..20_000 {
            let mut a = Hand::EMPTY;
            let mut b = Hand::EMPTY;
            for pt in PieceType::HAND {
                let cap = CAPACITY[pt as usize];
                a.set(pt, next(cap));
                b.set(pt, if round % 2 == 0 { next(cap) } else { a.count(pt) });
            }
            if round % 2 == 1 {
                // Equal but for one kind.
                let pt = PieceType::HAND[next(6) as usize];
                b.set(pt, next(CAPACITY[pt as usize]));
            }
            let expected = PieceType::HAND.iter().all(|&pt| a.count(pt) >= b.count(pt));
            assert_eq!(a.dominates(b), expected, "{a:?} vs {b:?}");
            if expected {
                yes += 1;
            } else {
                no += 1;
            }
        }
        assert!(yes > 5000 && no > 5000, "{yes} dominating, {no} not");
        assert!(Hand::EMPTY.dominates(Hand::EMPTY));
    }
}
