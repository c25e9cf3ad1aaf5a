//! The shortest mate (`go mate`): df-pn's first proof need not be the shortest, since a proof met
//! in the table holds at any depth. After it, searches bounded by the plies left
//! ([`Limits::proofs_within_depth`]) look for a mate two plies shorter than the last proof's,
//! until one proves there is none; then the main line is rebuilt move by move: at each attacker
//! move the check of a proof within the plies left, at each defender move an evasion after which
//! there is no mate two plies sooner (the longest defence). df-pn's own line follows the stored
//! lengths, which are upper bounds, so its defence may be shorter than the longest.

use koma_shogi::{Move, Position};

use crate::dfpn::{DfPn, Limits, Outcome};
use crate::line::verify_mate_line;

const KEEP_TABLE: bool = true;

/// The answer of [`DfPn::search_shortest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortest {
    /// [`DfPn::search`]'s answer, with the shortest line found when it is a mate.
    pub outcome: Outcome,
    /// The mate is proved the shortest (there is none two plies shorter) and its line is the
    /// main line: every attacker move mates as soon as possible and every defender move resists
    /// as long as possible. False when a limit came first: the line is a verified mate, maybe not
    /// the shortest.
    pub proved: bool,
}

impl DfPn {
    /// [`DfPn::search`], then, for a mate, the shortest mate and its main line within the same
    /// deadline and stop flag and `more_nodes` further descents (module doc). `found` is called
    /// with each shorter mate line as it is found, and the descents so far. [`DfPn::nodes`] then
    /// counts the descents of every search.
    pub fn search_shortest(
        &mut self,
        pos: &Position,
        limits: &Limits,
        more_nodes: u64,
        mut found: impl FnMut(&[Move], u64),
    ) -> Shortest {
        let first = self.search(pos, limits);
        let mut bounded = Bounded { solver: self, limits, budget: more_nodes, total: 0 };
        bounded.total = bounded.solver.nodes;
        let Outcome::Mate(mut line) = first else {
            return Shortest { outcome: first, proved: false };
        };
        found(&line, bounded.total);
        // The proof's length bounds the shortest mate from above; a search that finds no mate
        // two plies shorter bounds it from below.
        let mut plies = bounded.solver.mate_plies.max(1);
        let shortest = loop {
            if plies <= 1 {
                break true;
            }
            match bounded.search(pos, plies - 2, KEEP_TABLE) {
                Outcome::Mate(shorter) => {
                    plies = bounded.solver.mate_plies;
                    line = shorter;
                    found(&line, bounded.total);
                }
                Outcome::NoMate | Outcome::NoMateWithin => break true,
                Outcome::Unknown => break false,
            }
        };
        let mut proved = false;
        if let Some((main, complete)) = if shortest { bounded.main_line(pos, plies) } else { None } {
            // An incomplete main line replaces df-pn's line when it is as long (its first moves are
            // the main line's).
            if main != line && (complete || main.len() >= line.len()) {
                line = main;
                found(&line, bounded.total);
            }
            proved = complete;
        }
        let total = bounded.total;
        self.nodes = total;
        Shortest { outcome: Outcome::Mate(line), proved }
    }
}

/// Searches bounded by the plies left, sharing one node budget.
struct Bounded<'s, 'l, 'a> {
    solver: &'s mut DfPn,
    limits: &'l Limits<'a>,
    /// Descents left.
    budget: u64,
    /// Descents of every search so far.
    total: u64,
}

impl Bounded<'_, '_, '_> {
    /// Whether the side to move at `pos` mates within `max_plies`, using only proofs that fit;
    /// with `again`, keeping the table of the last searches (of the same position).
    fn search(&mut self, pos: &Position, max_plies: u32, again: bool) -> Outcome {
        let limits = Limits { max_plies, max_nodes: self.budget, proofs_within_depth: true, ..*self.limits };
        let outcome = if again { self.solver.search_again(pos, &limits) } else { self.solver.search(pos, &limits) };
        self.budget = self.budget.saturating_sub(self.solver.nodes);
        self.total += self.solver.nodes;
        outcome
    }

    /// The main line from `pos`, whose shortest mate takes `plies` (proved), and whether it is
    /// complete: when a limit comes first, the main line so far followed by the last proof's line
    /// (a verified mate, whose defence may not be the longest), or None before the first proof.
    fn main_line(&mut self, pos: &Position, mut plies: u32) -> Option<(Vec<Move>, bool)> {
        let mut walk = pos.clone();
        let mut line = Vec::with_capacity(plies as usize);
        let mut partial = None;
        let verified =
            |line: Vec<Move>, complete: bool| verify_mate_line(pos, &line).is_ok().then_some((line, complete));
        loop {
            // The attacker: the first check of a proof within the plies left mates as soon as
            // possible (there is no shorter mate).
            let Outcome::Mate(proof) = self.search(&walk, plies, false) else {
                return partial.and_then(|p| verified(p, false));
            };
            if plies <= 3 || proof.len() <= 1 {
                // Every defence of a mate in three is mated at once.
                line.extend(proof);
                return verified(line, true);
            }
            partial = Some([&line[..], &proof[..]].concat());
            walk.do_move(proof[0]);
            line.push(proof[0]);
            // The defender: an evasion after which there is no mate within `plies - 4`, the
            // proof's own first.
            let mut evasions = walk.legal_moves().to_vec();
            if let Some(i) = evasions.iter().position(|&e| e == proof[1]) {
                evasions.swap(0, i);
            }
            let mut longest = None;
            for e in evasions {
                walk.do_move(e);
                let outcome = self.search(&walk, plies - 4, false);
                walk.undo_move();
                match outcome {
                    Outcome::NoMate | Outcome::NoMateWithin => {
                        longest = Some(e);
                        break;
                    }
                    Outcome::Mate(_) => {}
                    Outcome::Unknown => return partial.and_then(|p| verified(p, false)),
                }
            }
            // None would contradict the proofs (every evasion mated sooner): keep what we have.
            let Some(e) = longest else { return partial.and_then(|p| verified(p, false)) };
            walk.do_move(e);
            line.push(e);
            plies -= 2;
        }
    }
}
