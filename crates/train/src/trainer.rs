//! [`Trainer`]: the network being trained with its optimiser, precision mode and counters, one
//! optimiser step at a time ([`Trainer::train_step`]), and saving/restoring the full state.
//!
//! Precision modes:
//! - f32: plain;
//! - f16 (CUDA): the forward pass under `tch::autocast` (f16 matmuls and convolutions, f32 master
//!   weights), the loss scaled by a [`LossScaler`] we maintain, steps with inf/NaN gradients
//!   skipped (with the batch-norm statistics the forward pass changed put back);
//! - bf16 (CUDA): tch's autocast is f16-only, so a bf16 copy of the network computes the forward
//!   and backward passes; its gradients (as f32) update the f32 master weights, which are copied
//!   back into it after every step (batch-norm statistics flow the other way). bf16 has f32's
//!   range: no loss scaling.
//!
//! Data parallel (`device = "cuda:0,cuda:1"`, or `cpu,cpu` in tests): the master weights live on
//! the first device; every device computes the forward and backward pass of its part of each
//! batch (contiguous rows, sizes within one of each other) on a replica in its own thread. The
//! gradients, weighted by the parts' sizes (the loss is a mean over the batch), are summed on the
//! first device, which takes one optimiser step; the replicas then copy the new weights. Batch
//! normalisation uses each part's own statistics in the forward pass (as PyTorch's
//! DistributedDataParallel without SyncBatchNorm); the running statistics are averaged over the
//! replicas after every step and copied back, so all replicas stay identical. With equal parts the
//! averaged running mean is exactly the one-device mean; the running variance misses the spread
//! between the parts' means.
//!
//! Nothing non-finite is ever saved: every variable (weights and batch-norm statistics) and the
//! optimiser state are checked before a checkpoint or state is written, and inf or NaN there is a
//! divergence. An update can overflow the weights from a finite gradient, and an f16 forward pass
//! can overflow the statistics; either would otherwise be published and restored by `--resume`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use koma_mcts::Rng;
use koma_nn::checkpoint::{self, TrainingInfo};
use koma_nn::{DeviceSpec, ModelConfig, Net, Network, Precision, RunOptions};
use rand::SeedableRng;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::averaging::Ema;
use crate::batch::{losses, HostBatch};
use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::metrics::StepStats;
use crate::optim::{clip_gradients, Optimizer};
use crate::scaler::{global_norm, LossScaler};
use crate::state::{self, StateMeta};

/// Where the initial weights come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelInit {
    /// A checkpoint (`.safetensors` with its sidecar).
    Checkpoint(PathBuf),
    /// A fresh network of this architecture, initialised from the config's seed.
    Fresh(ModelConfig),
}

impl ModelInit {
    /// `--model`: an existing `.safetensors` checkpoint, else a preset name (`tiny`, `standard`)
    /// or a model config file for a fresh network.
    pub fn parse(spec: &str) -> Result<ModelInit> {
        let path = Path::new(spec);
        if path.extension().is_some_and(|e| e == "safetensors") {
            return Ok(ModelInit::Checkpoint(path.to_path_buf()));
        }
        ModelConfig::from_preset_or_file(spec)
            .map(ModelInit::Fresh)
            .map_err(|e| TrainError::Config(format!("--model {spec}: not a .safetensors checkpoint, and {e}")))
    }
}

/// The precision the trainer computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    F32,
    F16,
    Bf16,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::F32 => "f32",
            Mode::F16 => "f16",
            Mode::Bf16 => "bf16",
        }
    }

    pub(crate) fn resolve(p: Precision, device: Device, allow_cpu_half: bool) -> Result<Mode> {
        let cuda = matches!(device, Device::Cuda(_));
        let mode = match p {
            Precision::Auto if cuda => Mode::F16,
            Precision::Auto | Precision::F32 => Mode::F32,
            Precision::F16 => Mode::F16,
            Precision::Bf16 => Mode::Bf16,
        };
        if mode != Mode::F32 && !cuda && !allow_cpu_half {
            return Err(TrainError::Config(format!(
                "precision {} is for CUDA devices; on the CPU the trainer runs in f32",
                mode.name()
            )));
        }
        Ok(mode)
    }
}

/// Keeps glibc's malloc from handing the activations' memory back to the kernel after every step.
///
/// A training step allocates and frees hundreds of MB of activations. glibc's default adapts its
/// mmap threshold to the largest block freed and trims the top of the heap once more than twice
/// that is free, so in koma's process much of that memory went back to the kernel every step and
/// the next step faulted it back in (docs/training.md, "Benchmark", has the measured cost). So,
/// once per process, the first trainer sets `M_MMAP_THRESHOLD` to 32 MiB (glibc's maximum for the
/// dynamic threshold; larger blocks are still mapped and unmapped) and `M_TRIM_THRESHOLD` to
/// 1 GiB: freed memory stays in the heap for the next step. Process-wide, glibc only;
/// `KOMA_MALLOC_DEFAULTS=1` in the environment leaves malloc alone (to measure it).
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if std::env::var_os("KOMA_MALLOC_DEFAULTS").is_some_and(|v| v == "1") {
                return;
            }
            extern "C" {
                fn mallopt(param: std::os::raw::c_int, value: std::os::raw::c_int) -> std::os::raw::c_int;
            }
            const M_TRIM_THRESHOLD: std::os::raw::c_int = -1;
            const M_MMAP_THRESHOLD: std::os::raw::c_int = -3;
            // SAFETY: mallopt only changes glibc's allocation policy; it is thread-safe.
            unsafe {
                mallopt(M_MMAP_THRESHOLD, 32 << 20);
                mallopt(M_TRIM_THRESHOLD, 1 << 30);
            }
        });
    }
}

/// A copy of the network that computes forward and backward passes for the master weights: a
/// data-parallel replica on another device, or the bf16 network of bf16 mode.
struct ComputeCopy {
    _vs: VarStore,
    net: Net,
    device: Device,
    /// The bf16 network of bf16 mode (else an f32 replica).
    bf16: bool,
    /// Same order as the optimiser's parameters.
    params: Vec<Tensor>,
    /// (master, copy) pairs of the non-trainable variables (batch-norm statistics).
    buffers: Vec<(Tensor, Tensor)>,
}

impl ComputeCopy {
    fn new(
        config: &ModelConfig,
        device: Device,
        bf16: bool,
        master: &VarStore,
        param_names: &[String],
    ) -> Result<ComputeCopy> {
        let mut vs = VarStore::new(device);
        let net = Net::new(&vs.root(), config);
        if bf16 {
            vs.bfloat16();
        }
        let vars = vs.variables();
        let mvars = master.variables();
        let params = param_names.iter().map(|n| vars[n].shallow_clone()).collect();
        let mut buffers = Vec::new();
        let mut names: Vec<&String> = vars.keys().collect();
        names.sort();
        for n in names {
            if !param_names.contains(n) {
                buffers.push((mvars[n].shallow_clone(), vars[n].shallow_clone()));
            }
        }
        let mut copy = ComputeCopy { _vs: vs, net, device, bf16, params, buffers };
        copy.load_master(&param_names.iter().map(|n| mvars[n].shallow_clone()).collect::<Vec<_>>(), true);
        Ok(copy)
    }

    /// Copies the master weights (and, with `buffers`, statistics) into the copy.
    fn load_master(&mut self, master_params: &[Tensor], buffers: bool) {
        let _guard = tch::no_grad_guard();
        for (c, m) in self.params.iter_mut().zip(master_params) {
            c.copy_(m);
        }
        if buffers {
            for (m, c) in self.buffers.iter_mut() {
                c.copy_(m);
            }
        }
    }
}

/// Who computes a part of the batch: the master network itself (with its parameters in the
/// optimiser's order), or a copy. Held by `&mut`, so that each can move to its own thread.
enum Unit<'a> {
    Master(&'a mut Network, Vec<Tensor>),
    Copy(&'a mut ComputeCopy),
}

/// What every unit's forward and backward pass shares.
struct PartPass<'a> {
    with_reply: bool,
    /// Under autocast (f16 mode).
    f16: bool,
    loss_scale: Option<f64>,
    loss: &'a crate::config::LossConfig,
    /// Where the gradients are summed (the master weights' device).
    first_device: Device,
    channels_last: bool,
}

impl PartPass<'_> {
    /// The forward and backward pass of `unit` on rows `rows` of `batch`; its gradients are
    /// multiplied by `share`, its fraction of the batch.
    fn run(&self, unit: Unit, batch: &HostBatch, rows: std::ops::Range<usize>, share: f64) -> Result<PartResult> {
        let (net, params, device, bf16) = match unit {
            Unit::Master(network, params) => (network.net(), params, network.device(), false),
            Unit::Copy(copy) => {
                (&copy.net, copy.params.iter().map(Tensor::shallow_clone).collect(), copy.device, copy.bf16)
            }
        };
        let b = batch.rows_to_device(rows, device, self.channels_last);
        // A model with the reply head always runs it (a batch without reply labels gives it a
        // zero loss term, so that its parameters stay in the graph the gradients are taken over).
        let forward = |in1: &Tensor, in2: &Tensor| {
            if self.with_reply {
                net.forward_with_reply_t(in1, in2, true)
            } else {
                let (p, v) = net.forward_t(in1, in2, true);
                (p, v, None)
            }
        };
        let (policy, wdl, reply) = if bf16 {
            forward(&b.input1.to_kind(Kind::BFloat16), &b.input2.to_kind(Kind::BFloat16))
        } else if self.f16 {
            tch::autocast(true, || forward(&b.input1, &b.input2))
        } else {
            forward(&b.input1, &b.input2)
        };
        let reply = reply.map(|r| r.to_kind(Kind::Float));
        let l = losses(&policy.to_kind(Kind::Float), &wdl.to_kind(Kind::Float), reply.as_ref(), &b, self.loss);
        let root = match self.loss_scale {
            Some(scale) => &l.total * scale,
            None => l.total.shallow_clone(),
        };
        // Gradients of the tensors that compute, as fresh tensors (torch.autograd.grad): no
        // zeroing, no accumulation, and the optimiser may update them in place. With
        // channels-last activations some convolution weight gradients come back channels-last;
        // the optimiser's in-place updates of the (contiguous) weights and momentum run several
        // times faster on matching layouts, so they are made contiguous (PyTorch's gradient
        // layout contract does the same in `.grad`).
        let grads = Tensor::f_run_backward(&[root], &params, false, false)?
            .into_iter()
            .map(|g| if g.device() != self.first_device { g.to_device(self.first_device) } else { g })
            .map(|g| if g.kind() != Kind::Float { g.to_kind(Kind::Float) } else { g })
            .map(|g| if share != 1.0 { g * share } else { g })
            .map(|g| if g.is_contiguous() { g } else { g.contiguous() })
            .collect();
        let mut terms = vec![l.policy, l.value, l.total.detach(), l.policy_top1, l.value_accuracy];
        if let Some((loss, top1)) = l.reply {
            terms.extend([loss, top1]);
        }
        let terms = Vec::<f32>::try_from(&Tensor::stack(&terms, 0).to_kind(Kind::Float).to_device(Device::Cpu))?;
        Ok(PartResult { grads, terms })
    }
}

/// What one unit's pass gives back: its gradients (on the first device, f32, contiguous, already
/// weighted by the unit's share of the batch) and its loss terms.
struct PartResult {
    grads: Vec<Tensor>,
    /// policy, value, total, policy top-1, value accuracy, then reply loss and top-1 if any.
    terms: Vec<f32>,
}

pub struct Trainer {
    config: TrainConfig,
    network: Network,
    device: Device,
    mode: Mode,
    optimizer: Optimizer,
    scaler: Option<LossScaler>,
    /// The batch-norm running statistics (the non-trainable variables) in f16 mode, copied before
    /// each forward pass and put back when the step is skipped; empty in the other modes.
    running_stats: Vec<Tensor>,
    /// Every device the trainer computes on; the first holds the master weights.
    devices: Vec<Device>,
    /// The copies that compute: the bf16 network of bf16 mode, and a replica on each further
    /// device (in bf16 mode, on every device).
    compute: Vec<ComputeCopy>,
    /// Inputs (hence activations) in channels-last layout (`config.memory_format` resolved).
    channels_last: bool,
    step: u64,
    samples_seen: u64,
    rng: Rng,
    /// File name of the last checkpoint written or started from (the next one's parent).
    parent: Option<String>,
    /// The average that checkpoints publish (`ema_samples` > 0).
    ema: Option<Ema>,
}

/// Every variable of the network (weights and batch-norm statistics), sorted by name.
fn sorted_variables(network: &Network) -> Vec<(String, Tensor)> {
    let mut variables: Vec<(String, Tensor)> = network.var_store().variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables
}

impl std::fmt::Debug for Trainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("model", &self.network.config().describe())
            .field("device", &self.device)
            .field("mode", &self.mode)
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// How the master network runs (the first device), and every device the trainer uses.
fn run_options(config: &TrainConfig) -> Result<(RunOptions, Vec<Device>)> {
    let list = config.devices()?;
    let devices = list.resolve().map_err(|e| TrainError::Config(format!("device: {e}")))?;
    let first: DeviceSpec = list.specs()?.first().copied().unwrap_or_default();
    Ok((RunOptions { device: first, precision: Precision::F32, cpu_threads: config.threads }, devices))
}

impl Trainer {
    /// A trainer at step 0 from a checkpoint or a fresh network.
    pub fn new(config: &TrainConfig, init: &ModelInit) -> Result<Trainer> {
        Trainer::build(config, init, false)
    }

    /// Like [`Trainer::new`], but f16/bf16 are allowed on the CPU (autocast is then a no-op and
    /// bf16 runs on the CPU): for testing those code paths without a GPU.
    #[doc(hidden)]
    pub fn new_allowing_cpu_half(config: &TrainConfig, init: &ModelInit) -> Result<Trainer> {
        Trainer::build(config, init, true)
    }

    fn build(config: &TrainConfig, init: &ModelInit, allow_cpu_half: bool) -> Result<Trainer> {
        config.validate()?;
        keep_freed_memory();
        let (options, devices) = run_options(config)?;
        tch::manual_seed(config.seed as i64);
        let (network, parent) = match init {
            ModelInit::Checkpoint(path) => {
                let net = Network::load(path, &options)?;
                (net, path.file_name().map(|n| n.to_string_lossy().into_owned()))
            }
            ModelInit::Fresh(model) => (Network::new(model, &options, Some(config.seed))?, None),
        };
        let device = network.device();
        let mode = Mode::resolve(config.precision, device, allow_cpu_half)?;
        Trainer::assemble(config.clone(), network, devices, mode, parent)
    }

    fn assemble(
        config: TrainConfig,
        network: Network,
        devices: Vec<Device>,
        mode: Mode,
        parent: Option<String>,
    ) -> Result<Trainer> {
        let device = network.device();
        // A reply_weight set for a model without the reply head is an error naming both.
        config.loss.reply_weight_for(network.net().has_reply_head())?;
        let mut params: Vec<(String, Tensor)> =
            network.var_store().variables().into_iter().filter(|(_, t)| t.requires_grad()).collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let names: Vec<String> = params.iter().map(|(n, _)| n.clone()).collect();
        // In bf16 mode a bf16 copy computes on every device; otherwise the master network
        // computes on the first and f32 replicas on the others.
        let copied = if mode == Mode::Bf16 { &devices[..] } else { &devices[1..] };
        let compute = copied
            .iter()
            .map(|&d| ComputeCopy::new(network.config(), d, mode == Mode::Bf16, network.var_store(), &names))
            .collect::<Result<Vec<_>>>()?;
        let optimizer = Optimizer::new(&config.optimizer, params);
        let scaler = (mode == Mode::F16).then(|| LossScaler::new(&config.loss_scale));
        let running_stats = match mode {
            Mode::F16 => {
                let vars = network.var_store().variables();
                let mut stats: Vec<(String, Tensor)> = vars.into_iter().filter(|(_, t)| !t.requires_grad()).collect();
                stats.sort_by(|a, b| a.0.cmp(&b.0));
                stats.into_iter().map(|(_, t)| t).collect()
            }
            _ => Vec::new(),
        };
        let rng = Rng::seed_from_u64(config.seed);
        let channels_last = config.memory_format.channels_last_on(device);
        let ema = (config.ema_samples > 0.0).then(|| Ema::new(&sorted_variables(&network), config.ema_samples));
        Ok(Trainer {
            config,
            network,
            device,
            mode,
            optimizer,
            scaler,
            running_stats,
            devices,
            compute,
            channels_last,
            step: 0,
            samples_seen: 0,
            rng,
            parent,
            ema,
        })
    }

    /// Restores the state saved in `state_dir` (verified; see [`crate::state`]). `config` may
    /// change hyper-parameters, but not the optimiser kind; the precision mode is the config's.
    pub fn resume(config: &TrainConfig, state_dir: &Path, models_dir: &Path) -> Result<Trainer> {
        Trainer::resume_inner(config, state_dir, models_dir, false)
    }

    #[doc(hidden)]
    pub fn resume_allowing_cpu_half(config: &TrainConfig, state_dir: &Path, models_dir: &Path) -> Result<Trainer> {
        Trainer::resume_inner(config, state_dir, models_dir, true)
    }

    fn resume_inner(
        config: &TrainConfig,
        state_dir: &Path,
        models_dir: &Path,
        allow_cpu_half: bool,
    ) -> Result<Trainer> {
        config.validate()?;
        keep_freed_memory();
        let loaded = state::load(state_dir, models_dir)?;
        let meta = loaded.meta;
        let bad = |reason: String| state::inconsistent(state_dir, models_dir, reason);
        if config.optimizer.kind != meta.config.optimizer.kind
            || Optimizer::buffer_kinds(&config.optimizer) != Optimizer::buffer_kinds(&meta.config.optimizer)
        {
            return Err(TrainError::Config(format!(
                "the training state in {} was written with optimizer {} (momentum {}); resuming needs the same kind",
                state_dir.display(),
                meta.config.optimizer.kind.name(),
                meta.config.optimizer.momentum
            )));
        }
        let (options, devices) = run_options(config)?;
        let mut network = Network::new(&meta.model, &options, None)?;
        {
            let model: Vec<(String, Tensor)> = loaded
                .tensors
                .iter()
                .filter_map(|(k, t)| k.strip_prefix("model/").map(|n| (n.to_string(), t.shallow_clone())))
                .collect();
            let path = state_dir.join(&meta.tensors_file);
            checkpoint::copy_into(&path, &model, network.var_store_mut()).map_err(|e| bad(e.to_string()))?;
        }
        let mode = Mode::resolve(config.precision, network.device(), allow_cpu_half)?;
        let mut trainer = Trainer::assemble(config.clone(), network, devices, mode, meta.last_checkpoint.clone())?;
        let optim: HashMap<String, Tensor> = loaded
            .tensors
            .iter()
            .filter_map(|(k, t)| k.strip_prefix("optim/").map(|n| (n.to_string(), t.shallow_clone())))
            .collect();
        trainer.optimizer.load_state(meta.optimizer_steps, &optim).map_err(bad)?;
        if let Some(ema) = &mut trainer.ema {
            let averages: HashMap<String, Tensor> = loaded
                .tensors
                .iter()
                .filter_map(|(k, t)| k.strip_prefix("ema/").map(|n| (n.to_string(), t.shallow_clone())))
                .collect();
            ema.load(&averages, trainer.device)?;
        }
        let master: Vec<Tensor> = trainer.optimizer.params().iter().map(|(_, t)| t.shallow_clone()).collect();
        for copy in &mut trainer.compute {
            copy.load_master(&master, true);
        }
        trainer.step = meta.step;
        trainer.samples_seen = meta.samples_seen;
        trainer.rng = meta.rng;
        if trainer.mode == Mode::F16 {
            trainer.scaler = Some(meta.loss_scaler.unwrap_or_else(|| LossScaler::new(&config.loss_scale)));
        }
        Ok(trainer)
    }

    pub fn step(&self) -> u64 {
        self.step
    }

    pub fn samples_seen(&self) -> u64 {
        self.samples_seen
    }

    /// The sampler state for the next batch.
    pub fn rng(&self) -> &Rng {
        &self.rng
    }

    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The device of the master weights (the first of [`Trainer::devices`]).
    pub fn device(&self) -> Device {
        self.device
    }

    /// Every device the trainer computes on (data parallel when there are several).
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// Whether the activations are channels-last (`memory_format` resolved for the device).
    pub fn channels_last(&self) -> bool {
        self.channels_last
    }

    /// The network (master weights, f32).
    pub fn network(&self) -> &Network {
        &self.network
    }

    pub fn model_config(&self) -> &ModelConfig {
        self.network.config()
    }

    /// Whether batches should carry opponent replies: the model has the reply head.
    pub fn wants_replies(&self) -> bool {
        self.network.net().has_reply_head()
    }

    pub fn loss_scaler(&self) -> Option<&LossScaler> {
        self.scaler.as_ref()
    }

    /// File name of the last checkpoint written (or started from).
    pub fn parent(&self) -> Option<&str> {
        self.parent.as_deref()
    }

    /// The learning rate of the next step.
    pub fn lr(&self) -> f64 {
        self.config.lr.at(self.step)
    }

    /// One optimiser step on `batch`.
    pub fn train_step(&mut self, batch: &HostBatch) -> Result<StepStats> {
        let lr = self.lr();
        let (v, grads_norm, applied) = self.forward_backward_update(batch, lr)?;
        if let (Some(ema), true) = (&mut self.ema, applied) {
            ema.update(&sorted_variables(&self.network), self.step, batch.len())?;
        }
        self.step += 1;
        self.samples_seen += batch.len() as u64;
        if let Some(rng) = &batch.rng_after {
            self.rng = rng.clone();
        }
        Ok(StepStats {
            step: self.step,
            samples_seen: self.samples_seen,
            samples: batch.len(),
            lr,
            policy_loss: v[0],
            value_loss: v[1],
            loss: v[2],
            policy_top1: v[3],
            value_accuracy: v[4],
            reply_loss: v.get(5).copied(),
            reply_top1: v.get(6).copied(),
            grad_norm: grads_norm,
            skipped: !applied,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
        })
    }

    /// The rows each computing unit takes: contiguous parts whose sizes differ by at most one
    /// (empty parts left out, so a batch smaller than the device count still trains).
    fn parts(&self, rows: usize) -> Vec<std::ops::Range<usize>> {
        let units = if self.mode == Mode::Bf16 { self.compute.len() } else { 1 + self.compute.len() };
        let units = units.min(rows.max(1));
        let (base, extra) = (rows / units, rows % units);
        let mut start = 0;
        (0..units)
            .map(|i| {
                let len = base + usize::from(i < extra);
                start += len;
                start - len..start
            })
            .collect()
    }

    fn forward_backward_update(&mut self, batch: &HostBatch, lr: f64) -> Result<(Vec<f32>, f64, bool)> {
        let stats_before = {
            let _guard = tch::no_grad_guard();
            self.running_stats.iter().map(Tensor::copy).collect::<Vec<_>>()
        };
        let parts = self.parts(batch.len());
        let total_rows = batch.len().max(1) as f64;
        let pass = PartPass {
            with_reply: self.network.net().has_reply_head(),
            f16: self.mode == Mode::F16,
            loss_scale: self.scaler.as_ref().map(|s| s.scale),
            loss: &self.config.loss,
            first_device: self.device,
            channels_last: self.channels_last,
        };
        let mut units: Vec<Unit> = Vec::with_capacity(parts.len());
        if self.mode != Mode::Bf16 {
            let params = self.optimizer.params().iter().map(|(_, p)| p.shallow_clone()).collect();
            units.push(Unit::Master(&mut self.network, params));
        }
        units.extend(self.compute.iter_mut().map(Unit::Copy));
        let jobs: Vec<(Unit, std::ops::Range<usize>)> = units.into_iter().zip(parts.iter().cloned()).collect();
        let results: Vec<Result<PartResult>> = if jobs.len() == 1 {
            jobs.into_iter().map(|(unit, rows)| pass.run(unit, batch, rows, 1.0)).collect()
        } else {
            // Each unit in its own thread: the devices compute at the same time.
            std::thread::scope(|scope| {
                let handles: Vec<_> = jobs
                    .into_iter()
                    .map(|(unit, rows)| {
                        let share = rows.len() as f64 / total_rows;
                        let pass = &pass;
                        scope.spawn(move || pass.run(unit, batch, rows, share))
                    })
                    .collect();
                // A panic (libtorch panics on CUDA out-of-memory) is that replica's error.
                handles
                    .into_iter()
                    .zip(&self.devices)
                    .map(|(h, &device)| {
                        h.join().unwrap_or_else(|panic| {
                            Err(TrainError::Replica {
                                device: koma_nn::device::device_name(device),
                                message: koma_mcts::panic_message(panic.as_ref()),
                            })
                        })
                    })
                    .collect()
            })
        };
        let results = results.into_iter().collect::<Result<Vec<_>>>()?;
        let units_ran = results.len();
        // The parts' gradients (each already weighted by its share), summed.
        let mut results = results.into_iter();
        let first = results.next().expect("at least one part");
        let mut grads = first.grads;
        let mut terms: Vec<f64> = first.terms.iter().map(|&t| t as f64 * parts[0].len() as f64).collect();
        for (r, rows) in results.zip(&parts[1..]) {
            for (g, part) in grads.iter_mut().zip(r.grads) {
                *g = &*g + part;
            }
            for (t, part) in terms.iter_mut().zip(r.terms) {
                *t += part as f64 * rows.len() as f64;
            }
        }
        let terms: Vec<f32> = terms.into_iter().map(|t| (t / total_rows) as f32).collect();
        let norm = match &self.scaler {
            Some(s) => s.unscale(&mut grads),
            None => global_norm(&grads),
        };
        let finite = norm.is_finite();
        if finite {
            self.average_statistics(units_ran);
        } else {
            // A skipped step leaves the model exactly as it was.
            let _guard = tch::no_grad_guard();
            for (stat, before) in self.running_stats.iter_mut().zip(&stats_before) {
                stat.f_copy_(before)?;
            }
        }
        let apply = match self.scaler.as_mut() {
            Some(s) => s
                .update(finite, &self.config.loss_scale)
                .map_err(|what| TrainError::Diverged { step: self.step, what })?,
            None => finite,
        };
        if !finite && self.scaler.is_none() {
            return Err(TrainError::Diverged {
                step: self.step,
                what: format!(
                    "the gradient norm is {norm} (loss {}); lower the learning rate or set optimizer.grad_clip_norm",
                    terms[2]
                ),
            });
        }
        if apply {
            clip_gradients(&mut grads, norm, self.config.optimizer.grad_clip_norm);
            self.optimizer.step(&mut grads, lr);
        }
        // The copies take the new weights (when the step was applied) and the statistics.
        let master: Vec<Tensor> = self.optimizer.params().iter().map(|(_, t)| t.shallow_clone()).collect();
        let new_weights: &[Tensor] = if apply { &master } else { &[] };
        for copy in &mut self.compute {
            copy.load_master(new_weights, true);
        }
        Ok((terms, norm, apply))
    }

    /// The master's batch-norm running statistics become the mean over the units that computed
    /// this step (the master itself when it computes, and the first `units_ran` of them).
    fn average_statistics(&mut self, units_ran: usize) {
        let master_computes = self.mode != Mode::Bf16;
        let copies_ran = if master_computes { units_ran - 1 } else { units_ran };
        if copies_ran == 0 {
            return;
        }
        let _guard = tch::no_grad_guard();
        let count = (copies_ran + usize::from(master_computes)) as f64;
        let pairs = self.compute[0].buffers.len();
        for b in 0..pairs {
            let master = self.compute[0].buffers[b].0.shallow_clone();
            let mut sum = if master_computes { master.copy() } else { master.zeros_like() };
            for copy in &self.compute[..copies_ran] {
                sum += copy.buffers[b].1.to_device(master.device()).to_kind(master.kind());
            }
            let mut master = master;
            master.copy_(&(sum / count));
        }
    }
    /// Writes `models_dir/model-STEP.safetensors` and its sidecar (atomically) and makes it the
    /// parent of the next one. Returns its path. Inf or NaN anywhere in the training state is a
    /// [`TrainError::Diverged`], and nothing is written. A model already published under that
    /// name is kept, never replaced (a warning says so).
    pub fn save_checkpoint(&mut self, models_dir: &Path) -> Result<PathBuf> {
        self.check_finite()?;
        std::fs::create_dir_all(models_dir).map_err(crate::error::io(models_dir))?;
        let path = models_dir.join(checkpoint::file_name(self.step));
        if path.is_file() {
            // A model name never gets other weights: self-play may have played it, the arena
            // rated it. Only a run that saved its checkpoints before its states (koma before
            // the state-first order) can get here, resumed from a state older than its last model.
            tracing::warn!(
                "{}: already published by an earlier run of this directory; kept as it is, not replaced by \
                 this run's weights of the same step",
                path.display()
            );
            self.parent = Some(checkpoint::file_name(self.step));
            return Ok(path);
        }
        let info = TrainingInfo { step: self.step, samples_seen: self.samples_seen, parent: self.parent.clone() };
        match &self.ema {
            // The published model is the average; training goes on from the raw weights.
            Some(ema) => {
                let variables = sorted_variables(&self.network);
                let network = &mut self.network;
                ema.with_averages_in(&variables, || network.save(&path, &info))??
            }
            None => self.network.save(&path, &info)?,
        };
        self.parent = Some(checkpoint::file_name(self.step));
        Ok(path)
    }

    /// After a resume: every state is saved just before the checkpoint of its step, so a crash
    /// between the two leaves that checkpoint unwritten; it is published now, from the weights
    /// the state holds (the ones it would have had). When it is there, it becomes the parent of
    /// the next checkpoint. Returns whether it had to be published.
    pub fn publish_checkpoint_of_state(&mut self, models_dir: &Path) -> Result<bool> {
        let name = checkpoint::file_name(self.step);
        if self.step == 0 || self.parent.as_deref() == Some(name.as_str()) {
            return Ok(false);
        }
        if models_dir.join(&name).is_file() {
            self.parent = Some(name);
            return Ok(false);
        }
        tracing::warn!(
            "{}: the training state of step {} was saved but its checkpoint was not published (the trainer \
             stopped between the two); publishing it now",
            models_dir.join(&name).display(),
            self.step
        );
        self.save_checkpoint(models_dir)?;
        Ok(true)
    }

    /// Writes the full training state into `state_dir` (atomically). Inf or NaN anywhere in it
    /// is a [`TrainError::Diverged`], and nothing is written.
    pub fn save_state(&self, state_dir: &Path) -> Result<()> {
        self.check_finite()?;
        let tensors = self.state_tensors();
        let mut meta = StateMeta {
            format: String::new(),
            format_version: 0,
            step: self.step,
            samples_seen: self.samples_seen,
            optimizer_steps: self.optimizer.steps(),
            model: self.network.config().clone(),
            config: self.config.clone(),
            rng: self.rng.clone(),
            loss_scaler: self.scaler.clone(),
            last_checkpoint: self.parent.clone(),
            tensors_file: String::new(),
            tensors_sha256: String::new(),
            koma_version: String::new(),
            created_unix: 0,
        };
        state::save(state_dir, &mut meta, &tensors)
    }

    /// The tensors of the training state: `model/NAME` (every variable, batch-norm statistics
    /// included) and `optim/NAME` (the optimiser's buffers).
    fn state_tensors(&self) -> BTreeMap<String, Tensor> {
        let mut tensors = BTreeMap::new();
        for (name, t) in self.network.var_store().variables() {
            tensors.insert(format!("model/{name}"), t);
        }
        for (name, t) in self.optimizer.state_tensors() {
            tensors.insert(format!("optim/{name}"), t);
        }
        for (name, t) in self.ema.iter().flat_map(|e| e.tensors()) {
            tensors.insert(format!("ema/{name}"), t.shallow_clone());
        }
        tensors
    }

    /// A [`TrainError::Diverged`] naming the first tensor of the training state that holds inf
    /// or NaN. One read-back for all of them, so a save hardly pays for it.
    fn check_finite(&self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let tensors = self.state_tensors();
        let flags = tensors
            .values()
            .map(|t| t.f_isfinite()?.f_all())
            .collect::<std::result::Result<Vec<Tensor>, tch::TchError>>()?;
        let finite = Vec::<bool>::try_from(&Tensor::f_stack(&flags, 0)?.f_to_device(Device::Cpu)?)?;
        match tensors.keys().zip(finite).find(|(_, finite)| !finite) {
            None => Ok(()),
            Some((name, _)) => Err(TrainError::Diverged {
                step: self.step,
                what: format!("`{name}` holds inf or NaN (found before saving)"),
            }),
        }
    }
}

/// Loss and agreement of a network on a batch, in inference mode (batch-norm running
/// statistics, no gradients): for measuring a trained net against its targets.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchMetrics {
    pub policy_loss: f64,
    pub value_loss: f64,
    pub policy_top1: f64,
    pub value_accuracy: f64,
    /// Opponent-reply loss and top-1 agreement, for a network with the reply head and a batch
    /// with replies.
    pub reply_loss: Option<f64>,
    pub reply_top1: Option<f64>,
}

pub fn batch_metrics(network: &Network, batch: &HostBatch, loss: &crate::config::LossConfig) -> BatchMetrics {
    let _guard = tch::no_grad_guard();
    let b = batch.to_device(network.device());
    let in1 = b.input1.to_device(network.device()).to_kind(network.kind());
    let in2 = b.input2.to_device(network.device()).to_kind(network.kind());
    let (p, v, r) = network.net().forward_with_reply_t(&in1, &in2, false);
    let r = r.filter(|_| b.reply.is_some()).map(|r| r.to_kind(Kind::Float));
    let l = losses(&p.to_kind(Kind::Float), &v.to_kind(Kind::Float), r.as_ref(), &b, loss);
    BatchMetrics {
        policy_loss: l.policy.double_value(&[]),
        value_loss: l.value.double_value(&[]),
        policy_top1: l.policy_top1.double_value(&[]),
        value_accuracy: l.value_accuracy.double_value(&[]),
        reply_loss: l.reply.as_ref().map(|(x, _)| x.double_value(&[])),
        reply_top1: l.reply.as_ref().map(|(_, x)| x.double_value(&[])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MemoryFormat;
    use crate::synth::{random_samples, SynthPolicy};

    fn small() -> ModelConfig {
        let mut m = ModelConfig::tiny();
        m.blocks = 2;
        m.channels = 16;
        m
    }

    fn cpu_config(precision: Precision) -> TrainConfig {
        TrainConfig { device: "cpu".into(), precision, batch_size: 16, ..TrainConfig::default() }
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
        let moved =
            before.iter().zip(variables(&t)).any(|((n, a), (_, b))| n.ends_with("running_mean") && !a.equal(&b));
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
            let config = TrainConfig { device: device.into(), ..base.clone() };
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
            let config = TrainConfig { device: devices.into(), precision, batch_size: 7, ..TrainConfig::default() };
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
        let base =
            TrainConfig { device: "cpu".into(), precision: Precision::F32, batch_size: 16, ..TrainConfig::default() };
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
            assert!(
                (a.grad_norm - b.grad_norm).abs() <= 1e-3 * a.grad_norm.max(1.0),
                "{} vs {}",
                a.grad_norm,
                b.grad_norm
            );
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
}
