//! Why self-play stopped, or could not save a game's record; each keeps its cause.

use std::path::PathBuf;

use koma_mcts::EvalError;
use koma_shogi::record::WriteError;
use koma_shogi::SfenError;

/// Why [`crate::run`] stopped before its games were done (or could not start).
#[derive(Debug, thiserror::Error)]
pub enum SelfPlayError {
    /// A cross-field rule of `[selfplay]` (`impasse`, `max_moves_rule`) that does not hold.
    #[error("{0}")]
    Config(String),
    #[error("self-play needs at least one evaluator")]
    NoEvaluator,
    #[error(
        "{devices} devices but {workers} worker(s): each device needs at least one worker (raise [selfplay] workers)"
    )]
    FewerWorkersThanDevices { devices: usize, workers: usize },
    #[error("inference: {0}")]
    Inference(#[source] EvalError),
    #[error("the shard writer stopped taking games (it failed; its error says why)")]
    SinkClosed,
    /// A thread of self-play (`worker 3`, or a caller's thread such as a model follower) panicked.
    #[error("{thread} panicked: {message}")]
    Panicked { thread: String, message: String },
}

/// A self-play game record that could not be written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The records folder could not be made or listed (`action`: `creating`, `reading`).
    #[error("{action} {path}: {source}")]
    Folder { action: &'static str, path: PathBuf, source: std::io::Error },
    #[error("start position {start:?}: {source}")]
    Start { start: String, source: SfenError },
    #[error("self-play game from {start:?}: {source}")]
    Game { start: String, source: WriteError },
    #[error(transparent)]
    Write(#[from] koma_base::durable::DurableError),
}
