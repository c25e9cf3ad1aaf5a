//! Loading the network in the background. `isready` starts a load (when the model, device,
//! precision or thread count changed) on its own thread and answers `readyok` when it is done,
//! while the command loop keeps reading (so `quit` works during a slow load). A search waits
//! for the load it needs, up to its deadline.
//!
//! A model that fails to load, or no model at all, is an error: reported as `info string error: …`
//! (and on stderr) at `isready`, and again at every `go`, which then answers `bestmove resign`.
//! The engine never plays a guess in the network's place; uniform priors and an even value only
//! when asked for (`UniformStandIn`, `koma usi --uniform`). `readyok` is still answered, so a GUI
//! does not hang and shows the reason from its engine log.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use koma_mcts::{EvalError, Evaluation, Evaluator, EvaluatorSlot, InferenceClient, InferenceServer, UniformEvaluator};
use koma_nn::{DeviceSpec, Network, Precision, RunOptions, SharedNetwork, ThreadedNetwork};
use koma_shogi::Position;

use crate::io::Output;
use crate::options::Options;

/// What decides which network is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadKey {
    pub model: Option<String>,
    pub uniform_stand_in: bool,
    pub device: String,
    pub precision: String,
    pub threads: u64,
    /// Batch size used to warm the network up.
    pub warmup_batch: u64,
}

impl LoadKey {
    pub fn from_options(options: &Options) -> LoadKey {
        LoadKey {
            model: options.model.clone(),
            uniform_stand_in: options.uniform_stand_in,
            device: options.device.clone(),
            precision: options.precision.clone(),
            threads: options.threads,
            warmup_batch: options.batch_size,
        }
    }
}

/// A loaded evaluator.
pub struct LoadedNet {
    pub evaluator: Arc<dyn Evaluator>,
    /// For `info string`: what was loaded, where.
    pub description: String,
    /// Whether it runs on a CUDA device (for the default batch size).
    pub cuda: bool,
    /// libtorch's intra-op threads for the next batches, when the engine chooses them (`Threads`
    /// 0 with the network on the CPU): set at each `go` from the cores free then.
    pub cpu_threads: Option<Arc<AtomicUsize>>,
}

impl LoadedNet {
    pub fn uniform(description: impl Into<String>) -> LoadedNet {
        LoadedNet {
            evaluator: Arc::new(UniformEvaluator),
            description: description.into(),
            cuda: false,
            cpu_threads: None,
        }
    }
}

/// Loads a model (the `Some` case of [`LoadKey::model`]); replaceable for tests.
pub type LoadFn = Arc<dyn Fn(&LoadKey) -> Result<LoadedNet, LoadError> + Send + Sync>;

/// Why there is no network to play with.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "no model set (koma usi --model PATH, or setoption name Model value PATH; setoption name UniformStandIn \
         value true plays with uniform priors, for testing)"
    )]
    NoModel,
    /// The checkpoint, the device or the precision (koma-nn says which and why).
    #[error(transparent)]
    Network(#[from] koma_nn::Error),
    #[error("warm-up evaluation failed: {0}")]
    WarmUp(#[source] EvalError),
    #[error("the loader panicked")]
    Panicked,
    #[error("cannot start the loader thread: {0}")]
    Thread(#[source] std::io::Error),
    #[error("cannot load model {model}: {source}")]
    Model { model: String, source: Box<LoadError> },
}

/// The default loader: a koma checkpoint through koma-nn behind the inference service, warmed up
/// with two batches (on the service's thread, where the searches' batches run) so that the first
/// move does not pay for CUDA kernel selection.
pub fn network_loader() -> LoadFn {
    Arc::new(|key: &LoadKey| {
        let path = key.model.as_deref().ok_or(LoadError::NoModel)?;
        let options = RunOptions {
            device: key.device.parse::<DeviceSpec>()?,
            precision: key.precision.parse::<Precision>()?,
            cpu_threads: (key.threads > 0).then_some(key.threads as usize),
        };
        let network = Network::load(Path::new(path), &options)?;
        let cuda = network.device().is_cuda();
        let description = format!(
            "{path} ({}, step {}) on {} ({:?})",
            network.config().describe(),
            network.meta().map_or(0, |m| m.step),
            koma_nn::device::device_name(network.device()),
            network.kind()
        );
        let cpu_threads = (!cuda && key.threads == 0).then(|| Arc::new(AtomicUsize::new(0)));
        let network: Arc<dyn Evaluator> = match &cpu_threads {
            Some(wanted) => Arc::new(ThreadedNetwork::new(network, wanted.clone())),
            None => Arc::new(SharedNetwork::new(network)),
        };
        let served = ServedNetwork::new(network, path);
        let batch = match key.warmup_batch {
            0 if cuda => 32,
            0 => 8,
            n => n as usize,
        };
        let start = Position::startpos();
        let positions: Vec<&Position> = std::iter::repeat_n(&start, batch.min(4096)).collect();
        for _ in 0..2 {
            served.evaluate(&positions).map_err(LoadError::WarmUp)?;
        }
        Ok(LoadedNet { evaluator: Arc::new(served), description, cuda, cpu_threads })
    })
}

/// A loaded network behind its own inference service. A failed batch stops a service for good (what
/// self-play and the arena want); here the next batch starts a fresh one, so a failure costs the
/// search it happened in and the next `go` tries the network again. A reload is a new
/// `ServedNetwork`: its own service, and a new evaluator identity for the search tree.
struct ServedNetwork {
    slot: Arc<EvaluatorSlot>,
    /// Clients are taken per batch and never kept: dropping the server waits for all of them.
    server: Mutex<InferenceServer>,
}

/// Each search thread sends whole batches of `BatchSize` leaves: they are evaluated as sent, one
/// at a time (merging several threads' batches would only make them larger than asked for).
const ONE_REQUEST: usize = 1;

impl ServedNetwork {
    fn new(network: Arc<dyn Evaluator>, model: &str) -> ServedNetwork {
        let slot = EvaluatorSlot::new(network, model);
        let server = Mutex::new(InferenceServer::spawn(slot.clone(), ONE_REQUEST));
        ServedNetwork { slot, server }
    }
}

impl ServedNetwork {
    /// A client of the service, restarted first if a failed batch stopped it.
    fn client(&self) -> InferenceClient {
        let mut server = self.server.lock().unwrap_or_else(|e| e.into_inner());
        if !server.is_serving() {
            *server = InferenceServer::spawn(self.slot.clone(), ONE_REQUEST);
        }
        server.client()
    }
}

impl Evaluator for ServedNetwork {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        self.client().evaluate(positions)
    }

    fn evaluate_until(
        &self,
        positions: &[&Position],
        give_up: &dyn Fn() -> bool,
    ) -> Result<Vec<Evaluation>, EvalError> {
        self.client().evaluate_until(positions, give_up)
    }
}

struct State {
    /// The key of the load in progress or last finished.
    wanted: Option<LoadKey>,
    loading: bool,
    /// The outcome of the last load: the network, or why there is none.
    ready: Option<(LoadKey, Loaded)>,
    /// `isready` commands waiting for the load in progress.
    pending_readyok: usize,
    generation: u64,
}

/// A loaded network, or the error that says why there is none.
pub type Loaded = Result<Arc<LoadedNet>, Arc<LoadError>>;

pub struct Loader {
    state: Mutex<State>,
    changed: Condvar,
    load: LoadFn,
    out: Output,
}

impl Loader {
    pub fn new(load: LoadFn, out: Output) -> Arc<Loader> {
        Arc::new(Loader {
            state: Mutex::new(State { wanted: None, loading: false, ready: None, pending_readyok: 0, generation: 0 }),
            changed: Condvar::new(),
            load,
            out,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes sure `key` is loaded or loading. A load of `key` that failed is tried again when
    /// `retry_failed` (at `isready`: the file may have been copied in since, or the GPU freed).
    pub fn ensure(self: &Arc<Loader>, key: &LoadKey, retry_failed: bool) {
        let mut state = self.lock();
        let failed = matches!(&state.ready, Some((k, Err(_))) if k == key);
        if state.wanted.as_ref() == Some(key) && (state.loading || (state.ready.is_some() && !(failed && retry_failed)))
        {
            return;
        }
        state.wanted = Some(key.clone());
        state.generation += 1;
        let Some(model) = key.model.clone() else {
            // No model: nothing to load.
            let loaded = if key.uniform_stand_in {
                self.out.info_string("no model: playing with uniform priors and an even value (UniformStandIn), which is only good for testing");
                Ok(Arc::new(LoadedNet::uniform("uniform stand-in")))
            } else {
                let error = LoadError::NoModel;
                self.out.warn(&format!("error: {error}"));
                Err(Arc::new(error))
            };
            state.ready = Some((key.clone(), loaded));
            state.loading = false;
            self.finish(&mut state);
            return;
        };
        state.loading = true;
        let generation = state.generation;
        drop(state);
        self.out.info_string(&format!("loading {model} on {}", key.device));
        let loader = Arc::clone(self);
        let key = key.clone();
        let spawned = std::thread::Builder::new().name("koma-usi-loader".into()).spawn(move || {
            let started = Instant::now();
            let result =
                catch_unwind(AssertUnwindSafe(|| (loader.load)(&key))).unwrap_or_else(|_| Err(LoadError::Panicked));
            let loaded = match result {
                Ok(net) => {
                    loader.out.info_string(&format!(
                        "loaded {} in {:.1} s",
                        net.description,
                        started.elapsed().as_secs_f64()
                    ));
                    Ok(Arc::new(net))
                }
                Err(e) => {
                    let error = LoadError::Model { model: model.clone(), source: Box::new(e) };
                    let report = koma_base::error::Report(&error);
                    loader.out.warn(&format!("error: {report}; the engine resigns every game until a model loads"));
                    Err(Arc::new(error))
                }
            };
            let mut state = loader.lock();
            if state.generation == generation {
                state.ready = Some((key, loaded));
                state.loading = false;
                loader.finish(&mut state);
            }
        });
        if let Err(e) = spawned {
            let mut state = self.lock();
            let error = LoadError::Thread(e);
            self.out.warn(&format!("error: {error}"));
            state.ready = Some((key_or_default(&state.wanted), Err(Arc::new(error))));
            state.loading = false;
            self.finish(&mut state);
        }
    }

    /// Answers the waiting `isready`s and wakes waiting searches.
    fn finish(&self, state: &mut State) {
        for _ in 0..std::mem::take(&mut state.pending_readyok) {
            self.out.line("readyok");
        }
        self.changed.notify_all();
    }

    /// `isready`: loads `key` if needed and answers `readyok` once it is ready.
    pub fn isready(self: &Arc<Loader>, key: &LoadKey) {
        self.ensure(key, true);
        let mut state = self.lock();
        if state.loading {
            state.pending_readyok += 1;
        } else {
            self.out.line("readyok");
        }
    }

    /// The outcome of the load of `key`, waiting for it until `deadline` (if any) or until `stop`
    /// is set; `None` if it did not arrive in time.
    pub fn wait(&self, key: &LoadKey, deadline: Option<Instant>, stop: &AtomicBool) -> Option<Loaded> {
        let mut state = self.lock();
        loop {
            if let Some((k, loaded)) = &state.ready {
                if k == key {
                    return Some(loaded.clone());
                }
            }
            if !state.loading || state.wanted.as_ref() != Some(key) {
                // Nothing is loading this key (the caller did not ensure it): give up.
                return None;
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) || stop.load(Ordering::Relaxed) {
                return None;
            }
            let step = deadline.map_or(Duration::from_millis(20), |d| (d - now).min(Duration::from_millis(20)));
            state = self.changed.wait_timeout(state, step).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

fn key_or_default(key: &Option<LoadKey>) -> LoadKey {
    key.clone().unwrap_or_else(|| LoadKey::from_options(&Options::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails its second batch only, as a passing CUDA out-of-memory would.
    struct FailsOnce {
        batches: AtomicUsize,
    }

    impl Evaluator for FailsOnce {
        fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
            match self.batches.fetch_add(1, Ordering::SeqCst) {
                1 => Err(EvalError::failed("CUDA out of memory")),
                _ => UniformEvaluator.evaluate(positions),
            }
        }
    }

    #[test]
    fn a_failed_batch_costs_that_batch_and_the_next_one_is_evaluated_again() {
        let served = ServedNetwork::new(Arc::new(FailsOnce { batches: AtomicUsize::new(0) }), "model-00000300");
        let start = Position::startpos();
        assert!(served.evaluate(&[&start]).is_ok());
        let error = served.evaluate(&[&start]).unwrap_err().to_string();
        assert!(error.contains("model-00000300") && error.contains("CUDA out of memory"), "{error}");
        assert_eq!(served.evaluate(&[&start, &start]).unwrap().len(), 2);
    }
}
