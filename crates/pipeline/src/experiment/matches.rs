//! The games that rate the variants: a round robin of their final models, `greedy` and the other
//! references (`games` each pairing, into `EXPDIR/results.jsonl`), and the Elo-over-time curve:
//! a few intermediate checkpoints of each variant, evenly spaced in training time, against
//! `greedy` and against model 0 (`curve_games` each, into `EXPDIR/curve.jsonl`). Matches are
//! played a few pairs at a time and committed to the state after each piece, so a killed
//! experiment loses at most one piece.

use std::path::PathBuf;

use koma_arena::player::Budget;
use koma_arena::tournament::{pairings, Format};

use crate::error::Result;
use crate::evaluation::{Contestant, MatchRunner};
use crate::experiment::spec::{BudgetKind, Variant};
use crate::experiment::state::{remaining_chunks, CheckpointTime, VariantState};
use crate::experiment::{Context, ExperimentEvent, Flow};
use crate::players::checkpoint_player_name;
use crate::run_dir::{ModelRef, RunDir};

/// A match to play: its label (the key in the state), its sides, games and results file.
#[derive(Clone, Debug)]
pub struct PlannedMatch {
    pub label: String,
    pub a: Contestant,
    pub b: Contestant,
    pub games: usize,
    pub results: PathBuf,
}

impl PlannedMatch {
    pub fn pairs(&self) -> usize {
        self.games.div_ceil(2).max(1)
    }
}

/// A player of the experiment's matches: a checkpoint copied to `EXPDIR/players/` (its file stem
/// is its name) or a reference.
pub fn model_player(path: PathBuf) -> Contestant {
    Contestant::Model(ModelRef { step: 0, path })
}

/// The name a contestant has in results files.
pub fn player_name(c: &Contestant, simulations: u32) -> String {
    match c {
        Contestant::Model(m) => checkpoint_player_name(&m.path, Budget::Simulations(simulations)),
        Contestant::Reference(r) => {
            crate::players::reference_factory(r, simulations, koma_shogi::rules::GameRules::default())
                .ok()
                .and_then(|f| f(0).ok())
                .map(|p| p.name())
                .unwrap_or_else(|| r.clone())
        }
    }
}

/// Where a checkpoint lies on the budget's axis: minutes of its kind, or millions of
/// evaluations.
pub fn position(c: &CheckpointTime, kind: BudgetKind) -> f64 {
    match kind {
        BudgetKind::Wall => c.wall_seconds / 60.0,
        BudgetKind::Cpu => c.cpu_seconds / 60.0,
        BudgetKind::Evals => c.evals as f64 / 1e6,
    }
}

/// Up to `n` intermediate checkpoints (neither model 0 nor the final one) closest to the points
/// total·k/(n+1), k = 1..n, of the budget's axis: evenly spaced in training time (or work),
/// whatever speed the variant trained at.
pub fn curve_checkpoints(state: &VariantState, kind: BudgetKind, n: usize) -> Vec<CheckpointTime> {
    let Some(final_step) = state.final_step else { return Vec::new() };
    let inner: Vec<&CheckpointTime> = state.checkpoints.iter().filter(|c| c.step != 0 && c.step < final_step).collect();
    if inner.is_empty() || n == 0 {
        return Vec::new();
    }
    let total =
        position(state.checkpoints.iter().find(|c| c.step == final_step).unwrap_or(inner[inner.len() - 1]), kind);
    let mut picked: Vec<CheckpointTime> = Vec::new();
    for k in 1..=n {
        let target = total * k as f64 / (n + 1) as f64;
        let best = inner
            .iter()
            .min_by(|a, b| (position(a, kind) - target).abs().total_cmp(&(position(b, kind) - target).abs()))
            .expect("not empty");
        if !picked.iter().any(|p| p.step == best.step) {
            picked.push((*best).clone());
        }
    }
    picked.sort_by_key(|c| c.step);
    picked
}

/// The round robin: every pair of players once, in the order given (the arena's pairings).
pub fn round_robin(
    players: &[Contestant],
    games: usize,
    results: &std::path::Path,
    simulations: u32,
) -> Vec<PlannedMatch> {
    pairings(players.len(), Format::RoundRobin)
        .into_iter()
        .map(|(i, j)| {
            let (a, b) = (&players[i], &players[j]);
            PlannedMatch {
                label: format!("round robin: {} vs {}", player_name(a, simulations), player_name(b, simulations)),
                a: a.clone(),
                b: b.clone(),
                games,
                results: results.to_path_buf(),
            }
        })
        .collect()
}

/// Copies what the matches need into `EXPDIR/players/` and plans them: the round robin first,
/// then the curve (each model 0 against greedy, then each variant's picked checkpoints against
/// greedy and against its model 0).
pub fn plan(
    ctx: &Context,
    variants: &[Variant],
    model_zero_players: &[(PathBuf, Vec<usize>)],
) -> Result<Vec<PlannedMatch>> {
    let spec = ctx.spec;
    let sims = spec.simulations;
    let (kind, _) = spec.budget();
    let mut players: Vec<Contestant> = variants.iter().map(|v| model_player(ctx.dir.player(&v.name))).collect();
    players.extend(spec.reference_players().into_iter().map(Contestant::Reference));
    let mut plan = round_robin(&players, spec.games, &ctx.dir.results(), sims);
    if spec.curve_games == 0 || spec.curve_points == 0 {
        return Ok(plan);
    }
    let greedy = Contestant::Reference(crate::experiment::spec::ANCHOR.to_string());
    let curve = |a: &Contestant, b: &Contestant| PlannedMatch {
        label: format!("curve: {} vs {}", player_name(a, sims), player_name(b, sims)),
        a: a.clone(),
        b: b.clone(),
        games: spec.curve_games,
        results: ctx.dir.curve(),
    };
    for (path, _) in model_zero_players {
        plan.push(curve(&model_player(path.clone()), &greedy));
    }
    for (path, members) in model_zero_players {
        let m0 = model_player(path.clone());
        for &i in members {
            let v = &variants[i];
            let Some(state) = ctx.state.variants.get(&v.name) else { continue };
            let run = RunDir::new(&ctx.dir.run(&v.name));
            for c in curve_checkpoints(state, kind, spec.curve_points) {
                let file = ctx.dir.curve_player(&v.name, c.step);
                if !file.is_file() {
                    let source = run.models_dir().join(koma_nn::checkpoint::file_name(c.step));
                    crate::run_dir::copy_checkpoint(&source, &file)?;
                }
                let who = model_player(file);
                plan.push(curve(&who, &greedy));
                plan.push(curve(&who, &m0));
            }
        }
    }
    Ok(plan)
}

/// Plays what is left of `plan`, committing the state after each piece of at most
/// `2 × concurrency` pairs.
pub fn play(ctx: &mut Context, arena: &mut MatchRunner<'_>, plan: &[PlannedMatch]) -> Result<Flow> {
    for file in [ctx.dir.results(), ctx.dir.curve()] {
        ctx.state.truncate_uncommitted(&file)?;
    }
    let total: usize = plan.iter().map(|m| m.pairs() * 2).sum();
    let mut done: usize = plan.iter().map(|m| ctx.state.pairs_done(&m.label).min(m.pairs()) * 2).sum();
    let chunk = 2 * ctx.spec.concurrency.max(1);
    for (index, m) in plan.iter().enumerate() {
        let chunks = remaining_chunks(m.pairs(), ctx.state.pairs_done(&m.label), chunk);
        for (first, pairs) in chunks {
            if ctx.stop.load(std::sync::atomic::Ordering::SeqCst) {
                return Ok(Flow::Interrupted);
            }
            let base = done;
            let events = ctx.events;
            let label = m.label.clone();
            let count = plan.len();
            let in_match = first * 2;
            let match_games = m.pairs() * 2;
            let _ = events.send(ExperimentEvent::Match {
                label: label.clone(),
                index,
                count,
                played: in_match,
                games: match_games,
                done: base,
                total,
            });
            let summary = arena.play_from(
                first,
                &m.a,
                &m.b,
                pairs * 2,
                ctx.spec.simulations,
                m.results.clone(),
                true,
                &mut |played| {
                    let _ = events.send(ExperimentEvent::Match {
                        label: label.clone(),
                        index,
                        count,
                        played: in_match + played,
                        games: match_games,
                        done: base + played,
                        total,
                    });
                },
            )?;
            if summary.games < pairs * 2 {
                // Cut short by a stop: these games are played again on --resume.
                ctx.state.truncate_uncommitted(&m.results)?;
                return Ok(Flow::Interrupted);
            }
            done += pairs * 2;
            ctx.state.commit(&m.label, first + pairs, &m.results)?;
            ctx.save()?;
        }
        tracing::info!("{}: done", m.label);
    }
    Ok(Flow::Continue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeline(points: &[(u64, f64)]) -> VariantState {
        VariantState {
            checkpoints: points
                .iter()
                .map(|&(step, m)| CheckpointTime {
                    step,
                    wall_seconds: m * 30.0,
                    cpu_seconds: m * 60.0,
                    evals: (m * 1e6) as u64,
                })
                .collect(),
            final_step: points.last().map(|p| p.0),
            finished: true,
            ..VariantState::default()
        }
    }

    #[test]
    fn curve_checkpoints_are_evenly_spaced_in_time_not_steps() {
        // Fast early, slow later: steps 100..500 at minutes 1, 2, 3, 7, 8.5; final 600 at 10.
        let s = timeline(&[(0, 0.0), (100, 1.0), (200, 2.0), (300, 3.0), (400, 7.0), (500, 8.5), (600, 10.0)]);
        let picked: Vec<u64> = curve_checkpoints(&s, BudgetKind::Cpu, 4).iter().map(|c| c.step).collect();
        // Targets 2, 4, 6, 8 minutes.
        assert_eq!(picked, vec![200, 300, 400, 500]);
        let picked: Vec<u64> = curve_checkpoints(&s, BudgetKind::Cpu, 1).iter().map(|c| c.step).collect();
        assert_eq!(picked, vec![300]);
        // In evaluations (a million per minute here) the same.
        let picked: Vec<u64> = curve_checkpoints(&s, BudgetKind::Evals, 4).iter().map(|c| c.step).collect();
        assert_eq!(picked, vec![200, 300, 400, 500]);
        // Never model 0 or the final model; fewer when there are fewer.
        let s = timeline(&[(0, 0.0), (100, 1.0), (200, 2.0)]);
        assert_eq!(curve_checkpoints(&s, BudgetKind::Wall, 4).iter().map(|c| c.step).collect::<Vec<_>>(), vec![100]);
        let s = timeline(&[(0, 0.0), (100, 1.0)]);
        assert!(curve_checkpoints(&s, BudgetKind::Wall, 4).is_empty());
    }

    #[test]
    fn the_round_robin_has_every_pair_once() {
        let players: Vec<Contestant> = ["a", "b", "c"]
            .iter()
            .map(|n| model_player(PathBuf::from(format!("E/players/{n}.safetensors"))))
            .chain([Contestant::Reference("greedy".into())])
            .collect();
        let plan = round_robin(&players, 10, std::path::Path::new("E/results.jsonl"), 16);
        assert_eq!(plan.len(), 6);
        assert_eq!(plan[0].label, "round robin: a@16 vs b@16");
        assert_eq!(plan[5].label, "round robin: c@16 vs greedy");
        assert!(plan.iter().all(|m| m.pairs() == 5));
    }

    /// Growing an experiment's replicates (`--resume --replicates`) inserts players among the
    /// old ones: every old pairing keeps its label, so its games done are not played again.
    #[test]
    fn new_players_keep_the_old_pairings_labels() {
        let players = |names: &[&str]| -> Vec<Contestant> {
            names
                .iter()
                .map(|n| model_player(PathBuf::from(format!("E/players/{n}.safetensors"))))
                .chain([Contestant::Reference("greedy".into())])
                .collect()
        };
        let results = std::path::Path::new("E/results.jsonl");
        let labels = |p: &[Contestant]| round_robin(p, 8, results, 32).into_iter().map(|m| m.label).collect::<Vec<_>>();
        let old = labels(&players(&["a.r1", "a.r2", "b.r1", "b.r2"]));
        let grown = labels(&players(&["a.r1", "a.r2", "a.r3", "b.r1", "b.r2", "b.r3"]));
        assert_eq!(grown.len(), 21);
        assert!(old.iter().all(|l| grown.contains(l)), "{old:?} not all in {grown:?}");
        assert_eq!(grown.iter().filter(|l| l.contains(".r3")).count(), 11);
    }
}
