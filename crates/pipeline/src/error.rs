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
    #[error("records: {0}")]
    Records(#[from] koma_selfplay::RecordError),
    /// Self-play stopped with an error; the games it finished are in the shards.
    #[error("{source} ({written} finished games were written)")]
    SelfPlay { written: usize, source: koma_selfplay::SelfPlayError },
    #[error("arena: {0}")]
    Match(#[from] koma_arena::error::MatchError),
    #[error(transparent)]
    Results(#[from] koma_arena::error::ResultsError),
    #[error("{stage}: {message}")]
    Stage { stage: &'static str, message: String },
    /// A stage's error, with the stage named in front (`self-play: shards: …`) and the error
    /// itself kept as the source, so its kind and cause survive to the CLI.
    #[error("{stage}: {source}")]
    InStage { stage: &'static str, source: Box<PipelineError> },
}

impl PipelineError {
    /// The stage this error names, if it names one.
    pub fn stage(&self) -> Option<&'static str> {
        match self {
            PipelineError::Stage { stage, .. } | PipelineError::InStage { stage, .. } => Some(stage),
            _ => None,
        }
    }
}

/// A player name (`greedy`, `mcts-material@32`, `NAME@500ms`) that names no player.
#[derive(Debug, thiserror::Error)]
pub enum PlayerNameError {
    #[error("player {spec:?}: budget {budget:?} is neither simulations (800) nor time (500ms)")]
    Budget { spec: String, budget: String },
    #[error("player {spec:?}: {message}")]
    Depth { spec: String, message: String },
    #[error("{0:?} is not a reference player (random, greedy, mcts-material[@N], alphabeta@D)")]
    NotReference(String),
}

pub type Result<T> = std::result::Result<T, PipelineError>;

/// Maps an I/O error to one that names `path`.
pub fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> PipelineError {
    let path = path.into();
    move |source| PipelineError::Io { path, source }
}
