//! Errors of the data layer. Each names the file and what is wrong with it.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum DataError {
    #[error("{path}: {message}")]
    Hdf5 { path: PathBuf, message: String },
    #[error("{path}: not a koma replay shard (format attribute {found:?})")]
    NotAShard { path: PathBuf, found: String },
    #[error("{path}: shard format version {found}, this koma reads version {expected}")]
    FormatVersion { path: PathBuf, found: u32, expected: u32 },
    #[error("{path}: dataset {name:?} is missing")]
    MissingDataset { path: PathBuf, name: String },
    #[error("{path}: inconsistent shard: {what}")]
    Inconsistent { path: PathBuf, what: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// Publishing a file failed (the message names the file and the step); the file it was to
    /// replace, if any, is intact.
    #[error(transparent)]
    Write(#[from] koma_base::durable::DurableError),
    #[error("{path}: {message}")]
    BadInput { path: PathBuf, message: String },
    #[error("{path}: sample {index}: {message}")]
    BadSample { path: PathBuf, index: usize, message: String },
}

pub type Result<T> = std::result::Result<T, DataError>;

/// Wraps an HDF5 error with the file it concerns.
pub(crate) fn h5(path: &std::path::Path) -> impl Fn(hdf5::Error) -> DataError + '_ {
    move |e| DataError::Hdf5 { path: path.to_path_buf(), message: e.to_string() }
}
