//! The self-play stage: plays with the run's current model, switches to each new one between
//! batches without stopping, and streams finished games into `RUN/selfplay/` shards (and optional
//! records). `koma pipeline` runs it beside the trainer, `koma selfplay --run DIR --follow` alone.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Sender;
use koma_base::host::host_name;
use koma_base::stop::{RaiseOnDrop, RaiseOnPanic};
use koma_data::{GameSamples, ShardWriter, WriterSummary};
use koma_mcts::{Evaluator, EvaluatorSlot};
use koma_nn::{Network, RunOptions, SharedNetwork, ThreadedNetwork};
use koma_selfplay::seed::SEED_ATTRIBUTE;
use koma_selfplay::{InferenceDevice, Progress, RecordWriter, SelfPlayError, SelfPlayStats, StartPositions};
use koma_tensorboard::ScalarLog;

use crate::config::PipelineConfig;
use crate::core_share::CoreShare;
use crate::error::{PipelineError, Result};
use crate::events::Event;
use crate::run::Run;
use crate::run_dir::{ModelRef, RunDir};

/// How often self-play looks for a new model.
const MODEL_POLL: Duration = Duration::from_secs(2);
/// Loads of one model tried before self-play gives up on it.
const MODEL_LOAD_TRIES: u32 = 3;
/// Self-play's TensorBoard record at most this often (and once at the end).
const TENSORTENSORBOARD_EVERY: Duration = Duration::from_secs(10);

/// Self-play's curves in `RUN/tensorboard/selfplay/`: rates and means over the games finished
/// since the previous record. The step is the run's sample count (the samples in its shards
/// when this process started, plus this process's), so that the curve goes on across restarts
/// and lines up with the trainer's `train/total_samples`.
struct SelfPlayTensorboard {
    log: ScalarLog,
    base: usize,
    /// The totals and time of the previous record.
    last: Progress,
    /// The newest totals seen.
    newest: Progress,
}

impl SelfPlayTensorboard {
    fn open(run: &RunDir, enabled: bool) -> SelfPlayTensorboard {
        let base = if enabled { samples_in(run) } else { 0 };
        let log = ScalarLog::open(&run.tensorboard_dir().join("selfplay"), &host_name(), enabled);
        SelfPlayTensorboard { log, base, last: Progress::default(), newest: Progress::default() }
    }

    /// Notes the totals; writes a record when one is due.
    fn observe(&mut self, progress: &Progress) {
        self.newest = progress.clone();
        if self.newest.seconds - self.last.seconds >= TENSORTENSORBOARD_EVERY.as_secs_f64() {
            self.record();
        }
    }

    /// Writes a record of the games since the previous one, if there are any.
    fn record(&mut self) {
        let (now, then) = (&self.newest, &self.last);
        let games = now.stats.games.saturating_sub(then.stats.games);
        if games == 0 {
            return;
        }
        let secs = (now.seconds - then.seconds).max(1e-9);
        let per_s = |now: f64, then: f64| (now - then) / secs;
        let draws = now.stats.draws.saturating_sub(then.stats.draws);
        let mut resignation = vec![("selfplay/resign_value", now.stats.resign_value as f64)];
        if let Some(rate) = now.stats.false_resignation_rate() {
            resignation.push(("selfplay/false_resignation_rate", rate));
        }
        self.log.scalars(
            (self.base + now.stats.samples) as i64,
            &[
                ("selfplay/games_per_s", games as f64 / secs),
                ("selfplay/game_length_mean", now.stats.plies.saturating_sub(then.stats.plies) as f64 / games as f64),
                ("selfplay/draw_rate", draws as f64 / games as f64),
                ("selfplay/samples_per_s", per_s(now.stats.samples as f64, then.stats.samples as f64)),
                ("selfplay/moves_per_s", per_s(now.moves as f64, then.moves as f64)),
                ("selfplay/evals_per_s", per_s(now.inference.positions as f64, then.inference.positions as f64)),
            ]
            .into_iter()
            .chain(resignation)
            .collect::<Vec<_>>(),
        );
        self.last = self.newest.clone();
    }
}

/// Samples in the run's shards now (0 when they cannot be read: the curve then starts at 0).
fn samples_in(run: &RunDir) -> usize {
    let dir = run.selfplay_dir();
    // On disk: counting opens each shard and reads none of its samples.
    let window = koma_data::ReplayWindow::open(
        &dir,
        koma_data::WindowSize::fixed(0),
        koma_data::SampleWeights::default(),
        koma_data::WindowStorage::Disk,
    );
    match window {
        Ok(window) => window.total_samples(),
        Err(e) => {
            tracing::warn!("self-play: counting the samples in {}: {e}", dir.display());
            0
        }
    }
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SelfPlaySummary {
    pub stats: SelfPlayStats,
    pub shards: usize,
    pub samples_written: usize,
    pub games_written: usize,
    /// Game records written under selfplay/records/ (`[run] records`).
    pub records_written: usize,
    /// The models this process played with, in order.
    pub models: Vec<String>,
    /// The run's end (`finished.json`) is what ended this self-play.
    pub run_finished: bool,
}

fn stopped(stop: &AtomicBool) -> bool {
    stop.load(Ordering::SeqCst)
}

/// Waits for the run's current model (None when stopped first).
fn wait_for_model(run: &RunDir, stop: &AtomicBool, events: &Sender<Event>) -> Result<Option<ModelRef>> {
    let mut announced = false;
    loop {
        if let Some(m) = run.current_model()? {
            return Ok(Some(m));
        }
        if stopped(stop) {
            return Ok(None);
        }
        if !announced {
            announced = true;
            let _ = events.send(Event::SelfPlayWaiting);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Loads a model for self-play and runs a probe batch through it, so that a model that loads but
/// answers NaN is refused like one that does not load.
fn load_probed(model: &ModelRef, options: &RunOptions) -> koma_nn::Result<Network> {
    let mut network = Network::load(&model.path, options)?;
    // Probed as it will play: folded (the inference services would fold it otherwise).
    network.fold_batch_norm();
    network.probe()?;
    Ok(network)
}

/// Why a model could not be put on every device.
enum DevicesError {
    /// The model itself (a truncated file, NaN weights, …): it failed on the first device.
    Model(koma_nn::Error),
    /// It loaded on the devices before `device` and failed there: that device is at fault.
    Device { device: String, error: String },
}

impl fmt::Display for DevicesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DevicesError::Model(e) => write!(f, "{e}"),
            DevicesError::Device { device, error } => write!(f, "on {device}: {error}"),
        }
    }
}

/// `model` on every device (`options` has one entry per device), each probed; the first failure
/// is the error.
fn load_on_devices(model: &ModelRef, options: &[RunOptions]) -> std::result::Result<Vec<Network>, DevicesError> {
    let mut networks = Vec::with_capacity(options.len());
    for (k, o) in options.iter().enumerate() {
        match load_probed(model, o) {
            Ok(network) => networks.push(network),
            Err(error) if k == 0 => return Err(DevicesError::Model(error)),
            Err(error) => return Err(DevicesError::Device { device: o.device.to_string(), error: error.to_string() }),
        }
    }
    Ok(networks)
}

/// The run's current model, or if it cannot be used (a truncated file, NaN weights), the newest
/// older one that can: a resumed run must not fail on every start because of its newest model.
/// Not under gating, where an older model may be one the gatekeeper refused.
fn first_usable_model(run: &RunDir, current: ModelRef, options: &[RunOptions]) -> Result<(ModelRef, Vec<Network>)> {
    let current_error = match load_on_devices(&current, options) {
        Ok(network) => return Ok((current, network)),
        Err(DevicesError::Model(e)) => e,
        // No older model would do better on a device that cannot run this one.
        Err(DevicesError::Device { device, error }) => {
            return Err(PipelineError::Stage {
                stage: "self-play",
                message: format!(
                    "{} loads on the first device but not on {device}: {error} (check that device, or leave it out of `device`)",
                    current.name()
                ),
            })
        }
    };
    if run.has_current() {
        return Err(PipelineError::Stage {
            stage: "self-play",
            message: format!("cannot use the gated current model: {current_error}"),
        });
    }
    tracing::error!("self-play: cannot use the current model {}: {current_error}", current.path.display());
    for model in run.models()?.into_iter().rev().filter(|m| m.step < current.step) {
        match load_on_devices(&model, options) {
            Ok(networks) => {
                tracing::error!("self-play: plays with {} until a newer model loads", model.name());
                return Ok((model, networks));
            }
            Err(e) => tracing::warn!("self-play: cannot use {} either: {e}", model.path.display()),
        }
    }
    Err(PipelineError::Stage {
        stage: "self-play",
        message: format!("cannot use the current model: {current_error} (nor any older one)"),
    })
}

/// Where games start: the config's handicap share and opening suite.
fn start_positions(config: &PipelineConfig) -> StartPositions {
    let sp = &config.selfplay;
    StartPositions::new(sp.handicap_fraction, sp.openings_fraction).with_suite(&config.run.openings)
}

/// Plays until `stop` is set (games in progress are abandoned; finished ones are all written).
/// Shards are named `PREFIX-NNNNNN.h5` with this process's own prefix ([`shard_prefix`]). With
/// several devices (`[run] device`), each gets a copy of the model and an inference service; a
/// new model is loaded on every device before any of them switches.
/// `share`: the cores this process's trainer leaves idle go to self-play's inference (the
/// pipeline's one process on the CPU; `None` keeps `[run] threads`). `until_run_end`: also end
/// when the run is finished (`finished.json` at or past `[run] steps`, [`RunFinished`]): a
/// self-play process of its own does; inside `koma pipeline` the pipeline's own trainer ends it.
pub fn run(
    run: &Run,
    stop: Arc<AtomicBool>,
    events: &Sender<Event>,
    share: Option<Arc<CoreShare>>,
    until_run_end: bool,
) -> Result<SelfPlaySummary> {
    play(&run.dir, &run.config, &shard_prefix(), stop, events, share, until_run_end)
}

/// The network self-play's inference service runs: its libtorch threads follow `share` if any.
fn served(network: Network, share: &Option<Arc<CoreShare>>) -> Arc<dyn Evaluator> {
    match share {
        Some(share) => Arc::new(ThreadedNetwork::new(network, share.clone())),
        None => Arc::new(SharedNetwork::new(network)),
    }
}

/// `selfplay-HOST-UNIXSECONDS-PID`: unique per process and host, so several self-play processes
/// (on one machine or many sharing the run directory, and after restarts) never write the same
/// shard name.
pub fn shard_prefix() -> String {
    koma_base::host::unique_prefix("selfplay")
}

fn play(
    run: &RunDir,
    config: &PipelineConfig,
    prefix: &str,
    stop: Arc<AtomicBool>,
    events: &Sender<Event>,
    share: Option<Arc<CoreShare>>,
    until_run_end: bool,
) -> Result<SelfPlaySummary> {
    if until_run_end {
        if let Some(end) = run.end_of_run_of(config.run.steps)? {
            tracing::info!(
                "the run is finished at {} ({}): no self-play",
                end.describe(),
                run.finished_file().display()
            );
            return Ok(SelfPlaySummary { run_finished: true, ..SelfPlaySummary::default() });
        }
    }
    let Some(current) = wait_for_model(run, &stop, events)? else { return Ok(SelfPlaySummary::default()) };
    let mut options = config.inference_options()?;
    if let Some(share) = &share {
        // On a lone CPU shared with the trainer: one service per worker, each its own network.
        let first = options[0];
        options.resize(share.services().max(options.len()), first);
    }
    let (first, networks) = first_usable_model(run, current, &options)?;
    let devices: Vec<InferenceDevice> = networks
        .into_iter()
        .map(|n| InferenceDevice {
            accelerator: n.is_accelerator(),
            slot: EvaluatorSlot::new(served(n, &share), &first.name()),
        })
        .collect();
    let mut summary = SelfPlaySummary { models: vec![first.name()], ..SelfPlaySummary::default() };
    let _ = events.send(Event::ModelSwitched { model: first.name() });
    tracing::info!(model = %first.name(), "self-play starts");

    let selfplay = config.selfplay.seeded();
    let seed = selfplay.seed.unwrap_or_default();
    tracing::info!(
        "self-play seed {seed} (kept in every shard as {SEED_ATTRIBUTE}; `[selfplay] seed = {seed}` replays it)"
    );
    let writer = ShardWriter::spawn_with_attributes(
        &run.selfplay_dir(),
        prefix,
        config.run.games_per_shard,
        vec![(SEED_ATTRIBUTE.to_string(), seed.to_string())],
    )?;
    let records = match config.run.records {
        None => None,
        Some(format) => {
            let records = RecordWriter::new(run.records_dir(), format, prefix)?;
            Some(records.spawn_tee(writer.sender()))
        }
    };
    let sink: Sender<GameSamples> = records.as_ref().map_or_else(|| writer.sender(), |r| r.sender());
    let starts = start_positions(config);
    let finished = AtomicBool::new(false);
    // Self-play's own stop: the caller's, or the run's end (`finished.json`) seen by the follower.
    // Kept apart from the caller's flag, which in `koma pipeline` stops every stage.
    let selfplay_stop = Arc::new(AtomicBool::new(false));
    let run_finished = AtomicBool::new(false);
    let mut tensorboard = SelfPlayTensorboard::open(run, config.run.tensorboard);
    let started = Instant::now();
    let models = std::sync::Mutex::new(Vec::<String>::new());
    let result = std::thread::scope(|scope| {
        // The caller's stop reaches self-play at once, even while the follower loads a model.
        scope.spawn(|| {
            while !finished.load(Ordering::SeqCst) {
                if stopped(&stop) {
                    selfplay_stop.store(true, Ordering::SeqCst);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        // The follower: swaps in the run's current model whenever it changes, and ends self-play
        // at the run's end.
        let follower = scope.spawn(|| {
            // If the follower dies, self-play must not play on with a model nobody updates.
            let _stop_selfplay_on_panic = RaiseOnPanic(&selfplay_stop);
            let mut loaded = first.clone();
            // A model that failed to load, and how often: tried again a few times (a file system
            // that shows a rename late), then left alone while self-play keeps its last good one.
            let mut failed: Option<(ModelRef, u32)> = None;
            let mut last_look = Instant::now();
            while !finished.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
                if stopped(&selfplay_stop) || last_look.elapsed() < MODEL_POLL {
                    continue;
                }
                last_look = Instant::now();
                if until_run_end {
                    match run.end_of_run_of(config.run.steps) {
                        Ok(Some(end)) => {
                            tracing::info!(
                                "the run is finished at {} ({}): self-play ends, its finished games written",
                                end.describe(),
                                run.finished_file().display()
                            );
                            run_finished.store(true, Ordering::SeqCst);
                            selfplay_stop.store(true, Ordering::SeqCst);
                            continue;
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!("self-play: looking for the run's end: {e}"),
                    }
                }
                let current = match run.current_model() {
                    Ok(Some(m)) if m != loaded => m,
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!("self-play: looking for a new model: {e}");
                        continue;
                    }
                };
                if failed.as_ref().is_some_and(|(m, tries)| *m == current && *tries >= MODEL_LOAD_TRIES) {
                    continue;
                }
                match load_on_devices(&current, &options) {
                    Ok(networks) => {
                        for (device, network) in devices.iter().zip(networks) {
                            device.slot.replace(served(network, &share), &current.name());
                        }
                        tracing::info!(model = %current.name(), "self-play switched model");
                        let _ = events.send(Event::ModelSwitched { model: current.name() });
                        models.lock().unwrap_or_else(|e| e.into_inner()).push(current.name());
                        loaded = current;
                        failed = None;
                    }
                    Err(e) => {
                        let tries = match &failed {
                            Some((m, tries)) if *m == current => tries + 1,
                            _ => 1,
                        };
                        if tries >= MODEL_LOAD_TRIES {
                            tracing::error!(
                                "self-play: cannot load {}: {e}; it keeps playing with {} until a newer model loads",
                                current.path.display(),
                                loaded.name()
                            );
                        } else {
                            tracing::warn!("self-play: loading {}: {e}", current.path.display());
                        }
                        failed = Some((current, tries));
                    }
                }
            }
        });
        // However self-play ends (a panic included), the follower must see it end.
        let stop_follower = RaiseOnDrop(&finished);
        let result = koma_selfplay::run(
            &selfplay,
            starts,
            &devices,
            usize::MAX,
            sink,
            selfplay_stop.clone(),
            Duration::from_millis(500),
            &mut |p| {
                tensorboard.observe(p);
                let _ = events.send(Event::SelfPlay(p.clone()));
            },
        );
        drop(stop_follower);
        match follower.join() {
            Ok(()) => result,
            Err(panic) => result.and(Err(SelfPlayError::Panicked {
                thread: "the model follower".into(),
                message: koma_base::stop::panic_message(panic.as_ref()),
            })),
        }
    });
    summary.models.extend(models.into_inner().unwrap_or_else(|e| e.into_inner()));
    summary.run_finished = run_finished.into_inner();
    // Whatever ended self-play, the games finished before it are written first.
    if let Some(tee) = records {
        summary.records_written = tee.finish().written;
    }
    let written: WriterSummary = match (writer.finish(), result.as_ref()) {
        (Ok(written), _) => written,
        (Err(e), Ok(_)) => return Err(e.into()),
        // Both failed: the writer's error (a full disk, say) is usually the cause of self-play's.
        (Err(e), Err(message)) => {
            return Err(PipelineError::Stage {
                stage: "self-play",
                message: format!("the shard writer failed: {e}; and self-play: {message}"),
            })
        }
    };
    summary.stats = result.map_err(|source| PipelineError::SelfPlay { written: written.games, source })?;
    // The last record counts every game written (progress reports may have missed the last few).
    tensorboard.newest.stats = summary.stats.clone();
    tensorboard.newest.seconds = started.elapsed().as_secs_f64();
    tensorboard.record();
    summary.shards = written.shards.len();
    summary.samples_written = written.samples;
    summary.games_written = written.games;
    tracing::info!(
        games = summary.stats.games,
        samples = summary.samples_written,
        shards = summary.shards,
        "self-play stopped"
    );
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run_dir::RunFinished;
    use koma_nn::{DeviceSpec, ModelConfig, TrainingInfo};

    fn write_model(run: &RunDir, step: u64) -> ModelRef {
        let path = run.models_dir().join(koma_nn::checkpoint::file_name(step));
        let config = ModelConfig { blocks: 1, channels: 8, ..ModelConfig::tiny() };
        let mut net = Network::new(&config, &RunOptions::cpu(), Some(step + 1)).unwrap();
        net.save(&path, &TrainingInfo { step, samples_seen: 0, parent: None }).unwrap();
        ModelRef { step, path }
    }

    /// A model that loads on the first device but not on a later one: the device is named as the
    /// fault, and no older model is tried in its place (none would do better there).
    #[test]
    fn a_device_that_cannot_run_the_model_is_blamed_not_the_model() {
        // The failing device is a GPU that this machine does not have.
        if tch::Cuda::is_available() {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        run.create("[run]\n").unwrap();
        write_model(&run, 0);
        let current = write_model(&run, 100);
        let gpu = RunOptions { device: DeviceSpec::Cuda(1), ..RunOptions::cpu() };
        let err = first_usable_model(&run, current.clone(), &[RunOptions::cpu(), gpu]).err().unwrap().to_string();
        assert!(err.contains("loads on the first device but not on cuda:1"), "{err}");
        assert!(err.contains(&current.name()), "{err}");
        // The same model on the first device alone is fine.
        let (model, networks) = first_usable_model(&run, current.clone(), &[RunOptions::cpu()]).unwrap();
        assert_eq!((model, networks.len()), (current, 1));
    }

    #[test]
    fn self_play_ends_by_itself_when_the_run_is_finished() {
        let dir = tempfile::tempdir().unwrap();
        let config = "[run]\nthreads = 1\nsteps = 250\ngames_per_shard = 1\n[model]\npreset = \"tiny\"\n\
                      [selfplay]\ngames_per_worker = 2\nsimulations = 4\ncheap_simulations = 2\nmax_plies = 12\n";
        RunDir::new(dir.path()).create(config).unwrap();
        let run = Run::open(dir.path(), &crate::RunOverrides::default()).unwrap();
        run.model_zero().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (events, _receiver) = crossbeam::channel::unbounded();
        let shards = || run.dir.selfplay_dir().read_dir().unwrap().count();
        let summary = std::thread::scope(|scope| {
            let selfplay = scope.spawn(|| super::run(&run, stop.clone(), &events, None, true));
            // Games get played, then the trainer's end arrives.
            let deadline = Instant::now() + Duration::from_secs(120);
            while shards() == 0 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            run.dir.mark_finished(250).unwrap();
            selfplay.join().unwrap()
        })
        .unwrap();
        assert!(summary.run_finished);
        assert!(summary.games_written >= 1, "the games finished before the end are written");
        assert!(!stop.load(Ordering::SeqCst), "the caller's stop (every stage's, in koma pipeline) is left alone");
        // A process started on a finished run plays nothing.
        let again = super::run(&run, stop.clone(), &events, None, true).unwrap();
        assert!(again.run_finished && again.stats.games == 0);
        // Under a raised step limit the marker is stale: self-play plays (here until stopped).
        let raised = |steps| Run { config: with_steps(&run.config, steps), ..run.clone() };
        let before = shards();
        let summary = std::thread::scope(|scope| {
            let selfplay = scope.spawn(|| super::run(&raised(400), stop.clone(), &events, None, true));
            let deadline = Instant::now() + Duration::from_secs(120);
            while shards() == before && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(Duration::from_secs(3));
            stop.store(true, Ordering::SeqCst);
            selfplay.join().unwrap()
        })
        .unwrap();
        assert!(!summary.run_finished && summary.games_written >= 1);
        stop.store(false, Ordering::SeqCst);
        // A trainer that stops at the end keeps it; one that trains past it, or follows without a
        // limit, takes it away; one that cannot start (no limit, no follow) leaves it.
        raised(250).reopen_if_training_past_its_end(true).unwrap();
        raised(0).reopen_if_training_past_its_end(false).unwrap();
        assert!(run.dir.finished().unwrap().is_some());
        raised(0).reopen_if_training_past_its_end(true).unwrap();
        assert!(run.dir.finished().unwrap().is_none());
        // A file put there by hand, whatever it holds, is an end at an unknown step: it ends
        // self-play under any limit, and a trainer that trains on removes it.
        std::fs::write(run.dir.finished_file(), "").unwrap();
        let end = run.dir.finished().unwrap().unwrap();
        assert_eq!(end.step, None);
        assert!(end.ends_run_of(0) && end.ends_run_of(250));
        raised(250).reopen_if_training_past_its_end(true).unwrap();
        assert!(run.dir.finished().unwrap().is_none());
        // An end at step 250 ends runs limited at or below it, not a run without a limit.
        let at = RunFinished { step: Some(250) };
        assert!(at.ends_run_of(250) && at.ends_run_of(100) && !at.ends_run_of(400) && !at.ends_run_of(0));
    }

    fn with_steps(config: &PipelineConfig, steps: u64) -> PipelineConfig {
        let mut config = config.clone();
        config.run.steps = steps;
        config
    }
}
