//! Pipeline errors: each names the file, table or stage it is about.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("{origin}: {message}")]
    Config { origin: String, message: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Publishing a file failed (the message names the file and the step); the file it was to
    /// replace, if any, is intact.
    #[error(transparent)]
    Write(#[from] koma_base::durable::DurableError),
    #[error("{path}: {message}")]
    Run { path: PathBuf, message: String },
    #[error("{0}")]
    Network(#[from] koma_nn::Error),
    #[error("trainer: {0}")]
    Train(#[from] koma_train::TrainError),
    #[error("shards: {0}")]
    Data(#[from] koma_data::DataError),
    #[error("{stage}: {message}")]
    Stage { stage: &'static str, message: String },
}

pub type Result<T> = std::result::Result<T, PipelineError>;

/// Maps an I/O error to one that names `path`.
pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> PipelineError {
    let path = path.into();
    move |source| PipelineError::Io { path, source }
}
