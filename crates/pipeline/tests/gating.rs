//! The gatekeeper on real (untrained) networks: it makes model 0 current, plays the new
//! checkpoint against it, records the games, and moves `models/current.json` only on acceptance;
//! self-play then follows that file rather than the newest checkpoint.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use koma_nn::{ModelConfig, Network, RunOptions, TrainingInfo};
use koma_pipeline::stages::gatekeeper;
use koma_pipeline::{Event, ModelRef, PipelineConfig, Run, RunDir};

fn small_model() -> ModelConfig {
    ModelConfig { blocks: 1, channels: 8, ..ModelConfig::tiny() }
}

fn write_model(run: &RunDir, step: u64, seed: u64) -> ModelRef {
    let path = run.models_dir().join(koma_nn::checkpoint::file_name(step));
    let mut net = Network::new(&small_model(), &RunOptions::cpu(), Some(seed)).unwrap();
    net.save(&path, &TrainingInfo { step, samples_seen: 0, parent: None }).unwrap();
    ModelRef { step, path }
}

/// Runs the gatekeeper until its first verdict on a candidate (model 10, weights from
/// `candidate_seed`; model 0 has seed 1); returns the verdict and the run.
fn gate(min_score: f64, candidate_seed: u64) -> (bool, ModelRef, ModelRef, RunDir, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[run]\nthreads = 1\nopenings = \"\"\n[gating]\nenabled = true\ngames = 2\nsimulations = 4\nconcurrency = 1\nmin_score = {min_score}\n[arena]\nmax_plies = 24\nopenings = \"\"\n"
    );
    let run = RunDir::new(dir.path());
    run.create(&text).unwrap();
    let config = PipelineConfig::parse(&text, "test").unwrap();
    let opened = Run { dir: run.clone(), config, config_origin: "test".into() };
    let m0 = write_model(&run, 0, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let (sender, events) = crossbeam::channel::unbounded();
    let accepted = std::thread::scope(|s| {
        let keeper = s.spawn(|| gatekeeper::run(&opened, stop.clone(), &sender));
        // Model 0 becomes current before any candidate exists.
        let started = Instant::now();
        while !run.has_current() {
            assert!(started.elapsed() < Duration::from_secs(30), "no current.json");
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(run.current_model().unwrap(), Some(m0.clone()));
        write_model(&run, 10, candidate_seed);
        let verdict = loop {
            match events.recv_timeout(Duration::from_secs(120)).expect("a gating verdict") {
                Event::Gating { summary, accepted } => break (summary, accepted),
                _ => continue,
            }
        };
        stop.store(true, Ordering::SeqCst);
        keeper.join().unwrap().unwrap();
        let (summary, accepted) = verdict;
        assert_eq!(summary.games, 2);
        assert_eq!(summary.a, "model-00000010@4");
        assert_eq!(accepted, summary.score >= min_score);
        if candidate_seed == 1 {
            // The same network on both sides, colours swapped from the same start: the games
            // mirror each other, so the candidate scores exactly one half.
            assert_eq!(summary.score, 0.5);
        }
        accepted
    });
    let m10 = ModelRef { step: 10, path: run.models_dir().join(koma_nn::checkpoint::file_name(10)) };
    (accepted, m0, m10, run, dir)
}

#[test]
fn an_accepted_candidate_becomes_the_self_play_model() {
    let (accepted, _m0, m10, run, _dir) = gate(0.5, 1);
    assert!(accepted);
    assert_eq!(run.current_model().unwrap(), Some(m10));
    let lines = std::fs::read_to_string(run.arena_dir().join("gating.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 2);
}

#[test]
fn a_rejected_candidate_leaves_model_zero_in_place() {
    let (accepted, m0, m10, run, _dir) = gate(0.55, 1);
    assert!(!accepted);
    assert_eq!(run.current_model().unwrap(), Some(m0));
    // Self-play follows current.json, not the newest checkpoint.
    assert_eq!(run.newest_model().unwrap(), Some(m10));
}
