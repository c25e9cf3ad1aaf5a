//! koma-selfplay: self-play games for training data.
//!
//! `workers` threads each run `games_per_worker` games in two alternating groups; their leaves go
//! in batches to an inference thread (koma-mcts's `InferenceServer`) that owns the (swappable)
//! evaluator: one per device, the workers spread over them round-robin; finished games go to a channel (usually a `koma_data::ShardWriter`), optionally
//! through a [`RecordWriter`] tee that also saves each game as a KIF or CSA record.

mod config;
mod error;
mod game;
mod openings;
mod records;
pub mod seed;
mod stats;
mod worker;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam::channel::Sender;
use koma_data::GameSamples;
use koma_mcts::{EvaluatorSlot, InferenceCounts, InferenceServer};

pub use config::SelfPlayConfig;
pub use error::{RecordError, SelfPlayError};
pub use openings::StartPositions;
pub use records::{game_record, RecordFormat, RecordSummary, RecordTee, RecordWriter};
pub use stats::SelfPlayStats;

/// Self-play's running totals: its one progress type, from the workers to every status line,
/// event, watchdog and TensorBoard curve.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub stats: SelfPlayStats,
    pub moves: usize,
    /// Summed over the inference services (one per device).
    pub inference: InferenceCounts,
    /// Since [`run`] started.
    pub seconds: f64,
    /// The model games are started with now (the first device's).
    pub model: String,
}

impl Progress {
    /// `812 games (67.3/min) · 40212 samples · 96 moves/s · 2210 evals/s · avg 118 plies · B 371
    /// W 366 D 75 · model-00000900`: the status line of self-play.
    pub fn line(&self) -> String {
        let secs = self.seconds.max(1e-9);
        let st = &self.stats;
        format!(
            "{} games ({:.1}/min) · {} samples · {:.0} moves/s · {:.0} evals/s · avg {:.0} plies · B {} W {} D {} · {}",
            st.games,
            st.games as f64 * 60.0 / secs,
            st.samples,
            self.moves as f64 / secs,
            self.inference.positions as f64 / secs,
            st.average_length(),
            st.black_wins,
            st.white_wins,
            st.draws,
            self.model
        )
    }
}

/// Plays `games` games (or until `stop` is set, which abandons the games in progress) and sends
/// each finished game to `sink`. `slots` holds one evaluator per device (the same model on each):
/// each gets its own inference service, and worker `w` uses slot `w % slots.len()`.
/// `on_progress` is called about every `every` with the running totals.
#[allow(clippy::too_many_arguments)]
pub fn run(
    config: &SelfPlayConfig,
    starts: StartPositions,
    slots: &[Arc<EvaluatorSlot>],
    games: usize,
    sink: Sender<GameSamples>,
    stop: Arc<AtomicBool>,
    every: Duration,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<SelfPlayStats, SelfPlayError> {
    let rules = config.rules().map_err(SelfPlayError::Config)?;
    if slots.is_empty() {
        return Err(SelfPlayError::NoEvaluator);
    }
    if slots.len() > config.workers.max(1) {
        return Err(SelfPlayError::FewerWorkersThanDevices { devices: slots.len(), workers: config.workers.max(1) });
    }
    // Callers that record the seed decide it first (`SelfPlayConfig::seeded`).
    let seed = config.seed.unwrap_or_else(seed::fresh_seed);
    let servers: Vec<InferenceServer> =
        slots.iter().map(|slot| InferenceServer::spawn(slot.clone(), config.max_batch)).collect();
    let inference = || servers.iter().map(|s| s.stats().counts()).fold(InferenceCounts::default(), |a, b| a + b);
    let shared = Shared {
        config: config.clone(),
        rules,
        starts,
        games_left: AtomicUsize::new(games),
        stop,
        failed: AtomicBool::new(false),
        stats: Mutex::new(SelfPlayStats::default()),
        moves: AtomicUsize::new(0),
        sink,
    };
    let shared = &shared;
    let started = std::time::Instant::now();
    let outcome = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.workers.max(1))
            .map(|w| {
                let device = w % servers.len();
                let client = servers[device].client();
                let slot = &slots[device];
                let seed = seed::worker_seed(seed, w);
                std::thread::Builder::new()
                    .name(format!("koma-selfplay-{w}"))
                    .spawn_scoped(scope, move || worker::run_worker(shared, slot, client, seed))
                    .expect("spawning a self-play worker")
            })
            .collect();
        let mut last = std::time::Instant::now();
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= every {
                last = std::time::Instant::now();
                let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
                on_progress(&Progress {
                    stats,
                    moves: shared.moves.load(Ordering::Relaxed),
                    inference: inference(),
                    seconds: started.elapsed().as_secs_f64(),
                    model: slots[0].get().1,
                });
            }
        }
        // Joined here, so that a panicking worker is an error of this run and not a panic of the
        // scope.
        let mut first_error = None;
        for (w, handle) in handles.into_iter().enumerate() {
            let error = match handle.join() {
                Ok(Ok(())) => continue,
                Ok(Err(worker::WorkerError::Inference(e))) => SelfPlayError::Inference(e),
                Ok(Err(worker::WorkerError::SinkClosed)) => SelfPlayError::SinkClosed,
                Err(panic) => SelfPlayError::Panicked {
                    thread: format!("worker {w}"),
                    message: koma_base::stop::panic_message(panic.as_ref()),
                },
            };
            first_error.get_or_insert(error);
        }
        first_error
    });
    if let Some(error) = outcome {
        return Err(error);
    }
    let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok(stats)
}

use worker::Shared;
