//! The inference service: one thread owns the evaluator, merges the requests of many searches
//! (self-play workers, arena games, the engine) into batches of up to `max_batch` positions, and
//! answers each caller on its own channel. Batching leaves is the search's business, so it lives
//! here and works with any [`Evaluator`]; a network is one evaluator among others. A caller may
//! keep searching while its request is out (self-play's workers search their other group of games),
//! so CPU search and network compute overlap. The evaluator can be swapped between batches (a new
//! model in the pipeline).
//!
//! An evaluator that fails (an error, non-finite numbers, a panic inside libtorch) stops the
//! service: every waiting request gets the error, and so does every later one (its client finds
//! the cause recorded), and [`InferenceServer::failure`] keeps it for the run to report.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use koma_shogi::Position;

use crate::evaluator::{check_evaluations, EvalError, Evaluation, Evaluator};

/// The evaluator in use and the name of its model (recorded with each game).
pub struct EvaluatorSlot {
    current: RwLock<(Arc<dyn Evaluator>, String)>,
}

impl EvaluatorSlot {
    pub fn new(evaluator: Arc<dyn Evaluator>, model: &str) -> Arc<EvaluatorSlot> {
        Arc::new(EvaluatorSlot { current: RwLock::new((evaluator, model.to_string())) })
    }

    /// Switches to a new model; batches already running finish with the old one.
    pub fn replace(&self, evaluator: Arc<dyn Evaluator>, model: &str) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = (evaluator, model.to_string());
    }

    pub fn get(&self) -> (Arc<dyn Evaluator>, String) {
        let guard = self.current.read().unwrap_or_else(|e| e.into_inner());
        (guard.0.clone(), guard.1.clone())
    }
}

/// An answer of the service: the evaluations of a request, or why there are none.
type Answer = Result<Vec<Evaluation>, EvalError>;

struct Request {
    positions: Vec<Position>,
    reply: Sender<Answer>,
    /// Its caller stopped waiting ([`InferenceClient::receive_until`]): not evaluated if not
    /// started yet.
    abandoned: Arc<AtomicBool>,
}

/// Why the service stopped on its own, once it has; shared by the server and its clients.
type Failure = Arc<Mutex<Option<EvalError>>>;

fn recorded(failure: &Failure) -> Option<EvalError> {
    failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Counters of the inference thread.
#[derive(Default)]
pub struct InferenceStats {
    pub positions: AtomicU64,
    pub batches: AtomicU64,
    /// Nanoseconds spent inside the evaluator.
    pub busy_ns: AtomicU64,
}

impl InferenceStats {
    /// The counters now.
    pub fn counts(&self) -> InferenceCounts {
        InferenceCounts {
            positions: self.positions.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            busy_ns: self.busy_ns.load(Ordering::Relaxed),
        }
    }
}

/// A reading of [`InferenceStats`]; readings of several services add up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InferenceCounts {
    pub positions: u64,
    pub batches: u64,
    pub busy_ns: u64,
}

impl std::ops::Add for InferenceCounts {
    type Output = InferenceCounts;
    fn add(self, o: InferenceCounts) -> InferenceCounts {
        InferenceCounts {
            positions: self.positions + o.positions,
            batches: self.batches + o.batches,
            busy_ns: self.busy_ns + o.busy_ns,
        }
    }
}

/// The inference thread. Dropping the server waits for the thread, which ends once every client
/// is gone too.
pub struct InferenceServer {
    sender: Option<Sender<Request>>,
    handle: Option<JoinHandle<()>>,
    stats: Arc<InferenceStats>,
    failure: Failure,
}

/// A way into the service, for any number of threads (`Clone`, `Sync`).
#[derive(Clone)]
pub struct InferenceClient {
    sender: Sender<Request>,
    failure: Failure,
}

/// A request on its way through the service; [`InferenceClient::receive`] waits for its answer.
pub struct Pending {
    answer: Receiver<Answer>,
    abandoned: Arc<AtomicBool>,
}

impl InferenceClient {
    /// Sends positions for evaluation and returns at once.
    pub fn submit(&self, positions: Vec<Position>) -> Pending {
        let (reply, answer) = unbounded();
        let abandoned = Arc::new(AtomicBool::new(false));
        let _ = self.sender.send(Request { positions, reply, abandoned: abandoned.clone() });
        Pending { answer, abandoned }
    }

    /// Waits for the answer to a request. A service that stopped answers with its recorded cause
    /// (the model's error, not just "stopped"): a caller keeps the first error that reaches it,
    /// and that should say why.
    pub fn receive(&self, pending: Pending) -> Result<Vec<Evaluation>, EvalError> {
        pending.answer.recv().unwrap_or_else(|_| Err(self.stopped()))
    }

    /// Like [`InferenceClient::receive`], but stops waiting once `give_up()` says so (checked
    /// every millisecond), with [`EvalError::Cancelled`]: a request not started yet is then
    /// skipped by the service, and the answer of one already running is dropped.
    pub fn receive_until(&self, pending: Pending, give_up: &dyn Fn() -> bool) -> Result<Vec<Evaluation>, EvalError> {
        loop {
            match pending.answer.recv_timeout(GIVE_UP_POLL) {
                Ok(answer) => return answer,
                Err(RecvTimeoutError::Disconnected) => return Err(self.stopped()),
                Err(RecvTimeoutError::Timeout) if give_up() => {
                    pending.abandoned.store(true, Ordering::Relaxed);
                    return Err(EvalError::Cancelled("stopped waiting for the network"));
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
        }
    }

    fn stopped(&self) -> EvalError {
        recorded(&self.failure).unwrap_or(EvalError::Stopped)
    }
}

/// How often a caller that may give up looks at its condition while it waits.
const GIVE_UP_POLL: Duration = Duration::from_millis(1);

/// A client is itself an evaluator: several players (arena games, search threads) that share one
/// server get their leaves merged into the server's batches.
impl Evaluator for InferenceClient {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let owned: Vec<Position> = positions.iter().map(|p| p.without_history()).collect();
        self.receive(self.submit(owned))
    }

    fn evaluate_until(
        &self,
        positions: &[&Position],
        give_up: &dyn Fn() -> bool,
    ) -> Result<Vec<Evaluation>, EvalError> {
        let owned: Vec<Position> = positions.iter().map(|p| p.without_history()).collect();
        self.receive_until(self.submit(owned), give_up)
    }
}

impl InferenceServer {
    pub fn spawn(slot: Arc<EvaluatorSlot>, max_batch: usize) -> InferenceServer {
        let (sender, receiver) = unbounded::<Request>();
        let stats = Arc::new(InferenceStats::default());
        let failure = Failure::default();
        let (thread_stats, thread_failure) = (stats.clone(), failure.clone());
        let handle = std::thread::Builder::new()
            .name("koma-inference".into())
            .spawn(move || {
                if let Err(e) = serve(&receiver, slot, max_batch.max(1), &thread_stats, &thread_failure) {
                    tracing::error!("inference stopped: {e}");
                }
                // Only now are the requests still queued dropped, so their clients, told that the
                // service stopped, find the cause recorded.
                drop(receiver);
            })
            .expect("spawning the inference thread");
        InferenceServer { sender: Some(sender), handle: Some(handle), stats, failure }
    }

    /// Why the service stopped on its own, if it did. Recorded before the failed batch is
    /// answered, so a caller that got the error sees it here.
    pub fn failure(&self) -> Option<EvalError> {
        recorded(&self.failure)
    }

    /// Whether the service can still answer: no failure recorded and its thread alive.
    pub fn is_serving(&self) -> bool {
        self.failure().is_none() && self.handle.as_ref().is_some_and(|h| !h.is_finished())
    }

    pub fn client(&self) -> InferenceClient {
        InferenceClient { sender: self.sender.clone().expect("server running"), failure: self.failure.clone() }
    }

    pub fn stats(&self) -> &Arc<InferenceStats> {
        &self.stats
    }
}

impl Drop for InferenceServer {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(
    receiver: &Receiver<Request>,
    slot: Arc<EvaluatorSlot>,
    max_batch: usize,
    stats: &InferenceStats,
    failure: &Failure,
) -> Result<(), EvalError> {
    // A request that would have taken a batch past `max_batch` opens the next one: batches stay
    // within the size their buffers (and an accelerator's padded shapes) are made for, except a
    // single request larger than `max_batch`, which runs alone.
    let mut held: Option<Request> = None;
    while let Some(first) = held.take().or_else(|| receiver.recv().ok()) {
        let mut requests = vec![first];
        let mut size = requests[0].positions.len();
        while size < max_batch {
            match receiver.try_recv() {
                Ok(r) if size + r.positions.len() > max_batch => {
                    held = Some(r);
                    break;
                }
                Ok(r) => {
                    size += r.positions.len();
                    requests.push(r);
                }
                Err(_) => break,
            }
        }
        requests.retain(|r| !r.abandoned.load(Ordering::Relaxed));
        if requests.is_empty() {
            continue;
        }
        let (evaluator, model) = slot.get();
        let refs: Vec<&Position> = requests.iter().flat_map(|r| r.positions.iter()).collect();
        let start = Instant::now();
        let answer = evaluate_guarded(evaluator.as_ref(), &model, &refs);
        stats.busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let evaluations = match answer {
            Ok(evaluations) => evaluations,
            Err(e) => {
                // Recorded first: a client that gets the error and looks finds the service stopped.
                *failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
                for r in requests {
                    let _ = r.reply.send(Err(e.clone()));
                }
                return Err(e);
            }
        };
        stats.positions.fetch_add(refs.len() as u64, Ordering::Relaxed);
        stats.batches.fetch_add(1, Ordering::Relaxed);
        let mut evaluations = evaluations.into_iter();
        for r in requests {
            let answer: Vec<Evaluation> = evaluations.by_ref().take(r.positions.len()).collect();
            let _ = r.reply.send(Ok(answer));
        }
    }
    Ok(())
}

/// One batch through the evaluator, with its answer checked: an error, a panic (libtorch panics
/// on CUDA out-of-memory, for one) or non-finite numbers become an error that names the model.
fn evaluate_guarded(
    evaluator: &dyn Evaluator,
    model: &str,
    positions: &[&Position],
) -> Result<Vec<Evaluation>, EvalError> {
    let evaluations = match catch_unwind(AssertUnwindSafe(|| evaluator.evaluate(positions))) {
        Ok(Ok(evaluations)) => evaluations,
        Ok(Err(e)) => return Err(EvalError::Model { model: model.into(), source: Box::new(e) }),
        Err(panic) => {
            return Err(EvalError::Model {
                model: model.into(),
                source: Box::new(EvalError::from_panic(panic.as_ref())),
            })
        }
    };
    check_evaluations(&format!("model {model}"), positions.len(), &evaluations)?;
    Ok(evaluations)
}
