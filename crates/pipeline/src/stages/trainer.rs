//! The trainer stage: koma-train's loop over the run's shards, from model 0 or the run's training
//! state (`train/state/`), publishing checkpoints into `models/` for self-play to follow.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use koma_train::{BudgetClock, ModelInit, Progress, ResumeMode, TrainOptions, TrainSummary};

use crate::error::{PipelineError, Result};
use crate::run::Run;

/// Trains until `[run] steps` (0: no limit) or `stop`. `follow`: wait for self-play's samples
/// (`[train.follow]`) rather than train on the shards there are. `budget`: the run's time limits,
/// for a learning rate that anneals over them. Resumes the run's training state when it has one;
/// model 0 is written first when the run has none.
pub fn run(
    run: &Run,
    follow: bool,
    budget: Option<Arc<dyn BudgetClock>>,
    stop: Arc<AtomicBool>,
    progress: &mut dyn FnMut(Progress),
) -> Result<TrainSummary> {
    let model_zero = run.model_zero()?;
    let steps = run.config.run.steps;
    let mut options = TrainOptions::new(
        run.dir.train_paths(),
        Some(ModelInit::Checkpoint(model_zero.path)),
        (steps > 0).then_some(steps),
        run.config.train_config(),
    );
    options.resume = ResumeMode::IfPresent;
    options.follow = follow;
    options.tensorboard = run.config.run.tensorboard;
    options.stop = Some(stop);
    options.budget = budget;
    koma_train::train(&options, progress).map_err(PipelineError::Train)
}
