//! The evaluator stage (`[arena] every_models` > 0): while the run goes on, each few new
//! checkpoints the newest plays model 0, its score and Elo going to `arena/results.jsonl`, the
//! events and TensorBoard (`tensorboard/arena/`). Inside `koma pipeline` it runs until the
//! pipeline stops; as its own process (`koma evaluate --run`, a cluster's evaluator job) it also
//! ends at the run's end, after evaluating the last model.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam::channel::Sender;
use koma_tensorboard::ScalarLog;

use crate::error::Result;
use crate::evaluation::{match_tensorboard, Contestant, MatchRunner};
use crate::events::Event;
use crate::run::Run;

/// How often the stage looks for new checkpoints and for the run's end.
const POLL: std::time::Duration = std::time::Duration::from_millis(500);

/// Every `[arena] every_models` new checkpoints (0: none), the newest plays `curve_games` against
/// model 0.
/// Returns when `stop` is set, or with `until_run_end` once the run is finished (`finished.json`
/// at or past `[run] steps`), when the last model has been evaluated. Returns whether the run
/// ended.
pub fn run(run: &Run, stop: Arc<AtomicBool>, events: &Sender<Event>, until_run_end: bool) -> Result<bool> {
    let (config, dir) = (&run.config, &run.dir);
    // 0: no evaluations along the way, only the last model's at the run's end.
    let every = config.arena.every_models;
    // Models that exist when the stage starts were evaluated by an earlier evaluator, or are
    // not worth a match each; a stage that starts at the run's end still rates the last one.
    let mut evaluated = dir.models()?.len();
    let mut tensorboard: Option<ScalarLog> = None;
    let mut evaluated_newest = None;
    while !stop.load(Ordering::SeqCst) {
        // Read before the models: a model published just before the end is seen below.
        let ended = until_run_end && run.end()?.is_some();
        let models = dir.models()?;
        let along_the_way = every > 0 && models.len() >= evaluated + every;
        let due = along_the_way || (ended && evaluated_newest != models.last().cloned());
        if models.len() >= 2 && due {
            evaluated = models.len();
            let (m0, newest) = (models[0].clone(), models[models.len() - 1].clone());
            evaluated_newest = Some(newest.clone());
            let mut arena = MatchRunner::new(dir, config, stop.clone())?;
            let summary = arena.play(
                &Contestant::Model(newest.clone()),
                &Contestant::Model(m0),
                config.arena.curve_games,
                config.arena.simulations,
                dir.arena_results(),
                false,
                &mut |_| {},
            )?;
            tracing::info!("evaluation: {}", summary.line());
            let mut values = vec![("arena/score_vs_model0", summary.score)];
            values.extend(summary.elo.map(|e| ("arena/elo_vs_model0", e)));
            tensorboard.get_or_insert_with(|| match_tensorboard(dir, config)).scalars(newest.step as i64, &values);
            let _ = events.send(Event::Arena { label: format!("{} vs model 0", newest.name()), summary });
            continue;
        }
        if ended {
            return Ok(true);
        }
        std::thread::sleep(POLL);
    }
    Ok(false)
}
