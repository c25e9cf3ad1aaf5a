//! The df-pn transposition table: clusters of entries indexed by the board (without hands) and
//! the node type, each entry holding an attacker's hand: the one an unsolved entry was computed
//! for, a proof's proof pieces or a disproof's disproof pieces. Hand dominance
//! makes one entry answer for many positions: a board proved with attacker hand H is proved for
//! every hand holding at least H (the defender then has fewer pieces to drop, and the attacker's
//! strategy still works); disproved with H, it is disproved for every hand holding at most H.
//! Positions of one search conserve the pieces, so the board and the attacker's hand determine
//! the defender's hand.

use koma_shogi::Hand;

/// Proof and disproof numbers: `INF` is a solved value, unsolved ones stay below it.
pub const INF: u32 = u32::MAX;

/// The table's default size in MiB.
pub const DEFAULT_TABLE_MIB: usize = 64;

const CLUSTER: usize = 8;

/// A stored result.
#[derive(Clone, Copy, Debug, Default)]
pub struct Entry {
    /// Board key with the node type mixed in.
    key: u64,
    /// The attacker's hand the numbers hold for: for an unsolved entry the exact hand; for a proof
    /// its proof pieces (the least hand the proof needs: it holds for every hand dominating it);
    /// for a disproof its disproof pieces (it holds for every hand this one dominates).
    hand: Hand,
    pub pn: u32,
    pub dn: u32,
    /// Solved entries: a proof's mate length (plies, an upper bound), or for a depth-limited
    /// disproof the plies that were left (it holds for that many or fewer). Open entries: 0, or
    /// df-pn's mark for an OR node known to have no mate in one and not yet expanded.
    pub plies: u16,
    /// A disproof that relied on the depth limit.
    pub depth_limited: bool,
    /// The search that wrote it (0: never written; a table's generations start at 1).
    generation: u8,
    /// Nodes searched below this entry (saturating): the replacement keeps the costly ones.
    amount: u32,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub pn: u32,
    pub dn: u32,
    /// See [`Entry::plies`].
    pub plies: u16,
    pub depth_limited: bool,
    /// See [`Entry::hand`].
    pub hand: Hand,
}

/// One cluster: four cache lines, aligned to them, so that a lookup touches no fifth line.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Cluster([Entry; CLUSTER]);

const _: () = assert!(std::mem::size_of::<Cluster>() == 4 * 64);

pub struct Table {
    clusters: Vec<Cluster>,
    /// Clusters − 1 (a power of two).
    mask: usize,
    generation: u8,
}

impl Table {
    /// A table of about `mib` MiB (at least one cluster).
    pub fn new(mib: usize) -> Table {
        let bytes = mib.max(1) << 20;
        let clusters = (bytes / std::mem::size_of::<Cluster>()).max(1);
        let clusters = if clusters.is_power_of_two() { clusters } else { clusters.next_power_of_two() / 2 };
        Table { clusters: vec![Cluster::default(); clusters], mask: clusters - 1, generation: 1 }
    }

    /// Forgets every entry (in O(1): entries of older generations are ignored and replaced).
    pub fn new_search(&mut self) {
        self.generation = self.generation.wrapping_add(1).max(1);
        if self.generation == 1 {
            // The counter wrapped: entries 255 searches old would look current.
            self.clusters.fill(Cluster::default());
        }
    }

    fn cluster(&self, key: u64) -> &[Entry; CLUSTER] {
        &self.clusters[key as usize & self.mask].0
    }

    /// Asks the processor to fetch the cluster of `key` into its caches: a lookup of it soon
    /// then finds it there, and the wait for memory overlaps other work.
    #[inline]
    pub fn prefetch(&self, key: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let cluster = (&self.clusters[key as usize & self.mask] as *const Cluster).cast::<i8>();
            for line in 0..std::mem::size_of::<Cluster>() / 64 {
                // SAFETY: prefetching has no effect on memory, and the address lies in the cluster.
                unsafe { _mm_prefetch(cluster.wrapping_add(64 * line), _MM_HINT_T0) };
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = key;
    }

    /// The best knowledge about the position `key` with attacker hand `hand` and `plies_left`
    /// plies of search left: a proof held by a hand it dominates (whose mate takes at most
    /// `proof_plies`), a disproof held by a hand dominating it (a depth-limited one only for as
    /// many plies or more, and never before a proof: "no mate within 5" and "mate in 9" are both
    /// true), or else the exact entry's numbers; `None` when nothing applies.
    pub fn lookup(&self, key: u64, hand: Hand, plies_left: u32, proof_plies: u32) -> Option<Found> {
        let (mut exact, mut limited) = (None, None);
        for e in self.cluster(key) {
            if e.key != key || e.generation != self.generation {
                continue;
            }
            let found = Found { pn: e.pn, dn: e.dn, plies: e.plies, depth_limited: e.depth_limited, hand: e.hand };
            if e.pn == 0 {
                if hand.dominates(e.hand) && u32::from(e.plies) <= proof_plies {
                    return Some(found);
                }
            } else if e.dn == 0 {
                if e.hand.dominates(hand) && !e.depth_limited {
                    return Some(found);
                }
                if e.hand.dominates(hand) && plies_left <= u32::from(e.plies) {
                    limited.get_or_insert(found);
                }
            } else if e.hand == hand {
                exact = Some(found);
            }
        }
        limited.or(exact)
    }

    /// Stores a result for `key` computed with attacker hand `hand`, keyed by `found.hand` (the
    /// same hand for unsolved numbers, the proof or disproof pieces for a solved one). It replaces
    /// the entry for either hand, an empty or stale slot, or the unsolved, then solved, entry with
    /// the least work below it.
    pub fn store(&mut self, key: u64, hand: Hand, found: Found, amount: u32) {
        let generation = self.generation;
        let cluster = &mut self.clusters[key as usize & self.mask].0;
        let slot = cluster
            .iter()
            .position(|e| e.key == key && (e.hand == hand || e.hand == found.hand) && e.generation == generation)
            .or_else(|| cluster.iter().position(|e| e.generation != generation))
            .unwrap_or_else(|| {
                let solved = |e: &Entry| e.pn == 0 || e.dn == 0;
                (0..CLUSTER).min_by_key(|&i| (solved(&cluster[i]), cluster[i].amount)).expect("clusters are not empty")
            });
        cluster[slot] = Entry {
            key,
            hand: found.hand,
            pn: found.pn,
            dn: found.dn,
            plies: found.plies,
            depth_limited: found.depth_limited,
            generation,
            amount,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_shogi::PieceType;

    /// Proofs of any length.
    const ANY: u32 = u32::MAX;

    fn hand(golds: u32, pawns: u32) -> Hand {
        let mut h = Hand::EMPTY;
        h.set(PieceType::Gold, golds);
        h.set(PieceType::Pawn, pawns);
        h
    }

    #[test]
    fn dominance_and_depth_decide_what_a_lookup_returns() {
        let mut t = Table::new(1);
        let proof = Found { pn: 0, dn: INF, plies: 5, depth_limited: false, hand: hand(1, 0) };
        t.store(42, hand(1, 0), proof, 10);
        // A proof with one gold holds with more pieces, not with fewer, and with fewer plies left
        // than its mate's length too (a proof is a proof at any depth).
        assert_eq!(t.lookup(42, hand(1, 3), 7, ANY), Some(proof));
        assert_eq!(t.lookup(42, hand(0, 3), 7, ANY), None);
        assert_eq!(t.lookup(42, hand(1, 0), 3, ANY), Some(proof));
        // Unless proofs are bounded: then only a mate that fits.
        assert_eq!(t.lookup(42, hand(1, 0), 7, 5), Some(proof));
        assert_eq!(t.lookup(42, hand(1, 0), 7, 3), None);
        // A disproof with two golds holds with fewer pieces; a depth-limited one only for as
        // many plies or fewer.
        let disproof = Found { pn: INF, dn: 0, plies: 9, depth_limited: true, hand: hand(2, 0) };
        t.store(7, hand(2, 0), disproof, 10);
        assert_eq!(t.lookup(7, hand(1, 0), 9, ANY), Some(disproof));
        assert_eq!(t.lookup(7, hand(2, 1), 9, ANY), None);
        assert_eq!(t.lookup(7, hand(1, 0), 11, ANY), None);
        // Unsolved numbers only for the exact hand.
        let open = Found { pn: 3, dn: 4, plies: 0, depth_limited: false, hand: hand(1, 1) };
        t.store(9, hand(1, 1), open, 10);
        assert_eq!(t.lookup(9, hand(1, 1), 1, ANY), Some(open));
        assert_eq!(t.lookup(9, hand(1, 2), 1, ANY), None);
        // A proof computed with a larger hand but keyed by its proof pieces replaces the open
        // entry of that hand and answers for every hand holding the pieces.
        let pieces = Found { pn: 0, dn: INF, plies: 3, depth_limited: false, hand: hand(0, 1) };
        t.store(9, hand(1, 1), pieces, 20);
        assert_eq!(t.lookup(9, hand(1, 1), 3, ANY), Some(pieces));
        assert_eq!(t.lookup(9, hand(0, 1), 3, ANY), Some(pieces));
        assert_eq!(t.lookup(9, hand(1, 0), 3, ANY), None);
        // A new search forgets everything.
        t.new_search();
        assert_eq!(t.lookup(42, hand(1, 3), 7, ANY), None);
    }

    #[test]
    fn a_proof_comes_before_a_depth_limited_disproof() {
        let mut t = Table::new(1);
        let limited = Found { pn: INF, dn: 0, plies: 5, depth_limited: true, hand: hand(2, 0) };
        let proof = Found { pn: 0, dn: INF, plies: 9, depth_limited: false, hand: hand(1, 0) };
        t.store(42, hand(2, 0), limited, 10);
        t.store(42, hand(1, 0), proof, 10);
        // Both hold for one gold with 5 plies left (no mate within 5, a mate in 9): the proof wins.
        assert_eq!(t.lookup(42, hand(1, 0), 5, ANY), Some(proof));
        // Where the proof is too long to count, the disproof answers.
        assert_eq!(t.lookup(42, hand(1, 0), 5, 5), Some(limited));
    }

    #[test]
    fn a_full_cluster_keeps_solved_and_costly_entries() {
        let mut t = Table::new(1);
        let clusters = t.mask + 1;
        let open = Found { pn: 2, dn: 2, plies: 0, depth_limited: false, hand: Hand::EMPTY };
        let proof = Found { pn: 0, dn: INF, plies: 1, depth_limited: false, hand: Hand::EMPTY };
        // Keys that share cluster 3.
        let key = |i: usize| (3 + i * clusters) as u64;
        t.store(key(0), Hand::EMPTY, proof, 1);
        for i in 1..CLUSTER {
            t.store(key(i), Hand::EMPTY, open, 100 + i as u32);
        }
        t.store(key(CLUSTER), Hand::EMPTY, open, 5);
        // The cheapest unsolved entry (key 1) went; the proof stayed.
        assert_eq!(t.lookup(key(0), Hand::EMPTY, 1, ANY), Some(proof));
        assert_eq!(t.lookup(key(1), Hand::EMPTY, 1, ANY), None);
        assert_eq!(t.lookup(key(CLUSTER), Hand::EMPTY, 1, ANY), Some(open));
    }
}
