//! The opponent-reply auxiliary target (KataGo §3.4): a model with `aux_reply_head` learns the
//! replies of shard games (its reply loss falls), metrics carry `reply_loss`/`reply_top1`, resume
//! stays bit-exact, and a `reply_weight` set for a model without the head is a clear error.

use std::path::{Path, PathBuf};

use koma_data::write_shard;
use koma_nn::checkpoint;
use koma_nn::{DeviceSpec, ModelConfig, Precision};
use koma_train::metrics::read_metrics;
use koma_train::synth::{random_games, SynthPolicy};
use koma_train::{train, ModelInit, Progress, ResumeMode, RunPaths, TrainConfig, TrainOptions, Trainer};

/// Fresh networks draw from libtorch's process-wide generator: keep the tests apart.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn model(reply: bool) -> ModelConfig {
    ModelConfig {
        blocks: 1,
        channels: 16,
        policy_channels: 8,
        value_channels: 2,
        value_hidden: 16,
        aux_reply_head: reply,
        ..ModelConfig::tiny()
    }
}

fn config() -> TrainConfig {
    let mut c = TrainConfig {
        device: DeviceSpec::Cpu.into(),
        precision: Precision::F32,
        seed: 9,
        batch_size: 32,
        ..TrainConfig::default()
    };
    c.checkpoint_every = 1000;
    c.log_every = 10;
    c.lr.base = 0.05;
    c.optimizer.grad_clip_norm = 5.0;
    c
}

fn shards(tmp: &Path) -> PathBuf {
    let dir = tmp.join("shards");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, chunk) in random_games(24, 6, SynthPolicy::MinLabel).chunks(8).enumerate() {
        write_shard(&dir.join(format!("s-{i:06}.h5")), chunk).unwrap();
    }
    dir
}

fn options(run_dir: &Path, shards: &Path, steps: u64, model: ModelConfig, config: &TrainConfig) -> TrainOptions {
    TrainOptions::new(
        RunPaths::new(run_dir.to_path_buf(), shards.to_path_buf()),
        Some(ModelInit::Fresh(model)),
        Some(steps),
        config.clone(),
    )
}

#[test]
fn reply_loss_falls_and_is_logged() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let run_dir = tmp.path().join("run");
    let mut steps = Vec::new();
    train(&options(&run_dir, &data, 200, model(true), &config()), &mut |p| {
        if let Progress::Step(s) = p {
            steps.push(s.clone());
        }
    })
    .unwrap();
    assert!(steps.iter().all(|s| s.reply_loss.is_some() && s.reply_top1.is_some()));
    let m = read_metrics(&run_dir.join("train").join("metrics.jsonl")).unwrap();
    let (first, last) = (&m[0], m.last().unwrap());
    eprintln!("first {first:?}\nlast {last:?}");
    let (r0, r1) = (first.reply_loss.unwrap(), last.reply_loss.unwrap());
    // From about ln 2187 = 7.7 towards the entropy of a random legal reply (the synthetic games
    // play random moves): the head learns which replies are legal.
    assert!(r1 < r0 - 1.5, "reply loss {r0} -> {r1}");
    assert!(last.reply_top1.unwrap() >= 0.0 && last.reply_top1.unwrap() <= 1.0);
    // The total includes 0.15 × the reply loss.
    assert!(last.loss > last.policy_loss + last.value_loss + 0.1 * r1, "{last:?}");
    let text = std::fs::read_to_string(run_dir.join("train").join("metrics.jsonl")).unwrap();
    assert!(text.lines().all(|l| l.contains("\"reply_loss\"") && l.contains("\"reply_top1\"")));
    // The checkpoint records the head.
    let models = run_dir.join("models");
    let meta = checkpoint::read_meta(&models.join(checkpoint::file_name(200))).unwrap();
    assert!(meta.model.aux_reply_head);

    // Without the head: no reply fields, and an unset reply_weight is fine.
    let plain_dir = tmp.path().join("plain");
    train(&options(&plain_dir, &data, 10, model(false), &config()), &mut |_| {}).unwrap();
    let text = std::fs::read_to_string(plain_dir.join("train").join("metrics.jsonl")).unwrap();
    assert!(!text.contains("reply"), "{text}");
}

/// A library caller may hand a model with the head a batch built without replies: it trains, with
/// no reply statistics.
#[test]
fn batches_without_replies_train_a_model_with_the_head() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let c = config();
    let mut t = Trainer::new(&c, &ModelInit::Fresh(model(true))).unwrap();
    let samples = koma_train::synth::random_samples(16, 3, SynthPolicy::MinLabel);
    let s = t.train_step(&koma_train::HostBatch::from_samples(&samples, &c.loss)).unwrap();
    assert!(s.reply_loss.is_none() && s.loss.is_finite());
}

#[test]
fn reply_weight_without_the_head_is_an_error() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut c = config();
    c.loss.reply_weight = Some(0.15);
    let err = Trainer::new(&c, &ModelInit::Fresh(model(false))).unwrap_err().to_string();
    assert!(err.contains("reply_weight = 0.15") && err.contains("aux_reply_head = true"), "{err}");
    c.loss.reply_weight = Some(0.0);
    Trainer::new(&c, &ModelInit::Fresh(model(false))).unwrap();
    c.loss.reply_weight = Some(-1.0);
    assert!(Trainer::new(&c, &ModelInit::Fresh(model(true))).is_err());
    // From TOML.
    let parsed = TrainConfig::from_toml_str("[train.loss]\nreply_weight = 0.15\n").unwrap();
    assert_eq!(parsed.loss.reply_weight, Some(0.15));
    assert_eq!(TrainConfig::default().loss.reply_weight, None);
}

/// (step, policy loss, reply loss, grad norm) as bits.
type Fingerprint = (u64, u32, Option<u32>, u64);

#[test]
fn resume_with_the_reply_head_is_exact() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    tch::set_num_threads(1);
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    let mut c = config();
    c.checkpoint_every = 5;
    let run = |dir: &Path, steps: u64, resume: ResumeMode| {
        let mut o = options(dir, &data, steps, model(true), &c);
        o.resume = resume;
        let mut out: Vec<Fingerprint> = Vec::new();
        train(&o, &mut |p| {
            if let Progress::Step(s) = p {
                out.push((s.step, s.policy_loss.to_bits(), s.reply_loss.map(f32::to_bits), s.grad_norm.to_bits()));
            }
        })
        .unwrap();
        out
    };
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let full = run(&a, 12, ResumeMode::Never);
    let first = run(&b, 7, ResumeMode::Never);
    assert_eq!(first[..], full[..7]);
    let second = run(&b, 12, ResumeMode::Required);
    assert_eq!(second[..], full[7..]);
    let sha =
        |d: &Path| checkpoint::read_meta(&d.join("models").join(checkpoint::file_name(12))).unwrap().weights_sha256;
    assert_eq!(sha(&a), sha(&b));
}

/// The reply head trains in the half-precision code paths too (f16 autocast + loss scaler, and
/// the bf16 compute copy; run on the CPU through the test switch).
#[test]
fn reply_head_in_half_precision_paths() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let data = shards(tmp.path());
    for precision in [Precision::F16, Precision::Bf16] {
        let mut c = config();
        c.precision = precision;
        let mut o = options(&tmp.path().join(format!("{precision:?}")), &data, 3, model(true), &c);
        o.allow_cpu_half = true;
        let mut replies = Vec::new();
        train(&o, &mut |p| {
            if let Progress::Step(s) = p {
                replies.push(s.reply_loss.unwrap());
            }
        })
        .unwrap();
        assert_eq!(replies.len(), 3);
        assert!(replies.iter().all(|r| r.is_finite() && *r > 0.0), "{precision:?}: {replies:?}");
    }
}
