//! An exact short checkmate search (tsume): iterative deepening over checks (attacker) and all
//! evasions (defender), with a table of positions already shown not to mate within a depth. With a
//! small depth and node budget the USI engine looks for a quick mate with it before every normal
//! search; the df-pn tests use it as their oracle.
//!
//! The line it returns is minimax-optimal within the depth: the attacker mates as fast as
//! possible and the defender resists as long as possible. Lines through a repeated position
//! count as no mate (a perpetual check loses; a repetition is no checkmate). Pawn-drop mate is
//! illegal and never generated. Impasse declarations are not considered.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use koma_shogi::rules::Repetition;
use koma_shogi::{Move, Position};

/// The outcome of [`MateSearch::run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MateResult {
    /// The side to move mates: the full line, attacker's and defender's moves, ending in mate.
    Mate(Vec<Move>),
    /// Proven: no sequence of checks mates, however long (the search met no depth limit and no
    /// repetition on the way).
    NoMate,
    /// No mate within the depth, but longer lines were cut (or a repetition was met): unknown
    /// beyond it.
    NoMateWithin,
    /// Stopped by the deadline, the node budget or the stop flag before an answer.
    Aborted,
}

/// Entries of the disproof table before it is cleared (about 100 MB).
const MAX_TABLE_ENTRIES: usize = 4 << 20;

pub struct MateSearch<'a> {
    max_nodes: u64,
    deadline: Option<Instant>,
    stop: Option<&'a AtomicBool>,
    nodes: u64,
    aborted: bool,
    /// Hash → the deepest depth at which the attacker (to move there) was shown not to mate
    /// ([`PROVEN`]: at any depth).
    no_mate: HashMap<u64, u32>,
    /// Lines cut by the depth limit or a repetition so far: a no-mate answer with none is a proof.
    cuts: u64,
}

/// A `no_mate` depth meaning "no mate at any depth": the subtree met no cut.
const PROVEN: u32 = u32::MAX;

impl<'a> MateSearch<'a> {
    pub fn new(max_nodes: u64, deadline: Option<Instant>, stop: Option<&'a AtomicBool>) -> MateSearch<'a> {
        MateSearch { max_nodes, deadline, stop, nodes: 0, aborted: false, no_mate: HashMap::new(), cuts: 0 }
    }

    /// Positions visited so far.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Looks for a mate by the side to move in at most `max_plies` plies (odd: 1, 3, 5, …).
    pub fn run(&mut self, pos: &mut Position, max_plies: u32) -> MateResult {
        let mut depth = 1;
        while depth <= max_plies.max(1) {
            let cuts = self.cuts;
            if let Some(line) = self.attack(pos, depth) {
                return MateResult::Mate(line);
            }
            if self.aborted {
                return MateResult::Aborted;
            }
            if self.cuts == cuts {
                // Nothing was cut: deeper iterations would search the same tree.
                return MateResult::NoMate;
            }
            depth += 2;
        }
        MateResult::NoMateWithin
    }

    fn tick(&mut self) -> bool {
        self.nodes += 1;
        if self.aborted {
            return false;
        }
        if self.nodes >= self.max_nodes {
            self.aborted = true;
        } else if self.nodes.is_multiple_of(512) {
            let late = self.deadline.is_some_and(|d| Instant::now() >= d);
            let stopped = self.stop.is_some_and(|s| s.load(Ordering::Relaxed));
            self.aborted = late || stopped;
        }
        !self.aborted
    }

    /// The shortest mate within `depth` plies for the side to move (iterative deepening).
    fn shortest(&mut self, pos: &mut Position, depth: u32) -> Option<Vec<Move>> {
        let mut d = 1;
        while d <= depth {
            if let Some(line) = self.attack(pos, d) {
                return Some(line);
            }
            if self.aborted {
                return None;
            }
            d += 2;
        }
        None
    }

    /// A mate in exactly up to `depth` plies by checks (attacker to move).
    fn attack(&mut self, pos: &mut Position, depth: u32) -> Option<Vec<Move>> {
        if let Some(&d) = self.no_mate.get(&pos.hash()).filter(|&&d| d >= depth) {
            if d != PROVEN {
                self.cuts += 1;
            }
            return None;
        }
        let cuts = self.cuts;
        for m in pos.checking_moves() {
            if !self.tick() {
                return None;
            }
            pos.do_move(m);
            let line = if pos.repetition(2) != Repetition::None {
                self.cuts += 1;
                None
            } else {
                self.defend(pos, depth - 1)
            };
            pos.undo_move();
            if let Some(mut line) = line {
                line.insert(0, m);
                return Some(line);
            }
            if self.aborted {
                return None;
            }
        }
        if self.no_mate.len() >= MAX_TABLE_ENTRIES {
            // Bounded memory for long `go mate` searches: start the table afresh.
            self.no_mate.clear();
        }
        let shown = if self.cuts == cuts { PROVEN } else { depth };
        let entry = self.no_mate.entry(pos.hash()).or_insert(0);
        *entry = (*entry).max(shown);
        None
    }

    /// Whether every evasion loses within `depth` plies; the longest resistance if so.
    fn defend(&mut self, pos: &mut Position, depth: u32) -> Option<Vec<Move>> {
        let evasions = pos.legal_moves();
        if evasions.is_empty() {
            return Some(Vec::new());
        }
        if depth == 0 {
            self.cuts += 1;
            return None;
        }
        let mut longest: Option<Vec<Move>> = None;
        for &e in evasions.iter() {
            if !self.tick() {
                return None;
            }
            pos.do_move(e);
            let line = if pos.repetition(2) != Repetition::None {
                self.cuts += 1;
                None
            } else {
                self.shortest(pos, depth - 1)
            };
            pos.undo_move();
            let mut line = line?;
            if longest.as_ref().is_none_or(|l| line.len() + 1 > l.len()) {
                line.insert(0, e);
                longest = Some(line);
            }
        }
        longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_shogi::usi::parse_position;

    fn line(moves: &[Move]) -> Vec<String> {
        moves.iter().map(|m| m.to_usi()).collect()
    }

    #[test]
    fn finds_mate_in_one_and_three() {
        // Gold drop mate in one: White king 5a, Black gold in hand, Black pawn on 5c.
        let mut pos = parse_position("sfen 4k4/9/4P4/9/9/9/9/9/4K4 b G 1").unwrap();
        assert_eq!(
            MateSearch::new(1_000_000, None, None).run(&mut pos, 1),
            MateResult::Mate(vec![Move::from_usi("G*5b").unwrap()])
        );
        // Mate in three found in random play (cshogi's mate_move(3) agrees; no mate in one).
        let mut pos =
            parse_position("sfen 2s1k3p/l2p2s1l/g1+B1p+P2n/pG2R1p1P/P6p1/Np2Ppg1L/+n2P2l2/R2K3P1/1NP1S2S1 b Pbg2p 157")
                .unwrap();
        assert_eq!(MateSearch::new(1_000_000, None, None).run(&mut pos, 1), MateResult::NoMateWithin);
        let mut search = MateSearch::new(1_000_000, None, None);
        match search.run(&mut pos, 5) {
            MateResult::Mate(moves) => {
                assert_eq!(moves.len(), 3, "{:?}", line(&moves));
                for &m in &moves {
                    assert!(pos.is_legal(m));
                    pos.do_move(m);
                }
                assert!(pos.legal_moves().is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_mate_and_budget() {
        // No check at all: proven.
        let mut pos = Position::startpos();
        assert_eq!(MateSearch::new(1_000_000, None, None).run(&mut pos, 3), MateResult::NoMate);
        // Checks that go on past the depth: unknown beyond it, never a proof.
        let mut pos = parse_position("sfen 4k4/9/9/9/9/9/9/9/4K4 b RBGSNL 1").unwrap();
        assert_eq!(MateSearch::new(100_000_000, None, None).run(&mut pos, 3), MateResult::NoMateWithin);
        let mut pos = parse_position("sfen 8k/9/9/9/9/9/9/9/K8 b 2G2S2N 1").unwrap();
        assert_eq!(MateSearch::new(10, None, None).run(&mut pos, 9), MateResult::Aborted);
    }
}

#[cfg(test)]
mod bench {
    use super::*;

    /// Cost of the quick mate search on positions from random games:
    /// `cargo test --release -p koma-mate --lib exact::bench -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn quick_mate_cost() {
        let mut seed = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for plies in [3u32, 5, 7] {
            let mut total = std::time::Duration::ZERO;
            let mut worst = std::time::Duration::ZERO;
            let (mut mates, mut aborted, mut nodes) = (0, 0, 0u64);
            for _ in 0..200 {
                let mut pos = Position::startpos();
                let len = 20 + next() % 140;
                for _ in 0..len {
                    let legal = pos.legal_moves();
                    if legal.is_empty() {
                        break;
                    }
                    pos.do_move(legal[(next() % legal.len() as u64) as usize]);
                }
                if pos.legal_moves().is_empty() {
                    continue;
                }
                let t = Instant::now();
                let mut search = MateSearch::new(200_000, None, None);
                match search.run(&mut pos, plies) {
                    MateResult::Mate(_) => mates += 1,
                    MateResult::Aborted => aborted += 1,
                    MateResult::NoMate | MateResult::NoMateWithin => {}
                }
                nodes += search.nodes();
                let e = t.elapsed();
                total += e;
                worst = worst.max(e);
            }
            eprintln!(
                "{plies} plies: mean {:.2} ms, worst {:.1} ms, {mates} mates, {aborted} over budget, {:.0} nodes/s",
                total.as_secs_f64() * 1e3 / 200.0,
                worst.as_secs_f64() * 1e3,
                nodes as f64 / total.as_secs_f64()
            );
        }
    }
}
