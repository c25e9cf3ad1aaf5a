//! Self-play under the shipped configs gives a usable training signal, checked on CPU with a
//! cheap deterministic evaluator: games differ from each other and between seeds (gpu-small's
//! Gumbel root once played near-identical games), and a full search's policy target holds only
//! its own visits (tree reuse once mixed in the visits of earlier cheap searches).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use koma_data::GameSamples;
use koma_mcts::{EvalError, Evaluation, Evaluator, EvaluatorSlot, RootSelection};
use koma_pipeline::PipelineConfig;
use koma_selfplay::{run, InferenceDevice, SelfPlayConfig, StartPositions};
use koma_shogi::Position;

/// Priors and values from the position's hash: deterministic, uneven, the same every run.
struct HashNet;

impl Evaluator for HashNet {
    fn evaluate(&self, positions: &[&Position]) -> Result<Vec<Evaluation>, EvalError> {
        Ok(positions
            .iter()
            .map(|p| {
                let n = p.legal_moves().len();
                let h = p.hash();
                let priors: Vec<f32> = (0..n).map(|i| 1.0 + ((h >> (i % 48)) & 7) as f32).collect();
                let sum: f32 = priors.iter().sum();
                let v = ((h % 1001) as f32 / 1000.0 - 0.5) * 0.6;
                Evaluation {
                    priors: priors.iter().map(|x| x / sum).collect(),
                    wdl: [(0.9 + v) / 2.0, 0.1, (0.9 - v) / 2.0],
                }
            })
            .collect())
    }
}

fn shipped(name: &str) -> PipelineConfig {
    let path = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into()))
        .join("../../configs")
        .join(format!("{name}.toml"));
    PipelineConfig::from_file(&path).unwrap()
}

fn play(config: &SelfPlayConfig, games: usize) -> Vec<GameSamples> {
    let (sender, receiver) = crossbeam::channel::unbounded();
    let slot = EvaluatorSlot::new(Arc::new(HashNet), "hash");
    let stop = Arc::new(AtomicBool::new(false));
    run(
        config,
        StartPositions::new(0.0, 0.0),
        &[InferenceDevice::cpu(slot)],
        games,
        sender,
        stop,
        Duration::from_secs(60),
        &mut |_| {},
    )
    .unwrap();
    receiver.try_iter().collect()
}

/// gpu-small's self-play settings, scaled down to run in a second; games from the start position.
fn small(config: &SelfPlayConfig, seed: u64) -> SelfPlayConfig {
    SelfPlayConfig {
        workers: 1,
        games_per_worker: 4,
        simulations: 16,
        cheap_simulations: 4,
        max_plies: 40,
        openings_fraction: 0.0,
        handicap_fraction: 0.0,
        seed: Some(seed),
        ..config.clone()
    }
}

#[test]
fn gpu_small_self_play_games_differ_within_a_run_and_between_seeds() {
    let config = shipped("gpu-small").selfplay;
    assert!(matches!(config.search.root, RootSelection::Gumbel { .. }), "the test is about the Gumbel root");
    config.validate().unwrap();
    let openings = |games: &[GameSamples]| -> Vec<Vec<String>> {
        games.iter().map(|g| g.moves.iter().take(12).map(|m| m.to_usi()).collect()).collect()
    };
    let first = openings(&play(&small(&config, 1), 6));
    let second = openings(&play(&small(&config, 2), 6));
    let mut all = first.clone();
    all.extend(second.iter().cloned());
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), all.len(), "repeated openings among {all:?}");
    assert_eq!(first.len(), 6);
    // The value targets are probabilities that sum to one, and not all draws.
    for g in play(&small(&config, 3), 2) {
        for s in &g.samples {
            let [w, d, l] = s.root_wdl;
            assert!(
                (w + d + l - 1.0).abs() < 1e-3 && [w, d, l].iter().all(|x| (0.0..=1.0).contains(x)),
                "{:?}",
                s.root_wdl
            );
        }
    }
}

#[test]
fn a_full_search_target_holds_only_that_searchs_visits() {
    // A PUCT root (visit-count targets): 8 simulations, one of which evaluates the root, leave 7 child visits.
    let mut config = small(&shipped("tiny-cpu").selfplay, 5);
    config.search.root = RootSelection::Puct;
    config.simulations = 8;
    config.cheap_simulations = 3;
    config.full_search_fraction = 0.5;
    config.search.mate_plies = 0;
    config.resign_value = -2.0;
    config.validate().unwrap();
    let games = play(&config, 4);
    let mut checked = 0;
    for g in &games {
        for s in &g.samples {
            for &(mv, p) in &s.policy {
                let visits = p * 7.0;
                assert!(
                    (visits - visits.round()).abs() < 1e-3,
                    "{mv} has share {p}: not a count out of 7 at ply {}",
                    s.ply
                );
            }
            checked += 1;
        }
    }
    assert!(checked > 20, "{checked} samples");
}
