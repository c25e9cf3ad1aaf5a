//! koma-train: the trainer.
//!
//! - [`config`]: [`TrainConfig`], every setting with a default (TOML `[train]` or JSON).
//! - [`batch`]: samples → network inputs, dense policy targets, mixed value targets.
//! - [`loss`]: the loss terms of a forward pass, and a network's metrics on a batch.
//! - [`optim`]: SGD (Nesterov) and AdamW written as tensor updates, so their state can be saved.
//! - [`scaler`]: dynamic loss scaling for f16.
//! - [`trainer`]: [`Trainer`], one optimiser step at a time; its precision modes (f32 / f16
//!   autocast / bf16), data-parallel replicas and saving/resuming in files of their own.
//! - [`budget`]: the share of the run's budget spent, for a learning rate that anneals over it.
//! - `averaging`: the moving average of the weights that checkpoints publish (`ema_samples`).
//! - [`held_out`]: a network's losses on samples it did not train on (`koma data loss`).
//! - [`state`]: the full training state under `train/state/` for an exact `--resume`.
//! - [`loader`]: the thread that samples the replay window ahead of the optimiser (and waits
//!   for data in follow mode).
//! - [`metrics`]: the lines of `train/metrics.jsonl`.
//! - [`run`]: [`train`], the entry point of `koma train` and the pipeline.
//! - [`bench`]: `koma bench train`.
//!
//! docs/training.md describes the files, the loss, the state and the follow protocol.

mod averaging;
pub mod batch;
pub mod bench;
pub mod budget;
pub mod config;
mod error;
pub mod held_out;
pub mod lease;
pub mod loader;
pub mod loss;
pub mod metrics;
pub mod optim;
pub mod run;
pub mod scaler;
pub mod state;
pub mod synth;
pub mod trainer;

pub use batch::{ContinuationTargets, HostBatch};
pub use budget::BudgetClock;
pub use config::{
    EmaStatistics, FollowConfig, LossConfig, LossScaleConfig, LrConfig, OptimizerConfig, OptimizerKind, Schedule,
    TrainConfig, WindowConfig,
};
pub use error::{Result, TrainError};
pub use loader::{WaitInfo, WaitReason, WindowInfo};
pub use loss::{batch_metrics, BatchMetrics};
pub use metrics::{MetricsRecord, StepStats};
pub use run::{train, Progress, ResumeMode, RunPaths, TrainOptions, TrainSummary};
pub use trainer::{Mode, ModelInit, Trainer};
