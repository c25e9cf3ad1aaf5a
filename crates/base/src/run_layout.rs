//! The layout of a run directory, KataGo style: every stage reads and writes files under one
//! directory, so stages can run in one process (`koma pipeline`) or as several (`koma selfplay
//! --run DIR --follow`, `koma train --run DIR --follow`). This is the one place that spells it.
//!
//! ```text
//! RUN/config.toml            the run's configuration (a copy; --resume reads it)
//! RUN/models/model-STEP.safetensors (+ .json)   checkpoints, model 0 first
//! RUN/models/current.json    the self-play model when gating is on (else: the newest checkpoint)
//! RUN/selfplay/*.h5          shards of self-play games; selfplay/records/ optional KIF/CSA
//! RUN/train/metrics.jsonl    train/state/: the trainer's metrics and full state (--resume)
//! RUN/arena/results.jsonl    arena/gating.jsonl   arena/games/*.kifu   arena/ratings.json
//! RUN/tensorboard/           train/ selfplay/ arena/ ratings/: TensorBoard event files
//! RUN/logs/                  one log file per process
//! RUN/*.png                  plots drawn at the end of `koma pipeline`
//! ```

use std::path::{Path, PathBuf};

/// The paths of one run directory (nothing is read or created here).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLayout {
    pub root: PathBuf,
}

impl RunLayout {
    pub fn new(root: &Path) -> RunLayout {
        RunLayout { root: root.to_path_buf() }
    }

    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }
    pub fn models_dir(&self) -> PathBuf {
        self.root.join("models")
    }
    /// `models/current.json`: the gatekeeper's choice of self-play model.
    pub fn current_file(&self) -> PathBuf {
        self.models_dir().join("current.json")
    }
    pub fn selfplay_dir(&self) -> PathBuf {
        self.root.join("selfplay")
    }
    pub fn records_dir(&self) -> PathBuf {
        self.selfplay_dir().join("records")
    }
    pub fn train_dir(&self) -> PathBuf {
        self.root.join("train")
    }
    /// `train/state/`: the trainer's full state for an exact `--resume`.
    pub fn state_dir(&self) -> PathBuf {
        self.train_dir().join("state")
    }
    pub fn metrics_file(&self) -> PathBuf {
        self.train_dir().join("metrics.jsonl")
    }
    pub fn arena_dir(&self) -> PathBuf {
        self.root.join("arena")
    }
    pub fn arena_results(&self) -> PathBuf {
        self.arena_dir().join("results.jsonl")
    }
    /// `arena/gating.jsonl`: the gatekeeper's games, apart from the ratings' results.
    pub fn gating_results(&self) -> PathBuf {
        self.arena_dir().join("gating.jsonl")
    }
    pub fn arena_games(&self) -> PathBuf {
        self.arena_dir().join("games")
    }
    pub fn ratings_file(&self) -> PathBuf {
        self.arena_dir().join("ratings.json")
    }
    /// `tensorboard/`: a TensorBoard run per component (`train/`, `selfplay/`, `arena/`,
    /// `ratings/`), written when `[run] tensorboard` is on.
    pub fn tensorboard_dir(&self) -> PathBuf {
        self.root.join("tensorboard")
    }
    pub fn logs_dir(&self) -> PathBuf {
        self.root.join("logs")
    }
}
