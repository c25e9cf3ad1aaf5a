//! The inference thread: it owns the evaluator, merges the requests of all workers into batches
//! of up to `max_batch` positions, and answers each worker on its own channel. Workers keep
//! searching their other group of games while a request is out, so CPU search and network
//! compute overlap. The evaluator can be swapped between batches (a new model in the pipeline).
//!
//! An evaluator that fails (an error, non-finite numbers, a panic inside libtorch) stops the
//! service: every waiting request gets the error, later ones find the channel closed, and
//! [`InferenceServer::failure`] keeps the cause for the run to report.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{unbounded, Receiver, Sender};
use koma_mcts::{check_evaluations, EvalError, Evaluation, Evaluator};
use koma_shogi::Position;

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
pub type Answer = Result<Vec<Evaluation>, EvalError>;

struct Request {
    positions: Vec<Position>,
    reply: Sender<Answer>,
}

/// Counters of the inference thread.
#[derive(Default)]
pub struct InferenceStats {
    pub positions: AtomicU64,
    pub batches: AtomicU64,
    /// Nanoseconds spent inside the evaluator.
    pub busy_ns: AtomicU64,
}

pub struct InferenceServer {
    sender: Option<Sender<Request>>,
    handle: Option<JoinHandle<()>>,
    stats: Arc<InferenceStats>,
    failure: Arc<Mutex<Option<EvalError>>>,
}

#[derive(Clone)]
pub struct InferenceClient {
    sender: Sender<Request>,
}

impl InferenceClient {
    /// Sends positions for evaluation; the answer arrives on the returned channel (a closed
    /// channel: the service has stopped, see [`InferenceServer::failure`]).
    pub fn submit(&self, positions: Vec<Position>) -> Receiver<Answer> {
        let (reply, answer) = unbounded();
        let _ = self.sender.send(Request { positions, reply });
        answer
    }
}

/// Waits for an answer; a closed channel is the service having stopped.
pub fn receive(answer: &Receiver<Answer>) -> Answer {
    answer.recv().unwrap_or_else(|_| Err(EvalError("the inference thread has stopped".into())))
}

/// A client is itself an evaluator: several players (arena games, search threads) that share one
/// server get their leaves merged into the server's batches.
impl Evaluator for InferenceClient {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        let owned: Vec<Position> = positions.iter().map(|p| p.without_history()).collect();
        receive(&self.submit(owned))
    }
}

impl InferenceServer {
    pub fn spawn(slot: Arc<EvaluatorSlot>, max_batch: usize) -> InferenceServer {
        let (sender, receiver) = unbounded::<Request>();
        let stats = Arc::new(InferenceStats::default());
        let failure = Arc::new(Mutex::new(None));
        let (thread_stats, thread_failure) = (stats.clone(), failure.clone());
        let handle = std::thread::Builder::new()
            .name("koma-inference".into())
            .spawn(move || {
                if let Err(e) = serve(&receiver, slot, max_batch.max(1), &thread_stats) {
                    tracing::error!("inference stopped: {e}");
                    *thread_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                }
                // Only now are the requests still queued dropped, so their clients, told that the
                // service stopped, find the cause in `failure()`.
                drop(receiver);
            })
            .expect("spawning the inference thread");
        InferenceServer { sender: Some(sender), handle: Some(handle), stats, failure }
    }

    /// Why the service stopped on its own, if it did.
    pub fn failure(&self) -> Option<EvalError> {
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn client(&self) -> InferenceClient {
        InferenceClient { sender: self.sender.clone().expect("server running") }
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
) -> Result<(), EvalError> {
    while let Ok(first) = receiver.recv() {
        let mut requests = vec![first];
        let mut size = requests[0].positions.len();
        while size < max_batch {
            match receiver.try_recv() {
                Ok(r) => {
                    size += r.positions.len();
                    requests.push(r);
                }
                Err(_) => break,
            }
        }
        let (evaluator, model) = slot.get();
        let refs: Vec<&Position> = requests.iter().flat_map(|r| r.positions.iter()).collect();
        let start = Instant::now();
        let answer = evaluate_guarded(evaluator.as_ref(), &model, &refs);
        stats.busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let evaluations = match answer {
            Ok(evaluations) => evaluations,
            Err(e) => {
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
        Ok(Err(e)) => return Err(EvalError(format!("model {model}: {e}"))),
        Err(panic) => return Err(EvalError(format!("model {model}: {}", EvalError::from_panic(panic.as_ref())))),
    };
    check_evaluations(&format!("model {model}"), positions.len(), &evaluations)?;
    Ok(evaluations)
}
