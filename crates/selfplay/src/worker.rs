//! A worker thread: `games_per_worker` games in two groups. While one group's leaves are with
//! the inference thread, the worker completes and searches the other group, so neither the CPU
//! nor the network waits for the other.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam::channel::Sender;
use koma_base::Rng;
use koma_data::GameSamples;
use koma_mcts::{EvalError, EvaluatorSlot, InferenceClient, LeafId, Pending};
use koma_shogi::rules::GameRules;
use rand::SeedableRng;

use crate::config::SelfPlayConfig;
use crate::game::{Finished, Game};
use crate::openings::StartPositions;
use crate::resign::ResignThreshold;
use crate::stats::SelfPlayStats;

pub(crate) struct Shared {
    pub(crate) config: SelfPlayConfig,
    pub(crate) rules: GameRules,
    pub(crate) starts: StartPositions,
    /// Games still to start (across workers).
    pub(crate) games_left: AtomicUsize,
    pub(crate) stop: Arc<AtomicBool>,
    /// Set when a worker fails (or panics): the others stop too.
    pub(crate) failed: AtomicBool,
    pub(crate) stats: Mutex<SelfPlayStats>,
    /// The resignation threshold, adjusted from the no-resign games.
    pub(crate) resign: ResignThreshold,
    pub(crate) moves: AtomicUsize,
    pub(crate) sink: Sender<GameSamples>,
}

impl Shared {
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }

    fn claim_game(&self) -> bool {
        !self.stopping()
            && self.games_left.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Counts a finished game and sends it on; a closed sink (the shard writer failed) is an error.
    fn record(&self, finished: Finished) -> Result<(), WorkerError> {
        if let Some(levels) = finished.resign_levels {
            self.resign.record(levels);
        }
        {
            let mut stats = self.stats.lock().unwrap_or_else(|e| e.into_inner());
            stats.add(&finished);
            stats.resign_value = self.resign.value();
        }
        self.sink.send(finished.samples).map_err(|_| WorkerError::SinkClosed)
    }
}

type InFlight = (Pending, Vec<(usize, LeafId)>);

/// Why a worker stopped before its games were done.
pub(crate) enum WorkerError {
    Inference(EvalError),
    /// The sink stopped taking games: the shard (or record) writer ended, which only a failure does
    /// while self-play runs.
    SinkClosed,
}

/// Plays until no game is left or the run stops; an evaluation error or a panic ends the worker
/// and stops the others (the games in progress are abandoned, finished ones were sent already).
/// `slot` is the evaluator of the worker's device (it names the model the games record).
pub(crate) fn run_worker(
    shared: &Shared,
    slot: &EvaluatorSlot,
    client: InferenceClient,
    seed: u64,
) -> Result<(), WorkerError> {
    let _guard = koma_base::stop::RaiseOnPanic(&shared.failed);
    let result = play(shared, slot, client, seed);
    if result.is_err() {
        shared.failed.store(true, Ordering::Relaxed);
    }
    result
}

fn play(shared: &Shared, slot: &EvaluatorSlot, client: InferenceClient, seed: u64) -> Result<(), WorkerError> {
    let config = &shared.config;
    let mut rng = Rng::seed_from_u64(seed);
    let mut groups: [Vec<Option<Game>>; 2] = [Vec::new(), Vec::new()];
    let (_, first_model) = slot.get();
    for i in 0..config.games_per_worker.max(1) {
        let game = shared
            .claim_game()
            .then(|| Game::new(shared.starts.pick(&mut rng), config, shared.rules, &first_model, &mut rng));
        groups[i % 2].push(game);
    }
    let mut in_flight: [Option<InFlight>; 2] = [None, None];
    loop {
        // A stop abandons the games in progress (their samples would be incomplete anyway).
        if shared.stopping() {
            return Ok(());
        }
        let mut active = false;
        for g in 0..2 {
            if let Some((answer, owners)) = in_flight[g].take() {
                let evaluations = client.receive(answer).map_err(WorkerError::Inference)?;
                for (&(game, leaf), e) in owners.iter().zip(&evaluations) {
                    if let Some(game) = groups[g][game].as_mut() {
                        game.complete(leaf, e);
                    }
                }
            }
            let (_, model) = slot.get();
            for place in groups[g].iter_mut() {
                let Some(game) = place.as_mut() else { continue };
                if game.move_ready() {
                    shared.moves.fetch_add(1, Ordering::Relaxed);
                    if let Some(finished) = game.play(config, &shared.rules, &model, shared.resign.value(), &mut rng) {
                        shared.record(finished)?;
                        *place = shared
                            .claim_game()
                            .then(|| Game::new(shared.starts.pick(&mut rng), config, shared.rules, &model, &mut rng));
                    }
                }
            }
            let mut batch = Vec::new();
            let mut owners = Vec::new();
            for (i, place) in groups[g].iter_mut().enumerate() {
                if let Some(game) = place.as_mut() {
                    active = true;
                    game.gather(config.leaves_per_game.max(1), &mut batch, &mut owners, i);
                }
            }
            if !batch.is_empty() {
                in_flight[g] = Some((client.submit(batch), owners));
            }
        }
        if !active && in_flight.iter().all(Option::is_none) {
            return Ok(());
        }
    }
}
