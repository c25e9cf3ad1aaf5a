//! Errors of the trainer. Each names the file or setting concerned.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum TrainError {
    #[error("invalid training config: {0}")]
    Config(String),

    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    /// The saved training state cannot be used. Nothing is deleted or overwritten: the
    /// checkpoints under models/ stay as they are.
    #[error("{}: corrupt training state: {reason}{}", path.display(), hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    CorruptState { path: PathBuf, reason: String, hint: Option<String> },

    /// `--resume` was asked for but there is nothing to resume.
    #[error("{}: no training state to resume from ({reason})", path.display())]
    NoState { path: PathBuf, reason: String },

    /// A fresh start was asked for in a run directory that already holds a training state.
    #[error("{}: a training state (step {step}) is already there: pass --resume to continue it, or choose another run directory", path.display())]
    StateExists { path: PathBuf, step: u64 },

    #[error("no training data: {0}")]
    NoData(String),

    /// Publishing a file failed (the message names the file and the step); the file it was to
    /// replace, if any, is intact.
    #[error(transparent)]
    Write(#[from] koma_base::durable::DurableError),
    #[error(transparent)]
    Data(#[from] koma_data::DataError),

    #[error(transparent)]
    Nn(#[from] koma_nn::Error),

    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),

    #[error("the data loader thread stopped: {0}")]
    Loader(String),

    #[error("the data-parallel replica on {device} failed: {message}")]
    Replica { device: String, message: String },

    #[error("training diverged at step {step}: {what}")]
    Diverged { step: u64, what: String },

    /// Another trainer holds the run directory's lease (one trainer per run).
    #[error("{}: the run is being trained by {holder}; one trainer per run: stop that one first (a trainer that died without releasing the lease loses it after {stale_after} s without a heartbeat, or at once when it was a process of this host)", path.display())]
    Leased { path: PathBuf, holder: String, stale_after: u64 },

    /// Another trainer took the lease over while this one ran: it stopped without saving.
    #[error("{}: another trainer took this run over (this one's heartbeat had stopped for too long); stopped without saving", path.display())]
    LeaseLost { path: PathBuf },
}

pub type Result<T, E = TrainError> = std::result::Result<T, E>;

pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> TrainError {
    let path = path.into();
    move |source| TrainError::Io { path, source }
}
