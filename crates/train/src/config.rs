//! The trainer's settings as one serde struct with defaults for everything ([`TrainConfig`]),
//! read from TOML (a `[train]` table of a run config, or a bare file) or JSON. Unknown fields are
//! errors, so a typo never silently falls back to a default.

use std::path::Path;

use koma_data::{SampleWeights, WindowSize, WindowStorage};
use koma_nn::{DeviceList, Precision};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Result, TrainError};

/// `[train]`: the trainer (`koma train`, and the pipeline's training stage).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct TrainConfig {
    /// Samples per optimiser step.
    pub batch_size: usize,
    /// Steps per model: every this many steps a checkpoint `models/model-STEP.safetensors` and
    /// the full training state (`train/state/`) are written.
    pub checkpoint_every: u64,
    /// A line of `train/metrics.jsonl` every this many steps (means over those steps).
    pub log_every: u64,
    /// Seeds the batch sampler and libtorch (initial weights of a preset network).
    pub seed: u64,
    /// `auto`, `cpu`, `cuda` or `cuda:N`; or several (`["cuda:0", "cuda:1"]`, `"cuda:0,cuda:1"`,
    /// `cuda:all`) for data-parallel training: a replica per device, each batch split between
    /// them, gradients averaged (docs/training.md). `koma train` only: a run config sets it in
    /// `[run]` (here it is refused).
    #[schemars(with = "koma_nn::device::DeviceField")]
    pub device: DeviceList,
    /// `auto` (f16 autocast on CUDA, f32 on the CPU), `f32`, `f16` (autocast with dynamic loss
    /// scaling) or `bf16` (bf16 compute copy, f32 master weights). Half precision is CUDA-only.
    pub precision: Precision,
    /// libtorch intra-op threads (process-wide; default: libtorch's choice). `koma train` only: a
    /// run config sets it in `[run]` (here it is refused).
    pub threads: Option<usize>,
    /// Layout of the activations: `auto` (channels-last on the CPU, contiguous on CUDA),
    /// `channels_last` or `contiguous`. Weights and checkpoints keep the standard layout.
    pub memory_format: MemoryFormat,
    /// Batches the loader thread prepares ahead of the optimiser.
    pub prefetch_batches: usize,
    /// Weight averaging: the published models (and the last one) are an exponential moving
    /// average of the trained weights with this time constant in samples: each step of B samples
    /// keeps exp(−B / ema_samples) of the average (docs/training.md). 0: the raw weights.
    pub ema_samples: f64,
    /// With `ema_samples`: the batch-norm statistics of each published average are recomputed on
    /// about this many positions of the last batches trained on (train-mode forward passes of the
    /// averaged weights, SWA's `update_bn`), rounded up to whole batches.
    pub ema_statistics_samples: usize,
    /// With `ema_samples`: the batch-norm statistics the published average carries: `recomputed`
    /// for its own weights on the last batches (SWA's `update_bn`), or `trained` (the running
    /// statistics of the network being trained, as they are at the publish). docs/benchmarks.md
    /// compares the two on held-out data.
    pub ema_statistics: EmaStatistics,
    pub optimizer: OptimizerConfig,
    pub lr: LrConfig,
    pub loss: LossConfig,
    pub window: WindowConfig,
    pub loss_scale: LossScaleConfig,
    pub follow: FollowConfig,
}

impl Default for TrainConfig {
    fn default() -> TrainConfig {
        TrainConfig {
            batch_size: 256,
            checkpoint_every: 1000,
            log_every: 100,
            seed: 0,
            device: DeviceList::default(),
            precision: Precision::Auto,
            threads: None,
            memory_format: MemoryFormat::Auto,
            prefetch_batches: 4,
            ema_samples: 0.0,
            ema_statistics_samples: 2048,
            ema_statistics: EmaStatistics::Recomputed,
            optimizer: OptimizerConfig::default(),
            lr: LrConfig::default(),
            loss: LossConfig::default(),
            window: WindowConfig::default(),
            loss_scale: LossScaleConfig::default(),
            follow: FollowConfig::default(),
        }
    }
}

/// Where the published average's batch-norm statistics come from (`train.ema_statistics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EmaStatistics {
    /// Recomputed for the averaged weights on the last `ema_statistics_samples` positions trained
    /// on.
    #[default]
    Recomputed,
    /// The trained network's running statistics at the publish.
    Trained,
}

/// The most positions `ema_statistics_samples` may name (about 630 MB of kept inputs).
pub const MAX_EMA_STATISTICS_SAMPLES: usize = 65_536;

/// Memory format of the network's activations during training (`train.memory_format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryFormat {
    /// Channels-last on the CPU (oneDNN's convolutions train faster in it; docs/training.md has the
    /// figures); contiguous on CUDA (not measured there yet).
    #[default]
    Auto,
    /// NHWC strides (PyTorch's `torch.channels_last`): the inputs are converted, every
    /// activation follows.
    ChannelsLast,
    /// The standard NCHW layout.
    Contiguous,
}

impl MemoryFormat {
    pub fn name(self) -> &'static str {
        match self {
            MemoryFormat::Auto => "auto",
            MemoryFormat::ChannelsLast => "channels_last",
            MemoryFormat::Contiguous => "contiguous",
        }
    }

    /// Whether training on `device` uses channels-last activations.
    pub fn channels_last_on(self, device: tch::Device) -> bool {
        match self {
            MemoryFormat::Auto => device == tch::Device::Cpu,
            MemoryFormat::ChannelsLast => true,
            MemoryFormat::Contiguous => false,
        }
    }
}

impl MemoryFormat {
    /// The names [`MemoryFormat::from_str`] reads.
    pub const NAMES: [&'static str; 3] = ["auto", "channels_last", "contiguous"];
}

impl std::str::FromStr for MemoryFormat {
    type Err = TrainError;
    fn from_str(s: &str) -> Result<MemoryFormat> {
        match s {
            "auto" => Ok(MemoryFormat::Auto),
            "channels_last" | "channels-last" => Ok(MemoryFormat::ChannelsLast),
            "contiguous" => Ok(MemoryFormat::Contiguous),
            _ => Err(TrainError::Config(format!("memory format {s:?}: expected auto, channels_last or contiguous"))),
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// SGD with (Nesterov) momentum and L2 weight decay added to the gradient (PyTorch's SGD).
    #[default]
    Sgd,
    /// AdamW: Adam with decoupled weight decay.
    #[serde(alias = "adam_w")]
    AdamW,
}

impl OptimizerKind {
    pub fn name(self) -> &'static str {
        match self {
            OptimizerKind::Sgd => "sgd",
            OptimizerKind::AdamW => "adamw",
        }
    }
}

/// The optimiser and its settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct OptimizerConfig {
    /// `sgd` (with momentum) or `adamw`.
    pub kind: OptimizerKind,
    /// SGD momentum (0: none).
    pub momentum: f64,
    /// Nesterov momentum (SGD).
    pub nesterov: bool,
    /// SGD: L2 penalty added to the gradient (`g + wd·w`); AdamW: decoupled decay (`w -= lr·wd·w`).
    pub weight_decay: f64,
    /// AdamW: decay rate of the first-moment (mean) estimate.
    pub beta1: f64,
    /// AdamW: decay rate of the second-moment (uncentred variance) estimate.
    pub beta2: f64,
    /// AdamW: added to the square root of the second moment, for stability.
    pub eps: f64,
    /// Clip the global gradient L2 norm to this (0: no clipping).
    pub grad_clip_norm: f64,
}

impl Default for OptimizerConfig {
    fn default() -> OptimizerConfig {
        OptimizerConfig {
            kind: OptimizerKind::Sgd,
            momentum: 0.9,
            nesterov: true,
            weight_decay: 1e-4,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            grad_clip_norm: 0.0,
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// `base` throughout.
    #[default]
    Constant,
    /// Multiply by `gamma` every `step_size` steps, or at each of `milestones` when given.
    Step,
    /// Cosine from `base` down to `base · min_factor` over `decay_steps` (0: over the run's
    /// budget), then flat.
    Cosine,
}

/// The learning rate: a schedule after an optional linear warm-up. Steps count from the end of
/// the warm-up for the schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LrConfig {
    /// Peak learning rate (after warm-up).
    pub base: f64,
    /// After the warm-up: `constant`, `step` or `cosine`.
    pub schedule: Schedule,
    /// Linear warm-up from `base · warmup_start` to `base` over this many steps.
    pub warmup_steps: u64,
    /// Learning rate at the start of the warm-up, as a share of `base`.
    pub warmup_start: f64,
    /// `step` schedule without `milestones`: steps between decays.
    pub step_size: u64,
    /// `step` schedule: the steps (counted after the warm-up) at which to decay; empty: every
    /// `step_size` steps.
    pub milestones: Vec<u64>,
    /// `step` schedule: factor of each decay.
    pub gamma: f64,
    /// `cosine` schedule: steps from `base` down to `base · min_factor`. 0: over the run's
    /// budget instead, whichever of its limits (`[run] minutes`, `cpu_minutes`, `steps`) ends it
    /// first, so that a run anneals within its own budget on any machine (budgeted training: Li,
    /// Yumer and Ramanan, ICLR 2020).
    pub decay_steps: u64,
    /// `cosine` schedule: the final learning rate as a share of `base`.
    pub min_factor: f64,
}

impl Default for LrConfig {
    fn default() -> LrConfig {
        LrConfig {
            base: 0.1,
            schedule: Schedule::Constant,
            warmup_steps: 0,
            warmup_start: 0.0,
            step_size: 100_000,
            milestones: Vec::new(),
            gamma: 0.1,
            decay_steps: 1_000_000,
            min_factor: 0.0,
        }
    }
}

impl LrConfig {
    /// Whether the schedule anneals over the run's budget (`cosine` with `decay_steps = 0`)
    /// rather than over a step count.
    pub fn over_budget(&self) -> bool {
        self.schedule == Schedule::Cosine && self.decay_steps == 0
    }

    /// Refuses a schedule [over the budget](Self::over_budget) for a trainer with no budget:
    /// neither a step limit nor a clock (`koma pipeline`'s minutes). Called before anything is
    /// written, by the trainer and by `koma train --run` before it writes model 0.
    pub fn check_bounded(&self, steps: Option<u64>, has_clock: bool) -> Result<()> {
        if self.over_budget() && steps.is_none() && !has_clock {
            return Err(TrainError::Config(
                "lr: a cosine schedule with decay_steps = 0 anneals over the run's budget, and this trainer has \
                 none: give it --steps (`koma train` has no clock; `koma pipeline` also takes --minutes and \
                 --cpu-minutes), or set decay_steps"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The learning rate of the optimiser step that takes the model from step `step` to
    /// `step + 1`: a pure function of the step and, for a schedule [over the
    /// budget](Self::over_budget), of `budget_spent`, the share of the run's budget spent (0 to
    /// 1; ignored by the other schedules). Resuming needs no schedule state beyond that share.
    pub fn at(&self, step: u64, budget_spent: f64) -> f64 {
        if step < self.warmup_steps {
            let f = step as f64 / self.warmup_steps as f64;
            return self.base * (self.warmup_start + (1.0 - self.warmup_start) * f);
        }
        let t = step - self.warmup_steps;
        match self.schedule {
            Schedule::Constant => self.base,
            Schedule::Step => {
                let k = if self.milestones.is_empty() {
                    t / self.step_size.max(1)
                } else {
                    self.milestones.iter().filter(|&&m| m <= t).count() as u64
                };
                self.base * self.gamma.powi(k.min(i32::MAX as u64) as i32)
            }
            Schedule::Cosine => {
                let x = if self.over_budget() {
                    budget_spent.clamp(0.0, 1.0)
                } else {
                    t.min(self.decay_steps) as f64 / self.decay_steps as f64
                };
                self.base * (self.min_factor + (1.0 - self.min_factor) * 0.5 * (1.0 + (std::f64::consts::PI * x).cos()))
            }
        }
    }
}

/// What the network is trained towards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LossConfig {
    /// Value target = w·onehot(game result) + (1 − w)·(search root W/D/L), w this weight. dlshogi
    /// weights the search value `val_lambda` = 0.333 and the result 1 − 0.333: that is
    /// `result_weight = 0.667`. 1: the game result alone (AlphaZero).
    pub result_weight: f64,
    /// Removed: `value_lambda` weighted the game result, the opposite of dlshogi's `val_lambda`
    /// (which weights the search value). Reading it is an error that says so.
    #[serde(default, skip_serializing, deserialize_with = "removed_value_lambda")]
    #[schemars(skip)]
    pub value_lambda: Option<()>,
    /// Weights of the two cross-entropy terms in the loss.
    pub policy_weight: f64,
    /// Weight of the value cross-entropy (see `policy_weight`).
    pub value_weight: f64,
    /// Policy-target pruning: entries with a weight below this are dropped (never the largest)
    /// and the rest renormalised.
    pub policy_prune_below: f32,
    /// Train the policy only on samples flagged as full searches (the value on all).
    pub policy_full_search_only: bool,
    /// Weight of the opponent-reply auxiliary loss (KataGo §3.4): cross-entropy of the model's
    /// reply head (`[model] aux_reply_head`) against the move the opponent played next. Unset: 0.15
    /// ([`DEFAULT_REPLY_WEIGHT`], KataGo's) when the model has the head, nothing when it has
    /// none. Set explicitly above 0, a model without the head is an error. 0 leaves the head
    /// untrained.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reply_weight: Option<f64>,
    /// Material value target, a dense signal for early training (0: off): the value target
    /// becomes (1 − μ)·(the target above) + μ·(p, 0, 1 − p) with p = sigmoid(m /
    /// `material_scale`), m the material balance in pawns (`koma_shogi::material`) for the side to
    /// move `material_plies` plies later in the sample's game (at its end if sooner). Samples
    /// without a known continuation (hcpe imports) keep the plain target. It teaches the value head
    /// that pieces matter long before game results can; it is shogi knowledge, not zero.
    pub material_weight: f64,
    /// Plies after the sample's position at which the material is counted (see
    /// `material_weight`).
    pub material_plies: usize,
    /// Pawns of material that move the material target from 0.5 to sigmoid(1) ≈ 0.73 (see
    /// `material_weight`).
    pub material_scale: f64,
    /// The material weight falls linearly to 0 over this many training samples (0: it stays
    /// constant), so that a long run ends on game results alone.
    pub material_decay_samples: u64,
}

/// `[train.loss] value_lambda`, removed: always an error that says what changed and what to write.
fn removed_value_lambda<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> std::result::Result<Option<()>, D::Error> {
    let old = f64::deserialize(deserializer)?;
    Err(serde::de::Error::custom(format!(
        "value_lambda was removed: it weighted the game result, the opposite of dlshogi's val_lambda (which weights \
         the search value). Write result_weight = {old} for the same targets as before (dlshogi's val_lambda = 0.333 \
         is result_weight = 0.667)"
    )))
}

/// The opponent-reply loss weight when a model has the head and `reply_weight` is not set.
pub const DEFAULT_REPLY_WEIGHT: f64 = 0.15;

impl LossConfig {
    /// The reply loss weight in effect for a model with (`has_head`) or without the reply head;
    /// an error naming both settings when the weight is set above 0 and the model has no head.
    pub fn reply_weight_for(&self, has_head: bool) -> Result<f64> {
        match (self.reply_weight, has_head) {
            (None, true) => Ok(DEFAULT_REPLY_WEIGHT),
            (None, false) => Ok(0.0),
            (Some(w), true) => Ok(w),
            (Some(w), false) if w > 0.0 => Err(TrainError::Config(format!(
                "[train.loss] reply_weight = {w}, but the model has no opponent-reply head: give the \
                 model one (`aux_reply_head = true` in its [model] config, for a fresh network) or set \
                 reply_weight = 0"
            ))),
            (Some(_), false) => Ok(0.0),
        }
    }

    /// The material weight μ in effect after the trainer has seen `samples_seen` samples
    /// (`material_decay_samples`).
    pub fn material_weight_at(&self, samples_seen: u64) -> f64 {
        if self.material_decay_samples == 0 {
            return self.material_weight;
        }
        self.material_weight * (1.0 - samples_seen as f64 / self.material_decay_samples as f64).max(0.0)
    }
}

impl Default for LossConfig {
    fn default() -> LossConfig {
        LossConfig {
            result_weight: 0.667,
            value_lambda: None,
            policy_weight: 1.0,
            value_weight: 1.0,
            policy_prune_below: 0.0,
            policy_full_search_only: false,
            reply_weight: None,
            material_weight: 0.0,
            material_plies: 6,
            material_scale: 6.0,
            material_decay_samples: 0,
        }
    }
}

/// The replay window (see koma-data): a fixed size, or KataGo's growing window.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct WindowConfig {
    /// A fixed window of the newest `size` samples (0: the growing window below).
    pub size: usize,
    /// Growing window (KataGo): after N samples produced, the window holds
    /// c·(1 + β((N/c)^α − 1)/α) of them (all N while N ≤ c), capped at `max`.
    pub c: f64,
    /// Growing window: the exponent α (see `c`).
    pub alpha: f64,
    /// Growing window: the slope β (see `c`).
    pub beta: f64,
    /// Growing window: the largest size, in samples.
    pub max: usize,
    /// Samples before this ply are accepted with `early_probability`.
    pub early_plies: u16,
    /// Probability that a sample before `early_plies` is used when drawn.
    pub early_probability: f64,
    /// Probability that a drawn sample is reflected left to right (position, policy target,
    /// played move and reply; shogi's rules are symmetric, `Position::mirror`): 0.5 shows the
    /// network each position and its mirror image equally often. 0: off.
    pub mirror: f64,
    /// Where the window's samples live: "memory" (each shard decoded into memory when it joins,
    /// about 66 bytes a sample plus 4 a policy entry; draws are copies) or "disk" (read on
    /// demand through HDF5's chunk caches: little memory, but a few thousand samples/s per core
    /// at millions of samples, too slow for a GPU trainer; docs/benchmarks.md).
    pub storage: WindowStorage,
}

impl Default for WindowConfig {
    fn default() -> WindowConfig {
        WindowConfig {
            size: 0,
            c: 250_000.0,
            alpha: 0.75,
            beta: 0.4,
            max: 2_000_000,
            early_plies: 0,
            early_probability: 1.0,
            mirror: 0.0,
            storage: WindowStorage::Memory,
        }
    }
}

impl WindowConfig {
    pub fn window_size(&self) -> WindowSize {
        if self.size > 0 {
            WindowSize::fixed(self.size)
        } else {
            WindowSize { c: self.c, alpha: self.alpha, beta: self.beta, max: self.max }
        }
    }

    pub fn sample_weights(&self) -> SampleWeights {
        SampleWeights { early_plies: self.early_plies, early_probability: self.early_probability }
    }
}

/// Dynamic loss scaling for f16 training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct LossScaleConfig {
    /// The first loss scale.
    pub init: f64,
    /// Multiply the scale by this after `growth_interval` steps in a row with finite gradients.
    pub growth_factor: f64,
    /// Steps in a row with finite gradients before the scale grows.
    pub growth_interval: u64,
    /// Multiply the scale by this (and skip the step) when a gradient is inf or NaN.
    pub backoff_factor: f64,
    /// The scale never falls below this.
    pub min: f64,
    /// The scale never grows above this.
    pub max: f64,
    /// This many skipped steps in a row is a divergence (the scale has fallen by
    /// `backoff_factor^N`, far beyond any passing overflow), not a reason to keep skipping.
    pub max_skips_in_a_row: u64,
}

impl Default for LossScaleConfig {
    fn default() -> LossScaleConfig {
        LossScaleConfig {
            init: 65536.0,
            growth_factor: 2.0,
            growth_interval: 2000,
            backoff_factor: 0.5,
            min: 1.0,
            max: 16_777_216.0,
            max_skips_in_a_row: 20,
        }
    }
}

/// `--follow`: keep training as self-play writes new shards.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct FollowConfig {
    /// Wait until the window holds at least this many samples.
    pub min_window_samples: usize,
    /// At most this many training samples per sample produced (0: no limit): the trainer waits
    /// for new shards when `samples_seen > ratio · samples produced`.
    pub samples_per_new_sample: f64,
    /// Seconds between looks for new shards while waiting.
    pub poll_seconds: f64,
    /// Look for new shards every this many batches while training.
    pub refresh_every_batches: u64,
}

impl Default for FollowConfig {
    fn default() -> FollowConfig {
        FollowConfig {
            min_window_samples: 10_000,
            samples_per_new_sample: 0.0,
            poll_seconds: 5.0,
            refresh_every_batches: 100,
        }
    }
}

impl TrainConfig {
    /// TOML: a `[train]` table (as in a run config) or a bare trainer config at the top level.
    pub fn from_toml_str(text: &str) -> Result<TrainConfig> {
        let table: toml::Table = toml::from_str(text).map_err(|e| TrainError::Config(format!("invalid TOML: {e}")))?;
        let value = match table.get("train") {
            Some(toml::Value::Table(t)) => toml::Value::Table(t.clone()),
            _ => toml::Value::Table(table),
        };
        let config: TrainConfig = value.try_into().map_err(|e: toml::de::Error| TrainError::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// JSON: a bare trainer config or an object with a `train` member.
    pub fn from_json_str(text: &str) -> Result<TrainConfig> {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| TrainError::Config(format!("invalid JSON: {e}")))?;
        let value = match value.get("train") {
            Some(t) if t.is_object() => t.clone(),
            _ => value,
        };
        let config: TrainConfig = serde_json::from_value(value).map_err(|e| TrainError::Config(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    /// A `.json` file as JSON, anything else as TOML.
    pub fn from_file(path: &Path) -> Result<TrainConfig> {
        let text = std::fs::read_to_string(path).map_err(crate::error::io(path))?;
        let parsed = if path.extension().is_some_and(|e| e == "json") {
            TrainConfig::from_json_str(&text)
        } else {
            TrainConfig::from_toml_str(&text)
        };
        parsed.map_err(|e| match e {
            TrainError::Config(m) => TrainError::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    pub fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(TrainError::Config(m.to_string()));
        if self.batch_size == 0 {
            return bad("batch_size must be at least 1");
        }
        if self.checkpoint_every == 0 || self.log_every == 0 {
            return bad("checkpoint_every and log_every must be at least 1");
        }
        if let DeviceList::Listed(list) = &self.device {
            if list.len() > self.batch_size {
                return bad(
                    "batch_size must be at least the number of devices (each replica gets a part of every batch)",
                );
            }
        }
        let o = &self.optimizer;
        if !(0.0..1.0).contains(&o.momentum) || o.weight_decay < 0.0 || o.grad_clip_norm < 0.0 {
            return bad("optimizer: momentum must be in [0, 1), weight_decay and grad_clip_norm ≥ 0");
        }
        if o.kind == OptimizerKind::AdamW
            && (!(0.0..1.0).contains(&o.beta1) || !(0.0..1.0).contains(&o.beta2) || o.eps <= 0.0)
        {
            return bad("optimizer: beta1 and beta2 must be in [0, 1) and eps > 0");
        }
        let l = &self.lr;
        let base_ok = l.base > 0.0 && l.base.is_finite();
        if !base_ok || !(0.0..=1.0).contains(&l.warmup_start) || l.gamma <= 0.0 || l.min_factor < 0.0 {
            return bad("lr: base must be positive, warmup_start in [0, 1], gamma > 0, min_factor ≥ 0");
        }
        if !(self.ema_samples >= 0.0 && self.ema_samples.is_finite()) {
            return bad("ema_samples must be 0 (off) or a positive number of samples");
        }
        if self.ema_samples > 0.0 && !(1..=MAX_EMA_STATISTICS_SAMPLES).contains(&self.ema_statistics_samples) {
            return bad(&format!(
                "ema_statistics_samples must be 1 to {MAX_EMA_STATISTICS_SAMPLES}: the averaged weights need batch-norm \
                 statistics of their own, and the trainer keeps that many positions' inputs (about 10 KB each) in memory \
                 and in its state"
            ));
        }
        if !(0.0..=1.0).contains(&self.loss.result_weight) {
            return bad("loss.result_weight must be in [0, 1]");
        }
        if self.loss.policy_weight < 0.0
            || self.loss.value_weight < 0.0
            || self.loss.reply_weight.is_some_and(|w| !(w >= 0.0 && w.is_finite()))
        {
            return bad("loss weights must be ≥ 0");
        }
        let loss = &self.loss;
        if !(0.0..=1.0).contains(&loss.material_weight) {
            return bad("loss.material_weight must be in [0, 1]");
        }
        let scale_ok = loss.material_scale > 0.0 && loss.material_scale.is_finite();
        if loss.material_weight > 0.0 && (loss.material_plies == 0 || !scale_ok) {
            return bad(
                "loss.material_plies must be at least 1 and loss.material_scale positive when material_weight > 0",
            );
        }
        let w = &self.window;
        if w.size == 0 && (w.c <= 0.0 || w.alpha <= 0.0 || w.max == 0) {
            return bad("window: c, alpha and max must be positive (or set a fixed size)");
        }
        if !(0.0..=1.0).contains(&w.early_probability) {
            return bad("window.early_probability must be in [0, 1]");
        }
        if !(0.0..=1.0).contains(&w.mirror) {
            return bad("window.mirror must be in [0, 1]");
        }
        let s = &self.loss_scale;
        if s.init <= 0.0
            || s.growth_factor < 1.0
            || !(0.0..1.0).contains(&s.backoff_factor)
            || s.backoff_factor == 0.0
            || s.min <= 0.0
            || s.max < s.min
            || s.max_skips_in_a_row == 0
        {
            return bad(
                "loss_scale: init > 0, growth_factor ≥ 1, backoff_factor in (0, 1), 0 < min ≤ max, max_skips_in_a_row ≥ 1",
            );
        }
        let f = &self.follow;
        if f.samples_per_new_sample < 0.0 || f.poll_seconds <= 0.0 {
            return bad("follow: samples_per_new_sample ≥ 0 and poll_seconds > 0");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_toml() {
        let c = TrainConfig::from_toml_str("").unwrap();
        assert_eq!(c, TrainConfig::default());
        let c = TrainConfig::from_toml_str(
            "name = \"run\"\n[train]\nbatch_size = 64\n[train.optimizer]\nkind = \"adamw\"\n[train.lr]\nbase = 0.001\nschedule = \"cosine\"\n",
        )
        .unwrap();
        assert_eq!(c.batch_size, 64);
        assert_eq!(c.optimizer.kind, OptimizerKind::AdamW);
        assert_eq!(c.optimizer.momentum, 0.9);
        assert_eq!(c.lr.schedule, Schedule::Cosine);
        let j =
            TrainConfig::from_json_str(r#"{"train": {"precision": "bf16", "loss": {"result_weight": 0.5}}}"#).unwrap();
        assert_eq!(j.precision, Precision::Bf16);
        assert_eq!(j.loss.result_weight, 0.5);
    }

    #[test]
    fn unknown_fields_and_bad_values_are_refused() {
        assert!(TrainConfig::from_toml_str("batch_sise = 3").unwrap_err().to_string().contains("batch_sise"));
        assert!(TrainConfig::from_toml_str("[optimizer]\nmomentun = 0.5").is_err());
        assert!(TrainConfig::from_toml_str("batch_size = 0").is_err());
        assert!(TrainConfig::from_toml_str("device = \"tpu\"").is_err());
        assert!(TrainConfig::from_toml_str("[loss]\nresult_weight = 2.0").is_err());
        assert!(TrainConfig::from_toml_str("[loss]\nmaterial_weight = 1.5").is_err());
        assert!(TrainConfig::from_toml_str("[loss]\nmaterial_weight = 0.3\nmaterial_plies = 0").is_err());
        assert!(TrainConfig::from_toml_str("[loss]\nmaterial_weight = 0.3\nmaterial_scale = 0.0").is_err());
        assert!(TrainConfig::from_toml_str("[loss]\nmaterial_weight = 0.3\nmaterial_plies = 4").is_ok());
        let text = toml::to_string(&TrainConfig::default()).unwrap();
        assert_eq!(TrainConfig::from_toml_str(&text).unwrap(), TrainConfig::default());
    }

    /// The old field is refused with what changed, and the default weights the result as dlshogi
    /// does (its val_lambda 0.333 weights the search value).
    #[test]
    fn value_lambda_is_refused_and_the_default_is_dlshogis() {
        let err = TrainConfig::from_toml_str("[loss]\nvalue_lambda = 0.333").unwrap_err().to_string();
        assert!(err.contains("value_lambda was removed"), "{err}");
        assert!(err.contains("result_weight = 0.333"), "{err}");
        assert!(err.contains("result_weight = 0.667"), "{err}");
        assert!((TrainConfig::default().loss.result_weight - (1.0 - 0.333)).abs() < 1e-9);
        let text = toml::to_string(&TrainConfig::default()).unwrap();
        assert!(!text.contains("value_lambda"), "{text}");
    }

    #[test]
    fn schedules() {
        let mut l = LrConfig { base: 1.0, warmup_steps: 10, warmup_start: 0.0, ..LrConfig::default() };
        assert_eq!(l.at(0, 0.0), 0.0);
        assert!((l.at(5, 0.0) - 0.5).abs() < 1e-12);
        assert_eq!(l.at(10, 0.0), 1.0);
        assert_eq!(l.at(1_000_000, 0.0), 1.0);
        l.schedule = Schedule::Step;
        l.step_size = 100;
        l.gamma = 0.5;
        assert_eq!(l.at(109, 0.0), 1.0);
        assert_eq!(l.at(110, 0.0), 0.5);
        assert_eq!(l.at(310, 0.0), 0.125);
        l.milestones = vec![50, 60];
        assert_eq!(l.at(59, 0.0), 1.0);
        assert_eq!(l.at(60, 0.0), 0.5);
        assert_eq!(l.at(70, 0.0), 0.25);
        l.schedule = Schedule::Cosine;
        l.decay_steps = 100;
        l.min_factor = 0.1;
        assert!((l.at(10, 0.0) - 1.0).abs() < 1e-12);
        assert!((l.at(60, 0.0) - 0.55).abs() < 1e-12);
        assert!((l.at(110, 0.0) - 0.1).abs() < 1e-12);
        assert!((l.at(5000, 0.0) - 0.1).abs() < 1e-12);
        // decay_steps = 0: over the run's budget, whatever the step; the warm-up still counts steps.
        l.decay_steps = 0;
        assert!(l.over_budget());
        assert_eq!(l.at(5, 0.9), 0.5);
        assert!((l.at(5000, 0.0) - 1.0).abs() < 1e-12);
        assert!((l.at(10, 0.5) - 0.55).abs() < 1e-12);
        assert!((l.at(11, 1.0) - 0.1).abs() < 1e-12);
        assert!((l.at(12, 7.0) - 0.1).abs() < 1e-12);
        l.schedule = Schedule::Step;
        assert!(!l.over_budget());
    }
}
