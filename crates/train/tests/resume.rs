//! `--resume` continues exactly: a run interrupted at step K and resumed produces the same
//! losses, bit for bit, as an uninterrupted run, and the same final weights (CPU, fixed seed,
//! one libtorch thread). A corrupt training state is refused clearly and nothing is changed.

use std::path::{Path, PathBuf};

use koma_data::write_shard;
use koma_nn::checkpoint;
use koma_nn::{DeviceSpec, ModelConfig, Network, Precision, RunOptions};
use koma_train::metrics::read_metrics;
use koma_train::synth::{random_games, SynthPolicy};
use koma_train::{
    train, ModelInit, OptimizerKind, Progress, ResumeMode, RunPaths, Schedule, TrainConfig, TrainError, TrainOptions,
};

/// Fresh networks are initialised from libtorch's process-wide generator: the two tests must not
/// interleave their initialisations.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn model() -> ModelConfig {
    ModelConfig {
        blocks: 1,
        channels: 16,
        policy_channels: 8,
        value_channels: 2,
        value_hidden: 16,
        ..ModelConfig::tiny()
    }
}

fn config(kind: OptimizerKind) -> TrainConfig {
    let mut c = TrainConfig {
        device: DeviceSpec::Cpu.into(),
        precision: Precision::F32,
        seed: 7,
        batch_size: 32,
        ..TrainConfig::default()
    };
    c.checkpoint_every = 5;
    c.log_every = 3;
    c.optimizer.kind = kind;
    c.optimizer.grad_clip_norm = 2.0;
    c.lr.base = if kind == OptimizerKind::Sgd { 0.05 } else { 0.002 };
    c.lr.warmup_steps = 4;
    c.lr.schedule = Schedule::Cosine;
    c.lr.decay_steps = 20;
    c.window.early_plies = 10;
    c.window.early_probability = 0.5;
    c
}

/// (step, policy loss, value loss, grad norm, lr, loss scale) as exact bits.
type Fingerprint = (u64, u32, u32, u64, u64, Option<u64>);

fn run(options: &TrainOptions) -> Vec<Fingerprint> {
    let mut out = Vec::new();
    train(options, &mut |p| {
        if let Progress::Step(s) = p {
            out.push((
                s.step,
                s.policy_loss.to_bits(),
                s.value_loss.to_bits(),
                s.grad_norm.to_bits(),
                s.lr.to_bits(),
                s.loss_scale.map(f64::to_bits),
            ));
        }
    })
    .unwrap();
    out
}

fn options(run_dir: &Path, shards: &Path, steps: u64, config: &TrainConfig, resume: ResumeMode) -> TrainOptions {
    let mut o = TrainOptions::new(
        RunPaths::new(run_dir.to_path_buf(), shards.to_path_buf()),
        Some(ModelInit::Fresh(model())),
        Some(steps),
        config.clone(),
    );
    o.resume = resume;
    o.allow_cpu_half = true;
    o
}

fn weights_sha(run_dir: &Path, step: u64) -> String {
    checkpoint::read_meta(&run_dir.join("models").join(checkpoint::file_name(step))).unwrap().weights_sha256
}

fn shards(tmp: &Path) -> PathBuf {
    let dir = tmp.join("shards");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, chunk) in random_games(24, 4, SynthPolicy::Random).chunks(8).enumerate() {
        write_shard(&dir.join(format!("s-{i:06}.h5")), chunk).unwrap();
    }
    dir
}

#[test]
fn resumed_runs_match_uninterrupted_runs_bit_for_bit() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    // SGD (Nesterov, weight decay) in f32; AdamW with the f16 loss-scaling path (a no-op
    // autocast on the CPU, but the scaler state must survive the resume); SGD data parallel over
    // two CPU replicas (the replicas are rebuilt from the saved master on resume).
    // SGD again with weight averaging: the average is part of the state (its checkpoints match
    // across the resume), training itself is untouched (the same losses as plain SGD), and the
    // published weights are the average (not plain SGD's).
    let mut losses_by_name = std::collections::HashMap::new();
    for (name, kind, precision, device) in [
        ("sgd", OptimizerKind::Sgd, Precision::F32, "cpu"),
        ("adamw", OptimizerKind::AdamW, Precision::F16, "cpu"),
        ("sgd-2-replicas", OptimizerKind::Sgd, Precision::F32, "cpu,cpu"),
        ("sgd-ema", OptimizerKind::Sgd, Precision::F32, "cpu"),
    ] {
        let mut c = config(kind);
        if name == "sgd-ema" {
            c.ema_samples = 200.0;
        }
        c.precision = precision;
        c.device = device.parse().unwrap();
        c.loss_scale.growth_interval = 4;
        // Mirrored samples too: the reflections are drawn from the sampler's saved generator.
        if kind == OptimizerKind::AdamW {
            c.window.mirror = 0.5;
        }
        let a_dir = tmp.path().join(format!("{name}-a"));
        let b_dir = tmp.path().join(format!("{name}-b"));
        let full = run(&options(&a_dir, &data, 20, &c, ResumeMode::Never));
        assert_eq!(full.len(), 20);
        let first = run(&options(&b_dir, &data, 12, &c, ResumeMode::Never));
        assert_eq!(first[..], full[..12]);
        // Stopped at 12, between checkpoints (10, 15): the state was written at 12.
        let second = run(&options(&b_dir, &data, 20, &c, ResumeMode::Required));
        assert_eq!(second.len(), 8);
        for (x, y) in second.iter().zip(&full[12..]) {
            assert_eq!(x, y, "{name}: resumed step {} differs", x.0);
        }
        assert_eq!(weights_sha(&a_dir, 20), weights_sha(&b_dir, 20), "{name}");
        assert_eq!(weights_sha(&a_dir, 15), weights_sha(&b_dir, 15), "{name}");
        // Metrics lines: one per logged step, no duplicates after the resume.
        let steps: Vec<u64> =
            read_metrics(&b_dir.join("train/metrics.jsonl")).unwrap().iter().map(|r| r.step).collect();
        assert_eq!(steps, [3, 6, 9, 12, 15, 18, 20], "{name}");
        let a: Vec<u64> = read_metrics(&a_dir.join("train/metrics.jsonl")).unwrap().iter().map(|r| r.step).collect();
        assert_eq!(a, [3, 6, 9, 12, 15, 18, 20], "{name}");
        losses_by_name.insert(name, (full, weights_sha(&a_dir, 20)));
    }
    let (sgd, ema) = (&losses_by_name["sgd"], &losses_by_name["sgd-ema"]);
    assert_eq!(sgd.0, ema.0, "averaging changed the training itself");
    assert_ne!(sgd.1, ema.1, "the averaged run published the raw weights");
}

/// The state is saved just before the checkpoint of its step: a trainer killed between the two
/// leaves the checkpoint unwritten, and the resume publishes it from the state, with the weights
/// it would have had (the averaged ones here), as the parent of the next one. No step is trained
/// twice, so no model name ever gets other weights.
#[test]
fn a_checkpoint_lost_after_its_state_is_published_on_resume_with_the_same_weights() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let mut c = config(OptimizerKind::Sgd);
    c.ema_samples = 200.0;
    let dir = tmp.path().join("run");
    run(&options(&dir, &data, 10, &c, ResumeMode::Never));
    let published = weights_sha(&dir, 10);
    let weights = dir.join("models").join(checkpoint::file_name(10));
    std::fs::remove_file(&weights).unwrap();
    std::fs::remove_file(checkpoint::sidecar_path(&weights)).unwrap();
    let resumed = run(&options(&dir, &data, 15, &c, ResumeMode::Required));
    assert_eq!(resumed.first().map(|f| f.0), Some(11), "no step is trained twice");
    assert_eq!(weights_sha(&dir, 10), published);
    let next = checkpoint::read_meta(&dir.join("models").join(checkpoint::file_name(15))).unwrap();
    assert_eq!(next.parent.as_deref(), Some(checkpoint::file_name(10).as_str()));
}

#[test]
fn corrupt_state_is_refused_and_the_last_checkpoint_kept() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let c = config(OptimizerKind::Sgd);
    let dir = tmp.path().join("run");
    run(&options(&dir, &data, 10, &c, ResumeMode::Never));
    let state_dir = dir.join("train/state");
    let last = dir.join("models").join(checkpoint::file_name(10));
    let tensors: Vec<PathBuf> = std::fs::read_dir(&state_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
        .collect();
    assert_eq!(tensors.len(), 1, "older tensors files are removed");
    let tensors = &tensors[0];
    let good = std::fs::read(tensors).unwrap();

    // One flipped byte in the tensors.
    let mut bad = good.clone();
    let i = bad.len() - 100;
    bad[i] ^= 0x40;
    std::fs::write(tensors, &bad).unwrap();
    let resume = options(&dir, &data, 15, &c, ResumeMode::Required);
    let err = train(&resume, &mut |_| {}).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, TrainError::CorruptState { .. }), "{msg}");
    assert!(msg.contains("corrupt training state") && msg.contains("SHA-256"), "{msg}");
    assert!(msg.contains("model-00000010.safetensors") && msg.contains("--model"), "{msg}");
    // Nothing was changed: the state is as it was, the checkpoint loads.
    assert_eq!(std::fs::read(tensors).unwrap(), bad);
    Network::load(&last, &RunOptions::cpu()).unwrap();
    assert!(!dir.join("models").join(checkpoint::file_name(15)).exists());

    // A truncated tensors file, a damaged state.json, one from the future.
    std::fs::write(tensors, &good[..good.len() / 2]).unwrap();
    assert!(train(&resume, &mut |_| {}).unwrap_err().to_string().contains("SHA-256"));
    std::fs::write(tensors, &good).unwrap();
    let json_path = state_dir.join("state.json");
    let json = std::fs::read_to_string(&json_path).unwrap();
    std::fs::write(&json_path, &json[..json.len() / 2]).unwrap();
    let msg = train(&resume, &mut |_| {}).unwrap_err().to_string();
    assert!(msg.contains("state.json") && msg.contains("not valid JSON"), "{msg}");
    let mut state: serde_json::Value = serde_json::from_str(&json).unwrap();
    state["format_version"] = 9.into();
    std::fs::write(&json_path, state.to_string()).unwrap();
    let msg = train(&resume, &mut |_| {}).unwrap_err().to_string();
    assert!(msg.contains("`format_version` is Some(9), this koma reads 1 to 3"), "{msg}");

    // Restored in the form of version 1 (before `budget_spent`), it resumes and is saved as 3.
    state["format_version"] = 1.into();
    state.as_object_mut().unwrap().remove("budget_spent").unwrap();
    std::fs::write(&json_path, state.to_string()).unwrap();
    let s = train(&resume, &mut |_| {}).unwrap();
    assert_eq!((s.start_step, s.final_step), (10, 15));
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(saved["format_version"], 3);
}

/// Trains a run to step 10 (SGD, no gradient clipping), then goes on at learning rate `lr` with a
/// checkpoint every `checkpoint_every` steps, which must diverge before step `steps`. Checks what
/// every divergence leaves: an error naming checkpoint 10 as the last good one, checkpoint 10
/// the newest and unchanged, the state unchanged, and the run resuming at a sane rate. Returns
/// the error for the caller's own checks.
fn diverge_after_step_10(lr: f64, checkpoint_every: u64, steps: u64) -> TrainError {
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let run_dir = tmp.path().join("run");
    let mut c = config(OptimizerKind::Sgd);
    c.optimizer.grad_clip_norm = 0.0;
    run(&options(&run_dir, &data, 10, &c, ResumeMode::Never));
    let (good, state) = (weights_sha(&run_dir, 10), state_json(&run_dir));
    c.checkpoint_every = checkpoint_every;
    c.lr.base = lr;
    c.lr.warmup_steps = 0;
    c.lr.schedule = Schedule::Constant;
    let error =
        train(&options(&run_dir, &data, steps, &c, ResumeMode::Required), &mut |_| {}).expect_err("a NaN run went on");
    let TrainError::Diverged { step, .. } = &error else { panic!("not a divergence: {error}") };
    assert!(*step > 10 && *step < steps, "{error}");
    let message = error.to_string();
    assert!(message.contains("the last good checkpoint is the one of step 10"), "{message}");
    // Nothing after step 10 was written: no checkpoint, no state with NaN weights.
    assert_eq!(newest_checkpoint_step(&run_dir), Some(10));
    assert_eq!(weights_sha(&run_dir, 10), good);
    assert_eq!(state_json(&run_dir), state, "the state still points at step 10");
    // And the run resumes from there with a sane rate.
    c.lr.base = 0.05;
    assert_eq!(run(&options(&run_dir, &data, 12, &c, ResumeMode::Required)).len(), 2);
    error
}

#[test]
fn a_diverging_run_stops_and_keeps_its_last_good_checkpoint() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    // A learning rate no network survives: the weights overflow within a few steps.
    diverge_after_step_10(1e30, 5, 40);
}

fn state_json(run_dir: &Path) -> String {
    std::fs::read_to_string(run_dir.join("train/state/state.json")).unwrap()
}

fn newest_checkpoint_step(run_dir: &Path) -> Option<u64> {
    std::fs::read_dir(run_dir.join("models"))
        .unwrap()
        .filter_map(|e| checkpoint::step_of_file_name(&e.unwrap().file_name().to_string_lossy()))
        .max()
}

/// An update that overflows the weights from a finite gradient, on a checkpoint step, is found
/// before the save: the run stops naming the last good checkpoint, and neither the checkpoint
/// nor the state of that step is written.
#[test]
fn weights_overflowing_on_a_checkpoint_step_are_never_saved() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    // Every step a checkpoint step, and a rate beyond f32's range: the first update (from a
    // finite gradient) turns the weights into inf and NaN.
    let error = diverge_after_step_10(1e39, 1, 20);
    let TrainError::Diverged { step, .. } = &error else { unreachable!("checked by diverge_after_step_10") };
    assert_eq!(*step, 11, "{error}");
    assert!(error.to_string().contains("holds inf or NaN (found before saving)"), "{error}");
}

/// f16 steps whose gradients overflow at every scale are skipped, and each leaves the network
/// exactly as it was (the checkpoint after skipped steps has the same weights and batch-norm
/// statistics, byte for byte), until `max_skips_in_a_row` of them in a row stop the run as a
/// divergence instead of skipping forever.
#[test]
fn f16_skips_change_nothing_and_too_many_in_a_row_stop_the_run() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let run_dir = tmp.path().join("run");
    let mut c = config(OptimizerKind::Sgd);
    run(&options(&run_dir, &data, 10, &c, ResumeMode::Never));
    // A scale beyond f32's range: the scaled loss, and so every gradient, is inf or NaN.
    c.precision = Precision::F16;
    c.loss_scale.init = 1e300;
    c.loss_scale.max = 1e300;
    c.loss_scale.max_skips_in_a_row = 7;
    let mut skipped = 0;
    let error = train(&options(&run_dir, &data, 40, &c, ResumeMode::Required), &mut |p| {
        if let Progress::Step(s) = p {
            assert!(s.skipped, "step {} was applied", s.step);
            skipped += 1;
        }
    })
    .expect_err("f16 skipped on and on");
    assert_eq!(skipped, 6, "the seventh skip in a row is the error");
    let message = error.to_string();
    assert!(matches!(error, TrainError::Diverged { step: 16, .. }), "{message}");
    assert!(message.contains("7 steps in a row had inf or NaN gradients"), "{message}");
    assert!(message.contains("the last good checkpoint is the one of step 15"), "{message}");
    assert_eq!(newest_checkpoint_step(&run_dir), Some(15));
    assert_eq!(weights_sha(&run_dir, 15), weights_sha(&run_dir, 10), "skipped steps changed the network");
}
