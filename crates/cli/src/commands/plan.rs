//! `koma plan [CONFIG]`: a run's timeline before it starts (koma_pipeline::plan), from stated
//! throughputs (`--evals-per-s`, `--train-samples-per-s`) or, when none is given, from a short
//! measurement of the config's network on this machine.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use koma_nn::Network;
use koma_pipeline::plan::{plan, Plan, Throughput};
use koma_pipeline::PipelineConfig;

use super::bench::nn::sample_positions;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run config (TOML). Default: the embedded configs/tiny-cpu.toml.
    config: Option<PathBuf>,
    /// Network evaluations per second of all self-play together (`koma bench selfplay`'s evals/s,
    /// measured beside the trainer when they share a device). Default: measured here (see --seconds).
    #[arg(long)]
    evals_per_s: Option<f64>,
    /// Samples per second the trainer takes when it never waits (`koma bench train`). Default:
    /// measured here.
    #[arg(long)]
    train_samples_per_s: Option<f64>,
    /// Mean game length in plies (koma's CPU runs: ~90; dlshogi-style self-play: ~120).
    #[arg(long, default_value_t = 100.0)]
    plies_per_game: f64,
    /// Network evaluations per simulation (evaluation caches and terminal nodes make it < 1).
    #[arg(long, default_value_t = 1.0)]
    evals_per_simulation: f64,
    /// Shard bytes per sample on disk (`koma bench data`: 60.5).
    #[arg(long, default_value_t = 60.5)]
    bytes_per_sample: f64,
    /// Self-play processes sharing --evals-per-s (one per self-play task of a Slurm array), each
    /// with the config's workers × games_per_worker games in flight.
    #[arg(long, default_value_t = 1.0)]
    selfplay_processes: f64,
    /// CPU cores of each self-play process for search, encoding and decoding (default: this
    /// machine's): on a GPU host, the task's cores less one per inference service.
    #[arg(long)]
    host_cores: Option<f64>,
    /// Host CPU µs an evaluation costs in self-play: search, encode and decode (`koma bench
    /// selfplay --simulate-device`: its CPU figure less the device's; 12 on the 2-core machine of
    /// docs/benchmarks.md).
    #[arg(long, default_value_t = 12.0)]
    host_cpu_us_per_eval: f64,
    /// The timeline's horizon in hours (it also ends at the run's own end).
    #[arg(long, default_value_t = 168.0)]
    hours: f64,
    /// Seconds each measurement takes when a throughput is not given.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Print the plan as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let config = match &args.config {
        Some(path) => PipelineConfig::from_file(path)?,
        None => PipelineConfig::embedded_default(),
    };
    let name = args.config.as_ref().map_or("configs/tiny-cpu.toml (embedded)".to_string(), |p| p.display().to_string());
    let mut sources = Vec::new();
    let evals_per_s = match args.evals_per_s {
        Some(v) => {
            sources.push("evals/s as given".to_string());
            v
        }
        None => {
            let (v, device) = measure_inference(&config, args.seconds)?;
            sources.push(format!(
                "evals/s measured here: the network alone on {device} at batch {} (an upper bound: search and the \
                 trainer share the machine in a run)",
                config.selfplay.max_batch.min(1024)
            ));
            v
        }
    };
    let train_samples_per_s = match args.train_samples_per_s {
        Some(v) => {
            sources.push("trainer samples/s as given".to_string());
            v
        }
        None => {
            let v = measure_trainer(&config, args.seconds)?;
            sources.push(format!("trainer samples/s measured here at batch {}", config.train.batch_size));
            v
        }
    };
    let throughput = Throughput {
        evals_per_s,
        train_samples_per_s,
        plies_per_game: args.plies_per_game,
        evals_per_simulation: args.evals_per_simulation,
        bytes_per_sample: args.bytes_per_sample,
        selfplay_processes: args.selfplay_processes,
        host_cores: args.host_cores.unwrap_or(koma_base::cpu::cores() as f64),
        host_cpu_us_per_eval: args.host_cpu_us_per_eval,
        source: sources.join("; "),
    };
    let p = plan(&config, &throughput, args.hours).map_err(anyhow::Error::msg)?;
    if args.json {
        println!("{}", serde_json::json!({ "config": name, "plan": p }));
    } else {
        print_plan(&name, &p);
    }
    Ok(())
}

/// Positions per second through the config's network at self-play's batch size (capped at 1024).
fn measure_inference(config: &PipelineConfig, seconds: f64) -> Result<(f64, String)> {
    let options = config.evaluation_options()?;
    let mut net = Network::new(&config.model, &options, Some(0)).context("building the config's network")?;
    net.fold_batch_norm(); // as self-play's inference services run it
    let n = config.selfplay.max_batch.clamp(1, 1024);
    let positions = sample_positions(n);
    let mut batch = koma_nn::LeafBatch::for_device(net.device());
    let mut out = koma_nn::LeafOutput::default();
    net.evaluate_with(&positions, &mut batch, &mut out)?; // warm-up
    let start = Instant::now();
    let mut evaluated = 0usize;
    while evaluated == 0 || start.elapsed().as_secs_f64() < seconds {
        net.evaluate_with(&positions, &mut batch, &mut out)?;
        evaluated += n;
    }
    if let tch::Device::Cuda(i) = net.device() {
        tch::Cuda::synchronize(i as i64);
    }
    Ok((evaluated as f64 / start.elapsed().as_secs_f64(), koma_nn::device::device_name(net.device())))
}

/// Trainer samples per second on synthetic batches of the config's batch size.
fn measure_trainer(config: &PipelineConfig, seconds: f64) -> Result<f64> {
    let train = config.train_config();
    let batch = koma_train::bench::synthetic_batch(train.batch_size, &train);
    let figures = koma_train::bench::measure_koma(&config.model, &batch, &train, seconds, 2)?;
    Ok(figures.samples_per_second)
}

fn print_plan(name: &str, p: &Plan) {
    let t = &p.throughput;
    println!("plan of {name}");
    println!(
        "  throughput: {:.0} evals/s, trainer {:.0} samples/s ({})",
        t.evals_per_s, t.train_samples_per_s, t.source
    );
    println!(
        "  self-play: {:.1} simulations a move → {:.0} games/h, {:.0} samples/h ({:.0} plies a game), shards {:.2} GB/h",
        p.simulations_per_move, p.games_per_hour, p.samples_per_hour, t.plies_per_game, p.disk_gb_per_hour
    );
    println!(
        "  games: {:.0} in flight ({:.0} process(es)), each lasting {:.1} min; samples reach the trainer {:.1} min \
         ({:.1} models) after their move; a restart of one process loses {:.0} half-played games ({:.0} samples)",
        p.games_in_flight,
        t.selfplay_processes,
        p.game_latency_minutes,
        p.data_age_minutes,
        p.data_age_models,
        p.restart_loses_games,
        p.restart_loses_samples
    );
    println!(
        "  host: {:.1} of {:.0} cores per self-play process for search, encoding and decoding ({:.1} µs an \
         evaluation); self-play is limited by {}",
        p.host_cores_needed, t.host_cores, t.host_cpu_us_per_eval, p.bottleneck
    );
    println!("  trainer: {:.0} samples/s once started, limited by {}", p.train_samples_per_s, p.trainer_limited_by);
    println!(
        "  first step after {:.1} min, first trained model after {:.1} min; then a model every {:.1} min ({:.0} new samples each)",
        p.first_step_minutes, p.first_model_minutes, p.minutes_per_model, p.new_samples_per_model
    );
    let hours = |h: Option<f64>| h.map_or("never".to_string(), format_hours);
    println!(
        "  learning-rate schedule ends: {}; window full: {}; run ends: {}",
        hours(p.schedule_end_hours),
        hours(p.window_full_hours),
        p.run_end_hours.map_or("at Ctrl-C".to_string(), format_hours)
    );
    println!(
        "  {:>9} {:>10} {:>12} {:>10} {:>9} {:>8} {:>9} {:>7} {:>8}",
        "time", "games", "samples", "window", "step", "lr", "models", "μ", "disk GB"
    );
    for r in &p.rows {
        println!(
            "  {:>9} {:>10.0} {:>12.0} {:>10} {:>9} {:>8.5} {:>9} {:>7.3} {:>8.2}",
            format_hours(r.hours),
            r.games,
            r.samples,
            r.window,
            r.trainer_step,
            r.learning_rate,
            r.models,
            r.material_weight,
            r.disk_gb
        );
    }
    for w in &p.warnings {
        println!("  warning: {w}");
    }
}

/// 0.25 h → "15m", 1.5 h → "1h30m", 50 h → "2d2h".
fn format_hours(h: f64) -> String {
    let minutes = (h * 60.0).round() as u64;
    match minutes {
        m if m < 60 => format!("{m}m"),
        m if m < 24 * 60 => format!("{}h{:02}m", m / 60, m % 60),
        m => format!("{}d{}h", m / (24 * 60), (m % (24 * 60)) / 60),
    }
}
