//! df-pn in the engine: `go mate` (the shortest mate it can prove in the time given), the quick
//! exact mate search before each move, and the root solver beside the MCTS. The solver and its
//! table are kept between searches ([`MateSolver`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use koma_base::stop::RaiseOnDrop;
use koma_mate::exact::{MateResult, MateSearch};
use koma_mate::{DfPn, Limits, Outcome};
use koma_shogi::{Move, Position};

use super::info::{Score, ThinkingInfo};
use super::{Answer, Job};
use crate::net_loader::LoadedNet;
use crate::time::{Budget, MateLimit};

/// Most plies `go mate` searches (df-pn: a longer limit costs nothing until lines get that long).
const MATE_MAX_PLIES: u32 = 1023;
/// Stack of the root mate search's thread (one df-pn frame per ply, up to `MateRootPlies`).
const MATE_STACK_BYTES: usize = 16 << 20;
/// Descents `go mate infinite` spends on a shorter mate after its first (tens of seconds).
const INFINITE_SHORTEST_NODES: u64 = 5_000_000;
/// Node budget of the quick mate search before a normal search.
const QUICK_MATE_NODES: u64 = 200_000;

/// The df-pn solver kept between searches (its table is allocated once), with its size in MiB.
#[derive(Default)]
pub(crate) struct MateSolver(Option<(u64, DfPn)>);

impl MateSolver {
    /// The solver with a table of `mib` MiB (reallocated when `MateHash` changed).
    pub(crate) fn get(&mut self, mib: u64) -> &mut DfPn {
        if self.0.as_ref().is_none_or(|(m, _)| *m != mib) {
            self.0 = None; // free the old table before allocating the new one
            self.0 = Some((mib, DfPn::new(mib as usize)));
        }
        &mut self.0.as_mut().expect("just set").1
    }
}

impl Job {
    /// The short exact mate search before a normal search (`MateSearchPlies` ≥ 3): a mate it
    /// finds within a tenth of the hard limit (at most 300 ms) is played at once.
    pub(super) fn quick_mate(&self, pos: &mut Position, budget: Option<Budget>) -> Option<Vec<Move>> {
        let plies = self.options.mate_search_plies as u32;
        if plies < 3 {
            return None;
        }
        let limit = match budget {
            _ if self.waiting() => Duration::from_millis(500),
            Some(b) => (b.hard / 10).min(Duration::from_millis(300)),
            None => Duration::from_millis(300),
        };
        let mut until = Instant::now() + limit;
        if let (Some(b), false) = (budget, self.waiting()) {
            // Never past the hard limit (a slow model load may have used most of it).
            until = until.min(self.clock_start() + b.hard);
        }
        let mut mate = MateSearch::new(QUICK_MATE_NODES, Some(until), Some(&self.control.stop));
        match mate.run(pos, plies | 1) {
            MateResult::Mate(line) => Some(line),
            _ => None,
        }
    }

    /// The MCTS with df-pn at the root beside it on its own thread (as dlshogi does): a mate the
    /// solver proves within `root_plies` is played at once.
    pub(super) fn mcts_beside_root_mate(
        &self,
        pos: &mut Position,
        net: &Arc<LoadedNet>,
        budget: Option<Budget>,
        node_limit: Option<u64>,
        root_plies: u32,
        draw_first: bool,
    ) -> Answer {
        let mut guard = self.mate.lock().unwrap_or_else(|e| e.into_inner());
        let solver = guard.get(self.options.mate_hash_mib);
        let (mate_stop, found) = (AtomicBool::new(false), AtomicBool::new(false));
        let root = pos.clone();
        let limits = Limits {
            max_plies: root_plies,
            max_nodes: self.options.mate_root_nodes,
            deadline: None,
            stop: Some(&mate_stop),
            // A mate longer than the plies left would come after the draw.
            proofs_within_depth: draw_first,
        };
        let (answer, outcome) = std::thread::scope(|scope| {
            // Stops the solver however this closure ends: a panic in the MCTS would otherwise
            // leave the scope waiting for it.
            let stop_solver = RaiseOnDrop(&mate_stop);
            let (root, found) = (&root, &found);
            let thread = std::thread::Builder::new().name("koma-usi-mate".into()).stack_size(MATE_STACK_BYTES);
            let solving = thread.spawn_scoped(scope, move || {
                let outcome = solver.search(root, &limits);
                if matches!(outcome, Outcome::Mate(_)) {
                    found.store(true, Ordering::Relaxed);
                }
                outcome
            });
            let answer = self.mcts(pos, net, budget, node_limit, &[], Some(found));
            drop(stop_solver);
            // A thread that could not start or panicked found nothing.
            (answer, solving.ok().and_then(|h| h.join().ok()))
        });
        match outcome {
            Some(Outcome::Mate(line)) => {
                self.report_mate(&line);
                Answer::Move { mv: line[0], ponder: line.get(1).copied() }
            }
            _ => answer,
        }
    }

    /// `go mate`: `checkmate <moves>`, `checkmate nomate` or `checkmate timeout`, from df-pn.
    pub(super) fn mate(&self, limit: MateLimit) {
        let deadline = match limit {
            MateLimit::Infinite => None,
            MateLimit::Millis(ms) => {
                Some(self.started + Duration::from_millis(ms.saturating_sub(self.options.byoyomi_margin.min(ms / 2))))
            }
        };
        let limits =
            Limits { max_plies: MATE_MAX_PLIES, deadline, stop: Some(&self.control.stop), ..Limits::default() };
        let mut guard = self.mate.lock().unwrap_or_else(|e| e.into_inner());
        let solver = guard.get(self.options.mate_hash_mib);
        if !self.pos.has_legal_move() {
            self.say("checkmate nomate");
            return;
        }
        // After the first proof, the shortest mate and its main line, for as long as the time
        // allows (koma_mate::Shortest); without a time limit, until proved or `stop`, within a
        // bound that keeps a search that cannot finish from running for hours unasked.
        let more_nodes = if deadline.is_some() { u64::MAX } else { INFINITE_SHORTEST_NODES };
        let report = |line: &[Move], nodes: u64| {
            let n = line.len();
            self.info(&ThinkingInfo {
                nodes,
                pv: line.to_vec(),
                ..ThinkingInfo::new(n, Score::Mate(n as i32), self.elapsed_ms())
            });
        };
        let outcome = solver.search_shortest(&self.pos, &limits, more_nodes, report).outcome;
        let text = match outcome {
            Outcome::Mate(line) => {
                let moves: Vec<String> = line.iter().map(|m| m.to_usi()).collect();
                format!("checkmate {}", moves.join(" "))
            }
            Outcome::NoMate => "checkmate nomate".to_string(),
            // USI has no "unknown": `nomate` would claim a proof (YaneuraOu's reading too).
            Outcome::NoMateWithin | Outcome::Unknown => "checkmate timeout".to_string(),
        };
        // Unlike `bestmove` after `go infinite`, the answer to `go mate infinite` comes as soon as
        // the search ends: GUIs (Shogidokoro, ShogiHome) send it for tsume with no time limit and
        // wait for `checkmate`; `stop` ends the search early with `checkmate timeout`.
        self.say(&text);
    }
}
