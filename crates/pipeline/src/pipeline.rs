//! `koma pipeline`: self-play, the trainer (and, when configured, the gatekeeper and evaluations
//! during the run) as threads of one process over one run directory, until a time limit, a step
//! count or a stop (Ctrl-C); then the end-of-run arena report.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Sender;
use koma_nn::{Network, RunOptions, TrainingInfo};
use koma_train::{ModelInit, Progress, ResumeMode, TrainOptions, TrainSummary};
use serde::Serialize;

use crate::config::{ConfigSource, PipelineConfig};
use crate::error::{PipelineError, Result};
use crate::evaluation::{report, run_evaluator, run_gatekeeper, Report};
use crate::events::Event;
use crate::resources::{process_cpu_seconds, CpuBudget};
use crate::run_dir::{copy_checkpoint, ModelRef, RunDir};
use crate::selfplay_stage::{run_selfplay, SelfPlaySummary};
use crate::watchdog::Watchdog;

#[derive(Clone, Debug)]
pub struct PipelineOptions {
    pub run_dir: PathBuf,
    /// A config file; None: the embedded default for a new run, the run's own config on resume.
    pub config: Option<PathBuf>,
    /// Continue the run in `run_dir` (trainer state, models and shards are kept).
    pub resume: bool,
    /// Overrides `[run] minutes` (0: no limit).
    pub minutes: Option<f64>,
    /// Overrides `[run] cpu_minutes` (0: no limit).
    pub cpu_minutes: Option<f64>,
    /// Overrides `[run] steps` (0: no limit).
    pub steps: Option<u64>,
    /// Overrides `[run] device` for this process (not written to the run's config.toml): on a
    /// cluster each job names the devices of its own node.
    pub device: Option<String>,
    /// A checkpoint to start from as model 0 instead of a fresh network from `[model]` and
    /// `[run] seed` (its architecture must be `[model]`'s). Copied in when the run has no model 0
    /// yet; ignored once it has one. `koma experiment` gives every variant the same model 0 so.
    pub model_zero: Option<PathBuf>,
    /// Set from outside (Ctrl-C) to stop every stage cleanly; during the report it cuts the
    /// report short.
    pub stop: Arc<AtomicBool>,
    /// Play the end-of-run arena report.
    pub report: bool,
}

/// A run ready to start: its directory, its config and model 0 in place.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub run: RunDir,
    pub config: PipelineConfig,
    pub resumed: bool,
    /// Where the config came from (a file, the embedded default, or the run's config.toml).
    pub config_origin: String,
    /// Set when --resume came with a --config different from the run's: the old one kept here.
    pub replaced_config: Option<PathBuf>,
    /// The untrained network the trainer starts from and the report measures against.
    pub model_zero: ModelRef,
}

/// Why the pipeline stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    TimeLimit,
    /// `[run] cpu_minutes` of process CPU time used.
    CpuLimit,
    StepsReached,
    Interrupted,
}

#[derive(Clone, Debug, Serialize)]
pub struct PipelineSummary {
    pub run_dir: PathBuf,
    pub resumed: bool,
    pub stop_reason: StopReason,
    /// Wall-clock seconds of the stages (the report not included).
    pub seconds: f64,
    /// Process CPU seconds (user + system, all threads) of the stages.
    pub cpu_seconds: f64,
    pub selfplay: SelfPlaySummary,
    pub train: TrainSummary,
    /// Checkpoints in models/ now, and the newest.
    pub models: usize,
    pub last_model: Option<String>,
    pub report: Option<Report>,
    pub report_seconds: f64,
}

/// Creates or reopens the run directory, settles its config and writes model 0 if missing.
pub fn prepare(options: &PipelineOptions) -> Result<Prepared> {
    let run = RunDir::new(&options.run_dir);
    let (config, config_origin, replaced_config) = if options.resume {
        if !run.exists() {
            return Err(PipelineError::Run {
                path: run.root.clone(),
                message: "--resume: not a koma run (no config.toml); start one without --resume".into(),
            });
        }
        match &options.config {
            Some(path) => {
                let (text, origin) = ConfigSource::File(path.clone()).read()?;
                let config = PipelineConfig::parse(&text, &origin)?;
                let replaced = run.replace_config(&text)?;
                (config, origin, replaced)
            }
            None => {
                let text = run.read_config()?;
                let origin = run.config_file().display().to_string();
                (PipelineConfig::parse(&text, &origin)?, origin, None)
            }
        }
    } else {
        let source = options.config.clone().map(ConfigSource::File).unwrap_or(ConfigSource::Embedded);
        let (text, origin) = source.read()?;
        // Validate before anything is created on disk.
        let config = PipelineConfig::parse(&text, &origin)?;
        run.create(&text)?;
        (config, origin, None)
    };
    let config = match &options.device {
        Some(device) => config.with_device(device)?,
        None => config,
    };
    run.make_dirs()?;
    if let Some(source) = &options.model_zero {
        if run.model_zero()?.is_none() {
            install_model_zero(&run, &config, source)?;
        }
    }
    let model_zero = ensure_model_zero(&run, &config)?;
    Ok(Prepared { run, config, resumed: options.resume, config_origin, replaced_config, model_zero })
}

/// Writes `models/model-00000000` (the untrained network, from `[run] seed`) unless the run
/// already has checkpoints.
pub fn ensure_model_zero(run: &RunDir, config: &PipelineConfig) -> Result<ModelRef> {
    if let Some(m0) = run.model_zero()? {
        return Ok(m0);
    }
    let path = run.models_dir().join(koma_nn::checkpoint::file_name(0));
    write_model_zero(&path, &config.model, config.run.seed)?;
    tracing::info!(path = %path.display(), "wrote model 0");
    Ok(ModelRef { step: 0, path })
}

/// Writes an untrained network (`model`, weights from `seed`) as a step-0 checkpoint at `path`.
pub fn write_model_zero(path: &Path, model: &koma_nn::ModelConfig, seed: u64) -> Result<()> {
    let mut network = Network::new(model, &RunOptions::cpu(), Some(seed))?;
    network.save(path, &TrainingInfo { step: 0, samples_seen: 0, parent: None })?;
    Ok(())
}

/// Copies `source` in as the run's model 0, after checking that it is a checkpoint of the run's
/// `[model]`.
fn install_model_zero(run: &RunDir, config: &PipelineConfig, source: &Path) -> Result<()> {
    let meta = koma_nn::checkpoint::read_meta(source)?;
    koma_nn::checkpoint::check_architecture(source, &meta.model, &config.model)?;
    let path = run.models_dir().join(koma_nn::checkpoint::file_name(0));
    copy_checkpoint(source, &path)?;
    tracing::info!(from = %source.display(), path = %path.display(), "model 0 copied in");
    Ok(())
}
/// Runs the stages until the time limit, the step count or `options.stop`, then the report.
pub fn run(prepared: &Prepared, options: &PipelineOptions, events: &Sender<Event>) -> Result<PipelineSummary> {
    let (run, config) = (&prepared.run, &prepared.config);
    if config.run.threads > 0 {
        tch::set_num_threads(config.run.threads as i32);
    }
    let minutes = options.minutes.unwrap_or(config.run.minutes);
    let steps = options.steps.unwrap_or(config.run.steps);
    let cpu_minutes = options.cpu_minutes.unwrap_or(config.run.cpu_minutes);
    let deadline = (minutes > 0.0).then(|| Instant::now() + Duration::from_secs_f64(minutes * 60.0));
    // Process CPU time from here on: the stages' threads, not what ran before `run`.
    let cpu_budget = (cpu_minutes > 0.0).then(|| CpuBudget::new(Duration::from_secs_f64(cpu_minutes * 60.0)));
    let model_zero = &prepared.model_zero;
    if config.gating.enabled {
        if !run.has_current() {
            run.set_current(model_zero)?;
        }
    } else {
        run.clear_current()?;
    }

    let mut train_options = TrainOptions::new(
        run.train_paths(),
        Some(ModelInit::Checkpoint(model_zero.path.clone())),
        (steps > 0).then_some(steps),
        config.train_config(),
    );
    train_options.resume = ResumeMode::IfPresent;
    train_options.follow = true;
    train_options.tensorboard = config.run.tensorboard;
    let stages_stop = Arc::new(AtomicBool::new(false));
    train_options.stop = Some(stages_stop.clone());
    let prefix = shard_prefix();
    let started = Instant::now();
    let cpu_started = process_cpu_seconds();
    let mut reason = StopReason::Interrupted;
    let mut stage_ended = false;

    // The stages report here; this loop passes their events on, watching them for stalls.
    let (stage_events, stage_receiver) = crossbeam::channel::unbounded::<Event>();
    let mut watchdog = (config.run.stall_minutes > 0.0)
        .then(|| Watchdog::new(Duration::from_secs_f64(config.run.stall_minutes * 60.0), Instant::now()));
    let mut relay = || {
        let now = Instant::now();
        for event in stage_receiver.try_iter() {
            let back = watchdog.as_mut().and_then(|w| w.observe(&event, now));
            let _ = events.send(event);
            if let Some(back) = back {
                let _ = events.send(back);
            }
        }
        for stalled in watchdog.as_mut().map(|w| w.check(now)).unwrap_or_default() {
            let _ = events.send(stalled);
        }
    };
    let stage_events = &stage_events;
    // Which stage ended first (an error, a panic): its error is the run's, the others followed.
    let mut first_ended: Option<&'static str> = None;
    let (train_result, selfplay_result, side_results) = std::thread::scope(|scope| {
        let trainer =
            scope.spawn(|| koma_train::train(&train_options, &mut |p| forward_train_progress(p, stage_events)));
        let selfplay = scope.spawn(|| run_selfplay(run, config, &prefix, stages_stop.clone(), stage_events));
        let mut side = Vec::new();
        if config.gating.enabled {
            side.push(("gatekeeper", scope.spawn(|| run_gatekeeper(run, config, stages_stop.clone(), stage_events))));
        }
        if config.arena.every_models > 0 {
            side.push(("evaluator", scope.spawn(|| run_evaluator(run, config, stages_stop.clone(), stage_events))));
        }
        // Every stage runs until the stop: one that ends on its own (an error, a panic, the
        // trainer's step count) ends the run within a poll, and its result says why.
        while !stages_stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(100));
            relay();
            first_ended = if trainer.is_finished() {
                Some("trainer")
            } else if selfplay.is_finished() {
                Some("self-play")
            } else {
                side.iter().find(|(_, h)| h.is_finished()).map(|(name, _)| *name)
            };
            let stopped = if options.stop.load(Ordering::SeqCst) {
                Some(StopReason::Interrupted)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(StopReason::TimeLimit)
            } else if cpu_budget.is_some_and(|b| b.exhausted()) {
                Some(StopReason::CpuLimit)
            } else if first_ended == Some("trainer") {
                Some(StopReason::StepsReached)
            } else if first_ended.is_some() {
                stage_ended = true;
                Some(StopReason::Interrupted)
            } else {
                None
            };
            if let Some(why) = stopped {
                reason = why;
                stages_stop.store(true, Ordering::SeqCst);
            }
        }
        let _ = events.send(Event::Note("stopping: the trainer writes its checkpoint, self-play its shards".into()));
        let panicked = |stage: &'static str| {
            move |panic: Box<dyn std::any::Any + Send>| PipelineError::Stage {
                stage,
                message: format!("the thread panicked: {}", koma_mcts::panic_message(panic.as_ref())),
            }
        };
        let train_result = trainer.join().map_err(panicked("trainer")).and_then(|r| r.map_err(PipelineError::Train));
        let selfplay_result =
            selfplay.join().map_err(panicked("self-play")).and_then(|r| r.map_err(in_stage("self-play")));
        let side_results: Vec<(&'static str, Result<()>)> = side
            .into_iter()
            .map(|(name, h)| (name, h.join().map_err(panicked(name)).and_then(|r| r.map_err(in_stage(name)))))
            .collect();
        relay();
        (train_result, selfplay_result, side_results)
    });
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = process_cpu_seconds() - cpu_started;
    let (train, selfplay) = stage_outcomes(train_result, selfplay_result, side_results, first_ended)?;
    if stage_ended {
        // A stage ended on its own and yet without an error: that is a bug, and said so.
        return Err(log_failure(PipelineError::Stage {
            stage: "pipeline",
            message: "a stage ended without an error before the stop".into(),
        }));
    }
    let report_started = Instant::now();
    let report = if options.report && reason != StopReason::Interrupted {
        report(run, config, options.stop.clone(), events)?
    } else {
        None
    };
    let models = run.models()?;
    Ok(PipelineSummary {
        run_dir: run.root.clone(),
        resumed: prepared.resumed,
        stop_reason: reason,
        seconds,
        cpu_seconds,
        selfplay,
        train,
        models: models.len(),
        last_model: models.last().map(ModelRef::name),
        report,
        report_seconds: report_started.elapsed().as_secs_f64(),
    })
}

/// The trainer's and self-play's summaries, or the run's error: that of the stage that ended
/// first, or else the first in stage order. Every other stage error is logged too, so nothing a
/// failing stage said is lost.
fn stage_outcomes(
    train: Result<TrainSummary>,
    selfplay: Result<SelfPlaySummary>,
    side: Vec<(&'static str, Result<()>)>,
    first_ended: Option<&'static str>,
) -> Result<(TrainSummary, SelfPlaySummary)> {
    let mut errors = Vec::new();
    let train = train.map_err(|e| errors.push(("trainer", e))).ok();
    let selfplay = selfplay.map_err(|e| errors.push(("self-play", e))).ok();
    errors.extend(side.into_iter().filter_map(|(stage, r)| r.err().map(|e| (stage, e))));
    match (train, selfplay) {
        (Some(train), Some(selfplay)) if errors.is_empty() => Ok((train, selfplay)),
        _ => {
            let cause = errors.iter().position(|(stage, _)| Some(*stage) == first_ended).unwrap_or(0);
            let (_, error) = errors.remove(cause);
            for (stage, other) in &errors {
                tracing::error!("also, after the stop: {stage}: {other}");
            }
            Err(log_failure(error))
        }
    }
}

/// Names the stage in an error that does not name one yet (`shards: …` becomes
/// `self-play: shards: …`), so a run's error always says which stage failed.
fn in_stage(stage: &'static str) -> impl Fn(PipelineError) -> PipelineError {
    move |error| match error {
        PipelineError::Stage { .. } => error,
        other => PipelineError::Stage { stage, message: other.to_string() },
    }
}

/// Logs a stage failure as it is returned, so the log file has it too.
fn log_failure(error: PipelineError) -> PipelineError {
    tracing::error!("the run stopped: {error}");
    error
}

/// `selfplay-HOST-UNIXSECONDS-PID`: unique per process and host, so several self-play processes
/// (on one machine or many sharing the run directory, and after restarts) never write the same
/// shard name.
pub fn shard_prefix() -> String {
    koma_data::host::unique_prefix("selfplay")
}

/// The trainer's progress as pipeline events.
pub fn forward_train_progress(p: Progress<'_>, events: &Sender<Event>) {
    let event = match p {
        Progress::Started { step, target, resumed, window, device, precision } => {
            Event::TrainStarted { step, target, resumed, window, device, precision }
        }
        Progress::Step(s) => Event::TrainStep { step: s.step, loss: s.loss },
        Progress::Metrics(m) => Event::TrainMetrics(m.clone()),
        Progress::Checkpoint { step, path } => Event::Checkpoint { step, path: path.to_path_buf() },
        Progress::Waiting(w) => Event::TrainWaiting(w.clone()),
    };
    let _ = events.send(event);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stage: &'static str, message: &str) -> PipelineError {
        PipelineError::Stage { stage, message: message.into() }
    }

    #[test]
    fn the_stage_that_failed_first_is_the_cause() {
        // A full disk: the shard writer fails first; the trainer's checkpoint at the stop fails
        // after it. The run's error is self-play's, not the trainer's.
        let trainer = Err(PipelineError::Train(koma_train::TrainError::Config("checkpoint: no space left".into())));
        let outcome = stage_outcomes(
            trainer,
            Err(failed("self-play", "the shard writer failed")),
            vec![("evaluator", Ok(()))],
            Some("self-play"),
        );
        assert!(outcome.err().unwrap().to_string().contains("shard writer"));
        // No stage ended first (a time limit, then failures at the stop): stage order decides.
        let outcome = stage_outcomes(
            Err(PipelineError::Train(koma_train::TrainError::Config("x".into()))),
            Err(failed("self-play", "y")),
            vec![],
            None,
        );
        assert!(outcome.err().unwrap().to_string().starts_with("trainer"));
        // A side stage that ended first is the cause, even with self-play failing after it.
        let trainer = Err(PipelineError::Train(koma_train::TrainError::Config("stopped".into())));
        let outcome = stage_outcomes(
            trainer,
            Err(failed("self-play", "later")),
            vec![("gatekeeper", Ok(())), ("evaluator", Err(failed("evaluator", "first")))],
            Some("evaluator"),
        );
        assert_eq!(outcome.err().unwrap().to_string(), "evaluator: first");
    }
}
