//! Tests of the trainer as a whole: precision, persistence and replicas together.

use koma_nn::checkpoint;
use koma_nn::{DeviceSpec, ModelConfig, Network, Precision, RunOptions};
use tch::{Device, Tensor};

use super::*;
use crate::batch::HostBatch;
use crate::config::MemoryFormat;
use crate::config::TrainConfig;
use crate::error::TrainError;
use crate::metrics::StepStats;
use crate::state;
use crate::synth::{random_samples, SynthPolicy};

fn small() -> ModelConfig {
    let mut m = ModelConfig::tiny();
    m.blocks = 2;
    m.channels = 16;
    m
}

fn cpu_config(precision: Precision) -> TrainConfig {
    TrainConfig { device: DeviceSpec::Cpu.into(), precision, batch_size: 16, ..TrainConfig::default() }
}

/// Every variable of the network (weights and batch-norm statistics), copied, by name.
fn variables(t: &Trainer) -> Vec<(String, Tensor)> {
    let mut vars: Vec<(String, Tensor)> =
        t.network().var_store().variables().into_iter().map(|(n, v)| (n, v.copy())).collect();
    vars.sort_by(|a, b| a.0.cmp(&b.0));
    vars
}

/// A skipped f16 step (a loss scale that overflows every gradient) leaves every variable as
/// it was, batch-norm statistics included, although its forward pass in training mode moved
/// them.
#[test]
fn a_skipped_step_leaves_the_network_as_it_was() {
    let mut config = cpu_config(Precision::F16);
    config.loss_scale.init = 1e300;
    config.loss_scale.max = 1e300;
    let batch = HostBatch::from_samples(&random_samples(16, 41, SynthPolicy::MinLabel), &config.loss);
    let mut t = Trainer::new_allowing_cpu_half(&config, &ModelInit::Fresh(small())).unwrap();
    let before = variables(&t);
    assert!(t.train_step(&batch).unwrap().skipped);
    for ((name, a), (_, b)) in before.iter().zip(variables(&t)) {
        assert!(a.equal(&b), "{name} changed in a skipped step");
    }
    // The same step applied moves the statistics: the check above is not vacuous.
    config.loss_scale = crate::config::LossScaleConfig::default();
    let mut t = Trainer::new_allowing_cpu_half(&config, &ModelInit::Fresh(small())).unwrap();
    assert!(!t.train_step(&batch).unwrap().skipped);
    let moved = before.iter().zip(variables(&t)).any(|((n, a), (_, b))| n.ends_with("running_mean") && !a.equal(&b));
    assert!(moved, "an applied step updates the running statistics");
}

/// Inf or NaN in the network (here a batch-norm statistic, as an f16 forward pass can leave
/// it) is a divergence at the next save naming it, and neither checkpoint nor state is
/// written.
#[test]
fn a_non_finite_statistic_is_never_saved() {
    let config = cpu_config(Precision::F32);
    let batch = HostBatch::from_samples(&random_samples(16, 42, SynthPolicy::MinLabel), &config.loss);
    let mut t = Trainer::new(&config, &ModelInit::Fresh(small())).unwrap();
    t.train_step(&batch).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (models, state_dir) = (dir.path().join("models"), dir.path().join("state"));
    t.save_checkpoint(&models).unwrap();
    t.save_state(&state_dir).unwrap();
    let files = || {
        let mut out = Vec::new();
        for d in [&models, &state_dir] {
            for e in std::fs::read_dir(d).unwrap() {
                let path = e.unwrap().path();
                out.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
        out.sort();
        out
    };
    let written = files();

    t.train_step(&batch).unwrap();
    let name = variables(&t).into_iter().map(|(n, _)| n).find(|n| n.ends_with("running_var")).unwrap();
    {
        let _guard = tch::no_grad_guard();
        let mut var = t.network().var_store().variables()[&name].shallow_clone();
        let _ = var.fill_(f64::NAN);
    }
    let errors = [t.save_checkpoint(&models).unwrap_err(), t.save_state(&state_dir).unwrap_err()];
    for err in errors {
        assert!(matches!(err, TrainError::Diverged { step: 2, .. }), "{err}");
        assert!(err.to_string().contains(&format!("`model/{name}` holds inf or NaN")), "{err}");
    }
    assert_eq!(files(), written, "nothing was written");
    assert_eq!(t.parent(), Some(checkpoint::file_name(1).as_str()), "the last good checkpoint stays the parent");
}

/// A save that fails at any step of writing a file (a full disk) is an error naming the file;
/// the last checkpoint and the last training state stay whole and loadable, and no temporary
/// is left behind.
#[test]
fn a_failed_save_keeps_the_last_checkpoint_and_state() {
    use koma_base::durable::{fail_next, Step};
    let config = cpu_config(Precision::F32);
    let batch = HostBatch::from_samples(&random_samples(16, 43, SynthPolicy::MinLabel), &config.loss);
    let mut t = Trainer::new(&config, &ModelInit::Fresh(small())).unwrap();
    t.train_step(&batch).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (models, state_dir) = (dir.path().join("models"), dir.path().join("state"));
    let first_model = t.save_checkpoint(&models).unwrap();
    t.save_state(&state_dir).unwrap();
    let model_bytes = std::fs::read(&first_model).unwrap();
    let state_json = state_dir.join(state::STATE_FILE);
    let state_bytes = std::fs::read(&state_json).unwrap();
    t.train_step(&batch).unwrap();
    for step in [Step::Create, Step::Write, Step::SyncFile, Step::Rename] {
        // The tensors file is written first, state.json second: fail each in turn.
        for failing in [state_dir.clone(), state_json.clone()] {
            fail_next(&failing, step);
            let e = t.save_state(&state_dir).unwrap_err();
            assert!(e.to_string().contains("state"), "{step:?}: {e}");
            assert_eq!(std::fs::read(&state_json).unwrap(), state_bytes, "{step:?}");
            assert_eq!(state::load(&state_dir, &models).unwrap().meta.step, 1, "{step:?}");
        }
        fail_next(&models, step);
        let e = t.save_checkpoint(&models).unwrap_err();
        assert!(e.to_string().contains("model-00000002"), "{step:?}: {e}");
        assert_eq!(std::fs::read(&first_model).unwrap(), model_bytes);
    }
    for d in [&models, &state_dir] {
        for e in std::fs::read_dir(d).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!name.contains(".tmp"), "{name} left behind");
        }
    }
    t.save_checkpoint(&models).unwrap();
    t.save_state(&state_dir).unwrap();
    assert_eq!(state::load(&state_dir, &models).unwrap().meta.step, 2);
}

/// The largest absolute difference between two runs' variables whose names satisfy `which`.
fn max_difference(a: &Trainer, b: &Trainer, which: impl Fn(&str) -> bool) -> f64 {
    let bv = b.network().var_store().variables();
    a.network()
        .var_store()
        .variables()
        .iter()
        .filter(|(n, _)| which(n))
        .map(|(n, t)| (t - &bv[n]).abs().max().double_value(&[]))
        .fold(0.0, f64::max)
}

/// Data parallel over two CPU replicas, on batches made of the same samples twice: each
/// replica's half then has the whole batch's batch-norm statistics, so the maths is one
/// device's and the runs agree up to float rounding: losses, weights, running means. The
/// running variances differ only by the unbiased correction (n/(n−1) over a half's elements
/// against the batch's), a relative 1e-3 here.
#[test]
fn two_replicas_follow_one_device_where_the_maths_is_the_same() {
    let base = cpu_config(Precision::F32);
    let batches: Vec<HostBatch> = (0..4)
        .map(|i| {
            let half = random_samples(8, 60 + i, SynthPolicy::MinLabel);
            let doubled: Vec<_> = half.iter().chain(&half).cloned().collect();
            HostBatch::from_samples(&doubled, &base.loss)
        })
        .collect();
    // Both runs start from one checkpoint: a fresh network draws from libtorch's global
    // generator, which tests running at the same time share.
    let dir = tempfile::tempdir().unwrap();
    let start = Trainer::new(&base, &ModelInit::Fresh(small())).unwrap().save_checkpoint(dir.path()).unwrap();
    let run = |device: &str| {
        let config = TrainConfig { device: device.parse().unwrap(), ..base.clone() };
        let mut t = Trainer::new(&config, &ModelInit::Checkpoint(start.clone())).unwrap();
        let stats: Vec<StepStats> = batches.iter().map(|b| t.train_step(b).unwrap()).collect();
        (t, stats)
    };
    let (one, one_stats) = run("cpu");
    let (two, two_stats) = run("cpu,cpu");
    assert_eq!(two.devices(), [Device::Cpu, Device::Cpu]);
    assert_eq!(two.compute.len(), 1, "one replica beside the master");
    for (a, b) in one_stats.iter().zip(&two_stats) {
        assert!(
            (a.loss - b.loss).abs() <= 1e-5 * a.loss.abs().max(1.0),
            "step {}: {} vs {} ({} vs {})",
            a.step,
            a.loss,
            b.loss,
            a.policy_loss,
            b.policy_loss
        );
        assert!((a.grad_norm - b.grad_norm).abs() <= 1e-4 * a.grad_norm.max(1.0));
        assert_eq!(a.policy_top1, b.policy_top1);
    }
    let weights = max_difference(&one, &two, |n| !n.contains("running_"));
    assert!(weights <= 1e-5, "weights differ by {weights}");
    let means = max_difference(&one, &two, |n| n.ends_with("running_mean"));
    assert!(means <= 1e-5, "running means differ by {means}");
    let vars = max_difference(&one, &two, |n| n.ends_with("running_var"));
    assert!(vars <= 1e-2, "running variances differ by {vars}");
    // Training moved the weights: the agreement above is not vacuous.
    let moved = max_difference(&one, &Trainer::new(&base, &ModelInit::Checkpoint(start)).unwrap(), |_| true);
    assert!(moved > 1e-3, "training moved the weights ({moved})");
}

/// Replicas on a 7-row batch (parts of 3, 2 and 2 rows; or two bf16 copies, 4 and 3): after
/// every step each replica holds exactly the master's weights and statistics (in its kind).
#[test]
fn replicas_stay_identical_to_the_master() {
    for (precision, devices, parts) in
        [(Precision::F32, "cpu,cpu,cpu", vec![0..3, 3..5, 5..7]), (Precision::Bf16, "cpu,cpu", vec![0..4, 4..7])]
    {
        let config =
            TrainConfig { device: devices.parse().unwrap(), precision, batch_size: 7, ..TrainConfig::default() };
        let mut t = Trainer::new_allowing_cpu_half(&config, &ModelInit::Fresh(small())).unwrap();
        assert_eq!(t.parts(7), parts);
        assert_eq!(t.parts(1), vec![0..1], "a batch smaller than the device count still trains");
        for seed in 0..2 {
            let batch = HostBatch::from_samples(&random_samples(7, 70 + seed, SynthPolicy::MinLabel), &config.loss);
            assert!(!t.train_step(&batch).unwrap().skipped);
            let master: Vec<Tensor> = t.optimizer.params().iter().map(|(_, p)| p.shallow_clone()).collect();
            for copy in &t.compute {
                for (m, c) in master.iter().zip(&copy.params).chain(copy.buffers.iter().map(|(m, c)| (m, c))) {
                    assert!(c.equal(&m.to_kind(c.kind())), "{devices}: a replica differs from the master");
                }
            }
        }
    }
}

/// Training in channels-last follows the contiguous run up to float rounding, and its
/// checkpoints are ordinary contiguous weights.
#[test]
fn channels_last_training_matches_contiguous() {
    let base = TrainConfig {
        device: DeviceSpec::Cpu.into(),
        precision: Precision::F32,
        batch_size: 16,
        ..TrainConfig::default()
    };
    assert_eq!(base.memory_format, MemoryFormat::Auto);
    let batches: Vec<HostBatch> = (0..3)
        .map(|i| HostBatch::from_samples(&random_samples(16, 40 + i, SynthPolicy::MinLabel), &base.loss))
        .collect();
    let run = |format: MemoryFormat| {
        let config = TrainConfig { memory_format: format, ..base.clone() };
        let mut t = Trainer::new(&config, &ModelInit::Fresh(small())).unwrap();
        let stats: Vec<StepStats> = batches.iter().map(|b| t.train_step(b).unwrap()).collect();
        (t, stats)
    };
    let (mut cl, cl_stats) = run(MemoryFormat::Auto);
    let (plain, plain_stats) = run(MemoryFormat::Contiguous);
    assert!(cl.channels_last() && !plain.channels_last());
    for (a, b) in cl_stats.iter().zip(&plain_stats) {
        assert!((a.loss - b.loss).abs() <= 1e-4 * a.loss.abs().max(1.0), "{} vs {}", a.loss, b.loss);
        assert!((a.grad_norm - b.grad_norm).abs() <= 1e-3 * a.grad_norm.max(1.0), "{} vs {}", a.grad_norm, b.grad_norm);
        assert_eq!(a.policy_top1, b.policy_top1);
    }
    let plain_vars = plain.network().var_store().variables();
    for (name, t) in cl.network().var_store().variables() {
        assert!(t.is_contiguous(), "{name} stays contiguous");
        let diff = (&t - &plain_vars[&name]).abs().max().double_value(&[]);
        assert!(diff <= 1e-4, "{name}: {diff}");
    }
    for (name, t) in cl.optimizer.state_tensors() {
        assert!(t.is_contiguous(), "{name}");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = cl.save_checkpoint(dir.path()).unwrap();
    let loaded = Network::load(&path, &run_options(&base).unwrap().0).unwrap();
    let loaded_vars = loaded.var_store().variables();
    for (name, t) in cl.network().var_store().variables() {
        assert!(t.equal(&loaded_vars[&name]), "{name} round-trips exactly");
    }
}

/// The published average carries batch-norm statistics of its own: for the stem, whose input is
/// the encoded position itself, the running mean and variance are exactly the means of the
/// averaged convolution's per-channel batch means and unbiased variances over the last batches
/// trained before the checkpoint. The raw network keeps its own statistics, and the training
/// state holds the published ones (a resume that publishes the checkpoint gives the same).
#[test]
fn the_published_average_has_statistics_recomputed_on_the_last_batches() {
    let mut config = cpu_config(Precision::F32);
    config.batch_size = 8;
    config.ema_samples = 40.0;
    config.ema_statistics_samples = 16; // two batches
    config.checkpoint_every = 4;
    config.memory_format = MemoryFormat::Contiguous;
    let batches: Vec<HostBatch> = (0..4)
        .map(|i| HostBatch::from_samples(&random_samples(8, 70 + i, SynthPolicy::MinLabel), &config.loss))
        .collect();
    let mut t = Trainer::new(&config, &ModelInit::Fresh(small())).unwrap();
    for b in &batches {
        t.train_step(b).unwrap();
    }
    let raw = variables(&t);
    let dir = tempfile::tempdir().unwrap();
    let (models, state_dir) = (dir.path().join("models"), dir.path().join("state"));
    t.save_state(&state_dir).unwrap();
    let path = t.save_checkpoint(&models).unwrap();
    for ((name, a), (_, b)) in raw.iter().zip(variables(&t)) {
        assert!(a.equal(&b), "{name}: publishing changed the raw network");
    }
    let published: std::collections::HashMap<String, Tensor> =
        Network::load(&path, &RunOptions::cpu()).unwrap().var_store().variables();
    let raw: std::collections::HashMap<String, Tensor> = raw.into_iter().collect();
    assert!(!published["stem.conv.weight"].equal(&raw["stem.conv.weight"]), "the published weights are the average");

    // The stem's statistics, computed here from the published (averaged) weights.
    let weight = &published["stem.conv.weight"];
    let (mut means, mut variances) = (Vec::new(), Vec::new());
    for b in &batches[2..] {
        let (in1, in2) = crate::batch::input_tensors(&b.inputs, 0..b.len(), Device::Cpu, false);
        let x = Tensor::cat(&[in1, in2], 1).conv2d(weight, None::<Tensor>, [1, 1], [1, 1], [1, 1], 1);
        means.push(x.mean_dim([0i64, 2, 3].as_slice(), false, tch::Kind::Float));
        variances.push(x.var_dim([0i64, 2, 3].as_slice(), true, false));
    }
    let expected_mean = Tensor::stack(&means, 0).mean_dim(0, false, tch::Kind::Float);
    let expected_var = Tensor::stack(&variances, 0).mean_dim(0, false, tch::Kind::Float);
    let gap = |a: &Tensor, b: &Tensor| (a - b).abs().max().double_value(&[]);
    assert!(gap(&published["stem.bn.running_mean"], &expected_mean) < 1e-4);
    assert!(gap(&published["stem.bn.running_var"], &expected_var) < 1e-3 * expected_var.abs().max().double_value(&[]));
    // Not the raw network's statistics (the check above would otherwise prove little).
    assert!(gap(&raw["stem.bn.running_mean"], &expected_mean) > 1e-3);

    // The state holds the same statistics: a resumed trainer that has to publish this step's
    // checkpoint again publishes identical weights.
    std::fs::remove_file(&path).unwrap();
    let mut resumed = Trainer::resume(&config, &state_dir, &models).unwrap();
    resumed.parent = None;
    assert!(resumed.publish_checkpoint_of_state(&models).unwrap());
    let again = Network::load(&path, &RunOptions::cpu()).unwrap().var_store().variables();
    for (name, t) in &published {
        assert!(t.equal(&again[name]), "{name} differs after the resume");
    }

    // Damaged since (a byte flipped): the resume sets it aside and publishes it again, whatever
    // the state says its parent is; an intact one is kept as it is.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let mut resumed = Trainer::resume(&config, &state_dir, &models).unwrap();
    resumed.parent = Some(path.file_name().unwrap().to_string_lossy().into_owned());
    assert!(resumed.publish_checkpoint_of_state(&models).unwrap());
    let again = Network::load(&path, &RunOptions::cpu()).unwrap().var_store().variables();
    for (name, t) in &published {
        assert!(t.equal(&again[name]), "{name} differs after republishing a damaged checkpoint");
    }
    let aside: Vec<String> = std::fs::read_dir(&models)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".corrupt-"))
        .collect();
    assert_eq!(aside.len(), 2, "weights and sidecar set aside: {aside:?}");
    assert!(!resumed.publish_checkpoint_of_state(&models).unwrap(), "an intact checkpoint is kept");
}

/// The bf16 compute copy keeps batch norm in f32 (its statistics' small updates would round away
/// in bf16) and everything else in bf16; a step runs with the mixed kinds.
#[test]
fn the_bf16_copy_keeps_batch_norm_in_f32() {
    let config = cpu_config(Precision::Bf16);
    let batch = HostBatch::from_samples(&random_samples(16, 43, SynthPolicy::MinLabel), &config.loss);
    let mut t = Trainer::new_allowing_cpu_half(&config, &ModelInit::Fresh(small())).unwrap();
    t.train_step(&batch).unwrap();
    let copy = t.compute[0]._vs.variables();
    for (name, v) in &copy {
        let expected =
            if koma_nn::model::is_batch_norm_variable(name) { tch::Kind::Float } else { tch::Kind::BFloat16 };
        assert_eq!(v.kind(), expected, "{name}");
    }
    assert!(copy.keys().any(|n| n.ends_with("running_var")));
}

/// `ema_statistics = "trained"`: the published average carries the trained network's running
/// statistics as they are at the publish, and no inputs are kept.
#[test]
fn the_published_average_can_carry_the_trained_statistics() {
    let mut config = cpu_config(Precision::F32);
    config.batch_size = 8;
    config.ema_samples = 40.0;
    config.ema_statistics = crate::config::EmaStatistics::Trained;
    let mut t = Trainer::new(&config, &ModelInit::Fresh(small())).unwrap();
    for i in 0..3 {
        t.train_step(&HostBatch::from_samples(&random_samples(8, 90 + i, SynthPolicy::MinLabel), &config.loss))
            .unwrap();
    }
    assert!(t.recent_inputs.is_empty());
    let raw: std::collections::HashMap<String, Tensor> = variables(&t).into_iter().collect();
    let dir = tempfile::tempdir().unwrap();
    let path = t.save_checkpoint(dir.path()).unwrap();
    let published = Network::load(&path, &RunOptions::cpu()).unwrap().var_store().variables();
    for name in ["stem.bn.running_mean", "stem.bn.running_var", "value.bn.running_var"] {
        assert!(published[name].equal(&raw[name]), "{name}");
    }
    assert!(!published["stem.conv.weight"].equal(&raw["stem.conv.weight"]), "the weights are the average");
}
