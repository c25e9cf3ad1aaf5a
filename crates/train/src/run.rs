//! The library entry point behind `koma train` (and the pipeline): [`train`] runs the loop —
//! loader thread → [`Trainer::train_step`] → metrics every `log_every` steps → checkpoint and
//! training state every `checkpoint_every` steps and at the end — reporting [`Progress`] to a
//! callback and returning a [`TrainSummary`].

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use koma_base::run_layout::RunLayout;
use koma_tensorboard::ScalarLog;
use serde::Serialize;

use crate::budget::{self, BudgetClock};
use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::lease::Lease;
use crate::loader::{Loader, LoaderMsg, LoaderSetup, WaitInfo, WindowInfo};
use crate::metrics::{Accumulator, MetricsLog, MetricsRecord, StepStats};
use crate::state;
use crate::trainer::{ModelInit, Trainer};

/// What `--resume` means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResumeMode {
    /// Start from `--model`; refuse if the run directory already holds a training state.
    #[default]
    Never,
    /// Continue from the training state; refuse if there is none.
    Required,
    /// Continue from the training state if there is one, else start from `--model` (pipeline).
    IfPresent,
}

/// Where a run's files live.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RunPaths {
    pub run_dir: PathBuf,
    /// The shards the replay window reads.
    pub shards_dir: PathBuf,
    /// `RUN/models/`: `model-STEP.safetensors` + `.json`.
    pub models_dir: PathBuf,
    /// `RUN/train/`.
    pub train_dir: PathBuf,
    /// `RUN/train/state/`.
    pub state_dir: PathBuf,
    /// `RUN/train/metrics.jsonl`.
    pub metrics: PathBuf,
    /// `RUN/tensorboard/`: the trainer writes the metrics again under `train/` for TensorBoard.
    pub tensorboard: PathBuf,
}

impl RunPaths {
    /// `data` is a run directory when it has a `selfplay/` subdirectory (its shards are read from
    /// there), else a directory of shards. Outputs go to `out`, by default the run directory, or
    /// for a bare shards directory that directory itself.
    pub fn resolve(data: &Path, out: Option<&Path>) -> RunPaths {
        let selfplay = RunLayout::new(data).selfplay_dir();
        let (shards_dir, default_run) =
            if selfplay.is_dir() { (selfplay, data.to_path_buf()) } else { (data.to_path_buf(), data.to_path_buf()) };
        RunPaths::new(out.map(Path::to_path_buf).unwrap_or(default_run), shards_dir)
    }

    /// Outputs under `run_dir` (its layout: [`RunLayout`]), shards read from `shards_dir`.
    pub fn new(run_dir: PathBuf, shards_dir: PathBuf) -> RunPaths {
        let layout = RunLayout::new(&run_dir);
        RunPaths {
            models_dir: layout.models_dir(),
            state_dir: layout.state_dir(),
            metrics: layout.metrics_file(),
            tensorboard: layout.tensorboard_dir(),
            train_dir: layout.train_dir(),
            shards_dir,
            run_dir,
        }
    }

    /// A run's own paths: its shards in `selfplay/`.
    pub fn of_run(layout: &RunLayout) -> RunPaths {
        RunPaths::new(layout.root.clone(), layout.selfplay_dir())
    }
}

/// Everything `koma train` passes in.
#[derive(Clone, Debug)]
pub struct TrainOptions {
    pub paths: RunPaths,
    /// Initial weights; required unless resuming from a state.
    pub model: Option<ModelInit>,
    /// Train until this step (counting the steps a resumed state already took). Required
    /// unless following; with `follow` and None, train until stopped.
    pub steps: Option<u64>,
    pub config: TrainConfig,
    pub resume: ResumeMode,
    /// Keep training as new shards appear (see [`crate::config::FollowConfig`]).
    pub follow: bool,
    /// Set to stop cleanly (a checkpoint and the state are written first), e.g. from Ctrl-C.
    pub stop: Option<Arc<AtomicBool>>,
    /// Also write the metrics as TensorBoard events (`RUN/tensorboard/train/`).
    pub tensorboard: bool,
    /// The caller's time limits, for a learning rate over the run's budget
    /// ([`LrConfig::over_budget`](crate::LrConfig::over_budget)); `steps` is the other limit.
    pub budget: Option<Arc<dyn BudgetClock>>,
    /// Allow f16/bf16 on the CPU (tests only).
    #[doc(hidden)]
    pub allow_cpu_half: bool,
}

impl TrainOptions {
    pub fn new(paths: RunPaths, model: Option<ModelInit>, steps: Option<u64>, config: TrainConfig) -> TrainOptions {
        TrainOptions {
            paths,
            model,
            steps,
            config,
            resume: ResumeMode::Never,
            follow: false,
            stop: None,
            tensorboard: true,
            budget: None,
            allow_cpu_half: false,
        }
    }
}

/// What the trainer reports while it runs: the one progress type of the trainer stage, passed on
/// unchanged to whoever shows it (`koma train`'s lines, the pipeline's events and watchdog).
#[derive(Clone, Debug)]
pub enum Progress {
    /// The trainer is ready and the window open.
    Started {
        step: u64,
        target: Option<u64>,
        resumed: bool,
        window: WindowInfo,
        device: String,
        precision: &'static str,
    },
    /// After every optimiser step.
    Step(StepStats),
    /// A metrics line was written.
    Metrics(MetricsRecord),
    /// A checkpoint (and the training state) was written.
    Checkpoint { step: u64, path: PathBuf },
    /// Follow mode: waiting for data.
    Waiting(WaitInfo),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainSummary {
    pub run_dir: PathBuf,
    pub resumed: bool,
    pub start_step: u64,
    pub final_step: u64,
    /// Steps taken by this call.
    pub steps: u64,
    pub samples_seen: u64,
    pub seconds: f64,
    /// Training samples per second over this call (waits included).
    pub samples_per_second: f64,
    pub skipped_steps: u64,
    pub checkpoints: Vec<PathBuf>,
    pub last_checkpoint: Option<PathBuf>,
    pub last_metrics: Option<MetricsRecord>,
    /// Stopped by the stop flag before reaching the target.
    pub stopped: bool,
    pub device: String,
    pub precision: String,
}

fn stopped(stop: &Option<Arc<AtomicBool>>) -> bool {
    stop.as_ref().is_some_and(|s| s.load(Ordering::SeqCst))
}

/// Builds the trainer for `options`: resumed from the state or started from `--model`.
pub fn prepare(options: &TrainOptions) -> Result<(Trainer, bool)> {
    let p = &options.paths;
    let has_state = state::exists(&p.state_dir);
    let resume = match options.resume {
        ResumeMode::Required => true,
        ResumeMode::IfPresent => has_state,
        ResumeMode::Never => {
            if has_state {
                let step = std::fs::read_to_string(p.state_dir.join(state::STATE_FILE))
                    .ok()
                    .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                    .and_then(|v| v.get("step").and_then(|s| s.as_u64()))
                    .unwrap_or(0);
                return Err(TrainError::StateExists { path: p.state_dir.clone(), step });
            }
            false
        }
    };
    let trainer = if resume {
        let mut trainer = if options.allow_cpu_half {
            Trainer::resume_allowing_cpu_half(&options.config, &p.state_dir, &p.models_dir)?
        } else {
            Trainer::resume(&options.config, &p.state_dir, &p.models_dir)?
        };
        trainer.publish_checkpoint_of_state(&p.models_dir)?;
        trainer
    } else {
        let init = options.model.as_ref().ok_or_else(|| {
            TrainError::Config("--model is required (a checkpoint, a preset or a model config) unless resuming".into())
        })?;
        if options.allow_cpu_half {
            Trainer::new_allowing_cpu_half(&options.config, init)?
        } else {
            Trainer::new(&options.config, init)?
        }
    };
    Ok((trainer, resume))
}

/// Runs training as `options` say; see the module documentation.
pub fn train(options: &TrainOptions, progress: &mut dyn FnMut(Progress)) -> Result<TrainSummary> {
    if options.steps.is_none() && !options.follow {
        return Err(TrainError::Config("a step count (--steps) is required unless following (--follow)".into()));
    }
    options.config.lr.check_bounded(options.steps, options.budget.is_some())?;
    let p = &options.paths;
    // One trainer per run, also across hosts sharing the directory (lease.rs).
    let lease = Lease::acquire(&p.run_dir)?;
    let (mut trainer, resumed) = prepare(options)?;
    let start_step = trainer.step();
    let start_samples = trainer.samples_seen();
    let resumed_share = trainer.budget_spent();
    std::fs::create_dir_all(&p.models_dir).map_err(crate::error::io(&p.models_dir))?;
    let mut log = MetricsLog::open(&p.metrics, start_step)?;
    let config = trainer.config().clone();
    let device = koma_nn::device::device_names(trainer.devices());
    let precision = trainer.mode().name();

    let mut summary = TrainSummary {
        run_dir: p.run_dir.clone(),
        resumed,
        start_step,
        final_step: start_step,
        steps: 0,
        samples_seen: start_samples,
        seconds: 0.0,
        samples_per_second: 0.0,
        skipped_steps: 0,
        checkpoints: Vec::new(),
        last_checkpoint: None,
        last_metrics: None,
        stopped: false,
        device: device.clone(),
        precision: precision.to_string(),
    };
    let done = |t: &Trainer| options.steps.is_some_and(|s| t.step() >= s);
    if done(&trainer) {
        return Ok(summary);
    }
    let mut tensorboard =
        ScalarLog::open(&p.tensorboard.join("train"), &koma_base::host::host_name(), options.tensorboard);
    // What MetricsLog::open drops (steps after the state's, logged by a run that stopped before
    // saving it), TensorBoard drops too: a session start purges the steps from here on.
    tensorboard.session_start(start_step as i64 + 1);

    let loader = Loader::spawn(LoaderSetup {
        shards_dir: p.shards_dir.clone(),
        window: config.window.clone(),
        loss: config.loss.clone(),
        batch_size: config.batch_size,
        prefetch: config.prefetch_batches,
        follow: options.follow.then(|| config.follow.clone()),
        rng: trainer.rng().clone(),
        samples_seen: start_samples,
        replies: trainer.wants_replies(),
    })?;
    let started = Instant::now();
    let mut acc = Accumulator::new();
    let mut last_saved = start_step;
    let mut last_stats: Option<StepStats> = None;
    let mut window = WindowInfo { window_samples: 0, total_samples: 0, shards: 0 };
    let mut announced = false;

    let result = (|| -> Result<()> {
        while !done(&trainer) {
            if stopped(&options.stop) {
                summary.stopped = true;
                break;
            }
            if lease.lost() {
                return Err(TrainError::LeaseLost { path: lease.path().to_path_buf() });
            }
            let Some(msg) = loader.recv_timeout(Duration::from_millis(200)) else { continue };
            match msg? {
                LoaderMsg::Opened(w) => {
                    window = w;
                    if !announced {
                        announced = true;
                        progress(Progress::Started {
                            step: trainer.step(),
                            target: options.steps,
                            resumed,
                            window: w,
                            device: device.clone(),
                            precision,
                        });
                    }
                }
                LoaderMsg::Waiting(w) => {
                    window.window_samples = w.window_samples;
                    window.total_samples = w.total_samples;
                    progress(Progress::Waiting(w));
                }
                LoaderMsg::Batch(batch, w) => {
                    window = w;
                    let share = budget::run_share(
                        trainer.step(),
                        options.steps,
                        resumed_share,
                        options.budget.as_ref().map(|c| c.spent()),
                        options.budget.as_ref().and_then(|c| c.run_spent()),
                    );
                    if let Some(share) = share {
                        trainer.set_budget_spent(share);
                    }
                    let stats = trainer.train_step_owned(*batch)?;
                    summary.skipped_steps += stats.skipped as u64;
                    acc.add(&stats);
                    progress(Progress::Step(stats.clone()));
                    if trainer.step() % config.log_every == 0 {
                        let rec = acc.finish(&stats, window.window_samples, window.total_samples);
                        log.append(&rec)?;
                        tensorboard.scalars(rec.step as i64, &rec.scalars());
                        progress(Progress::Metrics(rec.clone()));
                        summary.last_metrics = Some(rec);
                    }
                    last_stats = Some(stats);
                    if trainer.step() % config.checkpoint_every == 0 {
                        if !lease.still_held() {
                            return Err(TrainError::LeaseLost { path: lease.path().to_path_buf() });
                        }
                        let path = save(&mut trainer, p)?;
                        last_saved = trainer.step();
                        progress(Progress::Checkpoint { step: trainer.step(), path: path.clone() });
                        summary.checkpoints.push(path);
                    }
                }
            }
        }
        Ok(())
    })();
    drop(loader);
    // A divergence, in a step or found before a save, names the checkpoint to go back to.
    let last_good = |e: TrainError| match e {
        TrainError::Diverged { step, what } => TrainError::Diverged {
            step,
            what: format!("{what}; nothing of it was saved: the last good checkpoint is the one of step {last_saved}"),
        },
        e => e,
    };
    // Keep the work done so far, also after a data error or a stop; not after a divergence,
    // whose forward pass may have put NaN into the batch-norm statistics, nor once another
    // trainer owns the run.
    let save_nothing =
        matches!(result, Err(TrainError::Diverged { .. } | TrainError::LeaseLost { .. })) || !lease.still_held();
    if let (Some(stats), false, false) = (&last_stats, acc.is_empty(), save_nothing) {
        let rec = acc.finish(stats, window.window_samples, window.total_samples);
        log.append(&rec)?;
        tensorboard.scalars(rec.step as i64, &rec.scalars());
        progress(Progress::Metrics(rec.clone()));
        summary.last_metrics = Some(rec);
    }
    if trainer.step() != last_saved && !save_nothing {
        let path = save(&mut trainer, p).map_err(last_good)?;
        progress(Progress::Checkpoint { step: trainer.step(), path: path.clone() });
        summary.checkpoints.push(path);
    }
    result.map_err(last_good)?;
    summary.final_step = trainer.step();
    summary.steps = trainer.step() - start_step;
    summary.samples_seen = trainer.samples_seen();
    summary.seconds = started.elapsed().as_secs_f64();
    summary.samples_per_second = (trainer.samples_seen() - start_samples) as f64 / summary.seconds.max(1e-9);
    summary.last_checkpoint = summary.checkpoints.last().cloned();
    Ok(summary)
}

/// The state, then the checkpoint of the same step; neither when the network holds inf or NaN
/// (the state's check comes first). In this order a model name never gets other weights: a
/// crash between the two leaves a state whose checkpoint is missing, and the resume publishes it
/// from the state (`Trainer::publish_checkpoint_of_state`: the same weights), where the other
/// order left a published model whose steps a resume would train again, differently, and
/// publish under the same name.
fn save(trainer: &mut Trainer, p: &RunPaths) -> Result<PathBuf> {
    trainer.save_state(&p.state_dir)?;
    trainer.save_checkpoint(&p.models_dir)
}
