//! koma-selfplay: self-play games for training data.
//!
//! `workers` threads each run `games_per_worker` games in two alternating groups; their leaves go
//! in batches to inference services (koma-mcts's `InferenceServer`) that run the device's
//! (swappable) evaluator: `inference_services` per device (two on an accelerator, taking turns on
//! it while the other encodes and decodes), the workers spread over devices and services
//! round-robin. Finished games go to a channel (usually a `koma_data::ShardWriter`), optionally
//! through a [`RecordWriter`] tee that also saves each game as a KIF or CSA record.

mod config;
mod error;
mod game;
mod openings;
mod records;
pub mod resign;
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
use resign::ResignThreshold;
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
    /// W 366 D 75 · resign < -0.950 (false 1/24) · model-00000900`: the status line of self-play.
    pub fn line(&self) -> String {
        let secs = self.seconds.max(1e-9);
        let st = &self.stats;
        format!(
            "{} games ({:.1}/min) · {} samples · {:.0} moves/s · {:.0} evals/s · avg {:.0} plies · B {} W {} D {} · \
             resign < {:.3} (false {}/{}) · {}",
            st.games,
            st.games as f64 * 60.0 / secs,
            st.samples,
            self.moves as f64 / secs,
            self.inference.positions as f64 / secs,
            st.average_length(),
            st.black_wins,
            st.white_wins,
            st.draws,
            st.resign_value,
            st.false_resignations,
            st.would_resign_games,
            self.model
        )
    }
}

/// A device self-play runs on: the slot holding its copy of the model, and whether it is an
/// accelerator (which gets [`SelfPlayConfig::services_per_device`] services).
#[derive(Clone)]
pub struct InferenceDevice {
    pub slot: Arc<EvaluatorSlot>,
    pub accelerator: bool,
}

impl InferenceDevice {
    pub fn cpu(slot: Arc<EvaluatorSlot>) -> InferenceDevice {
        InferenceDevice { slot, accelerator: false }
    }
}

/// Which service each worker sends its leaves to: worker `w` plays on device `w % devices`, and the
/// workers of a device take its services in turn. A device gets at most as many services as it
/// has workers. Returns, per service, its device, and per worker, its service.
fn assign_services(config: &SelfPlayConfig, devices: &[InferenceDevice]) -> (Vec<usize>, Vec<usize>) {
    let workers = config.workers.max(1);
    let mut services = Vec::new();
    let mut first_service = Vec::new();
    let mut counts = Vec::new();
    for (d, device) in devices.iter().enumerate() {
        let workers_here = (d..workers).step_by(devices.len()).count();
        let n = config.services_per_device(device.accelerator).clamp(1, workers_here.max(1));
        first_service.push(services.len());
        counts.push(n);
        services.extend(std::iter::repeat_n(d, n));
    }
    let of_worker = (0..workers)
        .map(|w| {
            let d = w % devices.len();
            first_service[d] + (w / devices.len()) % counts[d]
        })
        .collect();
    (services, of_worker)
}

/// Plays `games` games (or until `stop` is set, which abandons the games in progress) and sends
/// each finished game to `sink`. `devices` holds one evaluator per device (the same model on
/// each), run by that device's inference services ([`assign_services`]).
/// `on_progress` is called about every `every` with the running totals.
#[allow(clippy::too_many_arguments)]
pub fn run(
    config: &SelfPlayConfig,
    starts: StartPositions,
    devices: &[InferenceDevice],
    games: usize,
    sink: Sender<GameSamples>,
    stop: Arc<AtomicBool>,
    every: Duration,
    on_progress: &mut dyn FnMut(&Progress),
) -> Result<SelfPlayStats, SelfPlayError> {
    let rules = config.rules().map_err(SelfPlayError::Config)?;
    if devices.is_empty() {
        return Err(SelfPlayError::NoEvaluator);
    }
    if devices.len() > config.workers.max(1) {
        return Err(SelfPlayError::FewerWorkersThanDevices { devices: devices.len(), workers: config.workers.max(1) });
    }
    // Callers that record the seed decide it first (`SelfPlayConfig::seeded`).
    let seed = config.seed.unwrap_or_else(seed::fresh_seed);
    let (service_devices, worker_services) = assign_services(config, devices);
    let servers: Vec<InferenceServer> =
        service_devices.iter().map(|&d| InferenceServer::spawn(devices[d].slot.clone(), config.max_batch)).collect();
    let inference = || servers.iter().map(|s| s.stats().counts()).fold(InferenceCounts::default(), |a, b| a + b);
    let shared = Shared {
        config: config.clone(),
        rules,
        starts,
        games_left: AtomicUsize::new(games),
        stop,
        failed: AtomicBool::new(false),
        stats: Mutex::new(SelfPlayStats { resign_value: config.resign_value, ..SelfPlayStats::default() }),
        resign: ResignThreshold::new(config.resign_value, config.resign_false_target as f64),
        moves: AtomicUsize::new(0),
        sink,
    };
    let shared = &shared;
    let started = std::time::Instant::now();
    let outcome = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.workers.max(1))
            .map(|w| {
                let service = worker_services[w];
                let client = servers[service].client();
                let slot = &devices[service_devices[service]].slot;
                let seed = seed::worker_seed(seed, w);
                std::thread::Builder::new()
                    .name(format!("koma-selfplay-{w}"))
                    .spawn_scoped(scope, move || worker::run_worker(shared, slot, client, seed))
                    .expect("spawning a self-play worker")
            })
            .collect();
        let mut last = std::time::Instant::now();
        let mut report = || {
            let stats = shared.stats.lock().unwrap_or_else(|e| e.into_inner()).clone();
            on_progress(&Progress {
                stats,
                moves: shared.moves.load(Ordering::Relaxed),
                inference: inference(),
                seconds: started.elapsed().as_secs_f64(),
                model: devices[0].slot.get().1,
            });
        };
        while handles.iter().any(|h| !h.is_finished()) {
            std::thread::sleep(Duration::from_millis(50));
            if last.elapsed() >= every {
                last = std::time::Instant::now();
                report();
            }
        }
        // The totals at the end, which budgets counted in evaluations need whole.
        report();
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

#[cfg(test)]
mod tests {
    use super::*;
    use koma_mcts::UniformEvaluator;

    fn devices(accelerators: &[bool]) -> Vec<InferenceDevice> {
        accelerators
            .iter()
            .map(|&accelerator| InferenceDevice {
                slot: EvaluatorSlot::new(Arc::new(UniformEvaluator), "uniform"),
                accelerator,
            })
            .collect()
    }

    #[test]
    fn workers_take_their_devices_services_in_turn() {
        let config = |workers, inference_services| SelfPlayConfig { workers, inference_services, ..Default::default() };
        // One accelerator: two services by default, workers alternate between them.
        assert_eq!(assign_services(&config(4, 0), &devices(&[true])), (vec![0, 0], vec![0, 1, 0, 1]));
        // A CPU device: one service.
        assert_eq!(assign_services(&config(3, 0), &devices(&[false])), (vec![0], vec![0, 0, 0]));
        // Two accelerators, 5 workers (3 on the first, 2 on the second), 3 services asked: capped
        // by each device's workers.
        assert_eq!(assign_services(&config(5, 3), &devices(&[true, true])), (vec![0, 0, 0, 1, 1], vec![0, 3, 1, 4, 2]));
        // One worker on an accelerator: one service.
        assert_eq!(assign_services(&config(1, 0), &devices(&[true])), (vec![0], vec![0]));
    }
}
