//! The trainer stage: koma-train's loop over the run's shards, from model 0 or the run's training
//! state (`train/state/`), publishing checkpoints into `models/` for self-play to follow.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use koma_train::{BudgetClock, ModelInit, Progress, ResumeMode, TrainOptions, TrainSummary};

use crate::error::{PipelineError, Result};
use crate::run::Run;

/// Trains until `[run] steps` (0: no limit) or `stop`; reaching the step limit marks the run
/// finished (`finished.json`, [`crate::RunDir::mark_finished`]), and a trainer that will train past
/// an earlier end takes that mark away first. `follow`: wait for self-play's samples
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
    run.reopen_if_training_past_its_end(follow)?;
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
    let summary = koma_train::train(&options, progress).map_err(PipelineError::Train)?;
    // The schedule's end (not a stop): every process that follows the run ends too.
    if steps > 0 && !summary.stopped && summary.final_step >= steps {
        run.dir.mark_finished(summary.final_step)?;
        tracing::info!(
            "the run is finished at step {}: {} tells self-play processes to end",
            summary.final_step,
            run.dir.finished_file().display()
        );
    }
    Ok(summary)
}
