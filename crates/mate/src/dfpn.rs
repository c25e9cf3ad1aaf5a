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
//!   attacker's hand (hand dominance), a proof keyed by its proof pieces (the least hand it
//!   needs) and a disproof by its disproof pieces (the most it allows). Each recursion keeps its
//!   children's values in its own frame and never re-reads them from the table, so results that
//!   depend on the path stay local.
//! - **Repetition**: a child that repeats a position of the current path, or of the game before
//!   the root, is no mate for the attacker (perpetual check loses; a repetition is not mate).
//!   Such a refutation is *tainted* by the repeated position's path index; it becomes clean once
//!   the search is back at that position (the cycle then lies inside the node's own subtree), and
//!   a tainted refutation is never stored.
//! - **Depth**: the search expands no attacker move past `max_plies`. A refutation that relied on
//!   the limit is stored with the plies it had, and a root refuted that way is `NoMateWithin`,
//!   never `NoMate`. A proof is a proof at any depth: one met in the table is used even where its
//!   mate is longer than the plies left (as cshogi's df-pn does), so a line may exceed the limit.
//! - **New OR nodes** look for a mate in one, then in three (every check whose evasions are each
//!   mated at once), as cshogi's df-pn does, without counting nodes; a check that fails starts
//!   with its evasions counted as its proof and disproof numbers. AND nodes look for a mate in
//!   one behind every new evasion.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use koma_shogi::{Color, Hand, Move, MoveList, PieceType, Position};

use crate::line::verify_mate_line;
use crate::table::{Found, Table, INF};

/// Mixed into the key of AND nodes: the same board is an OR node in a search where its side to
/// move attacks and an AND node where it defends.
const AND_NODE: u64 = 0x9d3a_5c6e_1f27_b481;

/// Below the root, the mate-in-three look tries only checks that leave at most this many
/// evasions: one that leaves more rarely has each of them mated at once, and looking behind its
/// first evasion is most of df-pn's time. (The root tries every check: a mate in three costs no
/// node.) On `koma bench mate`'s set: all checks 76 mates in 19.1 s, at most 4
/// evasions 76 mates in 14.7 s, at most 1 75 in 10.6 s (docs/mate.md has the other sets).
const MATE_IN_THREE_MAX_EVASIONS: usize = 4;

/// What may stop a search.
#[derive(Clone, Copy, Debug)]
pub struct Limits<'a> {
    /// The depth searched, in plies (attacker and defender moves): every mate this long or shorter
    /// is found given the nodes, and a longer one only through a transposition.
    pub max_plies: u32,
    /// Descents (one per move made in the search) before giving up.
    pub max_nodes: u64,
    pub deadline: Option<Instant>,
    pub stop: Option<&'a AtomicBool>,
    /// Use only proofs whose mate fits in the plies left, so that every line fits in
    /// `max_plies` (for a move limit, or to look for a shorter mate). Off, transpositions prove
    /// more mates at equal nodes.
    pub proofs_within_depth: bool,
}

impl Default for Limits<'_> {
    fn default() -> Self {
        Limits { max_plies: 255, max_nodes: u64::MAX, deadline: None, stop: None, proofs_within_depth: false }
    }
}

/// The answer of [`DfPn::search`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The side to move mates: a verified line (attacker and defender moves, ending in mate).
    /// Not necessarily the shortest, and longer than `max_plies` when the proof came through a
    /// transposition.
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
    pub(crate) nodes: u64,
    /// The root's proved mate length after a search that proved one (an upper bound on the
    /// shortest mate: the length of the proof's longest line), else 0.
    pub(crate) mate_plies: u32,
}

impl DfPn {
    /// A solver with a table of about `table_mib` MiB ([`crate::DEFAULT_TABLE_MIB`]).
    pub fn new(table_mib: usize) -> DfPn {
        DfPn { table: Table::new(table_mib), nodes: 0, mate_plies: 0 }
    }

    /// Descents made by the last search.
    pub fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Whether the side to move of `pos` mates within the limits. The game before `pos` (its
    /// history) counts for repetitions.
    pub fn search(&mut self, pos: &Position, limits: &Limits) -> Outcome {
        self.table.new_search();
        self.search_again(pos, limits)
    }

    /// [`Self::search`] keeping what the table learnt in the searches since the last
    /// [`Self::search`]: only for the same position with the same history, whose results are
    /// all still true (proofs keep their length, depth-limited refutations their plies).
    pub(crate) fn search_again(&mut self, pos: &Position, limits: &Limits) -> Outcome {
        let mut pos = pos.clone();
        let mut history: Vec<u64> = (1..=pos.plies_from_root()).filter_map(|i| pos.history_hash(i)).collect();
        history.sort_unstable();
        let mut s = Search {
            table: &mut self.table,
            limits,
            attacker: pos.side_to_move(),
            nodes: 0,
            work: 0,
            aborted: false,
            path: vec![pos.hash()],
            history,
        };
        let max_plies = limits.max_plies.min(u32::from(u16::MAX) - 1);
        let root_key = s.key(&pos, true);
        let root = s.mid(&mut pos, true, INF, INF, max_plies, root_key);
        let outcome = if s.aborted {
            Outcome::Unknown
        } else if root.pn == 0 {
            match s.line(&mut pos, max_plies, u32::from(root.plies)) {
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
        self.mate_plies = if matches!(outcome, Outcome::Mate(_)) { u32::from(root.plies) } else { 0 };
        outcome
    }
}

/// The `plies` of an open entry stored by a look-ahead for a mate in one (open entries have no
/// length otherwise): the node is known to have no mate in one, and was not expanded.
const LOOKED_BEHIND: u16 = 1;

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
    /// A proof's proof pieces (the least attacker hand it needs), a refutation's disproof pieces
    /// (the most it allows), in the node's own terms; unused while unsolved.
    hand: Hand,
}

impl Value {
    fn open(pn: u32, dn: u32) -> Value {
        Value { pn, dn, plies: 0, depth_limited: false, taint: NO_TAINT, hand: Hand::EMPTY }
    }

    fn proof(plies: u32, pieces: Hand) -> Value {
        Value {
            pn: 0,
            dn: INF,
            plies: plies.min(u32::from(u16::MAX)) as u16,
            depth_limited: false,
            taint: NO_TAINT,
            hand: pieces,
        }
    }

    fn refutation(pieces: Hand) -> Value {
        Value { pn: INF, dn: 0, plies: 0, depth_limited: false, taint: NO_TAINT, hand: pieces }
    }

    /// No mate within `plies_left`, shown for the exact hand `hand` only.
    fn depth_refutation(plies_left: u32, hand: Hand) -> Value {
        Value { plies: plies_left as u16, depth_limited: true, ..Value::refutation(hand) }
    }

    /// A repetition: a refutation for the exact hand `hand` only.
    fn repetition(taint: i32, hand: Hand) -> Value {
        Value { taint, ..Value::refutation(hand) }
    }

    /// What the table stores for a node searched with attacker hand `hand`: the numbers for that
    /// hand, or a result keyed by its proof or disproof pieces.
    fn found(self, hand: Hand) -> Found {
        let solved = self.pn == 0 || self.dn == 0;
        Found {
            pn: self.pn,
            dn: self.dn,
            plies: self.plies,
            depth_limited: self.depth_limited,
            hand: if solved { self.hand } else { hand },
        }
    }

    fn from_found(f: Found) -> Value {
        Value { pn: f.pn, dn: f.dn, plies: f.plies, depth_limited: f.depth_limited, taint: NO_TAINT, hand: f.hand }
    }
}

struct Child {
    mv: Move,
    /// The table key of the position after `mv`.
    key: u64,
    value: Value,
}

struct Search<'t, 'l, 'a> {
    table: &'t mut Table,
    limits: &'l Limits<'a>,
    attacker: Color,
    nodes: u64,
    /// Nodes plus look-aheads behind evasions (which count no node): the clock and the stop flag
    /// are read every 1024 of them.
    work: u64,
    aborted: bool,
    /// Hashes of the positions from the root to the current node.
    path: Vec<u64>,
    /// The hashes of the game's positions before the root, sorted (a binary search is cheaper
    /// than hashing a key that is a hash already).
    history: Vec<u64>,
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
        }
        self.count_work();
        !self.aborted
    }

    /// Counts a unit of work (a descent or a look-ahead), reading the clock and the stop flag
    /// every 1024: once either says so, the search is aborted.
    fn count_work(&mut self) {
        self.work += 1;
        if self.work.is_multiple_of(1024) {
            let late = self.limits.deadline.is_some_and(|d| Instant::now() >= d);
            let stopped = self.limits.stop.is_some_and(|s| s.load(Ordering::Relaxed));
            self.aborted |= late || stopped;
        }
    }

    /// The children of the node at `pos` (an OR node when `or`, with table key `key`): each
    /// check or evasion with the table key of its position, the value still unknown, and the
    /// table clusters of those keys fetched ahead of their lookups.
    /// Not inlined: the move list it fills lives in its own short frame, not in every frame of
    /// the recursion (deep mates would overflow the stack).
    #[inline(never)]
    fn children(&self, pos: &Position, or: bool, key: u64) -> Vec<Child> {
        let mut moves = MoveList::new();
        generate_node_moves(pos, or, &mut moves);
        let board = if or { key } else { key ^ AND_NODE };
        moves
            .iter()
            .map(|&mv| {
                let after = pos.board_hash_after(board, mv);
                let key = if or { after ^ AND_NODE } else { after };
                self.table.prefetch(key);
                Child { mv, key, value: Value::open(1, 1) }
            })
            .collect()
    }

    /// [`Self::probe_new`] for the position after `mv` from `pos` (with table key `key`),
    /// without playing the move.
    fn probe_after(&self, pos: &Position, mv: Move, key: u64, plies_left: u32) -> Option<Value> {
        let (h, mover_hand) = pos.hash_and_hand_after(mv);
        let hand = if pos.side_to_move() == self.attacker { mover_hand } else { pos.hand(self.attacker) };
        self.probe_hashed(h, hand, key, plies_left)
    }

    /// What the path, the game and the table say of the position with hash `h`, attacker hand
    /// `hand` and table key `key`; None for a new node.
    fn probe_hashed(&self, h: u64, hand: Hand, key: u64, plies_left: u32) -> Option<Value> {
        if let Some(j) = self.path.iter().rposition(|&x| x == h) {
            return Some(Value::repetition(j as i32, hand));
        }
        if self.history.binary_search(&h).is_ok() {
            return Some(Value::repetition(HISTORY, hand));
        }
        self.lookup(key, hand, plies_left).map(Value::from_found)
    }

    /// The table's knowledge of `key` with attacker hand `hand` and `plies_left` plies left.
    fn lookup(&self, key: u64, hand: Hand, plies_left: u32) -> Option<Found> {
        let proof_plies = if self.limits.proofs_within_depth { plies_left } else { u32::MAX };
        self.table.lookup(key, hand, plies_left, proof_plies)
    }

    /// The value of a child position (the move already made) from the path, the game and the
    /// table.
    fn probe(&self, pos: &Position, or: bool, plies_left: u32) -> Value {
        self.probe_new(pos, or, plies_left).unwrap_or(Value::open(1, 1))
    }

    /// [`Self::probe`], None for a position nothing is known about (a new node).
    fn probe_new(&self, pos: &Position, or: bool, plies_left: u32) -> Option<Value> {
        self.probe_at(pos, self.key(pos, or), plies_left)
    }

    /// [`Self::probe_new`] with the position's table key `key`.
    fn probe_at(&self, pos: &Position, key: u64, plies_left: u32) -> Option<Value> {
        self.probe_hashed(pos.hash(), pos.hand(self.attacker), key, plies_left)
    }

    /// Searches the node at `pos` (an OR node when `or`, with table key `key`) until it is
    /// solved, its numbers reach the thresholds, or a limit stops the search. `self.path` ends
    /// with `pos`.
    fn mid(&mut self, pos: &mut Position, or: bool, th_pn: u32, th_dn: u32, plies_left: u32, key: u64) -> Value {
        let ply = (self.path.len() - 1) as i32;
        let hand = pos.hand(self.attacker);
        if or && plies_left == 0 {
            return Value::depth_refutation(0, hand);
        }
        let mut kids = self.children(pos, or, key);
        if kids.is_empty() {
            let v = if or {
                Value::refutation(or_disproof_start(pos, self.attacker))
            } else {
                Value::proof(0, and_proof_pieces(pos, self.attacker, Hand::EMPTY))
            };
            self.table.store(key, hand, v.found(hand), 1);
            return v;
        }
        if !or && plies_left == 0 {
            return Value::depth_refutation(0, hand);
        }
        let nodes_before = self.nodes;
        // A new OR node: a mate in one or three proves it at once. One a look-ahead met already
        // has no mate in one.
        let known = if or { self.lookup(key, hand, plies_left) } else { None };
        let looked_behind = known.is_some_and(|f| f.pn != 0 && f.dn != 0 && f.plies == LOOKED_BEHIND);
        // The children's values, once the mate-in-three look has found them all.
        let mut valued = false;
        if or && (known.is_none() || looked_behind) {
            if known.is_none() {
                if let Some(v) = self.mate_in_one(pos, &kids, key, hand) {
                    return v;
                }
            }
            if plies_left >= 3 {
                let max_evasions = if ply == 0 { usize::MAX } else { MATE_IN_THREE_MAX_EVASIONS };
                if let Some(v) = self.mate_in_three(pos, &mut kids, key, hand, plies_left, max_evasions) {
                    return v;
                }
                valued = !self.aborted;
            }
        }
        // Every new evasion is looked at for a mate in one.
        let look_ahead = !or && plies_left >= 2;
        for kid in kids.iter_mut().filter(|_| !valued) {
            let known = self.probe_after(pos, kid.mv, kid.key, plies_left - 1);
            kid.value = known.unwrap_or(Value::open(1, 1));
            if look_ahead && known.is_none() {
                // A new evasion: look for the attacker's mate in one behind it now, so that
                // an AND node whose evasions all lose at once is proved without a descent
                // into each, and no proved evasion is descended into. (Stopping at the first
                // evasion without one is cheaper but proves fewer mates at equal node
                // limits: docs/mate.md.)
                pos.do_move(kid.mv);
                if let Some(v) = self.look_behind(pos, kid.key) {
                    kid.value = v;
                }
                pos.undo_move();
            }
        }
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
            let v = self.mid(pos, !or, child_pn, child_dn, plies_left - 1, kids[best].key);
            self.path.pop();
            pos.undo_move();
            kids[best].value = v;
            if self.aborted {
                let (pn, dn) = numbers(or, &kids);
                return Value::open(pn, dn);
            }
        }
        let mut v = summarize(pos, self.attacker, or, &kids, plies_left);
        if v.taint != NO_TAINT && v.taint >= ply {
            // The repeated position is this one or below it: the cycle is the node's own.
            v.taint = NO_TAINT;
        }
        if v.taint == NO_TAINT {
            let amount = (self.nodes - nodes_before).min(u64::from(u32::MAX)) as u32;
            self.table.store(key, hand, v.found(hand), amount.max(1));
        }
        v
    }

    /// The value of the OR node at `pos` (an evasion just made, nothing known of it) after looking
    /// for a mate in one: a proof, a refutation if it has no check, else open and marked
    /// [`LOOKED_BEHIND`]. Stored, so that no later visit looks again. None once the search is
    /// aborted.
    fn look_behind(&mut self, pos: &mut Position, key: u64) -> Option<Value> {
        let hand = pos.hand(self.attacker);
        self.count_work();
        if self.aborted {
            return None;
        }
        let (mate, checks) = pos.mate_in_one_or_checks();
        if let Some(m) = mate {
            return Some(self.mated_by(pos, m, key, hand));
        }
        let v = if !checks {
            Value::refutation(or_disproof_start(pos, self.attacker))
        } else {
            Value { plies: LOOKED_BEHIND, ..Value::open(1, 1) }
        };
        self.table.store(key, hand, v.found(hand), 1);
        Some(v)
    }

    /// Proves the new OR node at `pos` (its checks `moves`, none of which mates at once) and
    /// stores the proof if a check leaves only evasions that are each mated at once (looked for
    /// behind checks with at most `max_evasions` evasions). Every check
    /// that fails and that nothing was known of is stored open with its evasions counted as its
    /// proof and disproof numbers (a king with fewer answers is nearer to mate, and has fewer
    /// ways out); the evasions it looked behind are stored by [`Self::look_behind`].
    fn mate_in_three(
        &mut self,
        pos: &mut Position,
        checks: &mut [Child],
        key: u64,
        hand: Hand,
        plies_left: u32,
        max_evasions: usize,
    ) -> Option<Value> {
        for check in checks.iter_mut() {
            if let Some(known) = self.probe_after(pos, check.mv, check.key, plies_left - 1) {
                check.value = known;
                continue;
            }
            pos.do_move(check.mv);
            let value = self.evasions_all_mated(pos, check.key, plies_left - 1, max_evasions);
            pos.undo_move();
            if self.aborted {
                return None;
            }
            check.value = value;
            if value.pn == 0 {
                let v = or_proof(pos, self.attacker, check.mv, value);
                self.table.store(key, hand, v.found(hand), 1);
                return Some(v);
            }
        }
        None
    }

    /// For the new AND node at `pos` (a check just given, with table key `key`): its proof,
    /// stored, when it has at most `max_evasions` evasions and each is mated at once (or is
    /// already proved in the table); else
    /// the node's value stored open with its evasions counted (unless the search was aborted).
    fn evasions_all_mated(&mut self, pos: &mut Position, key: u64, plies_left: u32, max_evasions: usize) -> Value {
        let hand = pos.hand(self.attacker);
        let mut evasions = MoveList::new();
        pos.generate_legal_fast(&mut evasions);
        let board = key ^ AND_NODE;
        let (mut plies, mut needed) = (0, Hand::EMPTY);
        if evasions.len() > max_evasions {
            return self.open_with_evasions(key, hand, evasions.len());
        }
        // Most checks fail at their first evasion: the keys are computed one at a time.
        for &e in evasions.iter() {
            // The move is made before the lookup: its entry is fetched meanwhile.
            let child = pos.board_hash_after(board, e);
            self.table.prefetch(child);
            pos.do_move(e);
            let v = match self.probe_at(pos, child, plies_left - 1) {
                Some(v) => Some(v),
                None => self.look_behind(pos, child),
            };
            pos.undo_move();
            match v {
                Some(v) if v.pn == 0 => {
                    plies = plies.max(u32::from(v.plies));
                    needed = hand_max(needed, v.hand);
                }
                _ => return self.open_with_evasions(key, hand, evasions.len()),
            }
        }
        let v = Value::proof(plies + u32::from(!evasions.is_empty()), and_proof_pieces(pos, self.attacker, needed));
        self.table.store(key, hand, v.found(hand), 1);
        v
    }

    /// The open value of an AND node with `evasions` answers, stored (unless the search was
    /// aborted): a king with fewer answers is nearer to mate, and has fewer ways out.
    fn open_with_evasions(&mut self, key: u64, hand: Hand, evasions: usize) -> Value {
        let n = evasions as u32;
        let v = Value::open(n, n);
        if !self.aborted {
            self.table.store(key, hand, v.found(hand), 1);
        }
        v
    }

    /// Proves the OR node at `pos` (its checks `moves`) and stores the proof if one of them mates
    /// at once.
    fn mate_in_one(&mut self, pos: &mut Position, checks: &[Child], key: u64, hand: Hand) -> Option<Value> {
        let m = pos.mate_among(checks.iter().map(|c| c.mv))?;
        Some(self.mated_by(pos, m, key, hand))
    }

    /// The proof of the OR node at `pos` by the mate in one `m`, stored.
    fn mated_by(&mut self, pos: &mut Position, m: Move, key: u64, hand: Hand) -> Value {
        pos.do_move(m);
        let child = and_proof_pieces(pos, self.attacker, Hand::EMPTY);
        pos.undo_move();
        let v = Value::proof(1, or_proof_pieces(pos, self.attacker, m, child));
        self.table.store(key, hand, v.found(hand), 1);
        v
    }

    /// The mate line from a root proved by a mate of `proof_plies`: at OR nodes the proved check
    /// with the shortest mate, at AND nodes the evasion with the longest. A node whose children's
    /// proofs were replaced in the table is searched again, with the plies its own proof took.
    /// `None` if the line cannot be completed within the limits.
    fn line(&mut self, pos: &mut Position, max_plies: u32, proof_plies: u32) -> Option<Vec<Move>> {
        let mut line = Vec::new();
        let mut walk = pos.clone();
        self.path.truncate(1);
        let mut result = None;
        // Proofs met through the table may run past `max_plies`; the line follows them there.
        let mut needed = proof_plies;
        for depth in 0..=u32::from(u16::MAX) {
            let or = depth % 2 == 0;
            let plies_left = max_plies.saturating_sub(depth).max(needed).max(1);
            if !or && !walk.has_legal_move() {
                result = Some(line.clone());
                break;
            }
            let Some((mv, plies)) = self.next_on_line(&mut walk, or, plies_left).or_else(|| {
                // Re-prove the node (its children's entries may have been replaced) and retry.
                let key = self.key(&walk, or);
                let v = self.mid(&mut walk, or, INF, INF, plies_left, key);
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
            needed = u32::from(plies);
        }
        self.path.truncate(1);
        result
    }

    /// The move the line takes at `pos` if the table proves every child it needs, with the length
    /// of the child's proof.
    fn next_on_line(&mut self, pos: &mut Position, or: bool, plies_left: u32) -> Option<(Move, u16)> {
        let moves = node_moves(pos, or);
        let mut chosen: Option<(Move, u16)> = None;
        for mv in moves {
            pos.do_move(mv);
            let v = if or && !pos.has_legal_move() {
                Value::proof(0, Hand::EMPTY)
            } else {
                self.probe(pos, !or, plies_left - 1)
            };
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
        chosen
    }
}

/// An OR node's checks or an AND node's evasions. Not inlined: the move list it fills lives in
/// its own short frame, not in every frame of the recursion (deep mates would overflow the stack).
#[inline(never)]
fn node_moves(pos: &Position, or: bool) -> Vec<Move> {
    let mut moves = MoveList::new();
    generate_node_moves(pos, or, &mut moves);
    moves.to_vec()
}

/// Fills `list` with the moves of a node: the checks at an OR node, the evasions at an AND node.
fn generate_node_moves(pos: &Position, or: bool, list: &mut MoveList) {
    if or {
        pos.generate_checks(list);
    } else {
        pos.generate_legal_fast(list);
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

/// An OR node's proof through the check `mv`, whose position `child` proves.
fn or_proof(pos: &Position, attacker: Color, mv: Move, child: Value) -> Value {
    Value::proof(u32::from(child.plies) + 1, or_proof_pieces(pos, attacker, mv, child.hand))
}

/// An AND node's proof from the proofs of every evasion's position: as long as the longest, with
/// the pieces the most demanding needs.
fn and_proof(pos: &Position, attacker: Color, proofs: impl Iterator<Item = Value>) -> Value {
    let (plies, needed) =
        proofs.fold((0, Hand::EMPTY), |(plies, needed), v| (plies.max(u32::from(v.plies)), hand_max(needed, v.hand)));
    Value::proof(plies + 1, and_proof_pieces(pos, attacker, needed))
}

/// The node's value once its loop ended, with its proof or disproof pieces.
fn summarize(pos: &Position, attacker: Color, or: bool, kids: &[Child], plies_left: u32) -> Value {
    let (pn, dn) = numbers(or, kids);
    if pn == 0 {
        let proved = kids.iter().filter(|k| k.value.pn == 0);
        return if or {
            let best = proved.min_by_key(|k| k.value.plies).expect("pn 0 has a proved child");
            or_proof(pos, attacker, best.mv, best.value)
        } else {
            and_proof(pos, attacker, proved.map(|k| k.value))
        };
    }
    if dn == 0 {
        let refuting = kids.iter().filter(|k| k.value.dn == 0);
        // OR: every child refuted, all of them count; AND: one refutation suffices, the cleanest.
        let (depth_limited, taint, pieces) = if or {
            refuting.fold((false, NO_TAINT, or_disproof_start(pos, attacker)), |(d, t, h), k| {
                (d || k.value.depth_limited, t.min(k.value.taint), hand_min(h, or_disproof_pieces(pos, attacker, k)))
            })
        } else {
            refuting
                .min_by_key(|k| (k.value.taint != NO_TAINT, k.value.depth_limited, std::cmp::Reverse(k.value.taint)))
                .map(|k| (k.value.depth_limited, k.value.taint, and_disproof_pieces(pos, attacker, k)))
                .expect("dn 0 has a refuting child")
        };
        let mut v = if depth_limited { Value::depth_refutation(plies_left, pieces) } else { Value::refutation(pieces) };
        v.taint = taint;
        return v;
    }
    Value::open(pn, dn)
}

// Proof and disproof pieces (Seo 1999; Nagai 2002). Within one search the pieces are conserved,
// so an attacker hand H' on the same board leaves the defender the pieces in both hands less H'.
// A proof holds for every H' that dominates its proof pieces, a disproof for every H' its
// disproof pieces dominate; the rules below keep that true node by node.

/// Per kind, the larger count.
fn hand_max(a: Hand, b: Hand) -> Hand {
    let mut h = a;
    for pt in PieceType::HAND {
        h.set(pt, a.count(pt).max(b.count(pt)));
    }
    h
}

/// Per kind, the smaller count.
fn hand_min(a: Hand, b: Hand) -> Hand {
    let mut h = a;
    for pt in PieceType::HAND {
        h.set(pt, a.count(pt).min(b.count(pt)));
    }
    h
}

/// Whether the defender (to move, in check) could answer by dropping a piece between the checker
/// and the king: one checker, on a line with an empty square between.
fn drops_can_interpose(pos: &Position) -> bool {
    let checkers = pos.checkers();
    if checkers.more_than_one() {
        return false;
    }
    let Some(checker) = checkers.first() else { return false };
    let king = pos.king_square(pos.side_to_move());
    let df = (i32::from(checker.file_index()) - i32::from(king.file_index())).abs();
    let dr = (i32::from(checker.rank_index()) - i32::from(king.rank_index())).abs();
    df.max(dr) >= 2 && (df == 0 || dr == 0 || df == dr)
}

/// An AND node's proof pieces, given the most each proved evasion needs. If a drop could block
/// the check, the attacker keeps all it holds of every kind the defender has none of: with fewer,
/// the defender would hold some and could drop it, an evasion the proof never met.
fn and_proof_pieces(pos: &Position, attacker: Color, needed: Hand) -> Hand {
    let mut pieces = needed;
    if drops_can_interpose(pos) {
        let (mine, theirs) = (pos.hand(attacker), pos.hand(!attacker));
        for pt in PieceType::HAND {
            if theirs.count(pt) == 0 {
                pieces.set(pt, mine.count(pt));
            }
        }
    }
    pieces
}

/// An OR node's proof pieces from the check `mv` and the pieces its position needs: a dropped
/// piece must be in hand; a captured one need not be.
fn or_proof_pieces(pos: &Position, attacker: Color, mv: Move, child: Hand) -> Hand {
    let mut pieces = child;
    if let Some(pt) = mv.drop_piece_type() {
        pieces.set(pt, pieces.count(pt) + 1);
    } else if let Some(captured) = pos.piece_at(mv.to()) {
        let pt = captured.piece_type().unpromote();
        pieces.set(pt, pieces.count(pt).saturating_sub(1));
    }
    hand_min(pieces, pos.hand(attacker))
}

/// An OR node's disproof pieces before its checks are counted: of a kind the attacker holds, more
/// gives no new check (the drops are already tried, deeper nodes bound the rest); of a kind it
/// does not hold, one more would allow new drops.
fn or_disproof_start(pos: &Position, attacker: Color) -> Hand {
    let (mine, theirs) = (pos.hand(attacker), pos.hand(!attacker));
    let mut pieces = Hand::EMPTY;
    for pt in PieceType::HAND {
        if mine.count(pt) > 0 {
            pieces.set(pt, mine.count(pt) + theirs.count(pt));
        }
    }
    pieces
}

/// What the refuted check `kid` allows at its OR node: the child's disproof pieces, with the piece
/// the check drops added back and the piece it captures taken away.
fn or_disproof_pieces(pos: &Position, attacker: Color, kid: &Child) -> Hand {
    let (mine, theirs) = (pos.hand(attacker), pos.hand(!attacker));
    let mut pieces = kid.value.hand;
    if let Some(pt) = kid.mv.drop_piece_type() {
        pieces.set(pt, (pieces.count(pt) + 1).min(mine.count(pt) + theirs.count(pt)));
    } else if let Some(captured) = pos.piece_at(kid.mv.to()) {
        let pt = captured.piece_type().unpromote();
        pieces.set(pt, pieces.count(pt).saturating_sub(1));
    }
    // Never below the hand searched (a disproof always holds for it).
    hand_max(pieces, mine)
}

/// What the refuting evasion `kid` allows at its AND node: the child's disproof pieces, and if the
/// evasion drops a piece, the defender must keep one of that kind.
fn and_disproof_pieces(pos: &Position, attacker: Color, kid: &Child) -> Hand {
    let (mine, theirs) = (pos.hand(attacker), pos.hand(!attacker));
    let mut pieces = kid.value.hand;
    if let Some(pt) = kid.mv.drop_piece_type() {
        pieces.set(pt, pieces.count(pt).min(mine.count(pt) + theirs.count(pt) - 1));
    }
    hand_max(pieces, mine)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hand(pieces: &[(PieceType, u32)]) -> Hand {
        let mut h = Hand::EMPTY;
        for &(pt, n) in pieces {
            h.set(pt, n);
        }
        h
    }

    /// Searches `sfen` and returns the solver, for looking into its table.
    fn solved(sfen: &str) -> (DfPn, Position, Outcome) {
        let pos = Position::from_sfen(sfen).unwrap();
        let mut solver = DfPn::new(1);
        let outcome = solver.search(&pos, &Limits { max_plies: 7, ..Limits::default() });
        (solver, pos, outcome)
    }

    #[test]
    fn a_drop_mate_needs_exactly_the_dropped_piece() {
        // G*5b mates; the pawn and the second gold in hand are not needed.
        let (solver, pos, outcome) = solved("4k4/9/4P4/9/9/9/9/9/4K4 b 2GP 1");
        assert_eq!(outcome, Outcome::Mate(vec![Move::from_usi("G*5b").unwrap()]));
        let gold = hand(&[(PieceType::Gold, 1)]);
        let found = solver.table.lookup(pos.board_hash(), gold, 1, INF).expect("the proof answers for one gold");
        assert_eq!((found.pn, found.hand), (0, gold));
        assert_eq!(solver.table.lookup(pos.board_hash(), hand(&[(PieceType::Pawn, 1)]), 1, INF), None);
    }

    #[test]
    fn a_mate_without_drops_needs_no_piece_in_hand() {
        // 4c5b or 5c5b+ mates with the board alone: the proof holds with any hand, an empty one
        // included.
        let (solver, pos, outcome) = solved("4k4/9/4PG3/9/9/9/9/9/4K4 b RP 1");
        assert!(matches!(&outcome, Outcome::Mate(line) if line.len() == 1 && !line[0].is_drop()), "{outcome:?}");
        for h in [Hand::EMPTY, hand(&[(PieceType::Rook, 1)]), hand(&[(PieceType::Silver, 2)])] {
            let found = solver.table.lookup(pos.board_hash(), h, 1, INF).expect("a proof for any hand");
            assert_eq!((found.pn, found.hand), (0, Hand::EMPTY));
        }
    }

    #[test]
    fn a_disproof_holds_for_more_of_the_kinds_held_not_for_new_kinds() {
        // The gold on 5b blocks every check: a pawn drop gives none, and with more pawns there is
        // still none, but a silver or gold in hand would give new drops.
        let (solver, pos, outcome) = solved("4k4/4g4/9/9/9/9/9/9/4K4 b P2p 1");
        assert_eq!(outcome, Outcome::NoMate);
        let key = pos.board_hash();
        for h in [Hand::EMPTY, hand(&[(PieceType::Pawn, 1)]), hand(&[(PieceType::Pawn, 3)])] {
            assert_eq!(solver.table.lookup(key, h, 7, INF).map(|f| f.dn), Some(0), "{h:?}");
        }
        assert_eq!(solver.table.lookup(key, hand(&[(PieceType::Pawn, 1), (PieceType::Silver, 1)]), 7, INF), None);
    }

    #[test]
    fn an_interposable_check_keeps_the_kinds_the_defender_lacks() {
        // The rook checks from 5e: the defender could interpose, so with no gold in its hand the
        // attacker must keep its gold; it has a pawn, so the attacker's pawns are not needed.
        let pos = Position::from_sfen("4k4/9/9/9/4R4/9/9/9/4K4 w GPp 1").unwrap();
        assert!(drops_can_interpose(&pos));
        let pieces = and_proof_pieces(&pos, Color::Black, Hand::EMPTY);
        assert_eq!(pieces, hand(&[(PieceType::Gold, 1)]));
        // A contact check cannot be blocked: nothing is needed.
        let pos = Position::from_sfen("4k4/4R4/9/9/9/9/9/9/4K4 w GPp 1").unwrap();
        assert!(!drops_can_interpose(&pos));
        assert_eq!(and_proof_pieces(&pos, Color::Black, Hand::EMPTY), Hand::EMPTY);
    }
}
