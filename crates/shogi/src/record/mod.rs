//! Game records: a start position, the moves with optional times, comments and evaluations, the
//! result and the players, read from and written to CSA, KIF/KIFU and USI/SFEN text.
//!
//! ```
//! use koma_shogi::record::{self, Format, GameRecord};
//! let games = record::read_games(b"PI\n+\n+7776FU\n-3334FU\n%TORYO\n", Format::Csa).unwrap();
//! let kifu = record::write_games(&games, Format::Kifu).unwrap();
//! let back = record::read_games(&kifu, Format::Kif).unwrap();
//! assert_eq!(back[0].to_usi_position(), "position startpos moves 7g7f 3c3d");
//! assert_eq!(back[0].result, games[0].result);
//! ```
//!
//! Every reader validates the moves against the rules and reports the line (and move number) of
//! the first problem; nothing panics on bad input. See `docs/records.md` for what each format keeps.

pub mod bod;
mod convert;
pub mod csa;
mod error;
pub mod ki2;
pub mod kif;
pub mod notation;

use std::time::Duration;

pub use convert::{convert_path, read_file, ConvertSummary, FileOutcome};
pub use error::{ParseError, ParseErrorKind, RecordError, WriteError};

use crate::color::Color;
use crate::handicap::Handicap;
use crate::mv::Move;
use crate::position::Position;
use crate::rules::{EndReason, GameResult};
use crate::usi::{self, UsiPositionError};

/// One move of a record with what the record says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordMove {
    pub mv: Move,
    /// Time the player spent on the move (CSA `T`, KIF per-move time).
    pub time: Option<Duration>,
    /// Free comment (several lines joined with `\n`).
    pub comment: Option<String>,
    /// Evaluation in centipawns from Black's (sente's) point of view.
    pub eval: Option<i32>,
}

impl RecordMove {
    pub fn new(mv: Move) -> RecordMove {
        RecordMove { mv, time: None, comment: None, eval: None }
    }
}

/// A game: start position, moves, result and the information around them.
///
/// `moves` are legal from `start` when the record comes from a reader or from
/// [`GameRecord::push`]; writers check it again and refuse illegal moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GameRecord {
    /// The start position (even, a handicap or any legal position), with its SFEN move number.
    pub start: Position,
    pub moves: Vec<RecordMove>,
    /// How the game ended; `None` when the record does not say (unfinished).
    pub result: Option<GameResult>,
    /// Black's (sente's, shitate's) name.
    pub black: Option<String>,
    /// White's (gote's, uwate's) name.
    pub white: Option<String>,
    /// Other header fields, in file order. The CSA `$` keys EVENT, SITE, START_TIME, END_TIME,
    /// TIME_LIMIT and OPENING are used for the KIF headers 棋戦, 場所, 開始日時, 終了日時, 持ち時間
    /// and 戦型; other keys are kept as they were written.
    pub headers: Vec<(String, String)>,
    /// Comments about the whole game (before the first move), one entry per line.
    pub comments: Vec<String>,
}

impl GameRecord {
    /// An empty record starting from `start`.
    pub fn new(start: Position) -> GameRecord {
        // Drop any history: the record's moves are its history.
        let start = Position::from_sfen(&start.to_sfen()).unwrap_or(start);
        GameRecord {
            start,
            moves: Vec::new(),
            result: None,
            black: None,
            white: None,
            headers: Vec::new(),
            comments: Vec::new(),
        }
    }

    /// An empty record from a standard start (White moves first in handicap games).
    pub fn from_handicap(handicap: Handicap) -> GameRecord {
        GameRecord::new(handicap.position())
    }

    /// A record of the moves in `pos`'s history, starting from the root of that history.
    pub fn from_position(pos: &Position) -> GameRecord {
        let mut root = pos.clone();
        while root.plies_from_root() > 0 {
            root.undo_move();
        }
        let mut record = GameRecord::new(root);
        record.moves = pos.moves_from_root().map(RecordMove::new).collect();
        record
    }

    /// Appends a move after checking that it is legal in the current final position.
    pub fn push(&mut self, mv: Move) -> Result<(), WriteError> {
        let pos = self.final_position()?;
        if !pos.is_legal(mv) {
            return Err(WriteError::IllegalMove {
                move_number: self.moves.len() as u32 + 1,
                usi: mv.to_usi(),
                sfen: pos.to_sfen(),
            });
        }
        self.moves.push(RecordMove::new(mv));
        Ok(())
    }

    /// The standard handicap this game starts from, if any (the SFEN move number is ignored).
    pub fn handicap(&self) -> Option<Handicap> {
        Handicap::of_position(&self.start)
    }

    /// The position after all moves, with the moves as its history (for repetition checks).
    pub fn final_position(&self) -> Result<Position, WriteError> {
        let mut pos = self.start.clone();
        for (i, m) in self.moves.iter().enumerate() {
            if !pos.is_legal(m.mv) {
                return Err(WriteError::IllegalMove {
                    move_number: i as u32 + 1,
                    usi: m.mv.to_usi(),
                    sfen: pos.to_sfen(),
                });
            }
            pos.do_move(m.mv);
        }
        Ok(pos)
    }

    /// The side to move after all moves.
    pub fn side_to_move_at_end(&self) -> Color {
        if self.moves.len().is_multiple_of(2) {
            self.start.side_to_move()
        } else {
            !self.start.side_to_move()
        }
    }

    /// The USI `position` command of the game: `position startpos moves 7g7f …` or
    /// `position sfen <start> moves …`.
    pub fn to_usi_position(&self) -> String {
        let mut out = String::from("position ");
        out.push_str(&self.usi_arguments(false));
        out
    }

    /// The SFEN move list of the game: always `sfen <start> moves …`, even from the start position.
    pub fn to_sfen_moves(&self) -> String {
        self.usi_arguments(true)
    }

    fn usi_arguments(&self, force_sfen: bool) -> String {
        let sfen = self.start.to_sfen();
        let mut out = if !force_sfen && sfen == crate::sfen::STARTPOS_SFEN {
            "startpos".to_string()
        } else {
            format!("sfen {sfen}")
        };
        for (i, m) in self.moves.iter().enumerate() {
            out.push_str(if i == 0 { " moves " } else { " " });
            m.mv.write_usi(&mut out);
        }
        out
    }

    /// Reads USI position arguments (`[position] startpos|sfen … [moves …]`), checking every move.
    pub fn from_usi_position(text: &str) -> Result<GameRecord, UsiPositionError> {
        let pos = usi::parse_position(text)?;
        Ok(GameRecord::from_position(&pos))
    }
}

/// The record formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// CSA standard (V2.2), several games per file separated by `/`.
    Csa,
    /// KIF; read as UTF-8 or Shift_JIS (detected), written as Shift_JIS (`.kif`).
    Kif,
    /// KIF written as UTF-8 (`.kifu`); read like [`Format::Kif`].
    Kifu,
    /// One USI `position` command per line (`position startpos moves …`).
    Usi,
    /// One SFEN move list per line (`sfen <start> moves …`); read like [`Format::Usi`].
    Sfen,
    /// KI2 (moves in Japanese notation); read like [`Format::Kif`], written as Shift_JIS.
    Ki2,
}

impl Format {
    pub const ALL: [Format; 6] = [Format::Csa, Format::Kif, Format::Kifu, Format::Usi, Format::Sfen, Format::Ki2];

    pub const fn name(self) -> &'static str {
        match self {
            Format::Csa => "csa",
            Format::Kif => "kif",
            Format::Kifu => "kifu",
            Format::Usi => "usi",
            Format::Sfen => "sfen",
            Format::Ki2 => "ki2",
        }
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.into_iter().find(|f| f.name().eq_ignore_ascii_case(name))
    }

    /// The extension written files get (without the dot).
    pub const fn extension(self) -> &'static str {
        self.name()
    }

    /// Whether a file with this extension is read when converting a directory from `self`.
    pub fn reads_extension(self, ext: &str) -> bool {
        let ext = ext.to_ascii_lowercase();
        match self {
            Format::Csa => ext == "csa",
            Format::Kif | Format::Kifu => ext == "kif" || ext == "kifu",
            Format::Ki2 => ext == "ki2",
            Format::Usi | Format::Sfen => ext == "usi" || ext == "sfen",
        }
    }

    /// The format a file extension suggests.
    pub fn from_extension(ext: &str) -> Option<Format> {
        Format::from_name(ext)
    }

    /// Whether a file of this format holds only one game.
    pub const fn one_game_per_file(self) -> bool {
        matches!(self, Format::Kif | Format::Kifu | Format::Ki2)
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        Format::from_name(s).ok_or_else(|| {
            let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
            format!("unknown record format {s:?} (expected one of {})", names.join(", "))
        })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Decodes record bytes: UTF-8 (with or without BOM) when valid, otherwise Shift_JIS (cp932).
pub fn decode(bytes: &[u8]) -> Result<String, ParseError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if let Ok(text) = std::str::from_utf8(bytes) {
        return Ok(text.to_string());
    }
    match encoding_rs::SHIFT_JIS.decode_without_bom_handling_and_without_replacement(bytes) {
        Some(text) => Ok(text.into_owned()),
        None => {
            let (text, _) = encoding_rs::SHIFT_JIS.decode_without_bom_handling(bytes);
            let line = text.lines().position(|l| l.contains('\u{FFFD}')).map_or(1, |i| i + 1);
            Err(ParseError::new(line, ParseErrorKind::Encoding))
        }
    }
}

/// Encodes text as Shift_JIS (cp932); characters it cannot hold become `&#NNNN;`.
pub fn encode_shift_jis(text: &str) -> Vec<u8> {
    let (bytes, _, _) = encoding_rs::SHIFT_JIS.encode(text);
    bytes.into_owned()
}

/// Reads every game of `bytes` in `format` (a KIF file holds one game).
pub fn read_games(bytes: &[u8], format: Format) -> Result<Vec<GameRecord>, ParseError> {
    let text = decode(bytes)?;
    match format {
        Format::Csa => csa::parse_csa(&text),
        Format::Kif | Format::Kifu | Format::Ki2 => kif::parse_kif(&text).map(|g| vec![g]),
        Format::Usi | Format::Sfen => parse_usi_lines(&text),
    }
}

/// Writes games in `format`: CSA games are separated by `/`; KIF files hold one game, so several
/// games are an error here (see [`convert_path`], which writes one file per game); USI and SFEN
/// write one line per game. KIF is Shift_JIS, everything else UTF-8.
pub fn write_games(games: &[GameRecord], format: Format) -> Result<Vec<u8>, WriteError> {
    match format {
        Format::Csa => csa::write_csa_games(games).map(String::into_bytes),
        Format::Kif | Format::Kifu => {
            if games.len() != 1 {
                return Err(WriteError::OneGamePerFile { format: format.name(), games: games.len() });
            }
            let text = kif::write_kif(&games[0])?;
            Ok(if format == Format::Kif { encode_shift_jis(&text) } else { text.into_bytes() })
        }
        Format::Ki2 => {
            if games.len() != 1 {
                return Err(WriteError::OneGamePerFile { format: format.name(), games: games.len() });
            }
            Ok(encode_shift_jis(&ki2::write_ki2(&games[0])?))
        }
        Format::Usi | Format::Sfen => {
            let mut out = String::new();
            for g in games {
                g.final_position()?;
                out.push_str(&if format == Format::Usi { g.to_usi_position() } else { g.to_sfen_moves() });
                out.push('\n');
            }
            Ok(out.into_bytes())
        }
    }
}

/// Reads USI position lines, one game per line. Blank lines and lines starting with `#` are
/// skipped; a line may start with `position` or not, and may be `sfen …` or `startpos …`.
pub fn parse_usi_lines(text: &str) -> Result<Vec<GameRecord>, ParseError> {
    let mut games = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match GameRecord::from_usi_position(line) {
            Ok(g) => games.push(g),
            Err(e) => {
                let mv = match &e {
                    UsiPositionError::Syntax { index, .. } | UsiPositionError::Illegal { index, .. } => {
                        Some(*index as u32)
                    }
                    _ => None,
                };
                let kind = match e {
                    UsiPositionError::Sfen(s) => ParseErrorKind::Position(s),
                    UsiPositionError::Illegal { text, sfen, .. } => ParseErrorKind::IllegalMove { text, sfen },
                    UsiPositionError::Syntax { text, .. } => {
                        ParseErrorKind::BadMove { text, reason: "not a USI move".into() }
                    }
                    other => ParseErrorKind::Usi(other),
                };
                return Err(ParseError { line: i + 1, move_number: mv, kind });
            }
        }
    }
    Ok(games)
}

// ---- helpers shared by the formats ----------------------------------------------------------

/// A marker comment written for endings a format cannot express (`koma-end:try`), read back to
/// restore the exact [`EndReason`].
pub(crate) const END_MARKER: &str = "koma-end:";

/// The result as the final position confirms it: a resignation where the side to move has no
/// legal move is a checkmate; a marker comment restores the exact reason.
pub(crate) fn refine_result(result: GameResult, final_pos: &Position, marker: Option<EndReason>) -> GameResult {
    let mut result = result;
    if result.reason == EndReason::Resignation
        && result.winner == Some(!final_pos.side_to_move())
        && !final_pos.has_legal_move()
    {
        result.reason = EndReason::Checkmate;
    }
    if let Some(reason) = marker {
        let marked = GameResult { reason, ..result };
        if result_is_consistent(marked) {
            result = marked;
        }
    }
    result
}

/// Whether a result's winner fits its reason (a resignation has a winner, a repetition draw none).
pub fn result_is_consistent(result: GameResult) -> bool {
    match result.reason {
        EndReason::Checkmate
        | EndReason::Resignation
        | EndReason::TimeLoss
        | EndReason::Try
        | EndReason::PerpetualCheck
        | EndReason::IllegalMove
        | EndReason::Forfeit => result.winner.is_some(),
        EndReason::Repetition | EndReason::MaxMoves | EndReason::Abort => result.winner.is_none(),
        EndReason::Declaration => true,
    }
}

const MARKER_NAMES: [(EndReason, &str); 11] = [
    (EndReason::Checkmate, "checkmate"),
    (EndReason::Resignation, "resignation"),
    (EndReason::Repetition, "repetition"),
    (EndReason::PerpetualCheck, "perpetual_check"),
    (EndReason::Declaration, "declaration"),
    (EndReason::Try, "try"),
    (EndReason::MaxMoves, "max_moves"),
    (EndReason::TimeLoss, "time_loss"),
    (EndReason::IllegalMove, "illegal_move"),
    (EndReason::Abort, "abort"),
    (EndReason::Forfeit, "forfeit"),
];

pub(crate) fn end_marker_name(reason: EndReason) -> &'static str {
    MARKER_NAMES.iter().find(|(r, _)| *r == reason).map_or("abort", |(_, n)| n)
}

pub(crate) fn end_marker_reason(name: &str) -> Option<EndReason> {
    MARKER_NAMES.iter().find(|(_, n)| *n == name.trim()).map(|(r, _)| *r)
}

/// Chooses how a format ends a game. `natural` is the format's own ending for the result, `read`
/// what the reader makes of an ending (before markers), `by_winner` an ending that reads back with
/// a given winner. Returns the ending to write and the marker reason needed, if any: none when the
/// natural ending reads back exactly; the natural ending plus a marker when it gets the winner
/// right; otherwise the winner's ending plus a marker.
pub(crate) fn choose_ending<T: Clone>(
    result: GameResult,
    natural: T,
    read: impl Fn(&T) -> Option<GameResult>,
    by_winner: impl Fn(Option<Color>) -> T,
) -> (T, Option<EndReason>) {
    match read(&natural) {
        Some(r) if r == result => (natural, None),
        Some(r) if r.winner == result.winner => (natural, Some(result.reason)),
        _ => {
            let fallback = by_winner(result.winner);
            let marker = (read(&fallback) != Some(result)).then_some(result.reason);
            (fallback, marker)
        }
    }
}

/// Replaces line breaks and other control characters by spaces (for one-line fields).
pub(crate) fn one_line(s: &str) -> String {
    s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

/// Canonical header keys and their KIF names.
pub(crate) const HEADER_NAMES: [(&str, &str); 6] = [
    ("EVENT", "棋戦"),
    ("SITE", "場所"),
    ("START_TIME", "開始日時"),
    ("END_TIME", "終了日時"),
    ("TIME_LIMIT", "持ち時間"),
    ("OPENING", "戦型"),
];

/// Parses a non-negative decimal number of seconds (`12`, `1.5`) into a duration, refusing
/// anything else (and values above about 136 years).
pub(crate) fn parse_seconds(text: &str) -> Option<Duration> {
    let (int, frac) = match text.split_once('.') {
        Some((i, f)) => (i, f),
        None => (text, ""),
    };
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || int.len() > 9
    {
        return None;
    }
    let secs: u64 = int.parse().ok()?;
    let mut nanos = 0u32;
    let mut scale = 100_000_000u32;
    for b in frac.bytes().take(9) {
        nanos += (b - b'0') as u32 * scale;
        scale /= 10;
    }
    Some(Duration::new(secs, nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds() {
        assert_eq!(parse_seconds("12"), Some(Duration::from_secs(12)));
        assert_eq!(parse_seconds("1.5"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_seconds("-1"), None);
        assert_eq!(parse_seconds(""), None);
        assert_eq!(parse_seconds("1e3"), None);
        assert_eq!(parse_seconds("99999999999999999999"), None);
    }

    #[test]
    fn usi_round_trip() {
        let g = GameRecord::from_usi_position("position startpos moves 7g7f 3c3d").unwrap();
        assert_eq!(g.to_usi_position(), "position startpos moves 7g7f 3c3d");
        assert_eq!(g.to_sfen_moves(), format!("sfen {} moves 7g7f 3c3d", crate::STARTPOS_SFEN));
        let err = parse_usi_lines("startpos\n\nstartpos moves 7g7f 7g7f\n").unwrap_err();
        assert_eq!((err.line, err.move_number), (3, Some(2)));
    }
}
