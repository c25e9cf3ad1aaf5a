//! The trainer end to end on shards of real random games: it learns learnable targets, the f16
//! (loss scaling) and bf16 code paths run, follow mode waits for data and goes on, a stop flag
//! stops cleanly, and misuse is refused clearly.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use koma_data::{write_shard, ShardReader};
use koma_nn::checkpoint::{self, TrainingInfo};
use koma_nn::{DeviceSpec, ModelConfig, Network, Precision, RunOptions};
use koma_train::metrics::read_metrics;
use koma_train::synth::{random_games, SynthPolicy};
use koma_train::{
    batch_metrics, train, HostBatch, ModelInit, Progress, ResumeMode, RunPaths, TrainConfig, TrainError, TrainOptions,
    WaitReason, WindowConfig,
};

fn small_model() -> ModelConfig {
    ModelConfig {
        blocks: 2,
        channels: 32,
        policy_channels: 16,
        value_channels: 4,
        value_hidden: 32,
        ..ModelConfig::tiny()
    }
}

/// The smallest network the tests that only exercise the machinery train.
fn micro_model() -> ModelConfig {
    ModelConfig {
        blocks: 1,
        channels: 8,
        policy_channels: 4,
        value_channels: 2,
        value_hidden: 8,
        ..ModelConfig::tiny()
    }
}

fn write_games(dir: &Path, games: usize, seed: u64, policy: SynthPolicy, per_shard: usize, prefix: &str) {
    std::fs::create_dir_all(dir).unwrap();
    for (i, chunk) in random_games(games, seed, policy).chunks(per_shard).enumerate() {
        write_shard(&dir.join(format!("{prefix}-{i:06}.h5")), chunk).unwrap();
    }
}

fn cpu_config() -> TrainConfig {
    TrainConfig { device: DeviceSpec::Cpu.into(), precision: Precision::F32, seed: 5, ..TrainConfig::default() }
}

#[test]
fn loss_falls_and_policy_learns_the_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let shards = run.join("selfplay");
    write_games(&shards, 48, 1, SynthPolicy::MinLabel, 16, "sp");

    // An initial checkpoint, as `koma init` would write it.
    let models = run.join("models");
    std::fs::create_dir_all(&models).unwrap();
    let init_path = models.join(checkpoint::file_name(0));
    let mut init = Network::new(&small_model(), &RunOptions::cpu(), Some(3)).unwrap();
    init.save(&init_path, &TrainingInfo::default()).unwrap();

    let mut config = cpu_config();
    config.batch_size = 64;
    config.checkpoint_every = 50;
    config.log_every = 10;
    config.lr.base = 0.05;
    config.lr.warmup_steps = 10;
    config.lr.schedule = koma_train::Schedule::Cosine;
    config.lr.decay_steps = 110;
    config.lr.min_factor = 0.1;
    config.optimizer.grad_clip_norm = 10.0;
    let paths = RunPaths::resolve(&run, None);
    assert_eq!(paths.shards_dir, shards);
    let options =
        TrainOptions::new(paths.clone(), Some(ModelInit::Checkpoint(init_path.clone())), Some(120), config.clone());
    let started = std::time::Instant::now();
    let mut steps_seen = 0;
    let summary = train(&options, &mut |p| {
        if let Progress::Step(_) = p {
            steps_seen += 1
        }
    })
    .unwrap();
    eprintln!("120 steps in {:.1}s: {summary:?}", started.elapsed().as_secs_f64());
    assert_eq!((summary.start_step, summary.final_step, steps_seen), (0, 120, 120));
    assert_eq!(summary.samples_seen, 120 * 64);
    let names: Vec<String> =
        summary.checkpoints.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    assert_eq!(names, ["model-00000050.safetensors", "model-00000100.safetensors", "model-00000120.safetensors"]);

    // Lineage and counters in the sidecars.
    let meta = checkpoint::read_meta(&models.join(checkpoint::file_name(50))).unwrap();
    assert_eq!((meta.step, meta.samples_seen, meta.parent.as_deref()), (50, 3200, Some("model-00000000.safetensors")));
    let meta = checkpoint::read_meta(&models.join(checkpoint::file_name(120))).unwrap();
    assert_eq!(meta.parent.as_deref(), Some("model-00000100.safetensors"));

    // Metrics: a line every 10 steps, losses falling.
    let m = read_metrics(&paths.metrics).unwrap();
    assert_eq!(m.iter().map(|r| r.step).collect::<Vec<_>>(), (1..=12).map(|i| i * 10).collect::<Vec<_>>());
    let (first, last) = (&m[0], m.last().unwrap());
    eprintln!("first {first:?}\nlast {last:?}");
    assert!(last.policy_loss < first.policy_loss - 1.0, "policy loss {} -> {}", first.policy_loss, last.policy_loss);
    assert!(last.value_loss < first.value_loss, "value loss {} -> {}", first.value_loss, last.value_loss);
    assert!(last.policy_top1 > 0.5, "{last:?}");
    assert!(m.iter().all(|r| r.samples_per_second > 0.0 && r.grad_norm > 0.0));

    // The trained net agrees with the targets far more than the initial one (inference mode, all
    // samples of the data set).
    let mut samples = Vec::new();
    for e in std::fs::read_dir(&shards).unwrap() {
        samples.extend(ShardReader::open(&e.unwrap().path()).unwrap().read_all().unwrap());
    }
    let batch = HostBatch::from_samples(&samples, &config.loss);
    let before = batch_metrics(&init, &batch, &config.loss);
    let after = batch_metrics(
        &Network::load(summary.last_checkpoint.as_ref().unwrap(), &RunOptions::cpu()).unwrap(),
        &batch,
        &config.loss,
    );
    eprintln!("{} samples: before {before:?}\nafter {after:?}", samples.len());
    assert!(before.policy_top1 < 0.1, "{before:?}");
    assert!(after.policy_top1 > 0.6 && after.policy_top1 > 5.0 * before.policy_top1, "{before:?} {after:?}");
    assert!(after.policy_loss < before.policy_loss - 2.0);
    assert!(after.value_accuracy > before.value_accuracy && after.value_accuracy > 0.8, "{before:?} {after:?}");

    // The run directory now holds a state: a fresh start there is refused, resuming at the target
    // does nothing.
    let err = train(&options, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("a training state (step 120) is already there") && err.contains("--resume"), "{err}");
    let mut again = options.clone();
    again.resume = ResumeMode::Required;
    let s = train(&again, &mut |_| {}).unwrap();
    assert_eq!((s.start_step, s.final_step, s.steps), (120, 120, 0));
}

#[test]
fn half_precision_paths_run_on_the_cpu() {
    let tmp = tempfile::tempdir().unwrap();
    let shards = tmp.path().join("shards");
    write_games(&shards, 6, 2, SynthPolicy::Random, 3, "d");
    for precision in [Precision::F16, Precision::Bf16] {
        let run = tmp.path().join(format!("{precision}"));
        let mut config = cpu_config();
        config.precision = precision;
        config.batch_size = 16;
        config.checkpoint_every = 4;
        config.log_every = 2;
        config.loss_scale.init = 1024.0;
        config.loss_scale.growth_interval = 3;
        let model = micro_model();
        let mut options = TrainOptions::new(
            RunPaths::new(run.clone(), shards.clone()),
            Some(ModelInit::Fresh(model)),
            Some(6),
            config.clone(),
        );
        // Refused on the CPU unless explicitly allowed.
        let err = train(&options, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("CUDA"), "{err}");
        options.allow_cpu_half = true;
        let mut stats = Vec::new();
        let summary = train(&options, &mut |p| {
            if let Progress::Step(s) = p {
                stats.push(s.clone())
            }
        })
        .unwrap();
        assert_eq!(summary.precision, precision.to_string());
        assert_eq!(summary.final_step, 6);
        assert!(stats.iter().all(|s| s.loss.is_finite() && !s.skipped));
        match precision {
            Precision::F16 => {
                // Scale grows after every 3 good steps: 1024 → 2048 at step 3, 4096 at step 6.
                let scales: Vec<f64> = stats.iter().map(|s| s.loss_scale.unwrap()).collect();
                assert_eq!(scales, [1024.0, 1024.0, 2048.0, 2048.0, 2048.0, 4096.0]);
                let state: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(run.join("train/state/state.json")).unwrap())
                        .unwrap();
                assert_eq!(state["loss_scaler"]["scale"], 4096.0);
            }
            _ => assert!(stats.iter().all(|s| s.loss_scale.is_none())),
        }
        // The checkpoint is float32 and loads.
        let net = Network::load(summary.last_checkpoint.as_ref().unwrap(), &RunOptions::cpu()).unwrap();
        assert_eq!(net.kind(), tch::Kind::Float);
        // Resuming works in this precision too.
        options.resume = ResumeMode::Required;
        options.steps = Some(8);
        assert_eq!(train(&options, &mut |_| {}).unwrap().final_step, 8);
    }
}

#[test]
fn follow_waits_for_data_and_for_the_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let shards = run.join("selfplay");
    std::fs::create_dir_all(&shards).unwrap();
    let mut config = cpu_config();
    config.batch_size = 32;
    config.checkpoint_every = 1000;
    config.window = WindowConfig { size: 5000, ..WindowConfig::default() };
    config.follow.min_window_samples = 200;
    config.follow.samples_per_new_sample = 1.0;
    config.follow.poll_seconds = 0.05;
    config.follow.refresh_every_batches = 1;
    let model = micro_model();
    let mut options = TrainOptions::new(RunPaths::resolve(&run, None), Some(ModelInit::Fresh(model)), None, config);
    options.follow = true;
    options.resume = ResumeMode::IfPresent;
    let stop = Arc::new(AtomicBool::new(false));
    options.stop = Some(stop.clone());
    let mut reasons = Vec::new();
    let mut written = 0u64;
    let mut steps = 0;
    let mut total_at_step = Vec::new();
    let produced = |dir: &Path| -> usize {
        std::fs::read_dir(dir).unwrap().map(|e| ShardReader::open(&e.unwrap().path()).unwrap().len()).sum()
    };
    let mut expected_total = 0;
    let summary = train(&options, &mut |p| match p {
        Progress::Waiting(w) => {
            if reasons.last() != Some(&w.reason) {
                reasons.push(w.reason);
            }
            if w.total_samples < expected_total {
                // Sent before the loader saw the last shard (waits queue up while this thread is
                // busy): that shard answers it.
                return;
            }
            if written < 3 {
                // Self-play delivers a shard.
                write_games(&shards, 8, 10 + written, SynthPolicy::Random, 8, &format!("w{written}"));
                written += 1;
                expected_total = produced(&shards);
            } else {
                stop.store(true, Ordering::SeqCst);
            }
        }
        Progress::Step(s) => {
            steps += 1;
            total_at_step.push(s.samples_seen);
        }
        _ => {}
    })
    .unwrap();
    assert_eq!(reasons.first(), Some(&WaitReason::WindowTooSmall));
    assert!(reasons.contains(&WaitReason::AheadOfData), "{reasons:?}");
    assert!(summary.stopped && summary.steps > 0 && summary.steps == steps);
    // Never more training samples than samples produced (ratio 1).
    let produced = produced(&shards);
    assert!(summary.samples_seen as usize <= produced, "{} > {produced}", summary.samples_seen);
    // Stopping wrote a checkpoint and the state at the last step, and --resume (IfPresent) picks it up.
    assert!(summary.last_checkpoint.as_ref().unwrap().ends_with(checkpoint::file_name(summary.final_step)));
    stop.store(false, Ordering::SeqCst);
    options.follow = false;
    options.steps = Some(summary.final_step + 2);
    let again = train(&options, &mut |_| {}).unwrap();
    assert!(again.resumed);
    assert_eq!(again.final_step, summary.final_step + 2);
}

#[test]
fn misuse_is_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let tiny = ModelInit::parse("tiny").unwrap();
    assert_eq!(tiny, ModelInit::Fresh(ModelConfig::tiny()));
    assert!(matches!(ModelInit::parse("x/model-1.safetensors").unwrap(), ModelInit::Checkpoint(_)));
    assert!(ModelInit::parse("no-such-preset").is_err());

    let options = TrainOptions::new(RunPaths::resolve(&empty, None), Some(tiny.clone()), Some(3), cpu_config());
    let err = train(&options, &mut |_| {}).unwrap_err();
    assert!(matches!(err, TrainError::NoData(_)), "{err}");
    assert!(err.to_string().contains("no readable samples"), "{err}");

    let mut resume = options.clone();
    resume.resume = ResumeMode::Required;
    let err = train(&resume, &mut |_| {}).unwrap_err();
    assert!(matches!(err, TrainError::NoState { .. }), "{err}");

    let mut no_steps = options.clone();
    no_steps.steps = None;
    assert!(train(&no_steps, &mut |_| {}).unwrap_err().to_string().contains("--steps"));
    let mut no_model = options.clone();
    no_model.model = None;
    assert!(train(&no_model, &mut |_| {}).unwrap_err().to_string().contains("--model"));
}

/// A clock that reports a fixed share of the run's budget spent.
#[derive(Debug)]
struct SpentClock(f64);

impl koma_train::BudgetClock for SpentClock {
    fn spent(&self) -> f64 {
        self.0
    }
}

/// `decay_steps = 0`: the cosine anneals over the run's budget, the furthest of the step limit
/// and the caller's clock; the state keeps the share, and a resume spends the rest of it.
#[test]
fn a_cosine_over_the_budget_follows_the_step_limit_and_the_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    let shards = run.join("selfplay");
    write_games(&shards, 8, 2, SynthPolicy::Random, 8, "sp");
    let mut config = cpu_config();
    config.batch_size = 8;
    config.checkpoint_every = 100;
    config.log_every = 5;
    config.lr.base = 0.01;
    config.lr.warmup_steps = 2;
    config.lr.warmup_start = 0.5;
    config.lr.schedule = koma_train::Schedule::Cosine;
    config.lr.decay_steps = 0;
    config.lr.min_factor = 0.1;
    let lr = config.lr.clone();
    let mut options = TrainOptions::new(
        RunPaths::new(run.clone(), shards.clone()),
        Some(ModelInit::Fresh(micro_model())),
        Some(10),
        config,
    );
    options.budget = Some(Arc::new(SpentClock(0.3)));
    let mut rates = Vec::new();
    train(&options, &mut |p| {
        if let Progress::Step(s) = p {
            rates.push(s.lr)
        }
    })
    .unwrap();
    // Step k (0-based) trains at the share max(k/10, 0.3), after the two warm-up steps.
    let expected: Vec<f64> = (0..10u64).map(|k| lr.at(k, (k as f64 / 10.0).max(0.3))).collect();
    assert_eq!(rates.len(), 10);
    for (got, want) in rates.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-12, "{rates:?} vs {expected:?}");
    }
    assert_eq!(rates[0], 0.005);
    assert!((rates[4] - lr.at(4, 0.4)).abs() < 1e-12 && rates[4] < 0.01 && rates[4] > 0.001, "{rates:?}");
    assert!((rates[9] - lr.at(9, 0.9)).abs() < 1e-12 && rates[9] < 0.0015, "{rates:?}");
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("train/state/state.json")).unwrap()).unwrap();
    assert!((state["budget_spent"].as_f64().unwrap() - 0.9).abs() < 1e-12, "{state}");

    // Resumed for 5 more steps with a fresh clock half spent: 0.9 + 0.1·0.5 = 0.95 of the run.
    options.resume = ResumeMode::Required;
    options.steps = None;
    options.follow = true;
    options.config.follow.min_window_samples = 1;
    options.budget = Some(Arc::new(SpentClock(0.5)));
    let stop = Arc::new(AtomicBool::new(false));
    options.stop = Some(stop.clone());
    let mut resumed = Vec::new();
    train(&options, &mut |p| {
        if let Progress::Step(s) = p {
            resumed.push(s.lr);
            if resumed.len() == 5 {
                stop.store(true, Ordering::SeqCst);
            }
        }
    })
    .unwrap();
    assert_eq!(resumed.len(), 5);
    assert!(resumed.iter().all(|r| (r - lr.at(10, 0.95)).abs() < 1e-12), "{resumed:?}");

    // Neither a step limit nor a clock: refused, naming the way out.
    options.budget = None;
    let err = train(&options, &mut |_| {}).unwrap_err().to_string();
    assert!(err.contains("decay_steps = 0") && err.contains("--steps"), "{err}");
}
