//! The MCTS of one `go`: the tree kept between moves (tree reuse), the search threads
//! (`SearchThreads`) walking one shared tree with a batch each in flight, and the loop that
//! decides when to stop ([`super::stop`]) and reports progress ([`super::info`]).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use koma_base::stop::RaiseOnDrop;
use koma_mcts::{EvalError, Evaluator, Search, Selection};
use koma_shogi::{Move, Position};

use super::info::INFO_INTERVAL;
use super::{Answer, Job};
use crate::net_loader::LoadedNet;
use crate::time::Budget;

/// Stack of each further search thread (the walk is iterative; positions are cloned per batch).
const SEARCH_STACK_BYTES: usize = 8 << 20;

impl Job {
    pub(super) fn mcts(
        &self,
        pos: &mut Position,
        net: &Arc<LoadedNet>,
        budget: Option<Budget>,
        node_limit: Option<u64>,
        restrict: &[Move],
        mate_found: Option<&AtomicBool>,
    ) -> Answer {
        let mut guard = self.tree.lock().unwrap_or_else(|e| {
            self.tree.clear_poison();
            let mut g = e.into_inner();
            g.forget_tree();
            g
        });
        let tree = &mut *guard;
        let search = tree.prepare(&self.options, Some(Arc::as_ptr(&net.evaluator) as *const () as usize));
        search.start(pos, u32::MAX);

        let evaluator = Arc::clone(&net.evaluator);
        let batch = self.options.batch(net.cuda).max(1);
        let memory_budget = self.options.tree_bytes();
        let only_move = search.root_children().len() == 1;
        let mut stats =
            Stats { base_visits: search.root_visits(), root_ply: pos.plies_from_root(), seldepth: 0, memory_budget };
        // Past the hard limit, or after `stop`, nobody waits for the network any more: the
        // answer comes from the visits backed up, and the batches in flight are dropped (a
        // forward pass slowed by a CPU shared with other engines must not lose on time, nor delay
        // the `go` after a ponder miss). The root's own evaluation gets half the latency margin
        // more: without it the answer would be an unsearched move.
        let root_evaluated = AtomicBool::new(search.root_visits() > 0);
        let root_grace = Duration::from_millis(self.options.byoyomi_margin / 2);
        let give_up = || {
            if self.stopped() {
                return true;
            }
            let Some(b) = budget.filter(|_| !self.waiting()) else { return false };
            let grace = if root_evaluated.load(Ordering::Relaxed) { Duration::ZERO } else { root_grace };
            self.clock_start().elapsed() >= b.hard + grace
        };
        let walker = Walker {
            search: Mutex::new(search),
            evaluator: evaluator.as_ref(),
            give_up: &give_up,
            root_evaluated: &root_evaluated,
            abandoned: AtomicBool::new(false),
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
        let mut was_waiting = self.waiting();

        std::thread::scope(|scope| {
            // However this closure ends (a panic included), the other threads finish the batch
            // they have in flight (its leaves backed up), then end with the scope.
            let _halt_helpers = RaiseOnDrop(&walker.halt);
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
                if was_waiting && !waiting {
                    // `ponderhit`: our clock runs now and the opponent waits, so the cores free
                    // are counted again.
                    self.choose_cpu_threads(net, mate_found.is_some());
                    was_waiting = false;
                }
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
        let abandoned = walker.abandoned.load(Ordering::Relaxed);
        if abandoned && !self.stopped() {
            self.out.info_string("the hard time limit came during a network batch: answering without it");
        }
        let failure = walker.failure.into_inner().unwrap_or_else(|e| e.into_inner());
        let search = walker.search.into_inner().unwrap_or_else(|e| e.into_inner());
        let failed = failure.is_some();
        let answer = self.decide(search, &stats, restrict, pos, failure);
        if failed || abandoned {
            // Leaves left pending, virtual visits a panic stranded: the next search starts anew.
            search.clear_tree();
        }
        answer
    }

    /// The answer from the visits backed up: after a failure (reported here) nothing is guessed
    /// in the network's place, and with no visits at all the engine resigns.
    fn decide(
        &self,
        search: &Search,
        stats: &Stats,
        restrict: &[Move],
        pos: &Position,
        failure: Option<String>,
    ) -> Answer {
        if let Some(e) = failure {
            self.out.warn(&format!("error: {e}"));
            if search.root_visits() == 0 {
                return Answer::Resign;
            }
        }
        if search.root_visits() == 0 {
            self.out.info_string("no network evaluation came in time: a legal move without search");
        }
        let lines = self.report(search, stats, restrict);
        let Some(best) = lines.first() else {
            // Cannot happen (the root has legal moves); a legal move all the same.
            return Answer::Move { mv: pos.legal_moves()[0], ponder: None };
        };
        let threshold = self.options.resign_threshold as f64 / 100.0;
        let evaluated = search.root_visits() > 0;
        if threshold > 0.0 && evaluated && best.winrate < threshold && best.mate.is_none_or(|m| m < 0) {
            return Answer::ResignAtWinrate(best.winrate);
        }
        Answer::Move { mv: best.pv[0], ponder: best.pv.get(1).copied() }
    }
}

/// The search tree shared by the search threads (`SearchThreads`), and what they share besides.
struct Walker<'a> {
    search: Mutex<&'a mut Search>,
    evaluator: &'a dyn Evaluator,
    /// Whether to stop waiting for the network (the hard limit passed, or `stop`).
    give_up: &'a (dyn Fn() -> bool + Sync),
    /// Whether a batch has come back (the root's evaluation is the first).
    root_evaluated: &'a AtomicBool,
    /// A batch was left unanswered.
    abandoned: AtomicBool,
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
    /// halted) or when the hard time limit came while waiting for the network (the batch is
    /// abandoned).
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
        if (self.give_up)() {
            // Too late to ask the network at all (its leaves stay pending, as abandoned).
            self.abandoned.store(true, Ordering::Relaxed);
            self.halt.store(true, Ordering::Relaxed);
            return None;
        }
        let evaluations = self.evaluator.evaluate_until(&refs, self.give_up).and_then(|e| {
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
                self.root_evaluated.store(true, Ordering::Relaxed);
                Some(BatchDone { resolved, evaluated: Some(evaluated) })
            }
            Err(EvalError::Cancelled(_)) => {
                self.abandoned.store(true, Ordering::Relaxed);
                self.halt.store(true, Ordering::Relaxed);
                None
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

pub(super) struct Stats {
    /// Root visits before this search (kept by tree reuse).
    pub base_visits: u32,
    pub root_ply: usize,
    pub seldepth: usize,
    pub memory_budget: u64,
}
