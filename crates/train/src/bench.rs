//! `koma bench train`: training throughput (samples per second) of koma's trainer, against the
//! identical network (python/koma/model.py), batch, loss, statistics and optimiser in plain
//! PyTorch, measured in the same run with the same number of threads.
//!
//! Each step does the same work on both sides:
//! - koma: [`Trainer::train_step`] on one prepared batch, repeated: host batch → tensors (u8
//!   features to f32, in the trainer's memory format), forward in training mode, the weighted
//!   policy and value losses, top-1 agreement and value accuracy, backward, the global gradient
//!   norm, SGD with Nesterov momentum and weight decay, the statistics read back;
//! - pytorch: python/koma/bench_train.py doing the same as a PyTorch user writes it
//!   (`torch.optim.SGD`, `get_total_norm`, `zero_grad(set_to_none=True)`), in PyTorch's default
//!   contiguous layout; the headline ratio is against this;
//! - pytorch channels-last (unless turned off): the same script with PyTorch's channels-last recipe,
//!   the fair comparison for koma's layout (koma trains channels-last on the CPU by default);
//! - end to end (optional): [`crate::train`] on shards of random games in a temporary directory,
//!   loader thread included.
//!
//! The sides alternate (the order rotates every round) so that a change of load on a shared
//! machine hits them alike; every step is timed, and each side keeps the fastest step and the
//! median step over all its rounds.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use koma_base::python::Python;
use koma_nn::ModelConfig;
use serde::{Deserialize, Serialize};

use crate::batch::HostBatch;
use crate::config::TrainConfig;
use crate::error::{io, Result, TrainError};
use crate::run::{train, RunPaths, TrainOptions};
use crate::synth::{random_games, random_samples, SynthPolicy};
use crate::trainer::{ModelInit, Trainer};

#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// (name, architecture) of each network measured.
    pub nets: Vec<(String, ModelConfig)>,
    pub batch_size: usize,
    /// Seconds per measurement (after one warm-up step; at least `min_steps` steps).
    pub seconds: f64,
    pub min_steps: usize,
    /// Alternate koma and PyTorch measurements this many times and keep the best and median
    /// step of each over all rounds (the machine may be shared and noisy).
    pub rounds: usize,
    /// Python for the PyTorch reference (None: skip it).
    pub python: Option<String>,
    /// Also measure PyTorch with its channels-last recipe.
    pub pytorch_channels_last: bool,
    /// Also measure [`crate::train`] end to end on temporary shards.
    pub end_to_end: bool,
    /// Device, threads, memory format, optimiser and loss settings (precision must be f32 on the
    /// CPU).
    pub config: TrainConfig,
    /// Also measure data-parallel scaling over these devices (`cuda:0,cuda:1`): koma on the first
    /// alone against koma on all of them, the same batch, alternating for `rounds`.
    pub scaling_devices: Option<String>,
}

/// Data-parallel scaling: the same batch on one device and split over several.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Scaling {
    pub devices: String,
    pub one_device: Figures,
    pub all_devices: Figures,
    /// all / one, fastest steps.
    pub speedup: f64,
    /// speedup / device count (1: perfect scaling).
    pub efficiency: f64,
}

/// Throughput from individually timed steps. On a shared machine other processes only ever add
/// time, so the fastest step is the best estimate of the implementation's own speed; the median
/// and mean are reported too, and the process CPU time of each step, which time-slicing with other
/// processes does not inflate (on a busy machine it is the steadier comparison).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Batch size / fastest step.
    pub samples_per_second: f64,
    pub seconds_per_step: f64,
    /// Batch size / median step.
    #[serde(default)]
    pub median_samples_per_second: f64,
    #[serde(default)]
    pub median_seconds_per_step: f64,
    /// Batch size / mean step.
    pub mean_samples_per_second: f64,
    pub mean_seconds_per_step: f64,
    /// Median CPU seconds (all threads of the process) per step, where measured.
    #[serde(default)]
    pub median_cpu_seconds_per_step: Option<f64>,
    pub steps: usize,
    /// Wall-clock seconds of each step, in order (rounds concatenated).
    #[serde(default)]
    pub times: Vec<f64>,
    /// CPU seconds of each step (empty where not measured).
    #[serde(default)]
    pub cpu_times: Vec<f64>,
}

fn median(xs: &[f64]) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        k if k % 2 == 1 => sorted[k / 2],
        k => (sorted[k / 2 - 1] + sorted[k / 2]) / 2.0,
    }
}

impl Figures {
    /// From the wall-clock seconds of each step and, optionally (empty: none), their CPU seconds.
    pub fn from_step_times(batch: usize, times: &[f64], cpu_times: &[f64]) -> Figures {
        let best = times.iter().copied().fold(f64::INFINITY, f64::min);
        let mean = times.iter().sum::<f64>() / times.len().max(1) as f64;
        let median_time = median(times);
        let cpu = cpu_times.len() == times.len() && !times.is_empty();
        Figures {
            samples_per_second: batch as f64 / best,
            seconds_per_step: best,
            median_samples_per_second: batch as f64 / median_time,
            median_seconds_per_step: median_time,
            mean_samples_per_second: batch as f64 / mean,
            mean_seconds_per_step: mean,
            median_cpu_seconds_per_step: cpu.then(|| median(cpu_times)),
            steps: times.len(),
            times: times.to_vec(),
            cpu_times: if cpu { cpu_times.to_vec() } else { Vec::new() },
        }
    }

    /// Pools the steps of two measurements.
    fn merge(&self, other: &Figures, batch: usize) -> Figures {
        let cpu = if self.cpu_times.is_empty() || other.cpu_times.is_empty() {
            Vec::new()
        } else {
            [self.cpu_times.as_slice(), other.cpu_times.as_slice()].concat()
        };
        Figures::from_step_times(batch, &[self.times.as_slice(), other.times.as_slice()].concat(), &cpu)
    }
}

/// CPU time used so far by this process, all threads (Linux: the sum of
/// `/proc/self/task/*/schedstat`, nanoseconds; None elsewhere). Python's `time.process_time()`
/// measures the same.
pub fn process_cpu_seconds() -> Option<f64> {
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let path = entry.ok()?.path().join("schedstat");
        // A thread may have exited since the listing.
        if let Ok(text) = std::fs::read_to_string(&path) {
            total += text.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(total as f64 * 1e-9)
}

/// One PyTorch variant's figures and koma's ratios against it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reference {
    pub figures: Figures,
    /// koma / reference, fastest steps.
    pub ratio: f64,
    /// koma / reference, median steps.
    pub ratio_median: f64,
    /// reference / koma median CPU seconds per step (None where not measured).
    pub ratio_cpu: Option<f64>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetBench {
    pub name: String,
    pub describe: String,
    pub parameters: usize,
    pub batch_size: usize,
    pub koma: Figures,
    /// PyTorch in its default (contiguous) layout.
    pub pytorch: Option<Figures>,
    pub pytorch_error: Option<String>,
    /// koma / pytorch samples per second, fastest steps (must be ≥ 1).
    pub ratio: Option<f64>,
    /// koma / pytorch, median steps.
    pub ratio_median: Option<f64>,
    /// pytorch / koma, median CPU seconds per step.
    pub ratio_cpu: Option<f64>,
    /// PyTorch with its channels-last recipe, and koma's ratios against it.
    pub pytorch_channels_last: Option<Reference>,
    pub end_to_end: Option<Figures>,
    /// With [`BenchOptions::scaling_devices`].
    pub scaling: Option<Scaling>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    pub device: String,
    pub precision: String,
    pub threads: i32,
    /// koma's activation layout: `channels_last` or `contiguous`.
    pub memory_format: String,
    pub rounds: usize,
    /// `KOMA_MALLOC_DEFAULTS=1` was set: glibc's malloc left untuned
    /// ([`crate::trainer::keep_freed_memory`]).
    pub malloc_defaults: bool,
    pub nets: Vec<NetBench>,
    /// Every ratio (against PyTorch's default layout) ≥ 1 (None when no reference ran).
    pub ratio_ok: Option<bool>,
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
    let (mut times, mut cpu_times) = (Vec::new(), Vec::new());
    while times.len() < min_steps.max(1) || start.elapsed().as_secs_f64() < seconds {
        let c = process_cpu_seconds();
        let t = Instant::now();
        trainer.train_step(batch)?;
        times.push(t.elapsed().as_secs_f64());
        if let (Some(c0), Some(c1)) = (c, process_cpu_seconds()) {
            cpu_times.push(c1 - c0);
        }
    }
    Ok(Figures::from_step_times(batch.len(), &times, &cpu_times))
}

/// koma on the first of `devices` alone and on all of them (data parallel), alternating.
fn measure_scaling(
    model: &ModelConfig,
    batch: &HostBatch,
    config: &TrainConfig,
    devices: &str,
    options: &BenchOptions,
) -> Result<Scaling> {
    let list = devices.parse::<koma_nn::DeviceList>()?;
    let specs = list.specs()?;
    let all = TrainConfig { device: list.clone(), ..config.clone() };
    let one = TrainConfig { device: specs[0].into(), ..config.clone() };
    all.validate()?;
    let (mut one_figures, mut all_figures): (Option<Figures>, Option<Figures>) = (None, None);
    for round in 0..options.rounds.max(1) {
        for k in 0..2 {
            let (c, slot) = if (k + round) % 2 == 0 { (&one, &mut one_figures) } else { (&all, &mut all_figures) };
            let f = measure_koma(model, batch, c, options.seconds, options.min_steps)?;
            *slot = Some(match slot.take() {
                Some(prev) => prev.merge(&f, batch.len()),
                None => f,
            });
        }
    }
    let (one_device, all_devices) = (one_figures.expect("measured"), all_figures.expect("measured"));
    let speedup = all_devices.samples_per_second / one_device.samples_per_second;
    Ok(Scaling {
        devices: list.to_string(),
        efficiency: speedup / specs.len() as f64,
        speedup,
        one_device,
        all_devices,
    })
}

fn write_bytes(path: &Path, bytes: &[u8]) -> Result<()> {
    std::fs::File::create(path).and_then(|mut f| f.write_all(bytes)).map_err(io(path))
}

fn f32_bytes(xs: &[f32]) -> Vec<u8> {
    xs.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The same measurement in plain PyTorch (python/koma/bench_train.py, run with `python`), in
/// PyTorch's default layout or with its channels-last recipe.
pub fn measure_pytorch(
    python: &str,
    model: &ModelConfig,
    batch: &HostBatch,
    config: &TrainConfig,
    seconds: f64,
    min_steps: usize,
    channels_last: bool,
) -> Result<Figures> {
    let reference = Python::new(Some(python))
        .map_err(|e| TrainError::Config(format!("writing out the embedded Python package: {e}")))?;
    let dir = reference.scratch();
    write_bytes(&dir.join("input1.u8"), batch.inputs.input1())?;
    write_bytes(&dir.join("input2.u8"), batch.inputs.input2())?;
    write_bytes(&dir.join("policy.f32"), &f32_bytes(&batch.policy))?;
    write_bytes(&dir.join("value.f32"), &f32_bytes(&batch.value))?;
    write_bytes(&dir.join("policy_weight.f32"), &f32_bytes(&batch.policy_weight))?;
    write_bytes(&dir.join("value_weight.f32"), &f32_bytes(&batch.value_weight))?;
    let results: Vec<u8> = batch.result_class.iter().flat_map(|x| x.to_le_bytes()).collect();
    write_bytes(&dir.join("result_class.i64"), &results)?;
    let o = &config.optimizer;
    let spec = serde_json::json!({
        "model": model,
        "batch_size": batch.len(),
        "data_dir": dir,
        "seconds": seconds,
        "min_steps": min_steps,
        "threads": tch::get_num_threads(),
        "precision": crate::trainer::Mode::resolve(config.precision, first_device(config)?, false)?.name(),
        "device": koma_nn::device::device_name(first_device(config)?),
        "optimizer": {"kind": o.kind.name(), "lr": config.lr.base, "momentum": o.momentum, "nesterov": o.nesterov,
                      "weight_decay": o.weight_decay, "beta1": o.beta1, "beta2": o.beta2, "eps": o.eps},
        "loss": {"policy_weight": config.loss.policy_weight, "value_weight": config.loss.value_weight},
        "channels_last": channels_last,
    });
    let spec_path = dir.join("spec.json");
    write_bytes(&spec_path, spec.to_string().as_bytes())?;
    let output = reference
        .module("bench_train", [OsStr::new("--spec"), spec_path.as_os_str()])
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
    let f: Figures = serde_json::from_str(line)
        .map_err(|e| TrainError::Config(format!("the PyTorch reference printed {text:?}: {e}")))?;
    // The median (and everything else) from the step times, computed as for koma.
    Ok(if f.times.is_empty() { f } else { Figures::from_step_times(batch.len(), &f.times, &f.cpu_times) })
}

/// [`crate::train`] end to end on temporary shards of random games.
pub fn measure_end_to_end(
    model: &ModelConfig,
    config: &TrainConfig,
    seconds_hint: f64,
    sps_hint: f64,
) -> Result<Figures> {
    // Steps for about `seconds_hint` at `sps_hint` samples/s, plus the warm-up.
    let dir = tempfile::Builder::new().prefix("koma-bench-train-").tempdir().map_err(io(&std::env::temp_dir()))?;
    let shards = dir.path().join("selfplay");
    std::fs::create_dir_all(&shards).map_err(io(&shards))?;
    for (i, chunk) in random_games(64, 99, SynthPolicy::Random).chunks(16).enumerate() {
        koma_data::write_shard(&shards.join(format!("bench-{i:06}.h5")), chunk)?;
    }
    let steps = ((seconds_hint * sps_hint / config.batch_size as f64).ceil() as u64).max(2) + 1;
    let mut config = config.clone();
    config.checkpoint_every = u64::MAX / 2;
    config.log_every = u64::MAX / 2;
    let batch_size = config.batch_size;
    let options = TrainOptions::new(
        RunPaths::resolve(dir.path(), None),
        Some(ModelInit::Fresh(model.clone())),
        Some(steps),
        config,
    );
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
    Ok(Figures::from_step_times(batch_size, &times, &[]))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Koma,
    Pytorch,
    PytorchChannelsLast,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Koma => "koma",
            Side::Pytorch => "pytorch",
            Side::PytorchChannelsLast => "pytorch channels-last",
        }
    }
}

/// The first of the config's devices (where the PyTorch reference runs).
fn first_device(config: &TrainConfig) -> Result<tch::Device> {
    Ok(config.device.resolve()?[0])
}

/// Runs the whole benchmark; `log` receives a line per figure as it is measured.
pub fn run(options: &BenchOptions, log: &mut dyn FnMut(&str)) -> Result<BenchReport> {
    let config = &options.config;
    if let Some(n) = config.threads {
        koma_nn::device::set_cpu_threads(n);
    }
    let device = first_device(config)?;
    let channels_last = config.memory_format.channels_last_on(device);
    let batch = synthetic_batch(options.batch_size, config);
    let n = batch.len();
    let rounds = options.rounds.max(1);
    let mut sides = vec![Side::Koma];
    if options.python.is_some() {
        sides.push(Side::Pytorch);
        if options.pytorch_channels_last {
            sides.push(Side::PytorchChannelsLast);
        }
    }
    let mut nets = Vec::new();
    for (name, model) in &options.nets {
        let mut figures: Vec<Option<Figures>> = vec![None; sides.len()];
        let mut pytorch_error: Option<String> = None;
        for round in 0..rounds {
            // Rotate the order every round: koma first, then second, ...
            for k in 0..sides.len() {
                let i = (k + round) % sides.len();
                let side = sides[i];
                let measured = match (side, &options.python) {
                    (Side::Koma, _) => measure_koma(model, &batch, config, options.seconds, options.min_steps)?,
                    (_, Some(py)) if pytorch_error.is_none() => {
                        let cl = side == Side::PytorchChannelsLast;
                        match measure_pytorch(py, model, &batch, config, options.seconds, options.min_steps, cl) {
                            Ok(f) => f,
                            Err(e) => {
                                log(&format!("{name}: pytorch reference failed: {e}"));
                                pytorch_error = Some(e.to_string());
                                continue;
                            }
                        }
                    }
                    _ => continue,
                };
                log(&format!(
                    "{name} ({}) round {}: {} {:.1} samples/s (fastest of {} steps {:.3} s, median {:.3} s, CPU {})",
                    model.describe(),
                    round + 1,
                    side.name(),
                    measured.samples_per_second,
                    measured.steps,
                    measured.seconds_per_step,
                    measured.median_seconds_per_step,
                    measured.median_cpu_seconds_per_step.map(|c| format!("{c:.3} s")).unwrap_or_else(|| "-".into())
                ));
                figures[i] = Some(match figures[i].take() {
                    Some(f) => f.merge(&measured, n),
                    None => measured,
                });
            }
        }
        let koma = figures[0].clone().expect("koma measured every round");
        let reference = |side: Side| -> Option<Reference> {
            let i = sides.iter().position(|&s| s == side)?;
            let f = figures[i].clone()?;
            Some(Reference {
                ratio: koma.samples_per_second / f.samples_per_second,
                ratio_median: koma.median_samples_per_second / f.median_samples_per_second,
                ratio_cpu: match (f.median_cpu_seconds_per_step, koma.median_cpu_seconds_per_step) {
                    (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                    _ => None,
                },
                figures: f,
            })
        };
        let default = reference(Side::Pytorch);
        let cl = reference(Side::PytorchChannelsLast);
        for (what, r) in [("pytorch", &default), ("pytorch channels-last", &cl)] {
            if let Some(r) = r {
                let cpu = r.ratio_cpu.map(|c| format!(", {c:.3} by median CPU time")).unwrap_or_default();
                log(&format!("{name}: ratio koma/{what} {:.3} fastest, {:.3} median{cpu}", r.ratio, r.ratio_median));
            }
        }
        let scaling = match &options.scaling_devices {
            Some(devices) => {
                let s = measure_scaling(model, &batch, config, devices, options)?;
                log(&format!(
                    "{name}: {} devices ({}) {:.1} samples/s against {:.1} on one: speedup {:.2}, efficiency {:.2}",
                    s.devices.split(',').count(),
                    s.devices,
                    s.all_devices.samples_per_second,
                    s.one_device.samples_per_second,
                    s.speedup,
                    s.efficiency
                ));
                Some(s)
            }
            None => None,
        };
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
            batch_size: n,
            ratio: default.as_ref().map(|r| r.ratio),
            ratio_median: default.as_ref().map(|r| r.ratio_median),
            ratio_cpu: default.as_ref().and_then(|r| r.ratio_cpu),
            pytorch: default.map(|r| r.figures),
            pytorch_error,
            pytorch_channels_last: cl,
            koma,
            end_to_end,
            scaling,
        });
    }
    let ratios: Vec<f64> = nets.iter().filter_map(|n| n.ratio).collect();
    Ok(BenchReport {
        device: config.device.to_string(),
        precision: crate::trainer::Mode::resolve(config.precision, device, false)?.name().to_string(),
        threads: tch::get_num_threads(),
        memory_format: if channels_last { "channels_last" } else { "contiguous" }.to_string(),
        rounds,
        malloc_defaults: std::env::var_os("KOMA_MALLOC_DEFAULTS").is_some_and(|v| v == "1"),
        ratio_ok: (!ratios.is_empty()).then(|| ratios.iter().all(|&r| r >= 1.0)),
        nets,
    })
}
