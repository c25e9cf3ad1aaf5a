//! Matches between a run's checkpoints and the reference players ([`MatchRunner`], used by the
//! gatekeeper and evaluator stages and by `koma experiment`), and the end-of-run report with its
//! Elo curve. Results go to `RUN/arena/results.jsonl` (gating to `arena/gating.jsonl`), games to
//! `RUN/arena/games/`, the fitted ratings to `RUN/arena/ratings.json`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crossbeam::channel::Sender;
use koma_arena::matches::{run_match, MatchConfig, PlayerFactory};
use koma_arena::player::Budget;
use koma_arena::ratings::{fit, read_results, step_of_player};
use koma_base::host::host_name;
use koma_tensorboard::ScalarLog;
use serde::{Deserialize, Serialize};

use crate::config::PipelineConfig;
use crate::error::{PipelineError, Result};
use crate::events::{Event, MatchSummary};
use crate::players::{checkpoint_factory, checkpoint_player_name, reference_factory, PlaySearch};
use crate::run_dir::{ModelRef, RunDir};

/// One side of a match.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Contestant {
    Model(ModelRef),
    /// A built-in reference player (`greedy`, …).
    Reference(String),
}

impl Contestant {
    pub fn describe(&self) -> String {
        match self {
            Contestant::Model(m) => m.name(),
            Contestant::Reference(r) => r.clone(),
        }
    }
}

/// Player factories of one match setting, each checkpoint loaded once.
pub struct MatchRunner<'a> {
    run: &'a RunDir,
    config: &'a PipelineConfig,
    factories: HashMap<Contestant, PlayerFactory>,
    openings: Vec<koma_shogi::Position>,
    pub cancel: Arc<AtomicBool>,
}

impl<'a> MatchRunner<'a> {
    pub fn new(run: &'a RunDir, config: &'a PipelineConfig, cancel: Arc<AtomicBool>) -> Result<MatchRunner<'a>> {
        let openings = config.arena.openings.positions().to_vec();
        Ok(MatchRunner { run, config, factories: HashMap::new(), openings, cancel })
    }

    fn factory(&mut self, who: &Contestant, simulations: u32) -> Result<PlayerFactory> {
        if let Some(f) = self.factories.get(who) {
            return Ok(f.clone());
        }
        let rules = self.config.arena_rules();
        let f = match who {
            Contestant::Model(m) => checkpoint_factory(
                &m.path,
                Budget::Simulations(simulations),
                PlaySearch::default(),
                rules,
                &self.config.evaluation_options()?,
            )?,
            Contestant::Reference(r) => reference_factory(r, simulations, rules).map_err(|message| {
                PipelineError::Config { origin: "[arena] references".into(), message: message.to_string() }
            })?,
        };
        self.factories.insert(who.clone(), f.clone());
        Ok(f)
    }

    /// Plays `games` games (colour-swapped pairs over the opening suite) of `a` against `b`,
    /// appending results to `results`. Games are saved under `arena/games/` when `keep_games`.
    #[allow(clippy::too_many_arguments)]
    pub fn play(
        &mut self,
        a: &Contestant,
        b: &Contestant,
        games: usize,
        simulations: u32,
        results: PathBuf,
        keep_games: bool,
        on_game: &mut dyn FnMut(usize),
    ) -> Result<MatchSummary> {
        self.play_from(0, a, b, games, simulations, results, keep_games, on_game)
    }

    /// [`MatchRunner::play`] as if `first_pair` pairs had been played already: pair k of this call
    /// starts from the opening pair `first_pair + k` would. A long match played in pieces (and
    /// resumed after a crash, as `koma experiment` does) so goes through the suite like one match.
    #[allow(clippy::too_many_arguments)]
    pub fn play_from(
        &mut self,
        first_pair: usize,
        a: &Contestant,
        b: &Contestant,
        games: usize,
        simulations: u32,
        results: PathBuf,
        keep_games: bool,
        on_game: &mut dyn FnMut(usize),
    ) -> Result<MatchSummary> {
        let fa = self.factory(a, simulations)?;
        let fb = self.factory(b, simulations)?;
        let n = self.openings.len();
        let openings = (0..n).map(|k| self.openings[(first_pair + k) % n].clone()).collect();
        let match_config = MatchConfig {
            games,
            concurrency: self.config.arena.concurrency.max(1),
            rules: self.config.arena_rules(),
            openings,
            sprt: None,
            results: Some(results),
            records: keep_games.then(|| self.run.arena_games()),
            cancel: Some(self.cancel.clone()),
        };
        let state = run_match(fa, fb, &match_config, &mut |_, s| on_game(s.played))?;
        Ok(MatchSummary::from_state(&state))
    }
}

/// A player's fitted rating; `step` is set for checkpoints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatingPoint {
    pub player: String,
    pub elo: f64,
    pub margin: f64,
    pub games: f64,
    pub points: f64,
    pub step: Option<u64>,
}

/// The end-of-run report.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// (what the match measures, its result), the headline matches first.
    pub matches: Vec<(String, MatchSummary)>,
    /// Bradley–Terry ratings over every game in arena/results.jsonl, model 0 = 0 Elo.
    pub ratings: Vec<RatingPoint>,
    /// True when the report was cut short (Ctrl-C).
    pub cancelled: bool,
}

/// Fits ratings over `RUN/arena/results.jsonl` anchored at model 0 and writes `arena/ratings.json`.
pub fn update_ratings(run: &RunDir, config: &PipelineConfig) -> Result<Vec<RatingPoint>> {
    let results = run.arena_results();
    if !results.is_file() {
        return Ok(Vec::new());
    }
    let games = read_results(&results)?;
    let anchor = match run.model_zero()? {
        Some(m0) => checkpoint_player_name(&m0.path, Budget::Simulations(config.arena.simulations)),
        None => String::new(),
    };
    let ratings: Vec<RatingPoint> = fit(&games, &anchor)
        .into_iter()
        .map(|r| RatingPoint {
            step: step_of_player(&r.player),
            player: r.player,
            elo: r.elo,
            margin: r.margin,
            games: r.games,
            points: r.points,
        })
        .collect();
    let text = serde_json::to_string_pretty(&ratings).expect("serialisable");
    koma_base::durable::write(&run.ratings_file(), text.as_bytes())?;
    // The curve is refit over all games each time: its TensorBoard run is replaced as a whole.
    let mut tensorboard =
        ScalarLog::replace(&run.tensorboard_dir().join("ratings"), &host_name(), config.run.tensorboard);
    let mut curve: Vec<&RatingPoint> = ratings.iter().filter(|r| r.step.is_some()).collect();
    curve.sort_by_key(|r| r.step);
    for r in curve {
        tensorboard.scalars(r.step.unwrap_or(0) as i64, &[("arena/elo", r.elo), ("arena/elo_margin", r.margin)]);
    }
    Ok(ratings)
}

/// The TensorBoard run of the matches played while the run goes on (evaluations, gating).
pub(crate) fn match_tensorboard(run: &RunDir, config: &PipelineConfig) -> ScalarLog {
    ScalarLog::open(&run.tensorboard_dir().join("arena"), &host_name(), config.run.tensorboard)
}

/// Up to `n` checkpoints strictly between the first and the last, evenly spaced by position.
fn spaced(models: &[ModelRef], n: usize) -> Vec<ModelRef> {
    let inner = if models.len() > 2 { &models[1..models.len() - 1] } else { &[][..] };
    if inner.len() <= n {
        return inner.to_vec();
    }
    let mut picked: Vec<ModelRef> = (0..n).map(|i| inner[((i + 1) * inner.len()) / (n + 1)].clone()).collect();
    picked.dedup();
    picked
}

/// The matches of the report: the last model against model 0 and each reference (`games`
/// each), then the Elo curve (earlier checkpoints and model 0 against model 0 and the first
/// reference, `curve_games` each).
fn report_plan(models: &[ModelRef], config: &PipelineConfig) -> Vec<(String, Contestant, Contestant, usize)> {
    let a = &config.arena;
    let (Some(first), Some(last)) = (models.first(), models.last()) else { return Vec::new() };
    let m0 = Contestant::Model(first.clone());
    let newest = Contestant::Model(last.clone());
    let mut plan = Vec::new();
    if a.games > 0 {
        plan.push((format!("last model vs model 0 ({} games)", a.games), newest.clone(), m0.clone(), a.games));
        for r in &a.references {
            plan.push((
                format!("last model vs {r} ({} games)", a.games),
                newest.clone(),
                Contestant::Reference(r.clone()),
                a.games,
            ));
        }
    }
    if a.curve_games > 0 {
        if let Some(reference) = a.references.first() {
            plan.push((
                format!("Elo curve: model 0 vs {reference}"),
                m0.clone(),
                Contestant::Reference(reference.clone()),
                a.curve_games,
            ));
        }
        for m in spaced(models, a.curve_models) {
            let who = Contestant::Model(m.clone());
            plan.push((format!("Elo curve: {} vs model 0", m.name()), who.clone(), m0.clone(), a.curve_games));
            if let Some(reference) = a.references.first() {
                plan.push((
                    format!("Elo curve: {} vs {reference}", m.name()),
                    who,
                    Contestant::Reference(reference.clone()),
                    a.curve_games,
                ));
            }
        }
    }
    plan
}

/// Plays the report's matches (see [`report_plan`]) and fits the ratings. None when the run has
/// no trained checkpoint yet. `cancel` cuts it short: finished games still count.
pub fn report(
    run: &RunDir,
    config: &PipelineConfig,
    cancel: Arc<AtomicBool>,
    events: &Sender<Event>,
) -> Result<Option<Report>> {
    let models = run.models()?;
    if models.len() < 2 {
        let _ = events.send(Event::Note("no trained checkpoint yet: no arena report".into()));
        return Ok(None);
    }
    let plan = report_plan(&models, config);
    let mut arena = MatchRunner::new(run, config, cancel.clone())?;
    let mut report = Report::default();
    for (done, (label, a, b, games)) in plan.iter().enumerate() {
        if cancel.load(Ordering::SeqCst) {
            report.cancelled = true;
            break;
        }
        let planned = plan.len();
        let _ = events.send(Event::ReportProgress { done, planned, current: label.clone(), games: 0 });
        let summary = arena.play(a, b, *games, config.arena.simulations, run.arena_results(), true, &mut |played| {
            let _ = events.send(Event::ReportProgress { done, planned, current: label.clone(), games: played });
        })?;
        tracing::info!("report: {label}: {}", summary.line());
        let _ = events.send(Event::Arena { label: label.clone(), summary: summary.clone() });
        report.matches.push((label.clone(), summary));
    }
    report.cancelled |= cancel.load(Ordering::SeqCst);
    report.ratings = update_ratings(run, config)?;
    Ok(Some(report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn models(n: u64) -> Vec<ModelRef> {
        (0..n)
            .map(|i| ModelRef {
                step: i * 100,
                path: PathBuf::from(format!("models/model-{:08}.safetensors", i * 100)),
            })
            .collect()
    }

    #[test]
    fn curve_checkpoints_are_evenly_spaced_and_exclude_the_ends() {
        let m = models(11);
        let picked: Vec<u64> = spaced(&m, 3).iter().map(|m| m.step).collect();
        assert_eq!(picked, vec![300, 500, 700]);
        assert_eq!(spaced(&m[..3], 5).len(), 1);
        assert!(spaced(&m[..2], 5).is_empty());
    }

    #[test]
    fn report_plans_headline_matches_first() {
        let config = PipelineConfig::parse(
            "[arena]\ngames = 10\nreferences = [\"greedy\", \"random\"]\ncurve_models = 2\ncurve_games = 4\n",
            "x",
        )
        .unwrap();
        let plan = report_plan(&models(5), &config);
        let labels: Vec<&str> = plan.iter().map(|p| p.0.as_str()).collect();
        assert!(labels[0].starts_with("last model vs model 0"), "{labels:?}");
        assert!(labels[1].contains("greedy") && labels[2].contains("random"), "{labels:?}");
        // model 0 vs greedy, then 2 curve checkpoints × (model 0, greedy).
        assert_eq!(plan.len(), 3 + 1 + 4);
        assert!(plan.iter().skip(3).all(|p| p.3 == 4));
    }
}
