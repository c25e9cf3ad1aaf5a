//! A run as one process sees it: the run directory ([`RunDir`], which owns the layout), the run's
//! config and what this process changes of it for itself. `koma pipeline`, `koma selfplay --run`
//! and `koma train --run` all open a run here, so the config is read, checked and overridden the
//! same way for each of them, and every stage ([`crate::stages`]) takes a [`Run`].

use std::path::Path;

use koma_nn::{Network, RunOptions, TrainingInfo};

use crate::config::PipelineConfig;
use crate::error::Result;
use crate::run_dir::{copy_checkpoint, ModelRef, RunDir};

/// What a process changes of its run's config for itself; never written to `config.toml`.
#[derive(Clone, Debug, Default)]
pub struct RunOverrides {
    /// `[run] device`: on a cluster each job names the devices of its own node.
    pub device: Option<String>,
    /// `[selfplay] seed`: replays a self-play process whose shards recorded it.
    pub selfplay_seed: Option<u64>,
    /// `[run] steps`: the trainer stops at this step (0: no limit).
    pub steps: Option<u64>,
}

/// An open run: its directory and the config this process runs it with.
#[derive(Clone, Debug)]
pub struct Run {
    pub dir: RunDir,
    pub config: PipelineConfig,
    /// Where the config came from (a file, the embedded default, or the run's config.toml).
    pub config_origin: String,
}

impl Run {
    /// An existing run, with its own `config.toml` and this process's overrides.
    pub fn open(dir: &Path, overrides: &RunOverrides) -> Result<Run> {
        let dir = RunDir::new(dir);
        let text = dir.read_config()?;
        let config_origin = dir.config_file().display().to_string();
        let config = PipelineConfig::parse(&text, &config_origin)?;
        Run { dir, config, config_origin }.with_overrides(overrides)
    }

    /// The run with this process's overrides applied (and checked, like the config itself).
    pub fn with_overrides(mut self, overrides: &RunOverrides) -> Result<Run> {
        if let Some(seed) = overrides.selfplay_seed {
            self.config.selfplay.seed = Some(seed);
        }
        if let Some(steps) = overrides.steps {
            self.config.run.steps = steps;
        }
        if let Some(device) = &overrides.device {
            self.config = self.config.with_device(device)?;
        }
        Ok(self)
    }

    /// Takes away the run's end marker (`finished.json`) when a trainer will train past it: no
    /// step limit (a trainer that follows self-play), or a limit above the end's step.
    pub fn reopen_if_training_past_its_end(&self, follow: bool) -> Result<()> {
        let steps = self.config.run.steps;
        if steps == 0 && !follow {
            // Such a trainer refuses to start (it needs a step count): nothing to reopen.
            return Ok(());
        }
        if let Some(end) = self.dir.finished()? {
            if steps == 0 || end.step.is_none_or(|s| steps > s) {
                tracing::info!("the run ended at {}; training on to {} reopens it", end.describe(), steps_text(steps));
                self.dir.reopen()?;
            }
        }
        Ok(())
    }

    /// The run's end, when it ends a run with this config: `finished.json` at or past `[run] steps`
    /// (a stale marker, under a raised step limit, does not).
    pub fn end(&self) -> Result<Option<crate::run_dir::RunFinished>> {
        self.dir.end_of_run_of(self.config.run.steps)
    }

    /// Gives libtorch `[run] threads` CPU threads (0 leaves libtorch's default).
    pub fn set_threads(&self) {
        if self.config.run.threads > 0 {
            koma_nn::device::set_cpu_threads(self.config.run.threads);
        }
    }

    /// The run's model 0, written first (the untrained network from `[model]` and `[run] seed`)
    /// when the run has no checkpoint yet.
    pub fn model_zero(&self) -> Result<ModelRef> {
        if let Some(m0) = self.dir.model_zero()? {
            return Ok(m0);
        }
        let path = self.dir.models_dir().join(koma_nn::checkpoint::file_name(0));
        write_model_zero(&path, &self.config.model, self.config.run.seed)?;
        tracing::info!(path = %path.display(), "wrote model 0");
        Ok(ModelRef { step: 0, path })
    }

    /// Copies `source` in as the run's model 0, after checking that it is a checkpoint of the
    /// run's `[model]`; a run that has a model 0 already keeps it.
    pub fn install_model_zero(&self, source: &Path) -> Result<()> {
        if self.dir.model_zero()?.is_some() {
            return Ok(());
        }
        let meta = koma_nn::checkpoint::read_meta(source)?;
        koma_nn::checkpoint::check_architecture(source, &meta.model, &self.config.model)?;
        let path = self.dir.models_dir().join(koma_nn::checkpoint::file_name(0));
        copy_checkpoint(source, &path)?;
        tracing::info!(from = %source.display(), path = %path.display(), "model 0 copied in");
        Ok(())
    }
}

fn steps_text(steps: u64) -> String {
    if steps == 0 {
        "no step limit".into()
    } else {
        format!("step {steps}")
    }
}

/// Writes an untrained network (`model`, weights from `seed`) as a step-0 checkpoint at `path`.
pub fn write_model_zero(path: &Path, model: &koma_nn::ModelConfig, seed: u64) -> Result<()> {
    let mut network = Network::new(model, &RunOptions::cpu(), Some(seed))?;
    network.save(path, &TrainingInfo { step: 0, samples_seen: 0, parent: None })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_opens_with_its_own_config_and_this_processs_overrides() {
        let dir = tempfile::tempdir().unwrap();
        let e = Run::open(dir.path(), &RunOverrides::default()).unwrap_err().to_string();
        assert!(e.contains("no config.toml"), "{e}");
        RunDir::new(dir.path()).create("[run]\nsteps = 7\n[selfplay]\nseed = 3\n").unwrap();
        let run = Run::open(dir.path(), &RunOverrides::default()).unwrap();
        assert_eq!((run.config.run.steps, run.config.selfplay.seed), (7, Some(3)));
        assert!(run.config_origin.ends_with("config.toml"));
        let overrides = RunOverrides { device: Some("cpu".into()), selfplay_seed: Some(11), steps: Some(0) };
        let run = Run::open(dir.path(), &overrides).unwrap();
        assert_eq!((run.config.run.steps, run.config.selfplay.seed), (0, Some(11)));
        assert_eq!(run.config.run.device.to_string(), "cpu");
        let bad = RunOverrides { device: Some("tpu".into()), ..RunOverrides::default() };
        let e = Run::open(dir.path(), &bad).unwrap_err().to_string();
        assert!(e.contains("--device"), "{e}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("config.toml")).unwrap(),
            "[run]\nsteps = 7\n[selfplay]\nseed = 3\n",
            "overrides are this process's only"
        );
    }
}
