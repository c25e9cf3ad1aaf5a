//! One `go`: runs on its own thread, reports `info` lines and ends with exactly one `bestmove`
//! (or `checkmate` for `go mate`), unless the command loop abandons it.
//!
//! Order of business for a normal `go` ([`Job::think`] here): no legal move → `bestmove resign`; a
//! winning impasse declaration → `bestmove win` (under the Try rule, the Try move); a mate in one
//! → play it; a short mate search (`MateSearchPlies`) → play the mate; otherwise MCTS until the
//! time, playout or memory limit (or `stop`), then the most visited move, or `resign` below
//! `ResignThreshold`. The parts live beside this file: `walk.rs` (the MCTS driver and its search
//! threads), `stop.rs` (when a timed search stops), `info.rs` (typed `info` lines and the PVs they
//! show), `mate.rs` (df-pn: `go mate`, the quick mate search, the root solver beside the MCTS).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koma_mcts::{Search, SearchConfig};
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, Position, Status};

use crate::io::Output;
use crate::net_loader::{LoadKey, LoadedNet, Loader};
use crate::options::Options;
use crate::time::{self, GoParams};

mod info;
mod mate;
mod stop;
mod walk;

use info::{Score, ThinkingInfo};
pub(crate) use mate::MateSolver;

/// Shared between the command loop and a running search.
#[derive(Default)]
pub(crate) struct Control {
    pub stop: AtomicBool,
    /// When `ponderhit` arrived.
    pub ponderhit: Mutex<Option<Instant>>,
    /// Abandoned by a second `go`: print no `bestmove`.
    pub quiet: AtomicBool,
    /// The answer (`bestmove` or `checkmate`) is out.
    pub answered: AtomicBool,
}

impl Control {
    fn ponderhit_time(&self) -> Option<Instant> {
        *self.ponderhit.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The search tree kept between moves (tree reuse) and what it was built for.
#[derive(Default)]
pub(crate) struct TreeState {
    search: Option<Search>,
    /// Cache size (MiB) and rules the search was allocated with.
    allocated_for: Option<(u64, GameRules)>,
    /// The evaluator whose judgements fill the tree and the cache (`None`: none yet).
    evaluator: Option<usize>,
    /// Set by `usinewgame`.
    pub reset: bool,
}

impl TreeState {
    /// The search for `options`, allocated (its evaluation cache is `NN_Cache` MiB) only when the
    /// cache size or the rules changed: `isready` calls this so that the first `go` does not
    /// spend its time in page faults. A new `evaluator` forgets the tree and the cache; a new
    /// game (`reset`) only the tree, since the cached evaluations still hold.
    pub(crate) fn prepare(&mut self, options: &Options, evaluator: Option<usize>) -> &mut Search {
        let wanted = (options.nn_cache_mib, options.rules());
        if self.allocated_for != Some(wanted) {
            self.search = None; // free the old cache before allocating the new one
            let cache_entries = options.cache_entries();
            let mut search = Search::new(SearchConfig::evaluation(), wanted.1, SEARCH_SEED);
            if cache_entries > 0 {
                search = search.with_cache(cache_entries);
            }
            self.search = Some(search);
            self.allocated_for = Some(wanted);
            self.evaluator = None;
        }
        let search = self.search.as_mut().expect("allocated above");
        if evaluator.is_some() && self.evaluator != evaluator {
            if self.evaluator.is_some() {
                search.clear_evaluations();
            } else {
                search.clear_tree();
            }
            self.evaluator = evaluator;
        }
        if std::mem::take(&mut self.reset) {
            search.clear_tree();
        }
        search
    }

    /// Forgets the tree (a failed search leaves pending leaves in it).
    pub(crate) fn forget_tree(&mut self) {
        if let Some(search) = self.search.as_mut() {
            search.clear_tree();
        }
    }
}

/// Fallback seed; engine play has no randomness (no root noise, temperature 0).
const SEARCH_SEED: u64 = 0x6b6f_6d61;

pub(crate) struct Job {
    pub pos: Position,
    pub go: GoParams,
    pub options: Options,
    /// When the `go` line was read.
    pub started: Instant,
    pub control: Arc<Control>,
    pub out: Output,
    pub loader: Arc<Loader>,
    pub key: LoadKey,
    pub tree: Arc<Mutex<TreeState>>,
    pub mate: Arc<Mutex<MateSolver>>,
}

enum Answer {
    Move {
        mv: Move,
        ponder: Option<Move>,
    },
    Resign,
    /// The search's win rate is under `ResignThreshold`: said (`info string resigning: …`) only
    /// when it is the answer, not when the root's df-pn proves a mate after all.
    ResignAtWinrate(f64),
    Win,
}

/// Runs the job to its end; never panics out.
pub(crate) fn run(job: Job) {
    run_job(&job);
    job.control.answered.store(true, Ordering::Release);
}

fn run_job(job: &Job) {
    let result = catch_unwind(AssertUnwindSafe(|| match job.go.mate {
        Some(limit) => {
            job.mate(limit);
            None
        }
        None => Some(job.think()),
    }));
    let answer = match result {
        Ok(None) => return,
        Ok(Some(answer)) => answer,
        Err(_) => {
            job.out.warn("internal error during search; answering with a fallback move");
            if job.go.mate.is_some() {
                // Nothing was proved: `nomate` would claim a proof.
                job.say("checkmate timeout");
                return;
            }
            let mut pos = job.pos.clone();
            match pos.mate_in_one().or_else(|| pos.legal_moves().first().copied()) {
                Some(mv) => Answer::Move { mv, ponder: None },
                None => Answer::Resign,
            }
        }
    };
    job.wait_for_release();
    job.answer(answer);
}

impl Job {
    /// Searching without a deadline: `go infinite`, or pondering before `ponderhit`. A `nodes`
    /// limit on the `go infinite` line still ends the search with an answer, as in Stockfish (an
    /// analysis to N nodes: ShogiArena's `run analyze --nodes` sends `go nodes N infinite`); the
    /// `Playouts` option does not, and a ponder search waits for `ponderhit` or `stop` whatever
    /// its limits.
    fn waiting(&self) -> bool {
        (self.go.infinite && self.go.nodes.is_none()) || (self.go.ponder && self.control.ponderhit_time().is_none())
    }

    fn stopped(&self) -> bool {
        self.control.stop.load(Ordering::Relaxed)
    }

    /// Where the clock started for us: the `ponderhit`, or the `go`.
    fn clock_start(&self) -> Instant {
        if self.go.ponder {
            self.control.ponderhit_time().unwrap_or(self.started)
        } else {
            self.started
        }
    }

    /// `bestmove` may only come after `stop` (or `ponderhit`) in infinite and ponder searches.
    fn wait_for_release(&self) {
        while self.waiting() && !self.stopped() {
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Prints the answer. `answered` is set first: once the GUI has read the line it may send
    /// the next `go` at once, and that must not find this search still running.
    fn say(&self, line: &str) {
        self.control.answered.store(true, Ordering::Release);
        if !self.control.quiet.load(Ordering::Relaxed) {
            self.out.line(line);
        }
    }

    fn answer(&self, answer: Answer) {
        if self.control.quiet.load(Ordering::Relaxed) {
            return;
        }
        let text = match answer {
            Answer::Resign => "bestmove resign".to_string(),
            Answer::ResignAtWinrate(winrate) => {
                self.out.info_string(&format!("resigning: win rate {:.2}%", winrate * 100.0));
                "bestmove resign".to_string()
            }
            Answer::Win => "bestmove win".to_string(),
            Answer::Move { mv, ponder } => {
                let mut pos = self.pos.clone();
                // Never an illegal move: this cannot fail, but a wrong answer would lose the game.
                let mv = if pos.is_legal(mv) {
                    mv
                } else {
                    self.out.warn(&format!("internal error: {} is illegal here; playing another move", mv.to_usi()));
                    match pos.legal_moves().first() {
                        Some(&m) => m,
                        None => {
                            self.say("bestmove resign");
                            return;
                        }
                    }
                };
                pos.do_move(mv);
                match ponder.filter(|&p| self.options.ponder && pos.is_legal(p)) {
                    Some(p) => format!("bestmove {} ponder {}", mv.to_usi(), p.to_usi()),
                    None => format!("bestmove {}", mv.to_usi()),
                }
            }
        };
        self.say(&text);
    }

    fn elapsed_ms(&self) -> u128 {
        self.started.elapsed().as_millis()
    }

    /// `Threads 0` with the network on the CPU: as many libtorch threads as cores are free now
    /// (less one for the df-pn search beside the MCTS when it runs), at most libtorch's own
    /// default, so that an engine sharing the machine with its opponent, or with the engines of
    /// other games, does not oversubscribe it. Chosen at `go`, and again at `ponderhit`.
    fn choose_cpu_threads(&self, net: &LoadedNet, root_mate: bool) {
        let Some(wanted) = &net.cpu_threads else { return };
        let free = koma_base::cpu::free_cores();
        let threads = free.saturating_sub(usize::from(root_mate)).clamp(1, koma_nn::device::default_cpu_threads());
        if wanted.swap(threads, Ordering::Relaxed) != threads {
            self.out.info_string(&format!(
                "libtorch threads: {threads} ({free} of {} cores free{})",
                koma_base::cpu::cores(),
                if root_mate { ", one for the mate search" } else { "" }
            ));
        }
    }

    fn think(&self) -> Answer {
        let mut pos = self.pos.clone();
        let legal = pos.legal_moves();
        if legal.is_empty() {
            self.info(&ThinkingInfo::new(0, Score::MatedNow, self.elapsed_ms()));
            return Answer::Resign;
        }
        let rule = self.options.impasse_rule();
        if pos.declaration(rule) == Some(Status::DeclarationWin) {
            if rule.is_try() {
                if let Some(mv) = pos.try_move() {
                    self.info(&ThinkingInfo {
                        pv: vec![mv],
                        ..ThinkingInfo::new(1, Score::Mate(1), self.elapsed_ms())
                    });
                    return Answer::Move { mv, ponder: None };
                }
            } else {
                self.out.info_string("the impasse declaration wins: declaring");
                return Answer::Win;
            }
        }
        let restrict: Vec<Move> =
            self.go.searchmoves.iter().filter_map(|t| Move::from_usi(t)).filter(|&m| pos.is_legal(m)).collect();
        if let Some(mv) = pos.mate_in_one().filter(|m| restrict.is_empty() || restrict.contains(m)) {
            self.report_mate(&[mv]);
            return Answer::Move { mv, ponder: None };
        }

        let node_limit = match (self.go.nodes, self.options.playouts) {
            (Some(n), 0) => Some(n),
            (None, 0) => None,
            (Some(n), p) => Some(n.min(p)),
            (None, p) => Some(p),
        };
        let budget = time::budget(
            &self.go,
            pos.side_to_move(),
            pos.move_number(),
            self.options.byoyomi_margin,
            node_limit.is_some(),
        );
        let deadline = if self.waiting() { None } else { budget.map(|b| self.clock_start() + b.hard) };
        let net = match self.loader.wait(&self.key, deadline, &self.control.stop) {
            Some(Ok(net)) => net,
            Some(Err(error)) => {
                // No network, no guess: say why, every move, and resign.
                self.out.warn(&format!("error: {}", koma_base::error::Report(error.as_ref())));
                return Answer::Resign;
            }
            None => {
                // A GUI that sent `go` without waiting for `readyok`: no move that no network chose.
                self.out.warn(
                    "error: the network is not ready in time (send isready and wait for readyok before go): resigning",
                );
                return Answer::Resign;
            }
        };

        if restrict.is_empty() {
            if let Some(line) = self.quick_mate(&mut pos, budget) {
                self.report_mate(&line);
                return Answer::Move { mv: line[0], ponder: line.get(1).copied() };
            }
        }

        // df-pn knows neither the Try rule (an evasion onto the Try square wins for the defender)
        // nor the move limit: no root mate search under the former, and none longer than the
        // plies left under the latter.
        let mut root_plies = self.options.mate_root_plies as u32;
        let mut draw_first = false;
        if self.options.max_moves_to_draw > 0 {
            let played = u64::from(pos.move_number().saturating_sub(1));
            let left = self.options.max_moves_to_draw.saturating_sub(played).min(u64::from(u32::MAX)) as u32;
            draw_first = left < root_plies;
            root_plies = root_plies.min(left);
        }
        let root_mate = root_plies > 0 && restrict.is_empty() && !rule.is_try();
        self.choose_cpu_threads(&net, root_mate);
        if !root_mate {
            return self.mcts(&mut pos, &net, budget, node_limit, &restrict, None);
        }
        self.mcts_beside_root_mate(&mut pos, &net, budget, node_limit, root_plies, draw_first)
    }
}
