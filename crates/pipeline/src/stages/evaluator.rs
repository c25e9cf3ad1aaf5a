//! The evaluator stage (`[arena] every_models` > 0): while the run goes on, each few new
//! checkpoints the newest plays model 0, its score and Elo going to `arena/results.jsonl`, the
//! events and TensorBoard (`tensorboard/arena/`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam::channel::Sender;
use koma_tensorboard::ScalarLog;

use crate::error::Result;
use crate::evaluation::{match_tensorboard, Contestant, MatchRunner};
use crate::events::Event;
use crate::run::Run;

/// Every `[arena] every_models` new checkpoints, the newest plays `curve_games` against model 0.
/// Returns when `stop` is set.
pub fn run(run: &Run, stop: Arc<AtomicBool>, events: &Sender<Event>) -> Result<()> {
    let (config, run) = (&run.config, &run.dir);
    let every = config.arena.every_models;
    let mut evaluated = run.models()?.len();
    let mut tensorboard: Option<ScalarLog> = None;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let models = run.models()?;
        if models.len() < evaluated + every || models.len() < 2 {
            continue;
        }
        evaluated = models.len();
        let (m0, newest) = (models[0].clone(), models[models.len() - 1].clone());
        let mut arena = MatchRunner::new(run, config, stop.clone())?;
        let summary = arena.play(
            &Contestant::Model(newest.clone()),
            &Contestant::Model(m0),
            config.arena.curve_games,
            config.arena.simulations,
            run.arena_results(),
            false,
            &mut |_| {},
        )?;
        tracing::info!("evaluation: {}", summary.line());
        let mut values = vec![("arena/score_vs_model0", summary.score)];
        values.extend(summary.elo.map(|e| ("arena/elo_vs_model0", e)));
        tensorboard.get_or_insert_with(|| match_tensorboard(run, config)).scalars(newest.step as i64, &values);
        let _ = events.send(Event::Arena { label: format!("{} vs model 0", newest.name()), summary });
    }
    Ok(())
}
