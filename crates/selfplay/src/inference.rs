//! The inference thread: it owns the evaluator, merges the requests of all workers into batches
//! of up to `max_batch` positions, and answers each worker on its own channel. Workers keep
//! searching their other group of games while a request is out, so CPU search and network
//! compute overlap. The evaluator can be swapped between batches (a new model in the pipeline).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam::channel::{unbounded, Receiver, Sender};
use koma_mcts::{Evaluation, Evaluator};
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

struct Request {
    positions: Vec<Position>,
    reply: Sender<Vec<Evaluation>>,
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
}

#[derive(Clone)]
pub struct InferenceClient {
    sender: Sender<Request>,
}

impl InferenceClient {
    /// Sends positions for evaluation; the answer arrives on the returned channel.
    pub fn submit(&self, positions: Vec<Position>) -> Receiver<Vec<Evaluation>> {
        let (reply, answer) = unbounded();
        // If the server is gone the receiver reports a disconnect, which the worker handles.
        let _ = self.sender.send(Request { positions, reply });
        answer
    }
}

/// A client is itself an evaluator: several players (arena games, search threads) that share one
/// server get their leaves merged into the server's batches.
impl Evaluator for InferenceClient {
    fn evaluate(&self, positions: &[&Position]) -> Vec<Evaluation> {
        let owned: Vec<Position> = positions.iter().map(|p| p.without_history()).collect();
        self.submit(owned).recv().unwrap_or_else(|_| {
            tracing::error!("inference thread is gone; answering with uniform priors");
            positions.iter().map(|_| Evaluation { priors: Vec::new(), wdl: [0.0, 1.0, 0.0] }).collect()
        })
    }
}

impl InferenceServer {
    pub fn spawn(slot: Arc<EvaluatorSlot>, max_batch: usize) -> InferenceServer {
        let (sender, receiver) = unbounded::<Request>();
        let stats = Arc::new(InferenceStats::default());
        let thread_stats = stats.clone();
        let handle = std::thread::Builder::new()
            .name("koma-inference".into())
            .spawn(move || serve(receiver, slot, max_batch.max(1), &thread_stats))
            .expect("spawning the inference thread");
        InferenceServer { sender: Some(sender), handle: Some(handle), stats }
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

fn serve(receiver: Receiver<Request>, slot: Arc<EvaluatorSlot>, max_batch: usize, stats: &InferenceStats) {
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
        let (evaluator, _) = slot.get();
        let refs: Vec<&Position> = requests.iter().flat_map(|r| r.positions.iter()).collect();
        let start = Instant::now();
        let mut evaluations = evaluator.evaluate(&refs).into_iter();
        stats.busy_ns.fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        stats.positions.fetch_add(refs.len() as u64, Ordering::Relaxed);
        stats.batches.fetch_add(1, Ordering::Relaxed);
        for r in requests {
            let answer: Vec<Evaluation> = evaluations.by_ref().take(r.positions.len()).collect();
            let _ = r.reply.send(answer);
        }
    }
}
