//! `koma bench nn`: network throughput in positions per second for several batch sizes and two
//! networks (tiny 5×64, standard 10×192), split into
//!
//! - encode: dlshogi features of the batch into a reused buffer (rayon),
//! - forward: upload of the encoded batch, the forward pass, and copying the outputs back
//!   (`Network::forward`),
//! - evaluate: all of it plus priors over the legal moves (`Network::evaluate_with`),
//! - plain: the bare tch forward on a tensor already on the device (the ceiling),
//! - folding: what folding batch norm into the convolutions gains (`Network::fold_batch_norm`,
//!   which every measurement above runs with, as inference does): the fastest bare forward of
//!   the unfolded network ÷ the folded one's, called in turn,
//!
//! and the encoding share (encode time / forward time) at batch 256, which must stay under 5%.

use std::time::Instant;

use anyhow::Result;
use koma_nn::network::RawOutput;
use koma_nn::{InputBatch, LeafBatch, LeafOutput, ModelConfig, Network};
use koma_shogi::Position;
use serde_json::json;
use tch::{Device, Tensor};

use crate::commands::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Batch sizes to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,8,64,256,1024")]
    batch_sizes: Vec<usize>,
    /// Networks: presets (tiny, standard) or config files.
    #[arg(long, value_delimiter = ',', default_value = "tiny,standard")]
    nets: Vec<String>,
    /// Seconds to spend on each measurement (at least one run each).
    #[arg(long, default_value_t = 1.0)]
    seconds: f64,
    #[command(flatten)]
    run: RunArgs,
}

/// Positions from random games: opening to endgame, both sides to move.
pub(crate) fn sample_positions(count: usize) -> Vec<Position> {
    let mut state = 0x9e3779b97f4a7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut pos = Position::startpos();
        let plies = 1 + next() % 150;
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            pos.do_move(moves[(next() % moves.len() as u64) as usize]);
        }
        if !pos.legal_moves().is_empty() {
            out.push(pos);
        }
    }
    out
}

/// The fastest call of `a` and of `b`, called in turn (after one warm-up call each) for about
/// `budget` seconds and at least 3 times each.
fn fastest_in_turn(budget: f64, device: Device, mut a: impl FnMut(), mut b: impl FnMut()) -> (f64, f64) {
    let timed = |f: &mut dyn FnMut()| {
        let t = Instant::now();
        f();
        sync(device);
        t.elapsed().as_secs_f64()
    };
    timed(&mut a);
    timed(&mut b);
    let (mut best_a, mut best_b) = (f64::INFINITY, f64::INFINITY);
    let (start, mut runs) = (Instant::now(), 0);
    while runs < 3 || start.elapsed().as_secs_f64() < budget {
        // Each goes first every other round.
        if runs % 2 == 0 {
            best_a = best_a.min(timed(&mut a));
            best_b = best_b.min(timed(&mut b));
        } else {
            best_b = best_b.min(timed(&mut b));
            best_a = best_a.min(timed(&mut a));
        }
        runs += 1;
    }
    (best_a, best_b)
}

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// Mean seconds per call of `f`, repeated for about `budget` seconds (at least once).
fn time(budget: f64, device: Device, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut runs = 0u32;
    loop {
        f();
        runs += 1;
        sync(device);
        if start.elapsed().as_secs_f64() >= budget {
            break;
        }
    }
    start.elapsed().as_secs_f64() / runs as f64
}

pub fn run(args: Args) -> Result<()> {
    let options = args.run.options()?;
    let max_batch = args.batch_sizes.iter().copied().max().unwrap_or(1);
    let positions = sample_positions(max_batch);
    let mut report = Vec::new();
    let mut device_name = String::new();
    let mut all_ok = true;
    for name in &args.nets {
        let config = ModelConfig::from_preset_or_file(name)?;
        // Batch norm folded into the convolutions, as inference runs the network; and the same
        // weights unfolded, to measure what the fold gains.
        let mut net = Network::new(&config, &options, Some(0))?;
        net.fold_batch_norm();
        let unfolded = Network::new(&config, &options, Some(0))?;
        device_name = koma_nn::device::device_name(net.device());
        if !args.json {
            eprintln!(
                "{name} ({}, {} parameters) on {device_name} ({:?}), {} CPU threads",
                config.describe(),
                koma_nn::model::parameter_count(&config),
                net.kind(),
                tch::get_num_threads()
            );
        }
        let mut batch = InputBatch::with_capacity(max_batch);
        let mut out = RawOutput::new();
        let mut leaves = LeafBatch::for_device(net.device());
        let mut leaf_out = LeafOutput::default();
        let mut rows = Vec::new();
        let mut share_256 = None;
        for &n in &args.batch_sizes {
            let ps = &positions[..n];
            // Warm up (allocations, oneDNN / cuDNN algorithm choice) at this batch size.
            batch.encode(ps);
            net.forward(&batch, &mut out)?;
            let encode = time(args.seconds, Device::Cpu, || batch.encode(ps));
            let forward = time(args.seconds, net.device(), || net.forward(&batch, &mut out).expect("forward"));
            let evaluate = time(args.seconds, net.device(), || {
                net.evaluate_with(ps, &mut leaves, &mut leaf_out).expect("evaluate");
            });
            batch.encode(ps);
            let (in1, in2) = net.upload(&batch);
            let forward_of = |net: &Network| {
                let _guard = tch::no_grad_guard();
                let (p, v): (Tensor, Tensor) = net.net().forward_t(&in1, &in2, false);
                drop((p, v));
            };
            let plain = time(args.seconds, net.device(), || forward_of(&net));
            // Unfolded against folded, call by call in turn, each at its fastest: a difference of
            // a few percent drowns in a shared machine's drift between two measurements.
            let (unfolded_best, folded_best) =
                fastest_in_turn(args.seconds, net.device(), || forward_of(&unfolded), || forward_of(&net));
            let folded_speedup = unfolded_best / folded_best;
            let share = encode / forward;
            if n == 256 {
                share_256 = Some(share);
            }
            let pps = |s: f64| n as f64 / s;
            if !args.json {
                eprintln!(
                    "  batch {n:>5}: encode {:>10.0}/s  forward {:>9.0}/s  evaluate {:>9.0}/s  plain tch {:>9.0}/s  folding {:.2}x  encode share {:>6.2}%",
                    pps(encode),
                    pps(forward),
                    pps(evaluate),
                    pps(plain),
                    folded_speedup,
                    100.0 * share
                );
            }
            rows.push(json!({
                "batch": n,
                "encode_seconds": encode,
                "forward_seconds": forward,
                "evaluate_seconds": evaluate,
                "plain_forward_seconds": plain,
                "folded_speedup": folded_speedup,
                "encode_positions_per_second": pps(encode),
                "forward_positions_per_second": pps(forward),
                "evaluate_positions_per_second": pps(evaluate),
                "plain_forward_positions_per_second": pps(plain),
                "encode_share": share,
            }));
        }
        let ok = share_256.map(|s| s < 0.05);
        all_ok &= ok.unwrap_or(true);
        report.push(json!({
            "name": name,
            "config": config,
            "describe": config.describe(),
            "parameters": koma_nn::model::parameter_count(&config),
            "batches": rows,
            "encode_share_at_256": share_256,
            "encode_share_at_256_ok": ok,
        }));
    }
    let summary = json!({
        "device": device_name,
        "precision": args.run.precision,
        "cpu_threads": tch::get_num_threads(),
        "nets": report,
        "encode_share_ok": all_ok,
    });
    if args.json {
        println!("{summary}");
    } else {
        for net in summary["nets"].as_array().into_iter().flatten() {
            if let Some(s) = net["encode_share_at_256"].as_f64() {
                println!(
                    "{}: encoding is {:.2}% of forward time at batch 256 ({})",
                    net["name"].as_str().unwrap_or("?"),
                    100.0 * s,
                    if s < 0.05 { "ok, < 5%" } else { "TOO HIGH, must be < 5%" }
                );
            }
        }
    }
    Ok(())
}
