//! [`Trainer`]: the network being trained with its optimiser, precision mode and counters, one
//! optimiser step at a time ([`Trainer::train_step`]). Its concerns live beside it:
//! `precision.rs` (f32, f16 autocast with loss scaling, bf16), `replicas.rs` (the forward and
//! backward passes, data parallel over several devices), `persist.rs` (checkpoints, the training
//! state, `--resume`) and `memory.rs` (malloc tuning for the activations).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use koma_base::Rng;
use koma_nn::{DeviceSpec, InputBatch, ModelConfig, Network, Precision, RunOptions};
use rand::SeedableRng;
use tch::{Device, Tensor};

use crate::averaging::{recompute_statistics, restoring, Ema};
use crate::batch::HostBatch;
use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::metrics::StepStats;
use crate::optim::Optimizer;
use crate::scaler::LossScaler;

mod memory;
mod persist;
mod precision;
mod replicas;
#[cfg(test)]
mod tests;

pub use memory::keep_freed_memory;
pub use precision::Mode;
use replicas::ComputeCopy;

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
    /// With `ema`: the inputs of the last batches trained on (at most
    /// [`Trainer::statistics_batches`]), on which the average's batch-norm statistics are
    /// recomputed at a publish. Saved with the training state, so that a resumed run publishes
    /// what the uninterrupted one would.
    recent_inputs: VecDeque<InputBatch>,
    /// The share of the run's budget spent (0 to 1), for a learning rate that anneals over it
    /// ([`crate::LrConfig::over_budget`]); kept in the training state for a resume.
    budget_spent: f64,
}

/// Every variable of the network (weights and batch-norm statistics), sorted by name.
fn sorted_variables(network: &Network) -> Vec<(String, Tensor)> {
    let mut variables: Vec<(String, Tensor)> = network.var_store().variables().into_iter().collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    variables
}

/// The network's batch-norm running statistics (its non-trainable variables), sorted by name.
fn sorted_statistics(network: &Network) -> Vec<(String, Tensor)> {
    sorted_variables(network).into_iter().filter(|(_, t)| !t.requires_grad()).collect()
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
    let list = &config.device;
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
            Mode::F16 => sorted_statistics(&network).into_iter().map(|(_, t)| t).collect(),
            _ => Vec::new(),
        };
        let rng = Rng::seed_from_u64(config.seed);
        let channels_last = config.memory_format.channels_last_on(device);
        let ema = (config.ema_samples > 0.0)
            .then(|| Ema::new(optimizer.params(), &sorted_statistics(&network), config.ema_samples));
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
            recent_inputs: VecDeque::new(),
            budget_spent: 0.0,
        })
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
        self.config.lr.at(self.step, self.budget_spent)
    }

    /// The share of the run's budget spent (0 to 1) by the last [`Trainer::set_budget_spent`],
    /// or as the resumed state left it.
    pub fn budget_spent(&self) -> f64 {
        self.budget_spent
    }

    /// Tells the trainer how much of the run's budget is spent, before a step: the learning rate
    /// of a schedule over the budget follows it. It never goes back (a share measured low after
    /// a resume keeps the rate where it was).
    pub fn set_budget_spent(&mut self, spent: f64) {
        self.budget_spent = self.budget_spent.max(spent.clamp(0.0, 1.0));
    }

    /// One optimiser step on `batch` (its inputs copied when weight averaging keeps them).
    pub fn train_step(&mut self, batch: &HostBatch) -> Result<StepStats> {
        let stats = self.step_on(batch)?;
        self.keep_inputs(|kept| kept.copy_from(&batch.inputs));
        Ok(stats)
    }

    /// [`Trainer::train_step`] on a batch it may keep: its inputs are moved, not copied, into the
    /// ones the average's statistics are recomputed on (the training loop's path).
    pub fn train_step_owned(&mut self, batch: HostBatch) -> Result<StepStats> {
        let stats = self.step_on(&batch)?;
        let inputs = batch.inputs;
        self.keep_inputs(move |kept| *kept = inputs);
        Ok(stats)
    }

    /// With weight averaging, keeps the inputs of the step just trained (`fill` puts them into
    /// a slot) among the last [`Trainer::statistics_batches`].
    fn keep_inputs(&mut self, fill: impl FnOnce(&mut InputBatch)) {
        if self.ema.is_none() || self.config.ema_statistics == crate::config::EmaStatistics::Trained {
            return;
        }
        let mut kept = InputBatch::new();
        while self.recent_inputs.len() >= self.statistics_batches() {
            kept = self.recent_inputs.pop_front().unwrap_or_default();
        }
        fill(&mut kept);
        self.recent_inputs.push_back(kept);
    }

    fn step_on(&mut self, batch: &HostBatch) -> Result<StepStats> {
        let lr = self.lr();
        let (v, grads_norm, applied) = self.forward_backward_update(batch, lr)?;
        if let (Some(ema), true) = (&mut self.ema, applied) {
            ema.update(self.optimizer.params(), self.step, batch.len())?;
        }
        self.step += 1;
        memory::planted_leak();
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

    /// How many of the last batches the average's statistics are recomputed on.
    fn statistics_batches(&self) -> usize {
        self.config.ema_statistics_samples.div_ceil(self.config.batch_size.max(1)).max(1)
    }

    /// Recomputes the batch-norm statistics of the averaged weights on the kept inputs (unless
    /// done at this step already, or nothing is kept: a resumed trainer that has not trained yet
    /// keeps the statistics its state holds). The network's own weights and statistics are left
    /// as they were.
    fn recompute_average_statistics(&mut self) -> Result<()> {
        let Some(ema) = &mut self.ema else { return Ok(()) };
        if ema.statistics_are_from(self.step) {
            return Ok(());
        }
        if self.config.ema_statistics == crate::config::EmaStatistics::Trained {
            return ema.set_statistics(&sorted_statistics(&self.network), self.step);
        }
        if self.recent_inputs.is_empty() {
            return Ok(());
        }
        let (network, inputs, device, channels_last) =
            (&self.network, &self.recent_inputs, self.device, self.channels_last);
        let statistics = sorted_statistics(network);
        restoring(&sorted_variables(network), || -> Result<()> {
            ema.copy_into(self.optimizer.params(), &statistics)?;
            recompute_statistics(&statistics, inputs.len(), koma_nn::model::BATCH_NORM_MOMENTUM, |k| {
                let _guard = tch::no_grad_guard();
                let (in1, in2) = crate::batch::input_tensors(&inputs[k], 0..inputs[k].len(), device, channels_last);
                let _ = network.net().forward_t(&in1, &in2, true);
                Ok(())
            })?;
            ema.set_statistics(&statistics, self.step)
        })?
    }
}
