//! `koma train`: train a network on the shards of a directory (self-play shards, or records
//! imported as shards for supervised learning): a progress bar, then a summary (or one JSON
//! line with `--json`). The work is koma_train::train; see docs/training.md.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use koma_nn::Precision;
use koma_pipeline::{Run, RunOverrides};
use koma_train::{train, ModelInit, Progress, ResumeMode, RunPaths, TrainConfig, TrainOptions, WaitReason};

use super::choices::precision;
use crate::interrupt;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A directory of shards, or a run directory (its selfplay/ shards are read).
    #[arg(long, required_unless_present = "run", conflicts_with = "run")]
    data: Option<PathBuf>,
    /// Train a pipeline run as its own process (`koma pipeline` made the directory): the run's
    /// config.toml gives the settings, the trainer resumes from the run's state or starts from
    /// model 0, and with --follow it trains as self-play processes (`koma selfplay --run DIR
    /// --follow`) write shards. Runs the gatekeeper too when the config enables gating.
    #[arg(long, conflicts_with_all = ["out", "model", "config"])]
    run: Option<PathBuf>,
    /// Initial weights: a checkpoint (.safetensors), or a preset (tiny, standard) or model config
    /// file for a fresh network. Not needed with --resume.
    #[arg(long)]
    model: Option<String>,
    /// Train until this step (a resumed run counts the steps it already took). Required unless
    /// --follow (or --run with `[run] steps` set). With --run, the run's `[run] steps` is the
    /// default (0: no limit); a trainer that reaches it marks the run finished (RUN/finished.json)
    /// and the self-play processes that follow the run end.
    #[arg(long)]
    steps: Option<u64>,
    /// Trainer settings: TOML (a `[train]` table or a bare file) or JSON; see docs/training.md.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Continue exactly from RUN/train/state (weights, optimiser, sampler, loss scale).
    #[arg(long)]
    resume: bool,
    /// Keep training as new shards appear, waiting when there are too few samples or training is
    /// ahead of the data (follow.* settings).
    #[arg(long)]
    follow: bool,
    /// Run directory for models/ and train/ (default: --data if it is a run directory, else the
    /// shards directory itself).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Override the config's batch_size.
    #[arg(long)]
    batch_size: Option<usize>,
    /// Override the config's lr.base.
    #[arg(long)]
    lr: Option<f64>,
    /// Override the config's checkpoint_every (steps per model).
    #[arg(long)]
    checkpoint_every: Option<u64>,
    /// Override the config's seed.
    #[arg(long)]
    seed: Option<u64>,
    /// cpu, cuda, cuda:N or auto (overrides the config).
    #[arg(long, env = "KOMA_DEVICE")]
    device: Option<String>,
    /// Overrides the config; half precision is CUDA-only.
    #[arg(long, value_parser = precision())]
    precision: Option<Precision>,
    /// libtorch CPU threads (overrides the config).
    #[arg(long)]
    threads: Option<usize>,
    /// Do not write the metrics as TensorBoard events (OUT/tensorboard/train/); with --run,
    /// `[run] tensorboard` of the run's config decides.
    #[arg(long, conflicts_with = "run")]
    no_tensorboard: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn config(args: &Args) -> Result<TrainConfig> {
    let mut c = match &args.config {
        Some(path) => TrainConfig::from_file(path)?,
        None => TrainConfig::default(),
    };
    apply_overrides(args, &mut c)?;
    Ok(c)
}

/// The command-line overrides of trainer settings.
fn apply_overrides(args: &Args, c: &mut TrainConfig) -> Result<()> {
    apply_training_overrides(args, c);
    if let Some(v) = &args.device {
        c.device = v.parse().with_context(|| format!("--device {v}"))?;
    }
    if args.threads.is_some() {
        c.threads = args.threads;
    }
    c.validate()?;
    Ok(())
}

/// The overrides of how the trainer trains (not where: device and threads are the run's).
fn apply_training_overrides(args: &Args, c: &mut TrainConfig) {
    if let Some(v) = args.batch_size {
        c.batch_size = v;
    }
    if let Some(v) = args.lr {
        c.lr.base = v;
    }
    if let Some(v) = args.checkpoint_every {
        c.checkpoint_every = v;
    }
    if let Some(v) = args.seed {
        c.seed = v;
    }
    if let Some(v) = args.precision {
        c.precision = v;
    }
}

/// `--run DIR`: the run with this process's device, step count and trainer overrides.
fn open_run(args: &Args, dir: &std::path::Path) -> Result<Run> {
    // --device is the run's device for this process: the gatekeeper's games run on it too.
    let overrides = RunOverrides { device: args.device.clone(), steps: args.steps, selfplay_seed: None };
    let mut run = Run::open(dir, &overrides)?;
    if let Some(threads) = args.threads {
        run.config.run.threads = threads;
    }
    apply_training_overrides(args, &mut run.config.train);
    let train_config = run.config.train_config();
    train_config.validate()?;
    // Refused before model 0 is written (the trainer would refuse it after).
    let steps = run.config.run.steps;
    train_config.lr.check_bounded((steps > 0).then_some(steps), false)?;
    // Model 0 before the gatekeeper starts: it makes model 0 the self-play model.
    run.model_zero()?;
    Ok(run)
}

pub fn run(args: Args) -> Result<()> {
    let stop = interrupt::stop_flag();
    let run = args.run.as_deref().map(|dir| open_run(&args, dir)).transpose()?;
    // The gatekeeper runs beside a trainer of a gated run (self-play processes follow its choice).
    let gatekeeper = run.as_ref().filter(|run| run.config.gating.enabled).map(|run| {
        let (run, stop) = (run.clone(), stop.clone());
        std::thread::spawn(move || {
            let (events, _ignored) = crossbeam::channel::unbounded();
            if let Err(e) = koma_pipeline::stages::gatekeeper::run(&run, stop, &events) {
                tracing::error!("gatekeeper: {e}");
            }
        })
    });

    let bar = ProgressBar::hidden();
    let mut last_msg = String::new();
    let mut progress = |p: Progress| match p {
        Progress::Started { step, target, resumed, window, device, precision } => {
            eprintln!(
                "koma train: {} step {step}{} on {device} ({precision}); window {} of {} samples in {} shards",
                if resumed { "resuming at" } else { "starting at" },
                target.map(|t| format!(" → {t}")).unwrap_or_default(),
                window.window_samples,
                window.total_samples,
                window.shards
            );
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            match target {
                Some(t) => {
                    bar.set_length(t);
                    bar.set_position(step);
                    bar.set_style(
                        ProgressStyle::with_template("{bar:30} {pos}/{len} steps {per_sec} eta {eta} {msg}")
                            .expect("template")
                            .progress_chars("=> "),
                    );
                }
                None => {
                    bar.set_position(step);
                    bar.set_style(ProgressStyle::with_template("{spinner} step {pos} {msg}").expect("template"));
                }
            }
            bar.reset_eta();
            bar.enable_steady_tick(Duration::from_millis(250));
        }
        Progress::Step(s) => {
            bar.set_position(s.step);
            if last_msg.is_empty() {
                last_msg = format!("loss {:.3}", s.loss);
                bar.set_message(last_msg.clone());
            }
        }
        Progress::Metrics(m) => {
            last_msg = format!(
                "policy {:.3} value {:.3} top1 {:.1}% value acc {:.1}% lr {:.2e} {:.0} samples/s",
                m.policy_loss,
                m.value_loss,
                100.0 * m.policy_top1,
                100.0 * m.value_accuracy,
                m.lr,
                m.samples_per_second
            );
            bar.set_message(last_msg.clone());
        }
        Progress::Checkpoint { path, .. } => bar.println(format!("wrote {}", path.display())),
        Progress::Waiting(w) => bar.set_message(match w.reason {
            WaitReason::WindowTooSmall => {
                format!("waiting for data: window {} samples, need {}", w.window_samples, w.needed_total_samples)
            }
            WaitReason::AheadOfData => format!(
                "waiting for data: ahead of self-play ({} samples produced, need {})",
                w.total_samples, w.needed_total_samples
            ),
        }),
    };
    let summary = match &run {
        // The trainer's own errors as `koma train --data` reports them, without the stage's name.
        Some(run) => koma_pipeline::stages::trainer::run(run, args.follow, None, stop.clone(), &mut progress).map_err(
            |e| match e {
                koma_pipeline::PipelineError::Train(e) => anyhow::Error::from(e),
                other => anyhow::Error::from(other),
            },
        ),
        None => {
            let config = config(&args)?;
            let model = args.model.as_deref().map(ModelInit::parse).transpose()?;
            let data = args.data.as_ref().expect("clap requires --data without --run");
            let paths = RunPaths::resolve(data, args.out.as_deref());
            let mut options = TrainOptions::new(paths, model, args.steps, config);
            options.resume = if args.resume { ResumeMode::Required } else { ResumeMode::Never };
            options.tensorboard = !args.no_tensorboard;
            options.follow = args.follow;
            options.stop = Some(stop.clone());
            train(&options, &mut progress).map_err(anyhow::Error::from)
        }
    };
    bar.finish_and_clear();
    if let Some(g) = gatekeeper {
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = g.join();
    }
    let summary = summary.context("training failed")?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "trained steps {}..{} ({} steps, {} samples seen) in {:.1}s: {:.1} samples/s on {} ({}){}",
            summary.start_step,
            summary.final_step,
            summary.steps,
            summary.samples_seen,
            summary.seconds,
            summary.samples_per_second,
            summary.device,
            summary.precision,
            if summary.stopped { ", stopped" } else { "" }
        );
        if let Some(m) = &summary.last_metrics {
            println!(
                "last {} steps: policy loss {:.4}, value loss {:.4}, policy top-1 {:.1}%, value accuracy {:.1}%",
                m.steps,
                m.policy_loss,
                m.value_loss,
                100.0 * m.policy_top1,
                100.0 * m.value_accuracy
            );
        }
        if let Some(c) = &summary.last_checkpoint {
            println!("checkpoint: {}", c.display());
        }
    }
    Ok(())
}
