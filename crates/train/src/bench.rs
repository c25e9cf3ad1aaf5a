//! `koma bench train`: training throughput (samples per second) of koma's trainer, against the
//! identical network (python/koma/model.py), batch, loss and optimiser in plain PyTorch, measured
//! in the same run with the same number of threads.
//!
//! - koma: [`Trainer::train_step`] on one prepared batch, repeated (host batch → tensors,
//!   forward in training mode, both losses and accuracies, backward, gradient norm, SGD with
//!   Nesterov momentum and weight decay, reading the step's statistics back);
//! - pytorch: python/koma/bench_train.py doing the same with `torch.optim.SGD`;
//! - end to end (optional): [`crate::train`] on shards of random games in a temporary directory,
//!   loader thread included.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use koma_nn::ModelConfig;
use serde::{Deserialize, Serialize};

use crate::batch::HostBatch;
use crate::config::TrainConfig;
use crate::error::{io, Result, TrainError};
use crate::run::{train, RunPaths, TrainOptions};
use crate::synth::{random_games, random_samples, SynthPolicy};
use crate::trainer::{ModelInit, Trainer};

const PY_INIT: &str = include_str!("../../../python/koma/__init__.py");
const PY_MODEL: &str = include_str!("../../../python/koma/model.py");
const PY_BENCH: &str = include_str!("../../../python/koma/bench_train.py");

#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// (name, architecture) of each network measured.
    pub nets: Vec<(String, ModelConfig)>,
    pub batch_size: usize,
    /// Seconds per measurement (after one warm-up step; at least `min_steps` steps).
    pub seconds: f64,
    pub min_steps: usize,
    /// Alternate koma and PyTorch measurements this many times and keep the best of each (the
    /// machine may be shared and noisy).
    pub rounds: usize,
    /// Python for the PyTorch reference (None: skip it).
    pub python: Option<String>,
    /// Also measure [`crate::train`] end to end on temporary shards.
    pub end_to_end: bool,
    /// Device, threads, optimiser and loss settings (precision must be f32 on the CPU).
    pub config: TrainConfig,
}

/// Throughput from individually timed steps. On a shared machine other processes only ever add
/// time, so the fastest step is the best estimate of the implementation's own speed; the mean is
/// reported too.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Batch size / fastest step.
    pub samples_per_second: f64,
    pub seconds_per_step: f64,
    /// Batch size / mean step.
    pub mean_samples_per_second: f64,
    pub mean_seconds_per_step: f64,
    pub steps: usize,
}

impl Figures {
    pub fn from_step_times(batch: usize, times: &[f64]) -> Figures {
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
        Figures {
            samples_per_second: batch as f64 / best,
            seconds_per_step: best,
            mean_samples_per_second: batch as f64 / mean,
            mean_seconds_per_step: mean,
            steps: times.len(),
        }
    }

    /// Pools the steps of two measurements.
    fn merge(&self, other: &Figures, batch: usize) -> Figures {
        let steps = self.steps + other.steps;
        let mean = (self.mean_seconds_per_step * self.steps as f64 + other.mean_seconds_per_step * other.steps as f64)
            / steps.max(1) as f64;
        let best = self.seconds_per_step.min(other.seconds_per_step);
        Figures {
            samples_per_second: batch as f64 / best,
            seconds_per_step: best,
            mean_samples_per_second: batch as f64 / mean,
            mean_seconds_per_step: mean,
            steps,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetBench {
    pub name: String,
    pub describe: String,
    pub parameters: usize,
    pub batch_size: usize,
    pub koma: Figures,
    pub pytorch: Option<Figures>,
    pub pytorch_error: Option<String>,
    /// koma / pytorch samples per second (must be ≥ 1).
    pub ratio: Option<f64>,
    pub end_to_end: Option<Figures>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    pub device: String,
    pub precision: String,
    pub threads: i32,
    pub nets: Vec<NetBench>,
    /// Every ratio ≥ 1 (None when no reference ran).
    pub ratio_ok: Option<bool>,
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Result<Scratch> {
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let p = std::env::temp_dir().join(format!("koma-bench-train-{tag}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).map_err(io(&p))?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A batch of positions from random games with random policy targets.
pub fn synthetic_batch(batch_size: usize, config: &TrainConfig) -> HostBatch {
    HostBatch::from_samples(&random_samples(batch_size, 12345, SynthPolicy::Random), &config.loss)
}

/// koma's training steps per second on `batch`, repeated.
pub fn measure_koma(
    model: &ModelConfig,
    batch: &HostBatch,
    config: &TrainConfig,
    seconds: f64,
    min_steps: usize,
) -> Result<Figures> {
    let mut trainer = Trainer::new(config, &ModelInit::Fresh(model.clone()))?;
    trainer.train_step(batch)?; // warm-up: allocations, oneDNN / cuDNN algorithm choice
    let start = Instant::now();
    let mut times = Vec::new();
    while times.len() < min_steps.max(1) || start.elapsed().as_secs_f64() < seconds {
        let t = Instant::now();
        trainer.train_step(batch)?;
        times.push(t.elapsed().as_secs_f64());
    }
    Ok(Figures::from_step_times(batch.len(), &times))
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::File::create(path).and_then(|mut f| f.write_all(bytes)).map_err(io(path))
}

fn f32_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The same measurement in plain PyTorch (python/koma/bench_train.py, run with `python`).
pub fn measure_pytorch(
    python: &str,
    model: &ModelConfig,
    batch: &HostBatch,
    config: &TrainConfig,
    seconds: f64,
    min_steps: usize,
) -> Result<Figures> {
    let dir = Scratch::new("py")?;
    let pkg = dir.0.join("koma");
    std::fs::create_dir_all(&pkg).map_err(io(&pkg))?;
    for (name, text) in [("__init__.py", PY_INIT), ("model.py", PY_MODEL), ("bench_train.py", PY_BENCH)] {
        write_bytes(&pkg.join(name), text.as_bytes())?;
    }
    write_bytes(&dir.0.join("input1.u8"), batch.inputs.input1())?;
    write_bytes(&dir.0.join("input2.u8"), batch.inputs.input2())?;
    write_bytes(&dir.0.join("policy.f32"), &f32_bytes(&batch.policy))?;
    write_bytes(&dir.0.join("value.f32"), &f32_bytes(&batch.value))?;
    let o = &config.optimizer;
    let spec = serde_json::json!({
        "model": model,
        "batch_size": batch.len(),
        "data_dir": dir.0,
        "seconds": seconds,
        "min_steps": min_steps,
        "threads": tch::get_num_threads(),
        "precision": crate::trainer::Mode::resolve(config.precision, config.device.parse::<koma_nn::DeviceSpec>()?.resolve()?, false)?.name(),
        "device": koma_nn::device::device_name(config.device.parse::<koma_nn::DeviceSpec>()?.resolve()?),
        "optimizer": {"kind": o.kind.name(), "lr": config.lr.base, "momentum": o.momentum, "nesterov": o.nesterov,
                      "weight_decay": o.weight_decay, "beta1": o.beta1, "beta2": o.beta2, "eps": o.eps},
        "loss": {"policy_weight": config.loss.policy_weight, "value_weight": config.loss.value_weight},
    });
    let spec_path = dir.0.join("spec.json");
    write_bytes(&spec_path, spec.to_string().as_bytes())?;
    let output = Command::new(python)
        .args(["-m", "koma.bench_train", "--spec"])
        .arg(&spec_path)
        .env("PYTHONPATH", &dir.0)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| TrainError::Config(format!("starting {python} for the PyTorch reference: {e}")))?;
    if !output.status.success() {
        return Err(TrainError::Config(format!(
            "the PyTorch reference failed ({}); is torch installed for {python}?",
            output.status
        )));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().rev().find(|l| l.trim_start().starts_with('{')).unwrap_or("");
    serde_json::from_str(line).map_err(|e| TrainError::Config(format!("the PyTorch reference printed {text:?}: {e}")))
}

/// [`crate::train`] end to end on temporary shards of random games.
pub fn measure_end_to_end(
    model: &ModelConfig,
    config: &TrainConfig,
    seconds_hint: f64,
    sps_hint: f64,
) -> Result<Figures> {
    // Steps for about `seconds_hint` at `sps_hint` samples/s, plus the warm-up.
    let dir = Scratch::new("e2e")?;
    let shards = dir.0.join("selfplay");
    std::fs::create_dir_all(&shards).map_err(io(&shards))?;
    for (i, chunk) in random_games(64, 99, SynthPolicy::Random).chunks(16).enumerate() {
        koma_data::write_shard(&shards.join(format!("bench-{i:06}.h5")), chunk)?;
    }
    let steps = ((seconds_hint * sps_hint / config.batch_size as f64).ceil() as u64).max(2) + 1;
    let mut config = config.clone();
    config.checkpoint_every = u64::MAX / 2;
    config.log_every = u64::MAX / 2;
    let batch_size = config.batch_size;
    let options =
        TrainOptions::new(RunPaths::resolve(&dir.0, None), Some(ModelInit::Fresh(model.clone())), Some(steps), config);
    let mut last: Option<Instant> = None;
    let mut times = Vec::new();
    train(&options, &mut |p| {
        if let crate::run::Progress::Step(_) = p {
            // Step to step, loader included; the first step is the warm-up.
            let now = Instant::now();
            if let Some(t) = last {
                times.push(now.duration_since(t).as_secs_f64());
            }
            last = Some(now);
        }
    })?;
    Ok(Figures::from_step_times(batch_size, &times))
}

/// Runs the whole benchmark; `log` receives a line per figure as it is measured.
pub fn run(options: &BenchOptions, log: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    let config = &options.config;
    if let Some(n) = config.threads {
        tch::set_num_threads(n.max(1) as i32);
    }
    let device = config.device.parse::<koma_nn::DeviceSpec>()?.resolve()?;
    let batch = synthetic_batch(options.batch_size, config);
    let mut nets = Vec::new();
    for (name, model) in &options.nets {
        let mut koma: Option<Figures> = None;
        let mut pytorch: Option<Figures> = None;
        let mut pytorch_error = None;
        let n = batch.len();
        let best = |a: Option<Figures>, b: Figures| {
            Some(match a {
                Some(a) => a.merge(&b, n),
                None => b,
            })
        };
        for round in 1..=options.rounds.max(1) {
            let k = measure_koma(model, &batch, config, options.seconds, options.min_steps)?;
            log(&format!(
                "{name} ({}) round {round}: koma {:.1} samples/s (best of {} steps {:.3} s, mean {:.3} s)",
                model.describe(),
                k.samples_per_second,
                k.steps,
                k.seconds_per_step,
                k.mean_seconds_per_step
            ));
            koma = best(koma, k);
            if let (Some(py), None) = (&options.python, &pytorch_error) {
                match measure_pytorch(py, model, &batch, config, options.seconds, options.min_steps) {
                    Ok(f) => {
                        log(&format!(
                            "{name} round {round}: pytorch {:.1} samples/s (best of {} steps {:.3} s, mean {:.3} s)",
                            f.samples_per_second, f.steps, f.seconds_per_step, f.mean_seconds_per_step
                        ));
                        pytorch = best(pytorch, f);
                    }
                    Err(e) => {
                        log(&format!("{name}: pytorch reference failed: {e}"));
                        pytorch_error = Some(e.to_string());
                    }
                }
            }
        }
        let koma = koma.expect("at least one round");
        let ratio = pytorch.as_ref().map(|p| koma.samples_per_second / p.samples_per_second);
        if let Some(r) = ratio {
            log(&format!("{name}: ratio koma/pytorch {r:.3} ({})", if r >= 1.0 { "ok" } else { "BELOW 1" }));
        }
        let end_to_end = if options.end_to_end {
            let f = measure_end_to_end(model, config, options.seconds, koma.mean_samples_per_second)?;
            log(&format!("{name}: end to end (shards, loader thread) {:.1} samples/s", f.samples_per_second));
            Some(f)
        } else {
            None
        };
        nets.push(NetBench {
            name: name.clone(),
            describe: model.describe(),
            parameters: koma_nn::model::parameter_count(model),
            batch_size: batch.len(),
            koma,
            pytorch,
            pytorch_error,
            ratio,
            end_to_end,
        });
    }
    let ratios: Vec<f64> = nets.iter().filter_map(|n| n.ratio).collect();
    Ok(BenchReport {
        device: koma_nn::device::device_name(device),
        precision: crate::trainer::Mode::resolve(config.precision, device, false)?.name().to_string(),
        threads: tch::get_num_threads(),
        ratio_ok: (!ratios.is_empty()).then(|| ratios.iter().all(|&r| r >= 1.0)),
        nets,
    })
}
