//! Batched evaluation: priors over the legal moves in move-list order, W/D/L, and the same
//! answers through the mutex-shared network, alone and behind the search's inference service,
//! from many threads.

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use koma_mcts::{Evaluation, Evaluator, InferenceServer};
use koma_nn::encoding;
use koma_nn::network::{Network, SharedNetwork};
use koma_nn::{Error, ModelConfig, RunOptions};
use koma_shogi::Position;

fn network() -> Network {
    let mut config = ModelConfig::tiny();
    config.blocks = 2;
    config.channels = 16;
    let net = Network::new(&config, &RunOptions::cpu(), Some(3)).unwrap();
    koma_nn::model::randomize(net.var_store(), 4);
    net
}

fn positions(n: usize, seed: u64) -> Vec<Position> {
    let mut rng = common::Rng::new(seed);
    let mut ps = common::playout_positions(&mut rng, 1, 120, 7);
    while ps.len() < n {
        if let Some(p) = common::random_position(&mut rng) {
            if !p.legal_moves().is_empty() {
                ps.push(p);
            }
        }
    }
    ps.truncate(n);
    ps
}

fn close(a: &[Evaluation], b: &[Evaluation], tol: f32) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert_eq!(x.priors.len(), y.priors.len());
        for (p, q) in x.priors.iter().zip(&y.priors) {
            assert!((p - q).abs() <= tol, "{p} vs {q}");
        }
        for (p, q) in x.wdl.iter().zip(&y.wdl) {
            assert!((p - q).abs() <= tol, "{p} vs {q}");
        }
    }
}

#[test]
fn evaluations_cover_the_legal_moves_in_order() {
    let net = network();
    let ps = positions(40, 1);
    let refs: Vec<&Position> = ps.iter().collect();
    let evals = net.evaluate(&refs).unwrap();
    assert_eq!(evals.len(), ps.len());
    let mut batch = koma_nn::InputBatch::new();
    batch.encode(&ps);
    let mut raw = koma_nn::RawOutput::new();
    net.forward(&batch, &mut raw).unwrap();
    for (i, (pos, e)) in ps.iter().zip(&evals).enumerate() {
        let moves = pos.legal_moves();
        assert_eq!(e.priors.len(), moves.len());
        assert!((e.priors.iter().sum::<f32>() - 1.0).abs() < 1e-4);
        assert!(e.priors.iter().all(|&p| p > 0.0));
        assert!((e.wdl.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        assert!((0.0..=1.0).contains(&e.score()) && (-1.0..=1.0).contains(&e.value()));
        // Priors are the softmax of the legal moves' logits, gathered by label.
        let mut labels = Vec::new();
        encoding::legal_labels(pos, &moves, &mut labels);
        let mut expected = Vec::new();
        encoding::legal_priors(raw.policy(i), &labels, &mut expected);
        assert_eq!(e.priors, expected);
        let mut mask = vec![0u8; encoding::MOVE_LABELS];
        encoding::legal_mask(pos, &mut mask);
        assert_eq!(mask.iter().filter(|&&m| m == 1).count(), moves.len());
        assert!(labels.iter().all(|&l| mask[l as usize] == 1));
    }
    // Batch of one (CPU kernels may sum in another order for another batch size) and an empty
    // batch.
    close(&net.evaluate(&refs[..1]).unwrap(), &evals[..1], 1e-5);
    assert!(net.evaluate::<&Position>(&[]).unwrap().is_empty());
}

#[test]
fn shared_network_from_many_threads() {
    let net = network();
    let ps = Arc::new(positions(64, 2));
    let expected = net.evaluate(&ps[..]).unwrap();
    let shared = Arc::new(SharedNetwork::new(net));
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let (shared, ps) = (shared.clone(), ps.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for chunk in ps.chunks(8 + t) {
                    got.extend(shared.evaluate(chunk).unwrap());
                }
                got
            })
        })
        .collect();
    for h in handles {
        close(&h.join().unwrap(), &expected, 1e-5);
    }
}

#[test]
fn the_inference_service_batches_a_network_across_clients() {
    let net = network();
    let ps = Arc::new(positions(96, 3));
    let expected = net.evaluate(&ps[..]).unwrap();
    let slot = SharedNetwork::slot(net, "random");
    let server = InferenceServer::spawn(slot.clone(), 64);
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let client = server.client();
            let ps = ps.clone();
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for chunk in ps.chunks(1 + t) {
                    let refs: Vec<&Position> = chunk.iter().collect();
                    got.extend(client.evaluate(&refs).unwrap());
                }
                got
            })
        })
        .collect();
    for h in handles {
        close(&h.join().unwrap(), &expected, 1e-5);
    }
    // One client, shared by reference between scoped threads.
    let client = server.client();
    std::thread::scope(|scope| {
        for t in 0..3 {
            let (client, ps, expected) = (&client, &ps, &expected);
            scope.spawn(move || {
                let refs: Vec<&Position> = ps[t * 32..(t + 1) * 32].iter().collect();
                let got = client.evaluate(&refs).unwrap();
                close(&got, &expected[t * 32..(t + 1) * 32], 1e-5);
            });
        }
    });
    drop(client);
    let stats = server.stats().clone();
    drop(server);
    let (batches, positions) = (stats.batches.load(Ordering::Relaxed), stats.positions.load(Ordering::Relaxed));
    let requests: u64 = (0..6).map(|t| 96u64.div_ceil(1 + t)).sum();
    eprintln!("{batches} batches, mean batch {:.1}, {requests} requests", positions as f64 / batches as f64);
    assert_eq!(positions, 7 * 96);
    assert!(batches <= requests + 3);
    // The network is still usable once the service is gone.
    let (network, _) = slot.get();
    assert_eq!(network.evaluate(&[&ps[0], &ps[1]]).unwrap().len(), 2);
}

/// CUDA only: f32, f16 and bf16 inference on the GPU agree with f32 on the CPU. Ignored by
/// default, so that `cargo test` lists it as not run rather than passing it on a CPU machine;
/// on a GPU machine: `cargo test -p koma-nn --test network -- --ignored cuda_`.
#[test]
#[ignore = "needs CUDA: cargo test -p koma-nn --test network -- --ignored cuda_"]
fn cuda_precisions_agree_with_cpu() {
    assert!(tch::Cuda::is_available(), "this test needs CUDA, and libtorch sees no CUDA device here");
    use koma_nn::{DeviceSpec, Precision, TrainingInfo};
    let net = network();
    let ps = positions(64, 9);
    let expected = net.evaluate(&ps[..]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let mut net = net;
    net.save(&path, &TrainingInfo::default()).unwrap();
    for (precision, tol) in [(Precision::F32, 1e-3), (Precision::F16, 2e-2), (Precision::Bf16, 6e-2)] {
        let options = RunOptions { device: DeviceSpec::Cuda(0), precision, cpu_threads: None };
        let gpu = Network::load(&path, &options).unwrap();
        assert!(gpu.device().is_cuda());
        let worst_of = |got: Vec<Evaluation>| {
            got.iter()
                .zip(&expected)
                .flat_map(|(a, b)| a.priors.iter().zip(&b.priors).chain(a.wdl.iter().zip(&b.wdl)))
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max)
        };
        let worst = worst_of(gpu.evaluate(&ps[..]).unwrap());
        eprintln!("{precision}: max prior/wdl difference to CPU f32 = {worst:e}");
        assert!(worst < tol, "{precision}: {worst}");
        // As inference runs it: batch norm folded, in this precision.
        let shared = SharedNetwork::new(gpu);
        assert!(shared.with(|net| net.net().is_folded()));
        let worst = worst_of(shared.evaluate(&ps[..]).unwrap());
        eprintln!("{precision}, folded: max prior/wdl difference to CPU f32 = {worst:e}");
        assert!(worst < tol, "{precision}, folded: {worst}");
    }
}

#[test]
fn non_finite_outputs_are_an_error_naming_the_network_and_the_count() {
    let net = network();
    // A NaN weight in the value head's last layer: every position's W/D/L turns NaN.
    tch::no_grad(|| {
        for (name, mut tensor) in net.var_store().variables() {
            if name.starts_with("value") && name.ends_with("bias") && tensor.size() == [3] {
                let _ = tensor.fill_(f64::NAN);
            }
        }
    });
    // The probe that self-play runs at every load refuses it.
    let probed = net.probe();
    assert!(matches!(probed, Err(Error::NonFinite { positions: 2, batch: 2, .. })), "{probed:?}");
    assert!(network().probe().is_ok());
    let ps = positions(5, 11);
    match net.evaluate(&ps[..]) {
        Err(Error::NonFinite { model, positions, batch }) => {
            assert_eq!((positions, batch), (5, 5));
            assert!(model.contains("untrained"), "{model}");
        }
        other => panic!("NaN outputs gave {other:?}"),
    }
    // Through the search's trait too: an error, not uniform priors.
    let shared = SharedNetwork::new(net);
    let refs: Vec<&Position> = ps.iter().collect();
    let error = koma_mcts::Evaluator::evaluate(&shared, &refs).expect_err("NaN became evaluations");
    let text = error.to_string();
    assert!(text.contains("non-finite") && text.contains("5 of 5"), "{text}");
    // The network's own error is kept as the cause, not flattened into text.
    match &error {
        koma_mcts::EvalError::Failed(cause) => {
            assert!(matches!(cause.downcast_ref::<Error>(), Some(Error::NonFinite { positions: 5, .. })), "{cause:?}")
        }
        other => panic!("expected the network's failure, got {other:?}"),
    }
}

#[test]
fn a_libtorch_failure_in_the_forward_pass_is_an_error_not_a_panic() {
    let net = network();
    // A stem weight of the wrong shape: libtorch's convolution fails (tch panics on it, as it
    // does on CUDA out-of-memory).
    tch::no_grad(|| {
        let mut weight = net.var_store().variables().remove("stem.conv.weight").expect("the stem convolution");
        weight.set_data(&tch::Tensor::zeros([4, 4, 1, 1], (tch::Kind::Float, tch::Device::Cpu)));
    });
    match net.evaluate(&positions(2, 5)[..]) {
        Err(Error::Forward(message)) => assert!(!message.is_empty()),
        other => panic!("a failing forward pass gave {other:?}"),
    }
}

#[test]
fn the_features_of_a_mirrored_position_are_the_mirrored_planes() {
    // What mirror augmentation (`[train.window] mirror`) relies on: reflecting the position
    // reflects every input plane along the files and changes nothing else.
    for pos in positions(60, 21) {
        let (mut a, mut b) = (koma_nn::InputBatch::new(), koma_nn::InputBatch::new());
        a.encode(&[&pos]);
        b.encode(&[&pos.mirror()]);
        for (original, mirrored, planes) in
            [(a.input1(), b.input1(), koma_nn::FEATURES1_NUM), (a.input2(), b.input2(), koma_nn::FEATURES2_NUM)]
        {
            for plane in 0..planes {
                for index in 0..81u8 {
                    let sq = koma_shogi::Square::from_index(index).unwrap();
                    assert_eq!(
                        original[plane * 81 + sq.index()],
                        mirrored[plane * 81 + sq.mirror().index()],
                        "plane {plane}, square {sq} of {}",
                        pos.to_sfen()
                    );
                }
            }
        }
    }
}

/// The thread count a budget asks for is the one the batch's thread runs with (libtorch keeps a
/// count per thread, so setting it elsewhere would not reach an inference service's thread), and
/// the answers are the network's whatever the count.
#[test]
fn a_threaded_network_runs_each_batch_with_the_budgets_threads_on_the_calling_thread() {
    let ps = positions(6, 11);
    let refs: Vec<&Position> = ps.iter().collect();
    let reference = SharedNetwork::new(network());
    let expected = Evaluator::evaluate(&reference, &refs).unwrap();
    let budget = Arc::new(std::sync::atomic::AtomicUsize::new(1));
    let threaded = koma_nn::ThreadedNetwork::new(reference.into_inner(), budget.clone());
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                for threads in [1, 2, 1] {
                    budget.store(threads, Ordering::Relaxed);
                    close(&threaded.evaluate(&refs).unwrap(), &expected, 1e-5);
                    assert_eq!(tch::get_num_threads(), threads as i32);
                }
            })
            .join()
            .unwrap();
    });
}

/// Batch norm folded into the convolutions answers what the unfolded network answers, for every
/// kind of block (plain, squeeze-excitation, global pooling whose bias enters between a
/// convolution and its batch norm) and activation, with random running statistics; training
/// passes of a folded network still normalise with the batch's statistics.
#[test]
fn folded_batch_norm_answers_what_batch_norm_answers() {
    let ps = positions(12, 21);
    let mut configs = vec![ModelConfig::tiny(), ModelConfig::resnet10_swish()];
    let mut mixed = ModelConfig::tiny();
    mixed.blocks = 4;
    mixed.channels = 32;
    mixed.activation = koma_nn::Activation::Mish;
    mixed.se = Some(koma_nn::SeConfig { ratio: 4 });
    mixed.global_pool = Some(koma_nn::GlobalPoolConfig { every: 2, channels: 8 });
    configs.push(mixed);
    for (i, config) in configs.iter_mut().enumerate() {
        config.blocks = config.blocks.min(4);
        let plain = Network::new(config, &RunOptions::cpu(), Some(5)).unwrap();
        koma_nn::model::randomize(plain.var_store(), 30 + i as u64);
        let mut folded = Network::new(config, &RunOptions::cpu(), Some(5)).unwrap();
        {
            let _guard = tch::no_grad_guard();
            let ours = plain.var_store().variables();
            for (name, mut var) in folded.var_store().variables() {
                var.copy_(&ours[&name]);
            }
        }
        folded.fold_batch_norm();
        let (a, b) = (plain.evaluate(&ps).unwrap(), folded.evaluate(&ps).unwrap());
        close(&a, &b, 2e-4);
        // The raw logits too (priors are a softmax of them, which can hide an offset).
        let mut batch = koma_nn::InputBatch::with_capacity(ps.len());
        batch.encode(&ps);
        let (in1, in2) = plain.upload(&batch);
        let _guard = tch::no_grad_guard();
        for train in [false, true] {
            let (p1, v1) = plain.net().forward_t(&in1, &in2, train);
            let (p2, v2) = folded.net().forward_t(&in1, &in2, train);
            let scale = 1.0 + p1.abs().max().double_value(&[]);
            let diff = (&p1 - &p2).abs().max().double_value(&[]).max((&v1 - &v2).abs().max().double_value(&[]));
            assert!(diff < 1e-4 * scale, "{}: train {train}: outputs differ by {diff}", config.describe());
        }
        // The folded weights are what inference uses: statistics changed after the fold change
        // nothing, until the network is unfolded.
        let (before, _) = folded.net().forward_t(&in1, &in2, false);
        for (name, mut var) in folded.var_store().variables() {
            if name.ends_with("running_var") {
                let _ = var.fill_(4.0);
            }
        }
        let (after, _) = folded.net().forward_t(&in1, &in2, false);
        assert_eq!((&before - &after).abs().max().double_value(&[]), 0.0, "{}", config.describe());
        folded.var_store_mut();
        assert!(!folded.net().is_folded(), "new weights unfold");
        let (unfolded, _) = folded.net().forward_t(&in1, &in2, false);
        assert!((&before - &unfolded).abs().max().double_value(&[]) > 1e-3, "{}", config.describe());
    }
    // A shared network is folded; taken back out, it is not.
    let shared = SharedNetwork::new(network());
    assert!(shared.with(|net| net.net().is_folded()));
    close(&shared.evaluate(&ps).unwrap(), &network().evaluate(&ps).unwrap(), 1e-5);
    assert!(!shared.into_inner().net().is_folded());
}
