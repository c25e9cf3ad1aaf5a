//! Saving and restoring the trainer: checkpoints (the published models, averaged when
//! `ema_samples` is set), the full training state under `train/state/` and `--resume` from it.
//!
//! Nothing non-finite is ever saved: every variable (weights and batch-norm statistics) and the
//! optimiser state are checked before a checkpoint or state is written, and inf or NaN there is a
//! divergence. An update can overflow the weights from a finite gradient, and an f16 forward pass
//! can overflow the statistics; either would otherwise be published and restored by `--resume`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use koma_nn::checkpoint::{self, TrainingInfo};
use koma_nn::InputBatch;
use tch::{Device, Tensor};

use super::{keep_freed_memory, run_options, sorted_statistics, sorted_variables, Mode, Trainer};
use crate::averaging::restoring;
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
        let meta = loaded.meta.clone();
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
        let network = loaded.raw_network(state_dir, models_dir, &options)?;
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
            ema.load(&averages, trainer.device, meta.step)?;
            trainer.recent_inputs = recent_inputs(&loaded.tensors).map_err(bad)?;
            // A smaller batch count than the state's (a larger batch, fewer samples): the newest.
            let keep = trainer.statistics_batches();
            while trainer.recent_inputs.len() > keep {
                trainer.recent_inputs.pop_front();
            }
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
        self.recompute_average_statistics()?;
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
            // The published model is the average with its own statistics; training goes on from
            // the raw weights.
            Some(ema) => {
                let statistics = sorted_statistics(&self.network);
                let (network, params) = (&mut self.network, self.optimizer.params());
                restoring(&sorted_variables(network), || {
                    ema.copy_into(params, &statistics)?;
                    network.save(&path, &info).map_err(TrainError::from)
                })??
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
    ///
    /// A checkpoint that is there is verified first (sidecar, SHA-256, structure, architecture):
    /// one damaged since (a bad disk, a copy cut short) is set aside as `NAME.corrupt-UNIXSECONDS`
    /// (its sidecar too) and published again from the state, so self-play never follows a model
    /// it cannot load.
    pub fn publish_checkpoint_of_state(&mut self, models_dir: &Path) -> Result<bool> {
        let name = checkpoint::file_name(self.step);
        if self.step == 0 {
            return Ok(false);
        }
        let path = models_dir.join(&name);
        if path.is_file() {
            match checkpoint::read(&path, Some(self.network.config())) {
                Ok(_) => {
                    self.parent = Some(name);
                    return Ok(false);
                }
                Err(e) => {
                    let aside = set_aside(&path)?;
                    tracing::warn!(
                        "{e}; the training state of step {} holds its weights: the damaged file is kept as {} and \
                         the checkpoint published again",
                        self.step,
                        aside.display()
                    );
                }
            }
        } else if self.parent.as_deref() == Some(name.as_str()) {
            return Ok(false);
        } else {
            tracing::warn!(
                "{}: the training state of step {} was saved but its checkpoint was not published (the trainer \
                 stopped between the two); publishing it now",
                path.display(),
                self.step
            );
        }
        self.save_checkpoint(models_dir)?;
        Ok(true)
    }

    /// Writes the full training state into `state_dir` (atomically). Inf or NaN anywhere in it
    /// is a [`TrainError::Diverged`], and nothing is written. With weight averaging the state
    /// holds the average's statistics recomputed for this step, the ones its checkpoint
    /// publishes (also when a resume has to publish it).
    pub fn save_state(&mut self, state_dir: &Path) -> Result<()> {
        self.recompute_average_statistics()?;
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

    /// The tensors of the training state: [`Trainer::float_state_tensors`] and
    /// `recent/K/input{1,2}` (u8: the encoded inputs of the last batches, oldest first).
    fn state_tensors(&self) -> BTreeMap<String, Tensor> {
        let mut tensors = self.float_state_tensors();
        for (k, inputs) in self.recent_inputs.iter().enumerate() {
            tensors.insert(format!("recent/{k:04}/input1"), Tensor::from_slice(inputs.input1()));
            tensors.insert(format!("recent/{k:04}/input2"), Tensor::from_slice(inputs.input2()));
        }
        tensors
    }

    /// The float tensors of the training state: `model/NAME` (every variable, batch-norm
    /// statistics included), `optim/NAME` (the optimiser's buffers) and `ema/NAME` (the averaged
    /// parameters and the statistics that go with them).
    fn float_state_tensors(&self) -> BTreeMap<String, Tensor> {
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
        // The kept inputs (u8, on the host) cannot hold inf or NaN: only the float tensors.
        let tensors = self.float_state_tensors();
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

/// The kept inputs of a training state (`recent/K/input{1,2}`, K from 0, oldest first); none in
/// a state written before they were kept. A pair that does not hold whole positions is an error.
fn recent_inputs(tensors: &HashMap<String, Tensor>) -> std::result::Result<VecDeque<InputBatch>, String> {
    let (len1, len2) = (koma_nn::FEATURES1_NUM * 81, koma_nn::FEATURES2_NUM * 81);
    let mut kept = VecDeque::new();
    for k in 0.. {
        let (Some(in1), Some(in2)) =
            (tensors.get(&format!("recent/{k:04}/input1")), tensors.get(&format!("recent/{k:04}/input2")))
        else {
            break;
        };
        let bytes = |t: &Tensor| Vec::<u8>::try_from(t.flatten(0, -1)).map_err(|e| format!("recent/{k:04}: {e}"));
        let (in1, in2) = (bytes(in1)?, bytes(in2)?);
        if in1.len() % len1 != 0 || in2.len() % len2 != 0 || in1.len() / len1 != in2.len() / len2 {
            return Err(format!(
                "recent/{k:04}: {} and {} bytes are not whole positions of {len1} and {len2} bytes",
                in1.len(),
                in2.len()
            ));
        }
        let mut batch = InputBatch::with_capacity(in1.len() / len1);
        for (a, b) in in1.chunks(len1).zip(in2.chunks(len2)) {
            batch.push_encoded(a, b);
        }
        kept.push_back(batch);
    }
    Ok(kept)
}

/// Renames a damaged checkpoint (and its sidecar, if any) to `NAME.corrupt-UNIXSECONDS`, out of
/// the models' names; returns the weights' new path.
fn set_aside(path: &Path) -> Result<PathBuf> {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let aside = |p: &Path| {
        let mut name = p.as_os_str().to_owned();
        name.push(format!(".corrupt-{secs}"));
        PathBuf::from(name)
    };
    let sidecar = checkpoint::sidecar_path(path);
    if sidecar.is_file() {
        std::fs::rename(&sidecar, aside(&sidecar)).map_err(crate::error::io(&sidecar))?;
    }
    let weights = aside(path);
    std::fs::rename(path, &weights).map_err(crate::error::io(path))?;
    Ok(weights)
}
