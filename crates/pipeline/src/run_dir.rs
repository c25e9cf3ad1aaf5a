//! A run directory and what can be done with it: start one, read and replace its config, list
//! its checkpoints, and say which model self-play uses. The paths themselves are
//! [`koma_base::run_layout::RunLayout`]'s, which draws the tree.

use std::path::{Path, PathBuf};

use koma_base::run_layout::RunLayout;
use koma_nn::checkpoint;
use serde::{Deserialize, Serialize};

use crate::error::{io, PipelineError, Result};

/// A checkpoint in `models/`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ModelRef {
    pub step: u64,
    pub path: PathBuf,
}

impl ModelRef {
    /// `model-00001000`: the name games and arena results record.
    pub fn name(&self) -> String {
        self.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
    }
}

/// A run directory: its layout (through `Deref`, so `run.models_dir()` and `run.root` read as
/// before) and the operations on its files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunDir(RunLayout);

impl std::ops::Deref for RunDir {
    type Target = RunLayout;
    fn deref(&self) -> &RunLayout {
        &self.0
    }
}

impl RunDir {
    pub fn new(root: &Path) -> RunDir {
        RunDir(RunLayout::new(root))
    }

    /// The paths koma-train uses for this run.
    pub fn train_paths(&self) -> koma_train::RunPaths {
        koma_train::RunPaths::of_run(&self.0)
    }

    /// Whether a run was started here (its config.toml exists).
    pub fn exists(&self) -> bool {
        self.config_file().is_file()
    }

    /// Starts a new run: creates the directories and writes `config.toml`. Refuses a directory
    /// that already holds a run, so nothing of it is overwritten.
    pub fn create(&self, config_text: &str) -> Result<()> {
        if self.exists() {
            return Err(PipelineError::Run {
                path: self.root.clone(),
                message: "already holds a run (config.toml exists): continue it with --resume, or choose another --run"
                    .into(),
            });
        }
        if self.models_dir().is_dir() || self.selfplay_dir().is_dir() {
            return Err(PipelineError::Run {
                path: self.root.clone(),
                message: "has models/ or selfplay/ but no config.toml: not a run koma started; choose another --run"
                    .into(),
            });
        }
        self.make_dirs()?;
        koma_base::durable::write(&self.config_file(), config_text.as_bytes())?;
        Ok(())
    }

    /// Creates the stage directories (idempotent).
    pub fn make_dirs(&self) -> Result<()> {
        for dir in [self.models_dir(), self.selfplay_dir(), self.train_dir(), self.arena_dir(), self.logs_dir()] {
            std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        }
        Ok(())
    }

    /// The run's own configuration text (for --resume and the separate stage processes).
    pub fn read_config(&self) -> Result<String> {
        if !self.exists() {
            return Err(PipelineError::Run {
                path: self.root.clone(),
                message: "is not a koma run (no config.toml): start one with `koma pipeline --run DIR`".into(),
            });
        }
        std::fs::read_to_string(self.config_file()).map_err(io(self.config_file()))
    }

    /// Replaces the run's config (on --resume with --config), keeping the old one as
    /// `config-previous-N.toml`.
    pub fn replace_config(&self, config_text: &str) -> Result<Option<PathBuf>> {
        let old = self.read_config()?;
        if old == config_text {
            return Ok(None);
        }
        let mut n = 1;
        let kept = loop {
            let p = self.root.join(format!("config-previous-{n}.toml"));
            if !p.exists() {
                break p;
            }
            n += 1;
        };
        koma_base::durable::write(&kept, old.as_bytes())?;
        koma_base::durable::write(&self.config_file(), config_text.as_bytes())?;
        Ok(Some(kept))
    }

    /// Every complete checkpoint (weights and sidecar both present), by step.
    pub fn models(&self) -> Result<Vec<ModelRef>> {
        let dir = self.models_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(&dir)(e)),
        };
        let mut models: Vec<ModelRef> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let step = checkpoint::step_of_file_name(&name)?;
                let path = e.path();
                checkpoint::sidecar_path(&path).is_file().then_some(ModelRef { step, path })
            })
            .collect();
        models.sort();
        Ok(models)
    }

    pub fn newest_model(&self) -> Result<Option<ModelRef>> {
        Ok(self.models()?.pop())
    }

    /// Model 0, the untrained network every run starts from.
    pub fn model_zero(&self) -> Result<Option<ModelRef>> {
        Ok(self.models()?.into_iter().next())
    }

    /// The model self-play should use: the gatekeeper's choice (`models/current.json`) when there
    /// is one, else the newest checkpoint.
    pub fn current_model(&self) -> Result<Option<ModelRef>> {
        let file = self.current_file();
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                let current: ModelRef = serde_json::from_str(&text).map_err(|e| PipelineError::Run {
                    path: file.clone(),
                    message: format!("not a model reference: {e}"),
                })?;
                // Stored relative to the run, so a run directory can be moved; a path that
                // leaves the run (absolute, or through `..`) is refused, not followed.
                let inside = current.path.components().all(|c| matches!(c, std::path::Component::Normal(_)));
                if !inside {
                    return Err(PipelineError::Run {
                        path: file,
                        message: format!(
                            "names {}, a path outside the run (it must be relative to the run, without ..)",
                            current.path.display()
                        ),
                    });
                }
                let path = self.root.join(&current.path);
                if !path.is_file() {
                    return Err(PipelineError::Run {
                        path: file,
                        message: format!("names {}, which does not exist", path.display()),
                    });
                }
                Ok(Some(ModelRef { step: current.step, path }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.newest_model(),
            Err(e) => Err(io(file)(e)),
        }
    }

    /// Makes `model` the self-play model (the gatekeeper accepted it).
    pub fn set_current(&self, model: &ModelRef) -> Result<()> {
        let relative = model.path.strip_prefix(&self.root).unwrap_or(&model.path).to_path_buf();
        let text = serde_json::to_string(&ModelRef { step: model.step, path: relative }).expect("serialisable");
        koma_base::durable::write(&self.current_file(), text.as_bytes())?;
        Ok(())
    }

    /// Lets self-play follow the newest checkpoint again (gating turned off).
    pub fn clear_current(&self) -> Result<()> {
        remove_if_present(&self.current_file())
    }

    /// Whether the gatekeeper has chosen a model yet.
    pub fn has_current(&self) -> bool {
        self.current_file().is_file()
    }

    /// `evals.json`: the positions the pipeline's self-play has evaluated over the whole run, all
    /// its processes together (the unit of `[run] evals`).
    pub fn evals_file(&self) -> PathBuf {
        self.root.join("evals.json")
    }

    /// The run's evaluations so far (0 before the first count is saved).
    pub fn evals(&self) -> Result<u64> {
        let file = self.evals_file();
        match std::fs::read_to_string(&file) {
            Ok(text) => serde_json::from_str::<EvalCount>(&text).map(|c| c.evals).map_err(|e| PipelineError::Run {
                path: file,
                message: format!(
                    "not an evaluation count: {e} (write {{\"evals\": N}}, or remove it to count this run's \
                         evaluations from 0 again)"
                ),
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(io(file)(e)),
        }
    }

    /// Saves the run's evaluation count (durably: a budget must not be spent twice after a crash).
    pub fn set_evals(&self, evals: u64) -> Result<()> {
        let text = serde_json::to_string(&EvalCount { evals }).expect("serialisable");
        koma_base::durable::write(&self.evals_file(), text.as_bytes())?;
        Ok(())
    }

    /// Removes the temporaries that writers of this host killed mid-write left in the run's
    /// folders (`koma_base::durable::sweep_leftovers`, each logged); returns how many.
    pub fn sweep_leftover_temporaries(&self) -> Result<usize> {
        let dirs = [
            self.root.clone(),
            self.models_dir(),
            self.selfplay_dir(),
            self.records_dir(),
            self.train_dir(),
            self.state_dir(),
            self.arena_dir(),
            self.arena_games(),
            self.logs_dir(),
        ];
        let mut removed = 0;
        for dir in dirs {
            removed += koma_base::durable::sweep_leftovers(&dir).map_err(io(&dir))?.len();
        }
        Ok(removed)
    }

    /// `checkpoint-evals.jsonl`: one line per checkpoint the pipeline's trainer wrote, with the
    /// run's evaluations at that moment, so that a model can be placed on a curve of strength
    /// against work (docs/benchmarks.md, the scaling curve).
    pub fn checkpoint_evals_file(&self) -> PathBuf {
        self.root.join("checkpoint-evals.jsonl")
    }

    /// Notes that checkpoint `step` was written when the run had `evals` evaluations. A line lost
    /// to a crash only loses a point of the curve, so it is appended without a sync.
    pub fn note_checkpoint_evals(&self, step: u64, evals: u64) -> Result<()> {
        use std::io::{Read, Seek, SeekFrom, Write};
        let file = self.checkpoint_evals_file();
        let mut line = serde_json::to_string(&CheckpointEvals { step, evals }).expect("serialisable") + "\n";
        let mut f = std::fs::OpenOptions::new().create(true).read(true).append(true).open(&file).map_err(io(&file))?;
        // After a line torn by a crash, start a new one rather than finish the torn one.
        let length = f.seek(SeekFrom::End(0)).map_err(io(&file))?;
        if length > 0 {
            let mut last = [0u8];
            f.seek(SeekFrom::Start(length - 1)).and_then(|_| f.read_exact(&mut last)).map_err(io(&file))?;
            if last[0] != b'\n' {
                line.insert(0, '\n');
            }
        }
        f.write_all(line.as_bytes()).map_err(io(file))
    }

    /// The run's evaluations at each checkpoint noted so far (the first note of a step wins;
    /// torn or foreign lines are skipped).
    pub fn checkpoint_evals(&self) -> Result<std::collections::BTreeMap<u64, u64>> {
        let file = self.checkpoint_evals_file();
        let text = match std::fs::read_to_string(&file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Default::default()),
            Err(e) => return Err(io(file)(e)),
        };
        let mut out = std::collections::BTreeMap::new();
        for note in text.lines().filter_map(|l| serde_json::from_str::<CheckpointEvals>(l).ok()) {
            out.entry(note.step).or_insert(note.evals);
        }
        Ok(out)
    }

    /// `finished.json`: written when the trainer reaches the run's step limit. Self-play processes
    /// following the run (`koma selfplay --run --follow`, Slurm array tasks) end when they see it.
    pub fn finished_file(&self) -> PathBuf {
        self.root.join("finished.json")
    }

    /// The run's end, if its trainer reached its step limit (or someone put the file there by
    /// hand: its presence is the signal, and a file without a readable step is an end at an
    /// unknown step).
    pub fn finished(&self) -> Result<Option<RunFinished>> {
        let file = self.finished_file();
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                let step = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| v["step"].as_u64());
                Ok(Some(RunFinished { step }))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io(file)(e)),
        }
    }

    /// The run's end marker when it ends a run of `steps` steps ([`RunFinished::ends_run_of`]).
    pub fn end_of_run_of(&self, steps: u64) -> Result<Option<RunFinished>> {
        Ok(self.finished()?.filter(|end| end.ends_run_of(steps)))
    }

    /// Marks the run finished at `step` (written durably: a reader sees it whole or not at all).
    pub fn mark_finished(&self, step: u64) -> Result<()> {
        let unix_seconds =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let text = serde_json::json!({ "step": step, "unix_seconds": unix_seconds }).to_string();
        koma_base::durable::write(&self.finished_file(), text.as_bytes())?;
        Ok(())
    }

    /// Takes the end marker away: a trainer that trains on past it (a larger step limit, or none)
    /// reopens the run.
    pub fn reopen(&self) -> Result<()> {
        remove_if_present(&self.finished_file())
    }
}

/// Removes `path`; one that is not there is fine.
fn remove_if_present(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(path)(e)),
        _ => Ok(()),
    }
}

/// A run's end as `finished.json` says it: `{"step": N, "unix_seconds": T}` from the trainer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunFinished {
    /// The trainer's last step; None for a file without one (an operator's `touch`).
    pub step: Option<u64>,
}

impl RunFinished {
    /// Whether this end holds for a run whose step limit is `steps` (0: none): an end at a known
    /// step below the limit is stale (the limit was raised since), and without a limit only an
    /// end at an unknown step (put there by hand) counts.
    pub fn ends_run_of(&self, steps: u64) -> bool {
        self.step.is_none_or(|end| steps > 0 && end >= steps)
    }

    /// The step, for messages.
    pub fn describe(&self) -> String {
        self.step.map_or_else(|| "an unknown step".to_string(), |s| format!("step {s}"))
    }
}

/// Copies a checkpoint to `to` and `to`'s sidecar, published as a pair (`checkpoint::publish_pair`:
/// a reader finds the old pair, none, or the new pair).
pub fn copy_checkpoint(from: &Path, to: &Path) -> Result<()> {
    let weights = std::fs::read(from).map_err(io(from))?;
    let sidecar = checkpoint::sidecar_path(from);
    let meta = std::fs::read(&sidecar).map_err(io(&sidecar))?;
    if let Some(dir) = to.parent() {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    checkpoint::publish_pair(to, &weights, &checkpoint::sidecar_path(to), &meta)?;
    Ok(())
}

/// `evals.json`.
#[derive(Serialize, Deserialize)]
struct EvalCount {
    evals: u64,
}

/// A line of `checkpoint-evals.jsonl`.
#[derive(Serialize, Deserialize)]
struct CheckpointEvals {
    step: u64,
    evals: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_evaluation_count_reads_back_and_a_bad_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::new(tmp.path());
        assert_eq!(run.evals().unwrap(), 0, "no count yet");
        run.set_evals(123_456_789_012).unwrap();
        assert_eq!(run.evals().unwrap(), 123_456_789_012);
        std::fs::write(run.evals_file(), "{\"evals\": -3}").unwrap();
        let e = run.evals().unwrap_err().to_string();
        assert!(e.contains("evals.json") && e.contains("not an evaluation count"), "{e}");
        // Checkpoints' evaluations: the first note of a step wins, a torn line is skipped.
        assert!(run.checkpoint_evals().unwrap().is_empty());
        run.note_checkpoint_evals(100, 5000).unwrap();
        run.note_checkpoint_evals(200, 9000).unwrap();
        run.note_checkpoint_evals(100, 7000).unwrap();
        std::fs::OpenOptions::new()
            .append(true)
            .open(run.checkpoint_evals_file())
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"{\"step\": 300, \"ev"))
            .unwrap();
        run.note_checkpoint_evals(400, 12000).unwrap();
        let notes = run.checkpoint_evals().unwrap();
        assert_eq!(notes.into_iter().collect::<Vec<_>>(), [(100, 5000), (200, 9000), (400, 12000)]);
    }

    fn touch_model(run: &RunDir, step: u64, sidecar: bool) -> ModelRef {
        let path = run.models_dir().join(checkpoint::file_name(step));
        std::fs::write(&path, b"w").unwrap();
        if sidecar {
            std::fs::write(checkpoint::sidecar_path(&path), b"{}").unwrap();
        }
        ModelRef { step, path }
    }

    #[test]
    fn create_refuses_an_existing_run_and_models_sort_by_step() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        assert!(run.read_config().is_err());
        run.create("[run]\n").unwrap();
        let e = run.create("[run]\n").unwrap_err().to_string();
        assert!(e.contains("--resume"), "{e}");
        assert_eq!(run.newest_model().unwrap(), None);
        let m0 = touch_model(&run, 0, true);
        let m2 = touch_model(&run, 200, true);
        touch_model(&run, 400, false); // weights without sidecar: still being written
        assert_eq!(run.models().unwrap(), vec![m0.clone(), m2.clone()]);
        assert_eq!(run.current_model().unwrap(), Some(m2.clone()));
        run.set_current(&m0).unwrap();
        assert_eq!(run.current_model().unwrap(), Some(m0));
        // A current.json pointing out of the run is refused, however it is spelt.
        let outside = dir.path().parent().unwrap().join("elsewhere.safetensors");
        for path in [outside.display().to_string(), "../elsewhere.safetensors".into(), "models/../../x".into()] {
            let text = serde_json::json!({ "step": 0, "path": path }).to_string();
            std::fs::write(run.current_file(), text).unwrap();
            let e = run.current_model().unwrap_err().to_string();
            assert!(e.contains("current.json") && e.contains("outside the run"), "{path}: {e}");
        }
        assert_eq!(run.replace_config("[run]\n").unwrap(), None);
        let kept = run.replace_config("[run]\nminutes = 1\n").unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(kept).unwrap(), "[run]\n");
    }
}
