//! Depth-first proof-number search (df-pn, Nagai 2002) for shogi mates.
//!
//! OR nodes (the attacker to move) try every legal check; AND nodes (the defender to move, in
//! check) try every legal evasion. A node's proof number is the least number of leaves still to
//! prove for a mate, its disproof number the least to refute it: OR takes the smallest child pn
//! and the sum of the dns, AND the sum of the pns and the smallest dn. The search always expands
//! the most proving child, with thresholds (the 1 + ε trick of Pawlewicz & Lew 2006) that return
//! to the parent once another child becomes more promising.
//!
//! - **Table** (table.rs): results are shared between positions that differ only in the
//!   attacker's hand (hand dominance). Each recursion keeps its children's values in its own
//!   frame and never re-reads them from the table, so results that depend on the path stay local.
//! - **Repetition**: a child that repeats a position of the current path, or of the game before
//!   the root, is no mate for the attacker (perpetual check loses; a repetition is not mate).
//!   Such a refutation is *tainted* by the repeated position's path index; it becomes clean once
//!   the search is back at that position (the cycle then lies inside the node's own subtree), and
//!   a tainted refutation is never stored.
//! - **Depth**: a mate must fit in `max_plies`. A refutation that relied on the limit is stored
//!   with the plies it had, and a root refuted that way is `NoMateWithin`, never `NoMate`.
//! - **New OR nodes** first look for a mate in one.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use koma_shogi::{Color, Move, Position};

use crate::line::verify_mate_line;
use crate::table::{Found, Table, INF};

/// Mixed into the key of AND nodes: the same board is an OR node in a search where its side to
/// move attacks and an AND node where it defends.
const AND_NODE: u64 = 0x9d3a_5c6e_1f27_b481;

/// What may stop a search.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    /// The longest mate searched, in plies (attacker and defender moves).
    pub max_plies: u32,
    /// Descents (one per move made in the search) before giving up.
    pub max_nodes: u64,
    pub deadline: Option<Instant>,
    pub stop: Option<&'a AtomicBool>,
}

impl Default for Limits<'_> {
    fn default() -> Self {
        Limits { max_plies: 255, max_nodes: u64::MAX, deadline: None, stop: None }
    }
}

/// The answer of [`DfPn::search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The side to move mates: a verified line (attacker and defender moves, ending in mate).
    /// Not necessarily the shortest.
    Mate(Vec<Move>),
    /// Proved: no sequence of checks mates, however long.
    NoMate,
    /// No mate within `max_plies`, or none that avoids repeating a position of the game: longer
    /// lines were cut, so it is no proof.
    NoMateWithin,
    /// A limit (nodes, deadline, stop) ended the search first.
    Unknown,
}

/// A df-pn solver: owns its table, reusable across searches (each starts afresh).
pub struct DfPn {
    table: Table,
    nodes: u64,
}

impl DfPn {
    /// A solver with a table of about `table_mib` MiB ([`crate::DEFAULT_TABLE_MIB`]).
    pub fn new(table_mib: usize) -> DfPn {
        DfPn { table: Table::new(table_mib), nodes: 0 }
    }

    /// Descents made by the last search.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Whether the side to move of `pos` mates within the limits. The game before `pos` (its
    /// history) counts for repetitions.
    pub fn search(&mut self, pos: &Position, limits: &Limits) -> Outcome {
        self.table.new_search();
        let mut pos = pos.clone();
        let history: HashSet<u64> = (1..=pos.plies_from_root()).filter_map(|i| pos.history_hash(i)).collect();
        let mut s = Search {
            table: &mut self.table,
            limits,
            attacker: pos.side_to_move(),
            nodes: 0,
            aborted: false,
            path: vec![pos.hash()],
            history,
        };
        let max_plies = limits.max_plies.min(u32::from(u16::MAX) - 1);
        let root = s.mid(&mut pos, true, INF, INF, max_plies);
        let outcome = if s.aborted {
            Outcome::Unknown
        } else if root.pn == 0 {
            match s.line(&mut pos, max_plies) {
                Some(line) if verify_mate_line(&pos, &line).is_ok() => Outcome::Mate(line),
                _ => Outcome::Unknown,
            }
        } else if root.dn == 0 {
            if root.depth_limited || root.taint != NO_TAINT {
                Outcome::NoMateWithin
            } else {
                Outcome::NoMate
            }
        } else {
            Outcome::Unknown
        };
        self.nodes = s.nodes;
        outcome
    }
}

/// No repetition behind a refutation.
const NO_TAINT: i32 = i32::MAX;
/// A refutation by a position of the game before the root: it never becomes clean.
const HISTORY: i32 = -1;

/// A node's value as its parent sees it.
#[derive(Clone, Copy, Debug)]
struct Value {
    pn: u32,
    dn: u32,
    /// A proof's mate length; a depth-limited refutation's plies left.
    plies: u16,
    depth_limited: bool,
    /// The path index of the repeated position a refutation relies on ([`NO_TAINT`], [`HISTORY`]).
    taint: i32,
}

impl Value {
    fn open(pn: u32, dn: u32) -> Value {
        Value { pn, dn, plies: 0, depth_limited: false, taint: NO_TAINT }
    }

    fn proof(plies: u32) -> Value {
        Value { pn: 0, dn: INF, plies: plies.min(u32::from(u16::MAX)) as u16, depth_limited: false, taint: NO_TAINT }
    }

    fn refutation() -> Value {
        Value { pn: INF, dn: 0, plies: 0, depth_limited: false, taint: NO_TAINT }
    }

    fn depth_refutation(plies_left: u32) -> Value {
        Value { plies: plies_left as u16, depth_limited: true, ..Value::refutation() }
    }

    fn repetition(taint: i32) -> Value {
        Value { taint, ..Value::refutation() }
    }

    fn found(self) -> Found {
        Found { pn: self.pn, dn: self.dn, plies: self.plies, depth_limited: self.depth_limited }
    }

    fn from_found(f: Found) -> Value {
        Value { pn: f.pn, dn: f.dn, plies: f.plies, depth_limited: f.depth_limited, taint: NO_TAINT }
    }
}

struct Child {
    mv: Move,
    value: Value,
}

struct Search<'t, 'l, 'a> {
    table: &'t mut Table,
    limits: &'l Limits<'a>,
    attacker: Color,
    nodes: u64,
    aborted: bool,
    /// Hashes of the positions from the root to the current node.
    path: Vec<u64>,
    /// Hashes of the game's positions before the root.
    history: HashSet<u64>,
}

/// Saturating sum, kept below `INF` (an unsolved number stays unsolved).
fn sum(values: impl Iterator<Item = u32>) -> u32 {
    values.fold(0u64, |a, v| a + u64::from(v)).min(u64::from(INF - 1)) as u32
}

/// The threshold that sends the search back once the best child's number passes the second
/// best's by a margin (1 + ε, ε = 1/4).
fn beyond(second: u32) -> u32 {
    if second >= INF - 1 {
        INF
    } else {
        (u64::from(second) + (u64::from(second) / 4).max(1)).min(u64::from(INF - 1)) as u32
    }
}

impl Search<'_, '_, '_> {
    fn key(&self, pos: &Position, or: bool) -> u64 {
        let k = pos.board_hash();
        if or {
            k
        } else {
            k ^ AND_NODE
        }
    }

    /// Counts a descent; false once a limit is reached.
    fn tick(&mut self) -> bool {
        self.nodes += 1;
        if self.nodes >= self.limits.max_nodes {
            self.aborted = true;
        } else if self.nodes % 1024 == 0 {
            let late = self.limits.deadline.is_some_and(|d| Instant::now() >= d);
            let stopped = self.limits.stop.is_some_and(|s| s.load(Ordering::Relaxed));
            self.aborted = late || stopped;
        }
        !self.aborted
    }

    /// The value of a child position (the move already made) from the path, the game and the
    /// table.
    fn probe(&self, pos: &Position, or: bool, plies_left: u32) -> Value {
        let h = pos.hash();
        if let Some(j) = self.path.iter().rposition(|&x| x == h) {
            return Value::repetition(j as i32);
        }
        if self.history.contains(&h) {
            return Value::repetition(HISTORY);
        }
        match self.table.lookup(self.key(pos, or), pos.hand(self.attacker), plies_left) {
            Some(found) => Value::from_found(found),
            None => Value::open(1, 1),
        }
    }

    /// Searches the node at `pos` (an OR node when `or`) until it is solved, its numbers reach
    /// the thresholds, or a limit stops the search. `self.path` ends with `pos`.
    fn mid(&mut self, pos: &mut Position, or: bool, th_pn: u32, th_dn: u32, plies_left: u32) -> Value {
        let ply = (self.path.len() - 1) as i32;
        if or && plies_left == 0 {
            return Value::depth_refutation(0);
        }
        let key = self.key(pos, or);
        let hand = pos.hand(self.attacker);
        let moves = node_moves(pos, or);
        if moves.is_empty() {
            let v = if or { Value::refutation() } else { Value::proof(0) };
            self.table.store(key, hand, v.found(), 1);
            return v;
        }
        if !or && plies_left == 0 {
            return Value::depth_refutation(0);
        }
        let nodes_before = self.nodes;
        // A new OR node: a mate in one proves it at once.
        if or && self.table.lookup(key, hand, plies_left).is_none() {
            for &m in &moves {
                pos.do_move(m);
                let mated = !pos.has_legal_move();
                pos.undo_move();
                if mated {
                    let v = Value::proof(1);
                    self.table.store(key, hand, v.found(), 1);
                    return v;
                }
            }
        }
        let mut kids: Vec<Child> = moves
            .iter()
            .map(|&mv| {
                pos.do_move(mv);
                let value = self.probe(pos, !or, plies_left - 1);
                pos.undo_move();
                Child { mv, value }
            })
            .collect();
        loop {
            let (pn, dn) = numbers(or, &kids);
            if pn == 0 || dn == 0 || pn >= th_pn || dn >= th_dn {
                break;
            }
            if !self.tick() {
                return Value::open(pn, dn);
            }
            let (best, second) = most_proving(or, &kids);
            let kid = kids[best].value;
            let (child_pn, child_dn) = if or {
                (th_pn.min(beyond(second)), sum([th_dn - dn, kid.dn].into_iter()).max(kid.dn + 1).min(th_dn))
            } else {
                (sum([th_pn - pn, kid.pn].into_iter()).max(kid.pn + 1).min(th_pn), th_dn.min(beyond(second)))
            };
            pos.do_move(kids[best].mv);
            self.path.push(pos.hash());
            let v = self.mid(pos, !or, child_pn, child_dn, plies_left - 1);
            self.path.pop();
            pos.undo_move();
            kids[best].value = v;
            if self.aborted {
                let (pn, dn) = numbers(or, &kids);
                return Value::open(pn, dn);
            }
        }
        let mut v = summarize(or, &kids, plies_left);
        if v.taint != NO_TAINT && v.taint >= ply {
            // The repeated position is this one or below it: the cycle is the node's own.
            v.taint = NO_TAINT;
        }
        if v.taint == NO_TAINT {
            let amount = (self.nodes - nodes_before).min(u64::from(u32::MAX)) as u32;
            self.table.store(key, hand, v.found(), amount.max(1));
        }
        v
    }

    /// The mate line from a proved root: at OR nodes the proved check with the shortest mate,
    /// at AND nodes the evasion with the longest. A node whose children's proofs were replaced in
    /// the table is searched again. `None` if the line cannot be completed within the limits.
    fn line(&mut self, pos: &mut Position, max_plies: u32) -> Option<Vec<Move>> {
        let mut line = Vec::new();
        let mut walk = pos.clone();
        self.path.truncate(1);
        let mut result = None;
        for depth in 0..=max_plies {
            let or = depth % 2 == 0;
            let plies_left = max_plies - depth;
            if !or && !walk.has_legal_move() {
                result = Some(line.clone());
                break;
            }
            if plies_left == 0 {
                break;
            }
            let Some(mv) = self.next_on_line(&mut walk, or, plies_left).or_else(|| {
                // Re-prove the node (its children's entries may have been replaced) and retry.
                let v = self.mid(&mut walk, or, INF, INF, plies_left);
                if v.pn == 0 && !self.aborted {
                    self.next_on_line(&mut walk, or, plies_left)
                } else {
                    None
                }
            }) else {
                break;
            };
            walk.do_move(mv);
            if self.path.contains(&walk.hash()) {
                break;
            }
            self.path.push(walk.hash());
            line.push(mv);
        }
        self.path.truncate(1);
        result
    }

    /// The move the line takes at `pos` if the table proves every child it needs.
    fn next_on_line(&mut self, pos: &mut Position, or: bool, plies_left: u32) -> Option<Move> {
        let moves = node_moves(pos, or);
        let mut chosen: Option<(Move, u16)> = None;
        for mv in moves {
            pos.do_move(mv);
            let v = if or && !pos.has_legal_move() { Value::proof(0) } else { self.probe(pos, !or, plies_left - 1) };
            pos.undo_move();
            if v.pn != 0 {
                if or {
                    continue;
                }
                return None;
            }
            let better = match chosen {
                None => true,
                Some((_, plies)) => {
                    if or {
                        v.plies < plies
                    } else {
                        v.plies > plies
                    }
                }
            };
            if better {
                chosen = Some((mv, v.plies));
            }
        }
        chosen.map(|(mv, _)| mv)
    }
}

/// An OR node's checks or an AND node's evasions. Not inlined: the move list it fills lives in
/// its own short frame, not in every frame of the recursion (deep mates would overflow the stack).
#[inline(never)]
fn node_moves(pos: &Position, or: bool) -> Vec<Move> {
    if or {
        pos.checking_moves()
    } else {
        pos.legal_moves().to_vec()
    }
}

/// A node's proof and disproof numbers from its children's.
fn numbers(or: bool, kids: &[Child]) -> (u32, u32) {
    let min_pn = kids.iter().map(|k| k.value.pn).min().unwrap_or(INF);
    let min_dn = kids.iter().map(|k| k.value.dn).min().unwrap_or(INF);
    if or {
        (min_pn, if min_pn == 0 { INF } else { sum(kids.iter().map(|k| k.value.dn)) })
    } else {
        (if min_dn == 0 { INF } else { sum(kids.iter().map(|k| k.value.pn)) }, min_dn)
    }
}

/// The child to expand (smallest pn at OR nodes, dn at AND nodes) and the second smallest.
fn most_proving(or: bool, kids: &[Child]) -> (usize, u32) {
    let number = |k: &Child| if or { k.value.pn } else { k.value.dn };
    let mut best = 0;
    let mut second = INF;
    for (i, k) in kids.iter().enumerate().skip(1) {
        let n = number(k);
        if n < number(&kids[best]) {
            second = number(&kids[best]);
            best = i;
        } else if n < second {
            second = n;
        }
    }
    (best, second)
}

/// The node's value once its loop ended.
fn summarize(or: bool, kids: &[Child], plies_left: u32) -> Value {
    let (pn, dn) = numbers(or, kids);
    if pn == 0 {
        let lengths = kids.iter().filter(|k| k.value.pn == 0).map(|k| u32::from(k.value.plies));
        let plies = if or { lengths.min() } else { lengths.max() };
        return Value::proof(plies.unwrap_or(0) + 1);
    }
    if dn == 0 {
        let refuting = kids.iter().filter(|k| k.value.dn == 0).map(|k| k.value);
        // OR: every child refuted, all of them count; AND: one refutation suffices, the cleanest.
        let (depth_limited, taint) = if or {
            refuting.fold((false, NO_TAINT), |(d, t), v| (d || v.depth_limited, t.min(v.taint)))
        } else {
            refuting
                .min_by_key(|v| (v.taint != NO_TAINT, v.depth_limited, std::cmp::Reverse(v.taint)))
                .map(|v| (v.depth_limited, v.taint))
                .expect("dn 0 has a refuting child")
        };
        let mut v = if depth_limited { Value::depth_refutation(plies_left) } else { Value::refutation() };
        v.taint = taint;
        return v;
    }
    Value::open(pn, dn)
}
