//! The arena's errors: a player or time control that does not parse ([`SpecError`]), and a match
//! or tournament that cannot go on ([`MatchError`], [`TournamentError`]), an engine that does not
//! start ([`EngineStartError`]), a results file that cannot be read ([`ResultsError`]). Each keeps
//! its cause.

use std::path::PathBuf;

/// A player's failure to start or play, from whatever made it (a checkpoint that does not load, an
/// engine that does not answer): any error, its chain kept.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A `--player`, `--option`, player file, duration, time control or SPRT that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    #[error("duration {text:?}: unknown unit {unit:?} (use ms, s, m or h)")]
    DurationUnit { text: String, unit: String },
    #[error("duration {text:?}: expected a number and a unit such as 500ms or 1.5s")]
    DurationNumber { text: String },
    #[error("duration {text:?} is too long")]
    DurationTooLong { text: String },
    #[error("byoyomi ({byoyomi}) and increment ({increment}) together: a time control has one or the other")]
    ByoyomiAndIncrement { byoyomi: String, increment: String },
    #[error(
        "an increment ({0}) without main time: the increment comes after each move, so the first move would \
         have no time at all"
    )]
    IncrementWithoutMainTime(String),
    #[error("a time control needs some main time, byoyomi or increment")]
    NoTime,
    #[error("a {0} is not closed")]
    Unclosed(char),
    #[error("a \\ at the end escapes nothing")]
    TrailingBackslash,
    #[error("player {text:?}: {source}")]
    Player { text: String, source: Box<SpecError> },
    #[error("player {0:?}: usi: needs the engine's path")]
    NoEnginePath(String),
    #[error("an empty player")]
    EmptyPlayer,
    #[error("option {0:?}: expected NAME=VALUE with a name without spaces")]
    Option(String),
    #[error("option {name}={value}: {player:?} is not a USI engine (options go to usi:… players)")]
    OptionForBuiltin { name: String, value: String, player: String },
    #[error("player file {path}: {source}")]
    FileRead { path: PathBuf, source: std::io::Error },
    #[error("player file {path}: {}", source.to_string().trim_end())]
    FileSyntax { path: PathBuf, source: toml::de::Error },
    #[error("player file {path}: {source}")]
    File { path: PathBuf, source: Box<SpecError> },
    #[error("args, options and dir are for USI engines (path = …), not {0:?}")]
    EngineFieldsForBuiltin(String),
    #[error("give path (a USI engine) or player (built-in), not both")]
    PathAndPlayer,
    #[error("needs path (a USI engine) or player (a built-in player or checkpoint)")]
    NoPathOrPlayer,
    #[error("option {name}: {kind} is not a USI value (a string, number or boolean)")]
    NotUsiValue { name: String, kind: &'static str },
    #[error("{key}: {source}")]
    Field { key: &'static str, source: Box<SpecError> },
    #[error("name is empty")]
    EmptyName,
    #[error("SPRT {text:?}: {part:?} is not a number")]
    SprtNumber { text: String, part: String },
    #[error("SPRT {0:?}: expected elo0,elo1,alpha,beta")]
    SprtShape(String),
    #[error("SPRT {0:?}: need elo0 < elo1 and 0 < alpha, beta < 0.5")]
    SprtBounds(String),
}

/// Why a match stopped before its end.
#[derive(Debug, thiserror::Error)]
pub enum MatchError {
    /// A player could not be made or could not play on; the match's other games are not played.
    #[error("{0}")]
    Player(#[source] BoxError),
    /// The results file could not be opened or written: every later match would lose its games
    /// alike, so a tournament stops. `action` is `opening` or `writing`.
    #[error("{action} {path}: {source}")]
    Results { action: &'static str, path: PathBuf, source: std::io::Error },
    /// A failure after some games were played; those stay in the results file.
    #[error("{source} (the match stopped after {played} games)")]
    After { played: usize, source: Box<MatchError> },
}

impl MatchError {
    /// True when the results file failed: no later match could keep its games either.
    pub fn results_lost(&self) -> bool {
        match self {
            MatchError::Player(_) => false,
            MatchError::Results { .. } => true,
            MatchError::After { source, .. } => source.results_lost(),
        }
    }
}

/// Why a tournament could not be played or finished.
#[derive(Debug, thiserror::Error)]
pub enum TournamentError {
    #[error("a {format} needs at least two players (found {found})")]
    TooFewPlayers { format: &'static str, found: usize },
    /// The results file failed in this pairing: the tournament stops.
    #[error("{a} vs {b}: {source}")]
    ResultsLost { a: String, b: String, source: MatchError },
}

/// A `results.jsonl` that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct ResultsError {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// A USI engine that could not be started or did not complete its `usi`/`isready` handshake.
#[derive(Debug, thiserror::Error)]
pub enum EngineStartError {
    #[error("USI engine {command:?}: its folder {dir} is not a folder")]
    NotAFolder { command: String, dir: PathBuf },
    #[error("the current folder: {0}")]
    CurrentDir(#[source] std::io::Error),
    #[error("cannot start USI engine {command:?}: {source}")]
    Spawn { command: String, source: std::io::Error },
    #[error("USI engine {command:?}: reader thread: {source}")]
    ReaderThread { command: String, source: std::io::Error },
    #[error("USI engine {command:?}: {source}")]
    Handshake { command: String, source: crate::player::PlayerError },
}
