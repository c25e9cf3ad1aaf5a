//! `koma pipeline`: self-play, the trainer (and, when configured, the gatekeeper and evaluations
//! during the run) as threads of one process over one run directory, until a time limit, a step
//! count or a stop (Ctrl-C); then the end-of-run arena report.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam::channel::Sender;
use koma_train::TrainSummary;
use serde::Serialize;

use crate::config::{ConfigSource, PipelineConfig};
use crate::error::{PipelineError, Result};
use crate::evaluation::{report, Report};
use crate::events::Event;
use crate::resources::{process_cpu_seconds, Machine, RunBudget};
use crate::run::{Run, RunOverrides};
use crate::run_dir::{ModelRef, RunDir};
use crate::stages;
use crate::stages::selfplay::SelfPlaySummary;
use crate::watchdog::Watchdog;

/// How often the run's evaluation count is saved while it runs.
const EVALS_SAVE_EVERY: Duration = Duration::from_secs(5);

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
    /// Overrides `[run] evals` (0: no limit).
    pub evals: Option<u64>,
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
    /// Only create the run (`koma pipeline --prepare`): its stages run as other processes, which
    /// check their own limits.
    pub prepare_only: bool,
}

impl PipelineOptions {
    /// The run's time limits in minutes, wall clock and CPU (0: none): these options' overrides,
    /// else `config`'s `[run]`.
    pub fn time_limits(&self, config: &PipelineConfig) -> (f64, f64) {
        (self.minutes.unwrap_or(config.run.minutes), self.cpu_minutes.unwrap_or(config.run.cpu_minutes))
    }

    /// The run's limit in self-play evaluations (0: none): this option's override, else
    /// `config`'s `[run]`.
    pub fn eval_limit(&self, config: &PipelineConfig) -> u64 {
        self.evals.unwrap_or(config.run.evals)
    }
}

/// A run ready to start: its directory, its config and model 0 in place.
#[derive(Clone, Debug)]
pub struct Prepared {
    pub run: Run,
    pub resumed: bool,
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
    /// `[run] evals` self-play evaluations done.
    EvalLimit,
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
    /// The machine the run ran on, so that its minutes can be compared with another's.
    pub machine: Machine,
    /// Positions self-play evaluated with the network in this process (the `[run] evals`
    /// budget's unit), the run's total so far, and this process's per wall-clock second: the
    /// machine's measured speed on this run.
    pub evals: u64,
    pub evals_total: u64,
    pub evals_per_second: f64,
    pub selfplay: SelfPlaySummary,
    pub train: TrainSummary,
    /// Checkpoints in models/ now, and the newest.
    pub models: usize,
    pub last_model: Option<String>,
    pub report: Option<Report>,
    pub report_seconds: f64,
}

/// A learning rate over the run's budget needs a budget: refused, before anything is written,
/// when neither the config nor the command line limits the run.
fn check_budget(config: &PipelineConfig, origin: &str, options: &PipelineOptions) -> Result<()> {
    let (minutes, cpu_minutes) = options.time_limits(config);
    let limited = minutes > 0.0
        || cpu_minutes > 0.0
        || options.eval_limit(config) > 0
        || options.steps.unwrap_or(config.run.steps) > 0;
    if config.train.lr.over_budget() && !limited && !options.prepare_only {
        return Err(PipelineError::Config {
            origin: origin.to_string(),
            message: "[train.lr] decay_steps = 0 anneals the learning rate over the run's budget, and this run has \
                      none: give it minutes, cpu_minutes, evals or steps ([run] or --minutes, --cpu-minutes, \
                      --evals, --steps), or set decay_steps"
                .into(),
        });
    }
    Ok(())
}

/// Creates or reopens the run directory, settles its config and writes model 0 if missing.
pub fn prepare(options: &PipelineOptions) -> Result<Prepared> {
    let dir = RunDir::new(&options.run_dir);
    let (config, config_origin, replaced_config) = if options.resume {
        if !dir.exists() {
            return Err(PipelineError::Run {
                path: dir.root.clone(),
                message: "--resume: not a koma run (no config.toml); start one without --resume".into(),
            });
        }
        // Before anything is replaced: an unreadable count stops the resume here.
        let evals = dir.evals()?;
        if evals == 0 && dir.models()?.len() > 1 {
            tracing::warn!(
                "{}: no evaluation count in a run that has trained (a run of an older koma, or the file was \
                 removed); its evaluations count from 0, so an --evals budget starts again",
                dir.evals_file().display()
            );
        }
        match &options.config {
            Some(path) => {
                let (text, origin) = ConfigSource::File(path.clone()).read()?;
                let config = PipelineConfig::parse(&text, &origin)?;
                check_budget(&config, &origin, options)?;
                let replaced = dir.replace_config(&text)?;
                (config, origin, replaced)
            }
            None => {
                let text = dir.read_config()?;
                let origin = dir.config_file().display().to_string();
                let config = PipelineConfig::parse(&text, &origin)?;
                check_budget(&config, &origin, options)?;
                (config, origin, None)
            }
        }
    } else {
        let source = options.config.clone().map(ConfigSource::File).unwrap_or(ConfigSource::Embedded);
        let (text, origin) = source.read()?;
        // Validate before anything is created on disk.
        let config = PipelineConfig::parse(&text, &origin)?;
        check_budget(&config, &origin, options)?;
        dir.create(&text)?;
        (config, origin, None)
    };
    let overrides = RunOverrides { device: options.device.clone(), steps: options.steps, selfplay_seed: None };
    let run = Run { dir, config, config_origin }.with_overrides(&overrides)?;
    run.dir.make_dirs()?;
    if options.resume {
        let swept = run.dir.sweep_leftover_temporaries()?;
        if swept > 0 {
            tracing::warn!(
                "removed {swept} temporary files that killed writers had left in {}",
                run.dir.root.display()
            );
        }
    }
    if let Some(source) = &options.model_zero {
        run.install_model_zero(source)?;
    }
    let model_zero = run.model_zero()?;
    // Before any stage starts: self-play must not find the end of an earlier, shorter run.
    run.reopen_if_training_past_its_end(true)?;
    Ok(Prepared { run, resumed: options.resume, replaced_config, model_zero })
}

/// Runs the stages until the time limit, the step count or `options.stop`, then the report.
pub fn run(prepared: &Prepared, options: &PipelineOptions, events: &Sender<Event>) -> Result<PipelineSummary> {
    let stages_run = &prepared.run;
    let (run, config) = (&stages_run.dir, &stages_run.config);
    stages_run.set_threads();
    let (minutes, cpu_minutes) = options.time_limits(config);
    // Process CPU time from here on: the stages' threads, not what ran before `run`.
    let budget = Arc::new(RunBudget::new(minutes, cpu_minutes, options.eval_limit(config), run.evals()?));
    let mut evals_saved = (budget.evals_done(), Instant::now());
    let model_zero = &prepared.model_zero;
    if config.gating.enabled {
        if !run.has_current() {
            run.set_current(model_zero)?;
        }
    } else {
        run.clear_current()?;
    }

    let stages_stop = Arc::new(AtomicBool::new(false));
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
            match &event {
                Event::SelfPlay(progress) => budget.count_evals(progress.inference.positions),
                Event::Train(koma_train::Progress::Checkpoint { step, .. }) => {
                    if let Err(e) = run.note_checkpoint_evals(*step, budget.evals_done()) {
                        tracing::warn!("noting checkpoint {step}'s evaluations: {e}");
                    }
                }
                _ => {}
            }
            let back = watchdog.as_mut().and_then(|w| w.observe(&event, now));
            let _ = events.send(event);
            if let Some(back) = back {
                let _ = events.send(back);
            }
        }
        for stalled in watchdog.as_mut().map(|w| w.check(now)).unwrap_or_default() {
            let _ = events.send(stalled);
        }
        // The run's count, saved every few seconds (a crash loses at most those).
        if budget.evals_done() != evals_saved.0 && now.duration_since(evals_saved.1) >= EVALS_SAVE_EVERY {
            if let Err(e) = run.set_evals(budget.evals_done()) {
                tracing::warn!("saving the evaluation count: {e}");
            }
            evals_saved = (budget.evals_done(), now);
        }
    };
    let stage_events = &stage_events;
    // Which stage ended first (an error, a panic): its error is the run's, the others followed.
    let mut first_ended: Option<&'static str> = None;
    let core_share = config.core_share().map(Arc::new);
    let (train_result, selfplay_result, side_results) = std::thread::scope(|scope| {
        let trainer = scope.spawn(|| {
            let clock = budget.is_limited().then(|| budget.clone() as Arc<dyn koma_train::BudgetClock>);
            stages::trainer::run(stages_run, true, clock, stages_stop.clone(), &mut |p| {
                if let Some(share) = &core_share {
                    share.observe(&p);
                }
                let _ = stage_events.send(Event::Train(p));
            })
        });
        let selfplay =
            // The pipeline's own trainer ends the run (the stop below), not the end marker.
            scope.spawn(|| {
                stages::selfplay::run(stages_run, stages_stop.clone(), stage_events, core_share.clone(), false)
            });
        let mut side = Vec::new();
        if config.gating.enabled {
            let gatekeeper = scope.spawn(|| stages::gatekeeper::run(stages_run, stages_stop.clone(), stage_events));
            side.push(("gatekeeper", gatekeeper));
        }
        if config.arena.every_models > 0 {
            let evaluator = scope
                .spawn(|| stages::evaluator::run(stages_run, stages_stop.clone(), stage_events, false).map(|_| ()));
            side.push(("evaluator", evaluator));
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
            } else if budget.wall_exhausted() {
                Some(StopReason::TimeLimit)
            } else if budget.cpu_exhausted() {
                Some(StopReason::CpuLimit)
            } else if budget.evals_exhausted() {
                Some(StopReason::EvalLimit)
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
                message: format!("the thread panicked: {}", koma_base::stop::panic_message(panic.as_ref())),
            }
        };
        let train_result = trainer.join().map_err(panicked("trainer")).and_then(|r| r);
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
    // Self-play's last report, made as it ended, holds its totals; saved whatever the stages'
    // outcome (a failed save is said: the run's work is done either way).
    let evals = budget.evals_here();
    if let Err(e) = run.set_evals(budget.evals_done()) {
        tracing::warn!("saving the evaluation count: {e}");
    }
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
        machine: Machine::this(),
        evals,
        evals_total: budget.evals_done(),
        evals_per_second: evals as f64 / seconds.max(1e-9),
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
    move |error| match error.stage() {
        Some(_) => error,
        None => PipelineError::InStage { stage, source: Box::new(error) },
    }
}

/// Logs a stage failure as it is returned, so the log file has it too.
fn log_failure(error: PipelineError) -> PipelineError {
    tracing::error!("the run stopped: {}", koma_base::error::Report(&error));
    error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(stage: &'static str, message: &str) -> PipelineError {
        PipelineError::Stage { stage, message: message.into() }
    }

    /// `decay_steps = 0` without any limit: refused before the run directory exists; any limit,
    /// from the config or the command line, or `--prepare`, lets it through.
    #[test]
    fn a_schedule_over_the_budget_needs_a_budget_before_anything_is_written() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("c.toml");
        std::fs::write(&config, "[run]\nminutes = 0\n[model]\nblocks = 1\nchannels = 8\n[train.lr]\nschedule = \"cosine\"\ndecay_steps = 0\n").unwrap();
        let options = |run: &str| PipelineOptions {
            run_dir: tmp.path().join(run),
            config: Some(config.clone()),
            resume: false,
            minutes: None,
            cpu_minutes: None,
            steps: None,
            evals: None,
            device: Some("cpu".into()),
            model_zero: None,
            stop: Arc::new(AtomicBool::new(false)),
            report: false,
            prepare_only: false,
        };
        let e = prepare(&options("none")).unwrap_err().to_string();
        assert!(e.contains("decay_steps = 0") && e.contains("--minutes") && e.contains("c.toml"), "{e}");
        assert!(!tmp.path().join("none").exists());
        for (run, o) in [
            ("minutes", PipelineOptions { minutes: Some(1.0), ..options("minutes") }),
            ("cpu", PipelineOptions { cpu_minutes: Some(1.0), ..options("cpu") }),
            ("steps", PipelineOptions { steps: Some(10), ..options("steps") }),
            ("evals", PipelineOptions { evals: Some(1000), ..options("evals") }),
            ("prepared", PipelineOptions { prepare_only: true, ..options("prepared") }),
        ] {
            prepare(&o).unwrap_or_else(|e| panic!("{run}: {e}"));
        }
        // Resumed without a limit: refused too (the run's own config is read).
        let e = prepare(&PipelineOptions { resume: true, config: None, ..options("prepared") }).unwrap_err();
        assert!(e.to_string().contains("decay_steps = 0"), "{e}");
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

    #[test]
    fn a_stage_error_keeps_its_cause() {
        let full = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let shard = PipelineError::Data(koma_data::DataError::Io { path: "s/0.h5".into(), source: full });
        let error = in_stage("self-play")(shard);
        assert_eq!(error.to_string(), "self-play: shards: s/0.h5: No space left on device");
        // The chain reaches the io::Error, so its kind (a full disk) is not lost in the wrapping.
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&error);
        let mut kinds = Vec::new();
        while let Some(e) = cause {
            kinds.extend(e.downcast_ref::<std::io::Error>().map(std::io::Error::kind));
            cause = e.source();
        }
        assert_eq!(kinds, [std::io::ErrorKind::StorageFull]);
        // And the CLI's report says each link once.
        assert_eq!(koma_base::error::Report(&error).to_string(), "self-play: shards: s/0.h5: No space left on device");
        // A stage already named is not named twice.
        assert_eq!(in_stage("trainer")(error).to_string(), "self-play: shards: s/0.h5: No space left on device");
    }
}
