//! Errors of koma-nn. Messages name the file and, for mismatches, the field that differs.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    /// Publishing a file failed (the message names the file and the step); the file it was to
    /// replace, if any, is intact.
    #[error(transparent)]
    Write(#[from] koma_base::durable::DurableError),

    /// The file is not a valid checkpoint: unreadable header, wrong hash, missing tensors, …
    #[error("{}: corrupt or invalid checkpoint: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },

    /// The checkpoint's architecture differs from the one asked for.
    #[error("{}: architecture mismatch: `{field}` is {found} in the checkpoint but {expected} was expected", path.display())]
    ArchitectureMismatch { path: PathBuf, field: String, found: String, expected: String },

    /// The checkpoint was trained with another input/output encoding.
    #[error("{}: encoding mismatch: `{field}` is {found} in the checkpoint but {expected} was expected (this koma encodes dlshogi v{})", path.display(), crate::encoding::ENCODING_VERSION)]
    EncodingMismatch { path: PathBuf, field: String, found: String, expected: String },

    #[error("invalid model config: {0}")]
    Config(String),

    #[error("invalid device `{0}` (use cpu, cuda, cuda:N or auto)")]
    Device(String),

    #[error("{0}")]
    Unavailable(String),

    #[error("libtorch: {0}")]
    Torch(#[from] tch::TchError),

    /// libtorch failed while moving a loaded model to its device or precision.
    #[error("{}: cannot put the model on its device: {reason}", path.display())]
    Load { path: PathBuf, reason: String },

    /// The forward pass failed inside libtorch (out of memory, a device error).
    #[error("forward pass failed: {0}")]
    Forward(String),

    /// The network produced NaN or infinity: its weights or the inputs are broken.
    #[error("{model} returned non-finite values (NaN or infinity) for {positions} of {batch} positions")]
    NonFinite { model: String, positions: usize, batch: usize },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), source }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Error {
        Error::Corrupt { path: path.into(), reason: reason.into() }
    }
}
