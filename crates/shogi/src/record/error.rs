//! Errors of the record readers and writers. A parse error always carries the 1-based line of the
//! input it was found on and, when it concerns a move, the move's number in the game (the first
//! move of a game is move 1, whoever plays it).

use std::fmt;
use std::path::PathBuf;

use thiserror::Error;

use crate::sfen::SfenError;
use crate::usi::UsiPositionError;

/// What is wrong with a line of a record, without its location.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseErrorKind {
    #[error("the input is neither UTF-8 nor Shift_JIS (bad byte sequence)")]
    Encoding,
    #[error("unrecognised line {0:?}")]
    UnknownLine(String),
    #[error("invalid move {text:?}: {reason}")]
    BadMove { text: String, reason: String },
    #[error("illegal move {text:?} in position {sfen}")]
    IllegalMove { text: String, sfen: String },
    #[error("move {text:?} is for {found} but {expected} is to move")]
    WrongSide { text: String, expected: &'static str, found: &'static str },
    #[error("'同' (same square) but there is no previous move")]
    NoPreviousMove,
    #[error("move number {found} out of sequence, expected {expected}")]
    MoveNumber { found: u32, expected: u32 },
    #[error("a move after the end of the game ({0})")]
    MoveAfterEnd(String),
    #[error("position lines must come before the moves")]
    PositionAfterMoves,
    #[error("invalid board line {text:?}: {reason}")]
    BoardLine { text: String, reason: String },
    #[error("invalid pieces in hand {text:?}: {reason}")]
    Hand { text: String, reason: String },
    #[error("invalid start position: {0}")]
    Position(SfenError),
    #[error("unknown handicap {0:?}")]
    UnknownHandicap(String),
    #[error("invalid time {0:?}")]
    BadTime(String),
    #[error("unsupported special move {0:?}")]
    UnsupportedSpecial(String),
    #[error("{0}")]
    Usi(UsiPositionError),
    #[error("no side to move ('+' or '-') before the moves")]
    NoSideToMove,
}

/// A parse error with its location.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}{}: {kind}", MoveSuffix(*.move_number))]
pub struct ParseError {
    /// 1-based line number in the input.
    pub line: usize,
    /// 1-based move number in the game, when the error concerns a move.
    pub move_number: Option<u32>,
    pub kind: ParseErrorKind,
}

impl ParseError {
    pub fn new(line: usize, kind: ParseErrorKind) -> ParseError {
        ParseError { line, move_number: None, kind }
    }

    pub fn at_move(line: usize, move_number: u32, kind: ParseErrorKind) -> ParseError {
        ParseError { line, move_number: Some(move_number), kind }
    }
}

struct MoveSuffix(Option<u32>);

impl fmt::Display for MoveSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(n) => write!(f, ", move {n}"),
            None => Ok(()),
        }
    }
}

/// Why a record could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WriteError {
    #[error("move {move_number} ({usi}) is illegal in {sfen}")]
    IllegalMove { move_number: u32, usi: String, sfen: String },
    #[error("the {format} format holds one game per file, not {games}")]
    OneGamePerFile { format: &'static str, games: usize },
}

/// Errors of whole-file operations ([`super::read_file`], [`super::convert_path`]): the file and
/// what went wrong in it.
#[derive(Debug, Error)]
pub enum RecordError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {error}", path.display())]
    Parse { path: PathBuf, error: ParseError },
    #[error("{}: game {game}: {error}", path.display())]
    Write { path: PathBuf, game: usize, error: WriteError },
    #[error("{}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
}
