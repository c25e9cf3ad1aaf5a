//! One `go`: runs on its own thread, reports `info` lines and ends with exactly one `bestmove`
//! (or `checkmate` for `go mate`), unless the command loop abandons it.
//!
//! Order of business for a normal `go`: no legal move → `bestmove resign`; a winning impasse
//! declaration → `bestmove win` (under the Try rule, the Try move); a mate in one → play it; a
//! short mate search (`MateSearchPlies`) → play the mate; otherwise MCTS until the time, playout
//! or memory limit (or `stop`), then the most visited move, or `resign` below
//! `ResignThreshold`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koma_mcts::{Evaluator, RootChild, Search, SearchConfig, Selection};
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, Position, Status};

use koma_mate::exact::{MateResult, MateSearch};
use koma_mate::{DfPn, Limits, Outcome};

use crate::io::Output;
use crate::loader::{LoadKey, LoadedNet, Loader};
use crate::options::Options;
use crate::score::{value_to_winrate, winrate_to_cp};
use crate::time::{self, Budget, GoParams, MateLimit};

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
    pub search: Option<Search>,
    /// Cache size (MiB), rules and evaluator identity the tree was built with.
    key: Option<(u64, GameRules, usize)>,
    /// Set by `usinewgame`.
    pub reset: bool,
}

/// The df-pn solver kept between searches (its table is allocated once), with its size in MiB.
#[derive(Default)]
pub(crate) struct MateSolver(Option<(u64, DfPn)>);

impl MateSolver {
    /// The solver with a table of `mib` MiB (reallocated when `MateHash` changed).
    fn get(&mut self, mib: u64) -> &mut DfPn {
        if self.0.as_ref().is_none_or(|(m, _)| *m != mib) {
            self.0 = None; // free the old table before allocating the new one
            self.0 = Some((mib, DfPn::new(mib as usize)));
        }
        &mut self.0.as_mut().expect("just set").1
    }
}

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
    Move { mv: Move, ponder: Option<Move> },
    Resign,
    Win,
}

/// Most plies `go mate` searches (df-pn: a longer limit costs nothing until lines get that long).
const MATE_MAX_PLIES: u32 = 1023;
/// Stack of the root mate search's thread (one df-pn frame per ply, up to `MateRootPlies`).
const MATE_STACK_BYTES: usize = 16 << 20;
/// Node budget of the quick mate search before a normal search.
const QUICK_MATE_NODES: u64 = 200_000;
/// Stack of each further search thread (the walk is iterative; positions are cloned per batch).
const SEARCH_STACK_BYTES: usize = 8 << 20;
/// Seconds between periodic `info` lines.
const INFO_INTERVAL: Duration = Duration::from_secs(1);
/// Fallback seed; engine play has no randomness (no root noise, temperature 0).
const SEED: u64 = 0x6b6f_6d61;

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
    /// Searching without a deadline: `go infinite`, or pondering before `ponderhit`.
    fn waiting(&self) -> bool {
        self.go.infinite || (self.go.ponder && self.control.ponderhit_time().is_none())
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

    fn think(&self) -> Answer {
        let mut pos = self.pos.clone();
        let legal = pos.legal_moves();
        if legal.is_empty() {
            self.out.line(&format!("info depth 0 score mate -0 nodes 0 time {}", self.elapsed_ms()));
            return Answer::Resign;
        }
        let rule = self.options.impasse_rule();
        if pos.declaration(rule) == Some(Status::DeclarationWin) {
            if rule.is_try() {
                if let Some(mv) = pos.try_move() {
                    self.out.line(&format!(
                        "info depth 1 score mate 1 nodes 0 time {} pv {}",
                        self.elapsed_ms(),
                        mv.to_usi()
                    ));
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
                self.out.warn(&format!("error: {error}"));
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

        let plies = self.options.mate_search_plies as u32;
        if plies >= 3 && restrict.is_empty() {
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
            if let MateResult::Mate(line) = mate.run(&mut pos, plies | 1) {
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
        if root_plies == 0 || !restrict.is_empty() || rule.is_try() {
            return self.mcts(&mut pos, &net, budget, node_limit, &restrict, None);
        }
        // df-pn at the root beside the MCTS (as dlshogi does): a mate it proves is played at once.
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
            let stop_solver = SetOnDrop(&mate_stop);
            let (root, found) = (&root, &found);
            let thread = std::thread::Builder::new().name("koma-usi-mate".into()).stack_size(MATE_STACK_BYTES);
            let solving = thread.spawn_scoped(scope, move || {
                let outcome = solver.search(root, &limits);
                if matches!(outcome, Outcome::Mate(_)) {
                    found.store(true, Ordering::Relaxed);
                }
                outcome
            });
            let answer = self.mcts(&mut pos, &net, budget, node_limit, &restrict, Some(found));
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

    fn report_mate(&self, line: &[Move]) {
        let pv: Vec<String> = line.iter().map(|m| m.to_usi()).collect();
        self.out.line(&format!(
            "info depth {n} seldepth {n} score mate {n} nodes 0 time {} pv {}",
            self.elapsed_ms(),
            pv.join(" "),
            n = line.len()
        ));
    }

    fn mcts(
        &self,
        pos: &mut Position,
        net: &Arc<LoadedNet>,
        budget: Option<Budget>,
        node_limit: Option<u64>,
        restrict: &[Move],
        mate_found: Option<&AtomicBool>,
    ) -> Answer {
        let mut guard = self.tree.lock().unwrap_or_else(|e| {
            let mut g = e.into_inner();
            g.search = None;
            g
        });
        let tree = &mut *guard;
        let rules = self.options.rules();
        let key = (self.options.nn_cache_mib, rules, Arc::as_ptr(&net.evaluator) as *const () as usize);
        if tree.reset || tree.search.is_none() || tree.key != Some(key) {
            let cache_entries = self.options.cache_entries();
            let mut search = Search::new(SearchConfig::evaluation(), rules, SEED);
            if cache_entries > 0 {
                search = search.with_cache(cache_entries);
            }
            tree.search = Some(search);
            tree.key = Some(key);
            tree.reset = false;
        }
        let search = tree.search.as_mut().expect("just set");
        search.start(pos, u32::MAX);

        let evaluator = Arc::clone(&net.evaluator);
        let batch = self.options.batch(net.cuda).max(1);
        let memory_budget = self.options.tree_bytes();
        let only_move = search.root_children().len() == 1;
        let mut stats =
            Stats { base_visits: search.root_visits(), root_ply: pos.plies_from_root(), seldepth: 0, memory_budget };
        let walker = Walker {
            search: Mutex::new(search),
            evaluator: evaluator.as_ref(),
            root_ply: stats.root_ply,
            // At least the root's evaluation: `go nodes 0` still plays the network's first choice.
            node_cap: node_limit.map(|n| stats.base_visits as u64 + n.max(1)),
            in_flight: AtomicUsize::new(0),
            seldepth: AtomicUsize::new(0),
            halt: AtomicBool::new(false),
            pause: AtomicBool::new(false),
            failure: Mutex::new(None),
        };
        let threads = self.options.search_threads.max(1) as usize;
        let mut batch_time = Duration::ZERO;
        let mut last_info = Instant::now();
        let mut first = true;
        let mut memory_warned = false;

        std::thread::scope(|scope| {
            // However this closure ends (a panic included), the other threads finish the batch
            // they have in flight (its leaves backed up), then end with the scope.
            let _halt_helpers = SetOnDrop(&walker.halt);
            // The other search threads: each walks the shared tree with its own batch in flight
            // (while one waits for the network, the others select and back up).
            for t in 1..threads {
                let (walker, root) = (&walker, pos.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("koma-usi-search-{t}"))
                    .stack_size(SEARCH_STACK_BYTES)
                    .spawn_scoped(scope, move || walker.run_helper(root, batch));
                if spawned.is_err() {
                    self.out.info_string(&format!("could not start search thread {t}: searching with {t}"));
                    break;
                }
            }
            loop {
                if self.stopped() || walker.halted() {
                    break;
                }
                let waiting = self.waiting();
                if !waiting && mate_found.is_some_and(|f| f.load(Ordering::Relaxed)) {
                    break;
                }
                if !first {
                    let search = walker.lock();
                    let visits = (search.root_visits() - stats.base_visits) as u64;
                    let mut done = node_limit.is_some_and(|n| visits >= n) || search.root_visits() >= u32::MAX / 2;
                    if search.memory_bytes() as u64 >= memory_budget {
                        if !memory_warned {
                            self.out
                                .info_string("search tree memory (USI_Hash) is full: search stops growing the tree");
                            memory_warned = true;
                        }
                        done = true;
                    }
                    if !waiting {
                        done |= only_move;
                        if let Some(b) = budget {
                            // The other threads' batches in flight finish before the answer: up
                            // to one batch time each (the network's lock serves waiting threads
                            // in no fixed order, so this thread's next batch may come last).
                            let margin = batch_time * threads as u32;
                            done |= self.time_is_up(&search, b, margin, restrict, &stats);
                        }
                    }
                    // The other threads stop growing the tree too (a node or memory limit reached
                    // while pondering; they go on when `ponderhit` turns the limit into time).
                    walker.pause.store(done, Ordering::Relaxed);
                    if done {
                        if waiting {
                            drop(search);
                            std::thread::sleep(Duration::from_millis(2));
                            if last_info.elapsed() >= INFO_INTERVAL {
                                stats.seldepth = walker.seldepth();
                                self.report(&walker.lock(), &stats, restrict);
                                last_info = Instant::now();
                            }
                            continue;
                        }
                        break;
                    }
                }
                first = false;
                let mut root = pos.clone();
                // A panic here (an evaluator's, the tree's) is a failure like a helper's: the
                // visits made so far still decide the move.
                let done = catch_unwind(AssertUnwindSafe(|| walker.batch(&mut root, batch))).unwrap_or_else(|_| {
                    walker.fail("a search thread panicked".into());
                    None
                });
                match done {
                    Some(done) => {
                        if let Some(elapsed) = done.evaluated {
                            batch_time = if batch_time.is_zero() { elapsed } else { (batch_time * 3 + elapsed) / 4 };
                        } else if waiting && done.resolved == 0 {
                            std::thread::sleep(Duration::from_millis(1));
                        } else if done.resolved == 0 {
                            // Every leaf is in another thread's batch: let it finish.
                            std::thread::sleep(Duration::from_micros(200));
                        }
                    }
                    None => break,
                }
                if last_info.elapsed() >= INFO_INTERVAL {
                    stats.seldepth = walker.seldepth();
                    self.report(&walker.lock(), &stats, restrict);
                    last_info = Instant::now();
                }
            }
        });
        stats.seldepth = walker.seldepth();
        let failure = walker.failure.into_inner().unwrap_or_else(|e| e.into_inner());
        let search = walker.search.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = failure {
            // Nothing guessed in the network's place: the move is decided by the visits made so
            // far (a resignation when there are none). The failed batch's leaves are still pending
            // in the tree: the next search starts anew.
            self.out.warn(&format!("error: {e}"));
            let answer_from_visits = search.root_visits() > 0;
            tree.reset = true;
            if !answer_from_visits {
                return Answer::Resign;
            }
        }

        let lines = self.report(search, &stats, restrict);
        let Some(best) = lines.first() else {
            // Cannot happen (the root has legal moves); a legal move all the same.
            return Answer::Move { mv: pos.legal_moves()[0], ponder: None };
        };
        let threshold = self.options.resign_threshold as f64 / 100.0;
        let evaluated = search.root_visits() > 0;
        if threshold > 0.0 && evaluated && best.winrate < threshold && best.mate.is_none_or(|m| m < 0) {
            self.out.info_string(&format!("resigning: win rate {:.2}%", best.winrate * 100.0));
            return Answer::Resign;
        }
        Answer::Move { mv: best.pv[0], ponder: best.pv.get(1).copied() }
    }

    /// Whether a timed search should stop now (see [`crate::time`]).
    fn time_is_up(&self, search: &Search, b: Budget, batch_time: Duration, restrict: &[Move], stats: &Stats) -> bool {
        let elapsed = self.clock_start().elapsed();
        // The next batch must also finish before the hard limit.
        if elapsed + batch_time >= b.hard {
            return true;
        }
        let children = ordered_children(search, restrict);
        let (best, second) = match children.as_slice() {
            [] => return false,
            [only] => (only.visits as f64, 0.0),
            [a, b, ..] => (a.visits as f64, b.visits as f64),
        };
        if elapsed < b.soft {
            if !b.may_stop_early || elapsed < b.soft / 4 {
                return false;
            }
            // Stop early when the runner-up cannot catch up before the soft limit.
            let new_visits = (search.root_visits() - stats.base_visits) as f64;
            let rate = new_visits / elapsed.as_secs_f64().max(1e-3);
            let left = rate * (b.soft - elapsed).as_secs_f64();
            return best - second > left;
        }
        // Past the soft limit: go on (up to the hard limit) while unsure.
        let close = second >= 0.7 * best;
        let better_second = match children.as_slice() {
            [a, b, ..] => match (a.q, b.q) {
                (Some(qa), Some(qb)) => qb > qa + 0.05 && second >= 0.3 * best,
                _ => false,
            },
            _ => false,
        };
        !(close || better_second)
    }

    /// Prints one `info` line per PV (MultiPV) and returns them, best first.
    fn report(&self, search: &Search, stats: &Stats, restrict: &[Move]) -> Vec<PvLine> {
        let children = ordered_children(search, restrict);
        let mut visited: Vec<&RootChild> = children.iter().filter(|c| c.visits > 0).collect();
        if visited.is_empty() {
            // Nothing visited yet (the root was just evaluated, or not even that): the best prior.
            visited.extend(children.first());
        }
        let count = (self.options.multipv as usize).clamp(1, visited.len().max(1)).min(visited.len());
        let elapsed = self.started.elapsed();
        let nodes = (search.root_visits() - stats.base_visits) as u64;
        let nps = (nodes as f64 / elapsed.as_secs_f64().max(1e-3)) as u64;
        let hashfull = ((search.memory_bytes() as u64).saturating_mul(1000) / stats.memory_budget).min(1000);
        let mut lines = Vec::new();
        for (k, child) in visited.iter().take(count).enumerate() {
            let mut pv = vec![child.mv];
            pv.extend(line_after(search, child.mv));
            let q = child.q.unwrap_or_else(|| search.root_value());
            let mate = mate_in_pv(&self.pos, &mut pv, q);
            let winrate = value_to_winrate(q);
            let score = match mate {
                Some(n) => format!("mate {n}"),
                None => format!("cp {}", winrate_to_cp(winrate, self.options.eval_coef as f64)),
            };
            let multipv = if self.options.multipv > 1 { format!(" multipv {}", k + 1) } else { String::new() };
            let pv_text: Vec<String> = pv.iter().map(|m| m.to_usi()).collect();
            self.out.line(&format!(
                "info depth {} seldepth {}{multipv} score {score} nodes {nodes} nps {nps} time {} hashfull {hashfull} pv {}",
                pv.len(),
                stats.seldepth.max(pv.len()),
                elapsed.as_millis(),
                pv_text.join(" ")
            ));
            lines.push(PvLine { pv, winrate, mate });
        }
        lines
    }

    /// `go mate`: `checkmate <moves>`, `checkmate nomate` or `checkmate timeout`, from df-pn.
    fn mate(&self, limit: MateLimit) {
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
        let mut outcome = if self.pos.has_legal_move() { solver.search(&self.pos, &limits) } else { Outcome::NoMate };
        let mut nodes = solver.nodes();
        if let Outcome::Mate(line) = &mut outcome {
            // df-pn's first line need not be the shortest: look for shorter ones, within the
            // same limits and four times the nodes the first proof took.
            let budget = nodes.saturating_mul(4).max(100_000);
            while line.len() > 1 {
                let shorter =
                    Limits { max_plies: line.len() as u32 - 2, max_nodes: budget, proofs_within_depth: true, ..limits };
                let again = solver.search(&self.pos, &shorter);
                nodes += solver.nodes();
                match again {
                    Outcome::Mate(l) if l.len() < line.len() => *line = l,
                    _ => break,
                }
            }
        }
        let text = match outcome {
            Outcome::Mate(line) => {
                let moves: Vec<String> = line.iter().map(|m| m.to_usi()).collect();
                self.out.line(&format!(
                    "info depth {n} score mate {n} nodes {} time {} pv {}",
                    nodes,
                    self.elapsed_ms(),
                    moves.join(" "),
                    n = line.len()
                ));
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

/// The search tree shared by the search threads (`SearchThreads`), and what they share besides.
struct Walker<'a> {
    search: Mutex<&'a mut Search>,
    evaluator: &'a dyn Evaluator,
    root_ply: usize,
    /// Root visits at which the search stops (a node limit): no thread selects beyond it.
    node_cap: Option<u64>,
    /// Leaves selected and not yet backed up, over all threads (changed under the tree's lock).
    in_flight: AtomicUsize,
    /// Deepest leaf reached, plies below the root.
    seldepth: AtomicUsize,
    /// The search is over: threads finish their batch and end.
    halt: AtomicBool,
    /// A limit is reached while the search waits (pondering, `go infinite`): threads idle.
    pause: AtomicBool,
    /// The first failure (a network error, a search thread's panic); it halts every thread.
    failure: Mutex<Option<String>>,
}

/// What one batch did.
struct BatchDone {
    /// Leaves resolved without the network (terminal positions, cache hits).
    resolved: usize,
    /// How long the network took, when it was asked.
    evaluated: Option<Duration>,
}

impl<'a> Walker<'a> {
    fn lock(&self) -> std::sync::MutexGuard<'_, &'a mut Search> {
        self.search.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn halted(&self) -> bool {
        self.halt.load(Ordering::Relaxed)
    }

    fn seldepth(&self) -> usize {
        self.seldepth.load(Ordering::Relaxed)
    }

    /// One batch: up to `want` leaves selected under the tree's lock (virtual visits steer each
    /// walk, and the other threads' walks, away from leaves already in flight), evaluated outside
    /// it, and backed up under it. None after a network failure (recorded, and every thread
    /// halted).
    fn batch(&self, root: &mut Position, want: usize) -> Option<BatchDone> {
        let mut leaves = Vec::with_capacity(want);
        let mut snapshots: Vec<Position> = Vec::with_capacity(want);
        let mut resolved = 0;
        {
            let mut search = self.lock();
            // Under a node limit, the visits done and in flight (every thread's) count against it.
            let want = match self.node_cap {
                Some(cap) => {
                    let counted = search.root_visits() as u64 + self.in_flight.load(Ordering::Relaxed) as u64;
                    want.min(cap.saturating_sub(counted) as usize)
                }
                None => want,
            };
            while leaves.len() + resolved < want {
                let selection = search.select_leaf(root, |leaf| {
                    self.seldepth.fetch_max(leaf.plies_from_root().saturating_sub(self.root_ply), Ordering::Relaxed);
                    snapshots.push(leaf.without_history());
                });
                match selection {
                    Selection::Leaf(id) => leaves.push(id),
                    Selection::Resolved => resolved += 1,
                    Selection::Collision | Selection::Waiting | Selection::NoMoves => break,
                }
            }
            self.in_flight.fetch_add(leaves.len(), Ordering::Relaxed);
        }
        if leaves.is_empty() {
            return Some(BatchDone { resolved, evaluated: None });
        }
        let started = Instant::now();
        let refs: Vec<&Position> = snapshots.iter().collect();
        let evaluations = self.evaluator.evaluate(&refs).and_then(|e| {
            koma_mcts::check_evaluations("the network", refs.len(), &e)?;
            Ok(e)
        });
        let evaluated = started.elapsed();
        match evaluations {
            Ok(evaluations) => {
                let mut search = self.lock();
                for (&leaf, e) in leaves.iter().zip(&evaluations) {
                    search.complete(leaf, e);
                }
                self.in_flight.fetch_sub(leaves.len(), Ordering::Relaxed);
                Some(BatchDone { resolved, evaluated: Some(evaluated) })
            }
            Err(e) => {
                self.fail(format!("network evaluation failed: {e}"));
                None
            }
        }
    }

    /// A search thread besides the one that decides when to stop: batches until halted. A panic
    /// is recorded as a failure and halts the search, like a network error (its leaves stay
    /// pending in the tree, so a node limit could otherwise never be reached).
    fn run_helper(&self, root: Position, batch: usize) {
        if catch_unwind(AssertUnwindSafe(|| self.helper_loop(root, batch))).is_err() {
            self.fail("a search thread panicked".into());
        }
    }

    /// Records the search's first failure and halts every thread.
    fn fail(&self, failure: String) {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(failure);
        self.halt.store(true, Ordering::Relaxed);
    }

    fn helper_loop(&self, mut root: Position, batch: usize) {
        while !self.halted() {
            if self.pause.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            }
            match self.batch(&mut root, batch) {
                Some(BatchDone { resolved: 0, evaluated: None }) => std::thread::sleep(Duration::from_micros(200)),
                Some(_) => {}
                None => return,
            }
        }
    }
}

/// Sets its flag when dropped, unwinding included.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

struct Stats {
    /// Root visits before this search (kept by tree reuse).
    base_visits: u32,
    root_ply: usize,
    seldepth: usize,
    memory_budget: u64,
}

struct PvLine {
    pv: Vec<Move>,
    winrate: f64,
    /// Mate in this many plies (negative: we are mated), when the line is a forced mate.
    mate: Option<i32>,
}

/// Root children (restricted to `restrict` when non-empty), most visited first, then best value,
/// then best prior.
fn ordered_children(search: &Search, restrict: &[Move]) -> Vec<RootChild> {
    let mut children: Vec<RootChild> =
        search.root_children().into_iter().filter(|c| restrict.is_empty() || restrict.contains(&c.mv)).collect();
    children.sort_by(|a, b| {
        b.visits
            .cmp(&a.visits)
            .then(b.q.unwrap_or(-2.0).total_cmp(&a.q.unwrap_or(-2.0)))
            .then(b.prior.total_cmp(&a.prior))
    });
    children
}

/// The most visited line after `first`.
fn line_after(search: &Search, first: Move) -> Vec<Move> {
    let mut path = vec![first];
    while path.len() < 64 {
        let Some(children) = search.children_at(&path) else { break };
        match children.iter().filter(|c| c.visits > 0).max_by_key(|c| c.visits) {
            Some(c) => path.push(c.mv),
            None => break,
        }
    }
    path.remove(0);
    path
}

/// When the search values a line as a certain result (|q| = 1) and the line ends in checkmate or
/// in a position with a mate in one (which search scores without expanding), the mate distance
/// in plies, signed for the side to move at the root; the mating move is appended to `pv`.
fn mate_in_pv(root: &Position, pv: &mut Vec<Move>, q: f32) -> Option<i32> {
    if q.abs() < 0.9999 {
        return None;
    }
    let mut pos = root.clone();
    for &m in pv.iter() {
        if !pos.is_legal(m) {
            return None;
        }
        pos.do_move(m);
    }
    let n = if pos.legal_moves().is_empty() {
        pv.len()
    } else if let Some(m) = pos.mate_in_one() {
        pv.push(m);
        pv.len()
    } else {
        return None;
    };
    // Odd length: the root side delivered mate.
    let ours = n % 2 == 1;
    if ours != (q > 0.0) {
        return None;
    }
    Some(if ours { n as i32 } else { -(n as i32) })
}
