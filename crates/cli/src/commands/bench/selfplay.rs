//! `koma bench selfplay`: network evaluations per second inside self-play.
//!
//! With a network (the default): self-play's evaluations/s against the plain forward throughput of
//! the same net at the same (mean) batch size in the same run; their ratio shows how much of the
//! network's speed self-play keeps (goal ≥ 0.95 on the CPU).
//!
//! With `--simulate-device SPEC`: a simulated accelerator ([`koma_nn::simulated`]) stands in for the
//! forward pass while search, services, encoding and decoding run for real, and self-play runs
//! at the same device with one inference service (the design of before) and with several taking
//! turns on it, `--rounds` times each in alternating order. Each design's device busy fraction,
//! evaluations/s and where the time went are reported, and the ratio of the two.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use koma_mcts::{Evaluator, EvaluatorSlot};
use koma_nn::simulated::{DeviceModel, SimulatedDevice, SimulatedNetwork, StageCounts};
use koma_nn::{InputBatch, ModelConfig, Network, SharedNetwork};
use koma_pipeline::resources::{load_average, process_cpu_seconds};
use koma_selfplay::{InferenceDevice, SelfPlayConfig, StartPositions};
use serde_json::json;

use crate::commands::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Seconds of self-play to measure (each design, with --simulate-device).
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Network: a preset (tiny, standard, resnet10-swish) or a config file.
    #[arg(long, default_value = "tiny")]
    net: String,
    /// Self-play worker threads and games per worker.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    #[arg(long, default_value_t = 64)]
    games_per_worker: usize,
    /// Largest batch of an inference service (default: 4 leaves of every game, as before).
    #[arg(long)]
    max_batch: Option<usize>,
    /// Inference services per device (default: 2 on an accelerator, 1 on the CPU; with
    /// --simulate-device, the design compared with one service).
    #[arg(long)]
    services: Option<usize>,
    /// Stand a simulated accelerator in for the forward pass: a preset (h200, h100) or
    /// `EVALS_PER_S[,launch=MS][,bus=GBPS][,pad=ROWS]`, e.g. `20000,launch=0.5`. Compares one
    /// inference service with --services (default 2) at that device.
    #[arg(long, value_name = "SPEC")]
    simulate_device: Option<String>,
    /// With --simulate-device: rounds of both designs, in alternating order (one service first,
    /// then the other first), so that a drift of the machine's speed falls on both.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    #[command(flatten)]
    run: RunArgs,
}

/// Plain forward passes per second of `shared`'s net on a pre-made batch of `size` positions.
fn plain_forward(shared: &SharedNetwork, size: usize) -> (f64, String) {
    let positions = super::nn::sample_positions(size);
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

/// What one timed self-play run measured, all read at its last progress report.
struct Measured {
    seconds: f64,
    evaluations: u64,
    batches: u64,
    moves: usize,
    games: usize,
    cpu_seconds: f64,
    /// The simulated device's times at that report.
    times: StageCounts,
}

impl Measured {
    fn per_second(&self) -> f64 {
        self.evaluations as f64 / self.seconds
    }

    fn mean_batch(&self) -> f64 {
        self.evaluations as f64 / self.batches.max(1) as f64
    }
}

/// Self-play on `device` for `seconds` (the same games every time: seed 1). Every figure is read
/// in the same progress report, so the shutdown after it counts in none of them.
fn measure(
    config: &SelfPlayConfig,
    device: InferenceDevice,
    seconds: f64,
    times: &dyn Fn() -> StageCounts,
) -> Result<Measured> {
    let stop = Arc::new(AtomicBool::new(false));
    let (sink, games) = crossbeam::channel::unbounded();
    let cpu_start = process_cpu_seconds();
    let mut measured = Measured {
        seconds: 0.0,
        evaluations: 0,
        batches: 0,
        moves: 0,
        games: 0,
        cpu_seconds: 0.0,
        times: StageCounts::default(),
    };
    let stop_flag = stop.clone();
    koma_selfplay::run(
        config,
        StartPositions::new(0.0, 0.0),
        &[device],
        usize::MAX,
        sink,
        stop,
        Duration::from_millis(250),
        &mut |p| {
            if stop_flag.load(Ordering::Relaxed) {
                return;
            }
            measured = Measured {
                seconds: p.seconds,
                evaluations: p.inference.positions,
                batches: p.inference.batches,
                moves: p.moves,
                games: p.stats.games,
                cpu_seconds: process_cpu_seconds() - cpu_start,
                times: times(),
            };
            if p.seconds >= seconds {
                stop_flag.store(true, Ordering::Relaxed);
            }
        },
    )
    .map_err(anyhow::Error::msg)?;
    drop(games);
    if measured.evaluations == 0 {
        bail!("self-play evaluated nothing in {seconds} s");
    }
    Ok(measured)
}

fn selfplay_config(args: &Args, services: usize) -> SelfPlayConfig {
    SelfPlayConfig {
        workers: args.workers,
        games_per_worker: args.games_per_worker,
        max_batch: args.max_batch.unwrap_or(4 * args.games_per_worker * args.workers),
        inference_services: services,
        // The same games on every run of the benchmark.
        seed: Some(1),
        ..SelfPlayConfig::default()
    }
}

pub fn run(args: Args) -> Result<()> {
    if args.seconds <= 0.0 || args.workers == 0 || args.games_per_worker == 0 || args.max_batch == Some(0) {
        bail!("--seconds, --workers, --games-per-worker and --max-batch must be > 0");
    }
    match &args.simulate_device {
        Some(spec) => {
            let model: DeviceModel = spec.parse().map_err(anyhow::Error::msg)?;
            simulated(&args, model)
        }
        None => network(&args),
    }
}

fn network(args: &Args) -> Result<()> {
    let options = args.run.options()?;
    let config = ModelConfig::from_preset_or_file(&args.net)?;
    let network = Network::new(&config, &options, Some(0))?;
    let accelerator = network.is_accelerator();
    let shared = Arc::new(SharedNetwork::new(network));
    let selfplay = selfplay_config(args, args.services.unwrap_or(0));
    let services = selfplay.services_per_device(accelerator).min(args.workers);
    let device = InferenceDevice { slot: EvaluatorSlot::new(shared.clone(), "bench"), accelerator };
    let m = measure(&selfplay, device, args.seconds, &StageCounts::default)?;
    let mean_batch = m.mean_batch().round().max(1.0) as usize;
    // Measured twice after self-play; the better of the two is the ceiling on this shared, noisy
    // machine.
    let (first, device) = plain_forward(&shared, mean_batch);
    let (second, _) = plain_forward(&shared, mean_batch);
    let plain_per_second = first.max(second);
    let per_second = m.per_second();
    let ratio = per_second / plain_per_second;
    if args.json {
        println!(
            "{}",
            json!({
                "bench": "selfplay", "net": args.net, "device": device, "cpu_threads": tch::get_num_threads(),
                "workers": args.workers, "games_per_worker": args.games_per_worker, "services": services,
                "seconds": m.seconds, "evaluations": m.evaluations, "evaluations_per_second": per_second,
                "mean_batch": mean_batch, "moves": m.moves, "games": m.games,
                "cpu_seconds_per_evaluation": m.cpu_seconds / m.evaluations.max(1) as f64,
                "plain_forward_per_second": plain_per_second, "ratio": ratio,
                "load_average": load_average(),
            })
        );
    } else {
        println!(
            "self-play: {per_second:.0} evaluations/s (mean batch {mean_batch}, {services} inference service(s), {} moves, {:.1} CPU µs an evaluation)",
            m.moves,
            1e6 * m.cpu_seconds / m.evaluations.max(1) as f64
        );
        println!("plain forward at batch {mean_batch}: {plain_per_second:.0} positions/s on {device}");
        println!("ratio {ratio:.2}");
    }
    Ok(())
}

/// One design's figures at the simulated device: each round's, and their means.
fn design_report(name: &str, services: usize, rounds: &[Measured]) -> serde_json::Value {
    let mean = |f: &dyn Fn(&Measured) -> f64| rounds.iter().map(f).sum::<f64>() / rounds.len() as f64;
    let per_eval =
        |ns: fn(&StageCounts) -> u64| mean(&|m: &Measured| ns(&m.times) as f64 / 1e3 / m.times.positions.max(1) as f64);
    let busy = |m: &Measured| m.times.device_ns as f64 / 1e9 / m.seconds;
    json!({
        "design": name, "services": services, "rounds": rounds.len(),
        "seconds": mean(&|m| m.seconds),
        "evaluations": rounds.iter().map(|m| m.evaluations).sum::<u64>(),
        "evaluations_per_second": mean(&|m| m.per_second()),
        "evaluations_per_second_by_round": rounds.iter().map(|m| m.per_second()).collect::<Vec<_>>(),
        "device_busy_fraction": mean(&busy),
        "device_busy_fraction_by_round": rounds.iter().map(busy).collect::<Vec<_>>(),
        "mean_batch": mean(&|m| m.mean_batch()),
        "mean_rows": mean(&|m| m.times.rows as f64 / m.times.batches.max(1) as f64),
        "moves": rounds.iter().map(|m| m.moves).sum::<usize>(),
        "games": rounds.iter().map(|m| m.games).sum::<usize>(),
        "us_per_evaluation": {
            "encode": per_eval(|t| t.encode_ns), "queue": per_eval(|t| t.queue_ns),
            "device": per_eval(|t| t.device_ns), "decode": per_eval(|t| t.decode_ns),
        },
        "cpu_us_per_evaluation": mean(&|m| 1e6 * m.cpu_seconds / m.evaluations.max(1) as f64),
    })
}

fn simulated(args: &Args, model: DeviceModel) -> Result<()> {
    let multi = args.services.unwrap_or(2).max(1);
    if multi > args.workers {
        bail!(
            "--services {multi} needs at least {multi} workers (--workers {}): each service serves its own",
            args.workers
        );
    }
    if args.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    let designs = [("single", 1), ("multi", multi)];
    let mut measured: [Vec<Measured>; 2] = [Vec::new(), Vec::new()];
    for round in 0..args.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for d in order {
            let device = SimulatedDevice::new(model);
            let evaluator: Arc<dyn Evaluator> = Arc::new(SimulatedNetwork::new(device.clone()));
            let slot = InferenceDevice { slot: EvaluatorSlot::new(evaluator, "simulated"), accelerator: true };
            let config = selfplay_config(args, designs[d].1);
            measured[d].push(measure(&config, slot, args.seconds, &|| device.times())?);
        }
    }
    let reports: Vec<serde_json::Value> =
        designs.iter().zip(&measured).map(|(&(name, services), m)| design_report(name, services, m)).collect();
    let get = |r: &serde_json::Value, key: &str| r[key].as_f64().unwrap_or(0.0);
    let ratio = get(&reports[1], "evaluations_per_second") / get(&reports[0], "evaluations_per_second").max(1e-9);
    let load = load_average();
    let device = json!({
        "evals_per_s": model.evals_per_s, "launch_ms": model.launch.as_secs_f64() * 1e3,
        "bus_gb_per_s": model.bus_bytes_per_s / 1e9, "pad_multiple": model.pad_multiple,
    });
    if args.json {
        println!(
            "{}",
            json!({
                "bench": "selfplay", "simulated_device": device, "workers": args.workers, "rounds": args.rounds,
                "games_per_worker": args.games_per_worker, "max_batch": selfplay_config(args, 1).max_batch,
                "designs": reports, "ratio": ratio, "load_average": load,
            })
        );
        return Ok(());
    }
    println!(
        "simulated device: {:.0} evaluations/s, launch {:.2} ms, bus {:.0} GB/s, rows padded to {}; {} workers × {} games, max batch {}",
        model.evals_per_s,
        model.launch.as_secs_f64() * 1e3,
        model.bus_bytes_per_s / 1e9,
        model.pad_multiple,
        args.workers,
        args.games_per_worker,
        selfplay_config(args, 1).max_batch
    );
    println!(
        "{:<8} {:>8} {:>9} {:>7} {:>7} {:>6}   µs an evaluation: {:>6} {:>6} {:>6} {:>6} {:>6}",
        "design", "services", "evals/s", "busy", "batch", "rows", "encode", "queue", "device", "decode", "CPU"
    );
    for r in &reports {
        let us = &r["us_per_evaluation"];
        let f = |v: &serde_json::Value| v.as_f64().unwrap_or(0.0);
        println!(
            "{:<8} {:>8} {:>9.0} {:>6.1}% {:>7.0} {:>6.0}   {:>24.1} {:>6.1} {:>6.1} {:>6.1} {:>6.1}",
            r["design"].as_str().unwrap_or(""),
            r["services"],
            get(r, "evaluations_per_second"),
            100.0 * get(r, "device_busy_fraction"),
            get(r, "mean_batch"),
            get(r, "mean_rows"),
            f(&us["encode"]),
            f(&us["queue"]),
            f(&us["device"]),
            f(&us["decode"]),
            get(r, "cpu_us_per_evaluation"),
        );
    }
    println!("evaluations/s, {multi} services ÷ 1: {ratio:.2}");
    if args.rounds > 1 {
        let by_round = |r: &serde_json::Value| {
            r["evaluations_per_second_by_round"]
                .as_array()
                .map(|a| a.iter().map(|v| format!("{:.0}", v.as_f64().unwrap_or(0.0))).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        };
        println!("by round: one service {}; {multi} services {}", by_round(&reports[0]), by_round(&reports[1]));
    }
    if let Some([one, five, _]) = load {
        println!("load average {one:.2} (1 min), {five:.2} (5 min)");
    }
    Ok(())
}
