//! The gatekeeper stage (`[gating] enabled`, AlphaGo Zero's evaluator): a new checkpoint becomes
//! the self-play model only when it beats the current one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam::channel::Sender;
use koma_tensorboard::ScalarLog;

use crate::error::Result;
use crate::evaluation::{match_tensorboard, Contestant, MatchRunner};
use crate::events::Event;
use crate::run::Run;

/// The gatekeeper: makes model 0 the self-play model, then plays each new checkpoint against the
/// current one and makes it current only if it scores at least `[gating] min_score`. Writes
/// `models/current.json` (self-play follows it) and `arena/gating.jsonl`.
pub fn run(run: &Run, stop: Arc<AtomicBool>, events: &Sender<Event>) -> Result<()> {
    let (config, run) = (&run.config, &run.dir);
    let g = &config.gating;
    if !run.has_current() {
        if let Some(m0) = run.model_zero()? {
            run.set_current(&m0)?;
        }
    }
    let mut last_tried = run.current_model()?.map(|m| m.step).unwrap_or(0);
    let mut tensorboard: Option<ScalarLog> = None;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(std::time::Duration::from_millis(500));
        let (Some(newest), Some(current)) = (run.newest_model()?, run.current_model()?) else { continue };
        if newest.step <= current.step || newest.step <= last_tried {
            continue;
        }
        last_tried = newest.step;
        let mut arena = MatchRunner::new(run, config, stop.clone())?;
        let summary = arena.play(
            &Contestant::Model(newest.clone()),
            &Contestant::Model(current.clone()),
            g.games,
            g.simulations,
            run.gating_results(),
            false,
            &mut |_| {},
        )?;
        if summary.games < g.games.div_ceil(2) * 2 {
            break; // cut short by the stop: no verdict
        }
        let accepted = summary.score >= g.min_score;
        if accepted {
            run.set_current(&newest)?;
        }
        tracing::info!("gating: {} → {}", summary.line(), if accepted { "accepted" } else { "rejected" });
        tensorboard.get_or_insert_with(|| match_tensorboard(run, config)).scalars(
            newest.step as i64,
            &[("gating/score", summary.score), ("gating/accepted", accepted as u8 as f64)],
        );
        let _ = events.send(Event::Gating { summary, accepted });
    }
    Ok(())
}
