//! `koma bench selfplay`: network evaluations per second inside self-play with the tiny net, and
//! the plain forward throughput of the same net at the same (mean) batch size in the same run.
//! Their ratio shows how much of the network's speed self-play keeps (goal ≥ 0.9).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use koma_mcts::EvaluatorSlot;
use koma_nn::{InputBatch, ModelConfig, Network, SharedNetwork};
use koma_selfplay::{SelfPlayConfig, StartPositions};
use koma_shogi::Position;
use serde_json::json;

use crate::commands::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Seconds of self-play to measure.
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Network: a preset (tiny, standard) or a config file.
    #[arg(long, default_value = "tiny")]
    net: String,
    /// Self-play worker threads and games per worker.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    #[arg(long, default_value_t = 64)]
    games_per_worker: usize,
    #[command(flatten)]
    run: RunArgs,
}

/// Plain forward passes per second of `shared`'s net on a pre-made batch of `size` positions.
fn plain_forward(shared: &SharedNetwork, size: usize) -> (f64, String) {
    let positions: Vec<Position> = (0..size)
        .map(|i| {
            let mut pos = Position::startpos();
            for k in 0..(i % 60) {
                let moves = pos.legal_moves();
                if moves.is_empty() {
                    break;
                }
                pos.do_move(moves[(k * 7 + i) % moves.len()]);
            }
            pos
        })
        .collect();
    shared.with(|net| {
        let mut batch = InputBatch::with_capacity(size);
        batch.encode(&positions);
        let (in1, in2) = net.upload(&batch);
        let _guard = tch::no_grad_guard();
        let _ = net.net().forward_t(&in1, &in2, false);
        let t = Instant::now();
        let mut runs = 0;
        while t.elapsed().as_secs_f64() < 3.0 || runs < 3 {
            let (p, v) = net.net().forward_t(&in1, &in2, false);
            let _ = (p.size(), v.size());
            if let tch::Device::Cuda(i) = net.device() {
                tch::Cuda::synchronize(i as i64);
            }
            runs += 1;
        }
        ((runs * size) as f64 / t.elapsed().as_secs_f64(), koma_nn::device::device_name(net.device()))
    })
}

pub fn run(args: Args) -> Result<()> {
    let options = args.run.options()?;
    let config = ModelConfig::from_preset_or_file(&args.net)?;
    let shared = Arc::new(SharedNetwork::new(Network::new(&config, &options, Some(0))?));
    let selfplay = SelfPlayConfig {
        workers: args.workers,
        games_per_worker: args.games_per_worker,
        max_batch: 4 * args.games_per_worker * args.workers,
        // The same games on every run of the benchmark.
        seed: Some(1),
        ..SelfPlayConfig::default()
    };
    let slot = EvaluatorSlot::new(shared.clone(), "bench");
    let stop = Arc::new(AtomicBool::new(false));
    let (sink, games) = crossbeam::channel::unbounded();
    let start = Instant::now();
    let mut evaluations = 0u64;
    let mut batches = 0u64;
    let mut busy_ns = 0u64;
    let mut moves = 0usize;
    let stop_flag = stop.clone();
    let stats = koma_selfplay::run(
        &selfplay,
        StartPositions::new(0.0, 0.0),
        &[slot],
        usize::MAX,
        sink,
        stop,
        Duration::from_millis(250),
        &mut |p| {
            evaluations = p.inference.positions;
            batches = p.inference.batches;
            busy_ns = p.inference.busy_ns;
            moves = p.moves;
            if start.elapsed().as_secs_f64() >= args.seconds {
                stop_flag.store(true, Ordering::Relaxed);
            }
        },
    )
    .map_err(anyhow::Error::msg)?;
    let seconds = start.elapsed().as_secs_f64();
    drop(games);
    let mean_batch = (evaluations as f64 / batches.max(1) as f64).round().max(1.0) as usize;
    // Measured twice after self-play; the better of the two is the ceiling on this shared, noisy
    // machine.
    let (first, device) = plain_forward(&shared, mean_batch);
    let (second, _) = plain_forward(&shared, mean_batch);
    let plain_per_second = first.max(second);
    let per_second = evaluations as f64 / seconds;
    let ratio = per_second / plain_per_second;
    if args.json {
        println!(
            "{}",
            json!({
                "bench": "selfplay", "net": args.net, "device": device, "cpu_threads": tch::get_num_threads(),
                "workers": args.workers, "games_per_worker": args.games_per_worker, "seconds": seconds,
                "evaluations": evaluations, "evaluations_per_second": per_second, "mean_batch": mean_batch,
                "inference_busy_fraction": busy_ns as f64 / 1e9 / seconds, "moves": moves, "games": stats.games,
                "plain_forward_per_second": plain_per_second, "ratio": ratio,
            })
        );
    } else {
        println!("self-play: {per_second:.0} evaluations/s (mean batch {mean_batch}, inference busy {:.0}% of the time, {moves} moves)", 100.0 * busy_ns as f64 / 1e9 / seconds);
        println!("plain forward at batch {mean_batch}: {plain_per_second:.0} positions/s on {device}");
        println!("ratio {ratio:.2}");
    }
    Ok(())
}
