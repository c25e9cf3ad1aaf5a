//! Saving and restoring the trainer: checkpoints (the published models, averaged when
//! `ema_samples` is set), the full training state under `train/state/` and `--resume` from it.
//!
//! Nothing non-finite is ever saved: every variable (weights and batch-norm statistics) and the
//! optimiser state are checked before a checkpoint or state is written, and inf or NaN there is a
//! divergence. An update can overflow the weights from a finite gradient, and an f16 forward pass
//! can overflow the statistics; either would otherwise be published and restored by `--resume`.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use koma_nn::checkpoint::{self, TrainingInfo};
use koma_nn::Network;
use tch::{Device, Tensor};

use super::{keep_freed_memory, run_options, sorted_variables, Mode, Trainer};
use crate::config::TrainConfig;
use crate::error::{Result, TrainError};
use crate::optim::Optimizer;
use crate::scaler::LossScaler;
use crate::state::{self, StateMeta};

impl Trainer {
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
        trainer.budget_spent = meta.budget_spent;
        if trainer.mode == Mode::F16 {
            trainer.scaler = Some(meta.loss_scaler.unwrap_or_else(|| LossScaler::new(&config.loss_scale)));
        }
        Ok(trainer)
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
            budget_spent: self.budget_spent,
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
