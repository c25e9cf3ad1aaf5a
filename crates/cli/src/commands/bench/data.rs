//! `koma bench data`: the training-data path, measured in one run on synthetic shards in a
//! temporary directory:
//!
//! 1. samples/s written to shards (`write_shard`: random games of koma-shogi with random policy
//!    targets of up to 16 moves, the self-play shard layout);
//! 2. samples/s drawn from a replay window of 1 M samples across shards (the written shards,
//!    copied until the window is full), for each window storage asked for (`--storage`: the
//!    window on disk and the window decoded in memory, one after the other in the same run);
//! 3. encoded batches/s through the training loader (window sampling, unpacking, dlshogi
//!    features and dense targets; the loader thread with a rayon pool of `--threads`), for each
//!    storage;
//! 4. the trainer's consumption: optimiser steps/s of the tiny net at the same batch size and
//!    threads, and the ratio loader batches/s ÷ trainer batches/s, which must be above 1 for the
//!    loader to keep the trainer fed; with `--need S`, also against a trainer that takes S
//!    samples/s (a GPU's, from `koma plan`).
//!
//! The process's resident memory (`VmRSS`) is read before the window opens and after sampling,
//! so the cost of an open window (HDF5 handles and chunk caches on disk, the decoded samples in
//! memory) is measured too; the window in memory also counts its decoded bytes exactly.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use koma_base::Rng;
use koma_data::{write_shard, ReplayWindow, Sample, SampleWeights, WindowSize, WindowStorage};
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
    /// The window storages measured: memory, disk or both (in one run, for their ratio).
    #[arg(long, value_enum, default_value_t = StorageChoice::Both)]
    storage: StorageChoice,
    /// Samples per second a trainer takes (e.g. gpu-small's planned 20000): the loader's rate is
    /// also given against it.
    #[arg(long)]
    need: Option<f64>,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StorageChoice {
    Memory,
    Disk,
    Both,
}

impl StorageChoice {
    fn kinds(self) -> Vec<WindowStorage> {
        match self {
            StorageChoice::Memory => vec![WindowStorage::Memory],
            StorageChoice::Disk => vec![WindowStorage::Disk],
            StorageChoice::Both => vec![WindowStorage::Disk, WindowStorage::Memory],
        }
    }
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
    // As in a training process, whose trainer sets this before its loader starts: without it the
    // loader's batch buffers are mapped and faulted in afresh for every batch (measured 2.4x
    // slower at a 500 k window when nothing had grown the heap before).
    koma_train::trainer::keep_freed_memory();
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

    // 2 and 3, for each storage: sampling from the window, and the training loader.
    let config = TrainConfig {
        device: args.device.parse().with_context(|| format!("--device {}", args.device))?,
        threads: Some(args.threads),
        batch_size: args.batch_size,
        ..TrainConfig::default()
    };
    let mut measured = Vec::new();
    let mut last_batch = Vec::new();
    for storage in args.storage.kinds() {
        let (window, batch) = measure_window(&args, &dir, storage)?;
        last_batch = batch;
        let loader = measure_loader(&args, &dir, storage, &config)?;
        measured.push((window, loader));
    }

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
    let ratio = |loader: &LoaderFigures| loader.batches_per_second / train_rate;
    let need_ratio =
        |loader: &LoaderFigures| args.need.map(|need| loader.batches_per_second * args.batch_size as f64 / need);
    if args.json {
        let storages: Vec<_> = measured
            .iter()
            .map(|(window, loader)| {
                json!({
                    "storage": window.storage,
                    "window": window,
                    "loader": loader,
                    "ratio": ratio(loader),
                    "ratio_ok": ratio(loader) > 1.0,
                    "need_ratio": need_ratio(loader),
                })
            })
            .collect();
        println!(
            "{}",
            json!({
                "batch_size": args.batch_size,
                "threads": args.threads,
                "write": {"samples": samples_written, "shards": written.len(), "seconds": write_seconds,
                          "samples_per_second": write_rate, "bytes_per_sample": bytes as f64 / samples_written as f64},
                "need": args.need,
                "storages": storages,
                "trainer": {"net": args.net, "device": args.device, "describe": model.describe(), "steps": steps,
                            "batches_per_second": train_rate, "fastest_step_seconds": best},
            })
        );
    } else {
        println!("write {write_rate:.0} samples/s | trainer {train_rate:.3} batches/s");
        for (window, loader) in &measured {
            let ratio = ratio(loader);
            let need = need_ratio(loader).map_or(String::new(), |r| format!(" | need ratio {r:.2}"));
            println!(
                "{:<6} window of {} samples: {:.0} samples/s, {} | loader {:.2} batches/s | ratio {:.1} ({}){need}",
                window.storage,
                window.samples,
                window.samples_per_second,
                window.memory(),
                loader.batches_per_second,
                ratio,
                if ratio > 1.0 { "ok: the loader keeps up" } else { "BELOW 1: the loader starves the trainer" }
            );
        }
    }
    Ok(())
}

/// The window's figures for one storage.
#[derive(serde::Serialize)]
struct WindowFigures {
    storage: &'static str,
    samples: usize,
    shards: usize,
    samples_per_second: f64,
    open_seconds: f64,
    /// The process's resident memory after sampling, and its growth since before the open.
    resident_bytes: Option<u64>,
    resident_bytes_of_window: Option<u64>,
    /// Heap bytes of the decoded samples held (in memory; 0 on disk).
    decoded_bytes: usize,
}

impl WindowFigures {
    fn memory(&self) -> String {
        let mib = |b: u64| format!("{:.0} MiB", b as f64 / 1048576.0);
        let decoded = if self.decoded_bytes > 0 {
            format!(" ({} decoded samples)", mib(self.decoded_bytes as u64))
        } else {
            String::new()
        };
        format!(
            "opened in {:.1} s, +{} resident{decoded}",
            self.open_seconds,
            self.resident_bytes_of_window.map_or("n/a".into(), mib)
        )
    }
}

#[derive(serde::Serialize)]
struct LoaderFigures {
    batches: usize,
    seconds: f64,
    batches_per_second: f64,
    samples_per_second: f64,
}

fn storage_name(storage: WindowStorage) -> &'static str {
    match storage {
        WindowStorage::Memory => "memory",
        WindowStorage::Disk => "disk",
    }
}

/// Opens the window over `dir` and draws batches for `--seconds`; returns its figures and the
/// last batch drawn.
fn measure_window(args: &Args, dir: &Path, storage: WindowStorage) -> Result<(WindowFigures, Vec<Sample>)> {
    let resident_before = resident_bytes();
    let opened = Instant::now();
    let mut window = ReplayWindow::open(dir, WindowSize::fixed(args.window), SampleWeights::default(), storage)?;
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
    let resident_after = resident_bytes();
    let figures = WindowFigures {
        storage: storage_name(storage),
        samples: window.len(),
        shards: window.shard_count(),
        samples_per_second: drawn as f64 / t.elapsed().as_secs_f64(),
        open_seconds,
        resident_bytes: resident_after,
        resident_bytes_of_window: resident_before.zip(resident_after).map(|(b, a)| a.saturating_sub(b)),
        decoded_bytes: window.resident_bytes(),
    };
    log(
        args.json,
        format!(
            "window ({}): {} samples in {} shards, {}; sampling {:.0} samples/s (batches of {})",
            figures.storage,
            figures.samples,
            figures.shards,
            figures.memory(),
            figures.samples_per_second,
            args.batch_size
        ),
    );
    Ok((figures, last_batch))
}

/// Batches/s through the training loader (its own window over `dir`), after its first batch.
fn measure_loader(args: &Args, dir: &Path, storage: WindowStorage, config: &TrainConfig) -> Result<LoaderFigures> {
    let loader = Loader::spawn(LoaderSetup {
        shards_dir: dir.to_path_buf(),
        window: WindowConfig { size: args.window, storage, ..WindowConfig::default() },
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
    let seconds = loader_times.last().zip(first).map_or(f64::NAN, |(l, f)| l.duration_since(f).as_secs_f64());
    let rate = batches as f64 / seconds;
    let mut line = format!(
        "loader ({}): {rate:.2} batches/s of {} ({:.0} samples/s), {} threads",
        storage_name(storage),
        args.batch_size,
        rate * args.batch_size as f64,
        args.threads
    );
    if let Some(need) = args.need {
        line +=
            &format!("; against a trainer of {need:.0} samples/s: ratio {:.2}", rate * args.batch_size as f64 / need);
    }
    log(args.json, line);
    Ok(LoaderFigures { batches, seconds, batches_per_second: rate, samples_per_second: rate * args.batch_size as f64 })
}
