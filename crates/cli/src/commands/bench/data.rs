//! `koma bench data`: the training-data path, measured in one run on synthetic shards in a
//! temporary directory:
//!
//! 1. samples/s written to shards (`write_shard`: random games of koma-shogi with random policy
//!    targets of up to 16 moves, the self-play shard layout);
//! 2. samples/s drawn from a replay window of 1 M samples across shards (the written shards,
//!    copied until the window is full);
//! 3. encoded batches/s through the training loader (window sampling, unpacking, dlshogi
//!    features and dense targets; the loader thread with a rayon pool of `--threads`);
//! 4. the trainer's consumption: optimiser steps/s of the tiny net at the same batch size and
//!    threads, and the ratio loader batches/s ÷ trainer batches/s, which must be above 1 for the
//!    loader to keep the trainer fed; with `--need S`, also against a trainer that takes S
//!    samples/s (a GPU's, from `koma plan`).
//!
//! The process's resident memory (`VmRSS`) is read before and after the window opens, so the
//! cost of an open window of many shards (HDF5 handles and chunk caches) is measured too.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use koma_base::Rng;
use koma_data::{write_shard, ReplayWindow, SampleWeights, WindowSize};
use koma_nn::ModelConfig;
use koma_train::loader::{Loader, LoaderMsg, LoaderSetup};
use koma_train::synth::{random_games, SynthPolicy};
use koma_train::{HostBatch, ModelInit, TrainConfig, Trainer, WindowConfig};
use rand::{RngExt, SeedableRng};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Samples in the replay window (distinct shards are copied up to this).
    #[arg(long, default_value_t = 1_000_000)]
    window: usize,
    /// Distinct samples generated and written (the write measurement).
    #[arg(long, default_value_t = 100_000)]
    unique: usize,
    /// Samples per shard (whole games, so about this many).
    #[arg(long, default_value_t = 10_000)]
    shard_samples: usize,
    #[arg(long, default_value_t = 1024)]
    batch_size: usize,
    /// Threads of the loader's encoding pool and of libtorch for the trainer.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Seconds per measurement (window sampling, loader; the trainer does at least 2 steps).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// The network the trainer measurement uses (preset or model config file).
    #[arg(long, default_value = "tiny")]
    net: String,
    /// Where the trainer runs: cpu, cuda, cuda:N or auto.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Directory for the temporary shards (default: the system's temporary directory).
    #[arg(long)]
    tmp: Option<PathBuf>,
    /// Samples per second a trainer takes (e.g. gpu-small's planned 20000): the loader's rate is
    /// also given against it.
    #[arg(long)]
    need: Option<f64>,
}

/// The process's resident memory in bytes (Linux `/proc/self/status`), if readable.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn log(json: bool, line: String) {
    if !json {
        eprintln!("{line}");
    }
}

pub fn run(args: Args) -> Result<()> {
    if args.batch_size == 0 || args.threads == 0 || args.unique == 0 || args.window == 0 {
        bail!("--batch-size, --threads, --unique and --window must be at least 1");
    }
    if args.need.is_some_and(|n| !(n.is_finite() && n > 0.0)) {
        bail!("--need must be a positive number of samples per second");
    }
    // The loader encodes batches on rayon's global pool; it reads this when first used.
    std::env::set_var("RAYON_NUM_THREADS", args.threads.to_string());
    tch::set_num_threads(args.threads as i32);
    let model = ModelConfig::from_preset_or_file(&args.net)?;
    let base = args.tmp.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&base).with_context(|| format!("creating {}", base.display()))?;
    let scratch = tempfile::Builder::new()
        .prefix("koma-bench-data-")
        .tempdir_in(&base)
        .context("creating the scratch directory")?;
    let dir = scratch.path().join("shards");
    std::fs::create_dir_all(&dir)?;

    // 1. Writing shards.
    let mut written = Vec::new();
    let (mut samples_written, mut write_seconds, mut bytes) = (0usize, 0.0f64, 0u64);
    let mut seed = 1u64;
    while samples_written < args.unique {
        let mut games = Vec::new();
        let mut n = 0;
        while n < args.shard_samples.min(args.unique - samples_written).max(1) {
            for g in random_games(8, seed, SynthPolicy::Random) {
                n += g.samples.len();
                games.push(g);
            }
            seed += 1;
        }
        let path = dir.join(format!("bench-{:06}.h5", written.len()));
        let t = Instant::now();
        samples_written += write_shard(&path, &games)?;
        write_seconds += t.elapsed().as_secs_f64();
        bytes += std::fs::metadata(&path)?.len();
        written.push(path);
    }
    let write_rate = samples_written as f64 / write_seconds;
    log(
        args.json,
        format!(
            "write: {samples_written} samples in {} shards, {:.0} samples/s, {:.1} bytes/sample on disk",
            written.len(),
            write_rate,
            bytes as f64 / samples_written as f64
        ),
    );

    // Copies up to the window size (not timed).
    let mut total = samples_written;
    let mut copies = 0usize;
    'fill: loop {
        for src in &written {
            if total >= args.window {
                break 'fill;
            }
            let dst = dir.join(format!("copy-{copies:06}.h5"));
            std::fs::copy(src, &dst)?;
            total += koma_data::ShardReader::open(&dst)?.len();
            copies += 1;
        }
    }

    // 2. Sampling from the window.
    let resident_before = resident_bytes();
    let opened = Instant::now();
    let mut window = ReplayWindow::open(&dir, WindowSize::fixed(args.window), SampleWeights::default())?;
    let open_seconds = opened.elapsed().as_secs_f64();
    let mut rng = Rng::seed_from_u64(7);
    let t = Instant::now();
    let mut drawn = 0usize;
    let mut draws = 0usize;
    let mut last_batch = Vec::new();
    while draws < 2 || t.elapsed().as_secs_f64() < args.seconds {
        last_batch = window.sample(args.batch_size, &mut |n| rng.random_range(0..n))?;
        drawn += last_batch.len();
        draws += 1;
    }
    let sample_rate = drawn as f64 / t.elapsed().as_secs_f64();
    let resident_after = resident_bytes();
    let window_resident =
        resident_before.zip(resident_after).map(|(before, after)| after.saturating_sub(before) as f64);
    log(
        args.json,
        format!(
            "window: opened {} shards in {open_seconds:.1} s; resident memory {} (+{} for the open window after sampling)",
            window.shard_count(),
            resident_after.map_or("n/a".into(), |b| format!("{:.0} MiB", b as f64 / 1048576.0)),
            window_resident.map_or("n/a".into(), |b| format!("{:.0} MiB", b / 1048576.0)),
        ),
    );
    log(
        args.json,
        format!(
            "window: {} samples in {} shards; sampling {:.0} samples/s (batches of {})",
            window.len(),
            window.shard_count(),
            sample_rate,
            args.batch_size
        ),
    );
    let window_samples = window.len();
    let window_shards = window.shard_count();
    drop(window);

    // 3. The training loader.
    let config = TrainConfig {
        device: args.device.parse().with_context(|| format!("--device {}", args.device))?,
        threads: Some(args.threads),
        batch_size: args.batch_size,
        ..TrainConfig::default()
    };
    let loader = Loader::spawn(LoaderSetup {
        shards_dir: dir.clone(),
        window: WindowConfig { size: args.window, ..WindowConfig::default() },
        loss: config.loss.clone(),
        batch_size: args.batch_size,
        prefetch: 2,
        follow: None,
        rng: Rng::seed_from_u64(11),
        samples_seen: 0,
        replies: false,
    })?;
    let mut loader_times = Vec::new();
    let mut first: Option<Instant> = None;
    let mut batches = 0usize;
    let deadline = Duration::from_secs_f64(args.seconds.max(0.0) + 120.0);
    let started = Instant::now();
    loop {
        match loader.recv_timeout(Duration::from_secs(60)) {
            Some(Ok(LoaderMsg::Batch(b, _))) => {
                if b.len() != args.batch_size {
                    bail!("the loader gave a batch of {} samples, expected {}", b.len(), args.batch_size);
                }
                let now = Instant::now();
                match first {
                    // The first batch includes opening the window: the clock starts after it.
                    None => first = Some(now),
                    Some(_) => {
                        batches += 1;
                        loader_times.push(now);
                    }
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e.into()),
            None => bail!("the loader produced nothing for 60 s"),
        }
        let measured = first.map_or(0.0, |f| f.elapsed().as_secs_f64());
        if (batches >= 3 && measured >= args.seconds) || started.elapsed() > deadline {
            break;
        }
    }
    drop(loader);
    let loader_seconds = loader_times.last().zip(first).map_or(f64::NAN, |(l, f)| l.duration_since(f).as_secs_f64());
    let loader_rate = batches as f64 / loader_seconds;
    log(
        args.json,
        format!(
            "loader: {loader_rate:.2} batches/s of {} ({:.0} samples/s), {} threads",
            args.batch_size,
            loader_rate * args.batch_size as f64,
            args.threads
        ),
    );

    // 4. The trainer's consumption on a batch like the loader's.
    config.validate()?;
    let batch = HostBatch::from_samples(&last_batch, &config.loss);
    let mut trainer = Trainer::new(&config, &ModelInit::Fresh(model.clone()))?;
    trainer.train_step(&batch)?; // warm-up
    let t = Instant::now();
    let mut steps = 0usize;
    let mut best = f64::INFINITY;
    while steps < 2 || t.elapsed().as_secs_f64() < args.seconds {
        let s = Instant::now();
        trainer.train_step(&batch)?;
        best = best.min(s.elapsed().as_secs_f64());
        steps += 1;
    }
    let train_rate = steps as f64 / t.elapsed().as_secs_f64();
    let ratio = loader_rate / train_rate;
    let need_ratio = args.need.map(|need| loader_rate * args.batch_size as f64 / need);
    if let (Some(need), Some(r)) = (args.need, need_ratio) {
        log(args.json, format!("loader against a trainer of {need:.0} samples/s: ratio {r:.2}"));
    }
    log(
        args.json,
        format!(
            "trainer ({}, {}, {}): {train_rate:.3} batches/s of {} (fastest step {best:.3} s), {} threads",
            args.net,
            args.device,
            model.describe(),
            args.batch_size,
            args.threads
        ),
    );
    if args.json {
        println!(
            "{}",
            json!({
                "batch_size": args.batch_size,
                "threads": args.threads,
                "write": {"samples": samples_written, "shards": written.len(), "seconds": write_seconds,
                          "samples_per_second": write_rate, "bytes_per_sample": bytes as f64 / samples_written as f64},
                "window": {"samples": window_samples, "shards": window_shards, "samples_per_second": sample_rate,
                           "open_seconds": open_seconds, "resident_bytes": resident_after,
                           "resident_bytes_of_window": window_resident},
                "need": args.need.map(|n| json!({"samples_per_second": n, "ratio": need_ratio})),
                "loader": {"batches": batches, "seconds": loader_seconds, "batches_per_second": loader_rate,
                           "samples_per_second": loader_rate * args.batch_size as f64},
                "trainer": {"net": args.net, "device": args.device, "describe": model.describe(), "steps": steps,
                            "batches_per_second": train_rate, "fastest_step_seconds": best},
                "ratio": ratio,
                "ratio_ok": ratio > 1.0,
            })
        );
    } else {
        println!(
            "write {:.0} samples/s | window of {} samples: {:.0} samples/s | loader {:.2} batches/s | trainer {:.3} batches/s | ratio {:.1} ({})",
            write_rate,
            window_samples,
            sample_rate,
            loader_rate,
            train_rate,
            ratio,
            if ratio > 1.0 { "ok: the loader keeps up" } else { "BELOW 1: the loader starves the trainer" }
        );
    }
    Ok(())
}
