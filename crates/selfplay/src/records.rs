//! Game records of self-play games (KIF, CSA, …), for reading games in a GUI or checking them
//! with another program. The shards stay the training data; records are an optional copy.
//!
//! ```no_run
//! use koma_selfplay::{RecordFormat, RecordWriter};
//! # fn games() -> Vec<koma_data::GameSamples> { Vec::new() }
//! let mut records = RecordWriter::new("run/selfplay/records", RecordFormat::Kif, "selfplay-1234").unwrap();
//! for game in games() {
//!     let path = records.write(&game).unwrap(); // run/selfplay/records/game-selfplay-1234-000000.kif
//! #   let _ = path;
//! }
//! ```
//!
//! Each game is one file, `DIR/game-PREFIX-NNNNNN.EXT` (`NNNNNN` counts on from the highest
//! number already in `DIR` for that prefix, so a resumed run never overwrites), written durably
//! (`koma_base::durable`: a temporary, fsynced and renamed), so a reader never sees half a record. Both players are the
//! model that played the game ([`GameSamples::model`]). Every move that got a full search carries
//! that search's root value as a comment (`koma value +0.231 wdl 0.562/0.107/0.331`, for the side
//! that moved) and as the record's evaluation in centipawns from Black's point of view
//! (dlshogi's conversion, `cp = -600 · ln(1/p − 1)` with p = (1 + value)/2); cheap-search moves
//! have none. A resigning player's last value is noted after the last move.
//!
//! To write records alongside shards without touching the self-play loop, put a
//! [`RecordWriter::spawn_tee`] between [`crate::run`] and the shard writer.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crossbeam::channel::{unbounded, Sender};
use koma_data::{flags, GameSamples};
use koma_shogi::record::{write_games, Format, GameRecord, RecordMove};
use koma_shogi::{Color, EndReason, Position};

use crate::error::RecordError;

/// The record formats a [`RecordWriter`] writes: `Kif` (Shift_JIS `.kif`), `Kifu` (UTF-8
/// `.kifu`), `Ki2`, `Csa`, `Usi` and `Sfen` (one line per file).
pub use koma_shogi::record::Format as RecordFormat;

/// dlshogi's original win-rate-to-centipawn coefficient (as `koma usi` uses by default).
const EVAL_COEF: f64 = 600.0;

/// Writes one record file per finished self-play game.
#[derive(Debug)]
pub struct RecordWriter {
    dir: PathBuf,
    format: Format,
    prefix: String,
    next: u64,
    written: usize,
}

/// What a record tee wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordSummary {
    pub written: usize,
    /// Games whose record could not be written (each logged as a warning).
    pub failed: usize,
    pub dir: PathBuf,
}

impl RecordWriter {
    /// A writer of `format` records under `dir` (created if missing), files named
    /// `game-PREFIX-NNNNNN.EXT`.
    pub fn new(dir: impl AsRef<Path>, format: Format, prefix: &str) -> Result<RecordWriter, RecordError> {
        let dir = dir.as_ref().to_path_buf();
        let folder = |action, source| RecordError::Folder { action, path: dir.clone(), source };
        std::fs::create_dir_all(&dir).map_err(|e| folder("creating", e))?;
        let stem = format!("game-{prefix}-");
        let mut next = 0;
        let entries = std::fs::read_dir(&dir).map_err(|e| folder("reading", e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = name.strip_prefix(&stem).and_then(|r| r.split('.').next()).and_then(|n| n.parse::<u64>().ok());
            if let Some(n) = number {
                next = next.max(n + 1);
            }
        }
        Ok(RecordWriter { dir, format, prefix: prefix.to_string(), next, written: 0 })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Records written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Writes `game` as the next record file and returns its path.
    pub fn write(&mut self, game: &GameSamples) -> Result<PathBuf, RecordError> {
        let record = game_record(game)?;
        let bytes = write_games(std::slice::from_ref(&record), self.format)
            .map_err(|source| RecordError::Game { start: game.start_sfen.clone(), source })?;
        let name = format!("game-{}-{:06}.{}", self.prefix, self.next, self.format.extension());
        let path = self.dir.join(&name);
        // No half record left behind (a full disk, a file-size limit).
        koma_base::durable::write(&path, &bytes)?;
        self.next += 1;
        self.written += 1;
        Ok(path)
    }

    /// Starts a thread that writes a record of every game sent to [`RecordTee::sender`] and then
    /// passes the game on to `next` (usually a `ShardWriter`'s sender). A record that cannot be
    /// written is logged and counted, and the game still goes on: training data comes first.
    pub fn spawn_tee(mut self, next: Sender<GameSamples>) -> RecordTee {
        let (sender, receiver) = unbounded::<GameSamples>();
        let handle = std::thread::Builder::new()
            .name("koma-record-writer".into())
            .spawn(move || {
                let mut failed = 0;
                for game in receiver {
                    if let Err(e) = self.write(&game) {
                        failed += 1;
                        tracing::warn!("could not save a self-play record: {e}");
                    }
                    // The shard writer stopped (it failed): stop too, so that self-play sees its
                    // sink close and reports it instead of playing games nobody keeps.
                    if next.send(game).is_err() {
                        break;
                    }
                }
                RecordSummary { written: self.written, failed, dir: self.dir }
            })
            .expect("spawning the record writer");
        RecordTee { sender: Some(sender), handle: Some(handle) }
    }
}

/// A running [`RecordWriter::spawn_tee`].
pub struct RecordTee {
    sender: Option<Sender<GameSamples>>,
    handle: Option<JoinHandle<RecordSummary>>,
}

impl RecordTee {
    /// Where finished games go (pass it to [`crate::run`] as the sink).
    pub fn sender(&self) -> Sender<GameSamples> {
        self.sender.clone().expect("tee not finished")
    }

    /// Waits until every sender is dropped and every record written.
    pub fn finish(mut self) -> RecordSummary {
        self.sender = None;
        self.handle.take().and_then(|h| h.join().ok()).unwrap_or_default()
    }
}

impl Drop for RecordTee {
    fn drop(&mut self) {
        self.sender = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The record of a finished self-play game: its start, every move (checked for legality), the
/// result, the model as both players, and the search's root value on every fully searched move.
pub fn game_record(game: &GameSamples) -> Result<GameRecord, RecordError> {
    let start = Position::from_sfen(&game.start_sfen)
        .map_err(|source| RecordError::Start { start: game.start_sfen.clone(), source })?;
    let mut record = GameRecord::new(start.clone());
    for &mv in &game.moves {
        record.push(mv).map_err(|source| RecordError::Game { start: game.start_sfen.clone(), source })?;
    }
    let mut side = start.side_to_move();
    let sides: Vec<Color> = (0..game.moves.len())
        .map(|_| {
            let s = side;
            side = !side;
            s
        })
        .collect();
    for sample in &game.samples {
        let ply = sample.ply as usize;
        let value = sample.root_wdl[0] - sample.root_wdl[2];
        match sample.played {
            Some(mv) if ply < game.moves.len() && game.moves[ply] == mv => {
                let m: &mut RecordMove = &mut record.moves[ply];
                let [w, d, l] = sample.root_wdl;
                m.comment = Some(format!("koma value {value:+.3} wdl {w:.3}/{d:.3}/{l:.3}"));
                let black_value = if sides[ply] == Color::Black { value } else { -value };
                m.eval = Some(value_to_cp(black_value));
            }
            None if ply == game.moves.len() && game.result.reason == EndReason::Resignation => {
                let note = format!("koma resigns at value {value:+.3}");
                match record.moves.last_mut() {
                    Some(last) => {
                        last.comment = Some(last.comment.take().map_or(note.clone(), |c| format!("{c}\n{note}")))
                    }
                    None => record.comments.push(note),
                }
            }
            _ => {}
        }
    }
    let model = if game.model.is_empty() { "koma" } else { game.model.as_str() };
    record.black = Some(model.to_string());
    record.white = Some(model.to_string());
    record.result = Some(game.result);
    record.headers.push(("EVENT".to_string(), "koma self-play".to_string()));
    let no_resign = game.samples.first().is_some_and(|s| s.flags & flags::NO_RESIGN != 0);
    record.comments.push(format!(
        "koma self-play, model {model}; root values for the side that moved, on fully searched moves{}",
        if no_resign { "; played without resignation" } else { "" }
    ));
    Ok(record)
}

/// A value in [-1, 1] as centipawns, the way dlshogi converts win rates.
fn value_to_cp(value: f32) -> i32 {
    let p = ((1.0 + value as f64) / 2.0).clamp(1e-5, 1.0 - 1e-5);
    (-EVAL_COEF * (1.0 / p - 1.0).ln()).round() as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_data::{PackedPosition, Sample};
    use koma_shogi::record::read_games;
    use koma_shogi::{GameResult, Handicap, Move};

    fn game(start: Position, usi: &[&str], result: GameResult) -> GameSamples {
        let mut pos = start.clone();
        let mut moves = Vec::new();
        let mut samples = Vec::new();
        for (i, u) in usi.iter().enumerate() {
            let mv = Move::from_usi(u).unwrap();
            if i % 2 == 0 {
                samples.push(Sample {
                    position: PackedPosition::pack(&pos).unwrap(),
                    played: Some(mv),
                    policy: vec![(mv, 1.0)],
                    root_wdl: [0.6, 0.1, 0.3],
                    result: 0,
                    ply: i as u16,
                    flags: flags::FULL_SEARCH,
                });
            }
            pos.do_move(mv);
            moves.push(mv);
        }
        if result.reason == EndReason::Resignation {
            samples.push(Sample {
                position: PackedPosition::pack(&pos).unwrap(),
                played: None,
                policy: Vec::new(),
                root_wdl: [0.01, 0.0, 0.99],
                result: -1,
                ply: moves.len() as u16,
                flags: flags::FULL_SEARCH,
            });
        }
        GameSamples {
            start_sfen: start.to_sfen(),
            result,
            length: moves.len() as u16,
            model: "model-00000042".into(),
            moves,
            samples,
            root_values: Vec::new(),
        }
    }

    #[test]
    fn records_read_back_with_moves_result_names_and_values() {
        let dir = tempfile::tempdir().unwrap();
        let games = [
            game(
                Position::startpos(),
                &["7g7f", "3c3d", "8h2b+", "3a2b"],
                GameResult { winner: Some(Color::Black), reason: EndReason::Resignation },
            ),
            game(
                Handicap::TwoPiece.position(),
                &["5a4b", "7g7f", "4b3b"],
                GameResult { winner: None, reason: EndReason::MaxMoves },
            ),
        ];
        for format in [Format::Kif, Format::Kifu, Format::Csa] {
            let mut writer = RecordWriter::new(dir.path().join(format.name()), format, "t").unwrap();
            for (i, g) in games.iter().enumerate() {
                let path = writer.write(g).unwrap();
                assert_eq!(
                    path.file_name().unwrap().to_string_lossy(),
                    format!("game-t-{i:06}.{}", format.extension())
                );
                let back = read_games(&std::fs::read(&path).unwrap(), format).unwrap();
                let back = &back[0];
                assert_eq!(back.moves.iter().map(|m| m.mv).collect::<Vec<_>>(), g.moves, "{format}");
                assert_eq!(back.result, Some(g.result), "{format}");
                assert_eq!(back.start.to_sfen(), g.start_sfen, "{format}");
                assert_eq!(back.black.as_deref(), Some("model-00000042"));
                assert_eq!(back.white.as_deref(), Some("model-00000042"));
                // Fully searched moves (even plies here) carry the value; the others nothing.
                let first_mover_black = back.start.side_to_move() == Color::Black;
                for (ply, m) in back.moves.iter().enumerate() {
                    if ply % 2 == 0 {
                        assert!(
                            m.comment.as_deref().unwrap().starts_with("koma value +0.300 wdl 0.600/0.100/0.300"),
                            "{format}: {m:?}"
                        );
                        let cp = value_to_cp(0.3);
                        assert!(cp > 0);
                        assert_eq!(m.eval, Some(if first_mover_black { cp } else { -cp }), "{format}");
                    } else if ply + 1 < back.moves.len() || g.result.reason != EndReason::Resignation {
                        assert_eq!((m.comment.as_deref(), m.eval), (None, None), "{format}: ply {ply}");
                    }
                }
                if g.result.reason == EndReason::Resignation {
                    assert!(
                        back.moves.last().unwrap().comment.as_deref().unwrap().contains("koma resigns at value -0.980"),
                        "{format}"
                    );
                }
            }
            // A new writer continues the numbering instead of overwriting.
            let mut again = RecordWriter::new(dir.path().join(format.name()), format, "t").unwrap();
            let path = again.write(&games[0]).unwrap();
            assert!(path.ends_with(format!("game-t-000002.{}", format.extension())));
            let leftovers: Vec<_> = std::fs::read_dir(dir.path().join(format.name()))
                .unwrap()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
                .collect();
            assert!(leftovers.is_empty());
        }
    }

    /// A record that fails at any step of its write (a full disk) is an error naming the file; the
    /// records before it stay, no temporary is left, and the next game takes the number that
    /// failed.
    #[test]
    fn a_failed_record_write_loses_nothing_written_and_leaves_no_temporary() {
        use koma_base::durable::{fail_next, Step};
        let dir = tempfile::tempdir().unwrap();
        let g = game(Position::startpos(), &["7g7f"], GameResult { winner: None, reason: EndReason::Repetition });
        let mut writer = RecordWriter::new(dir.path(), Format::Csa, "f").unwrap();
        let first = writer.write(&g).unwrap();
        let first_bytes = std::fs::read(&first).unwrap();
        for step in [Step::Create, Step::Write, Step::SyncFile, Step::Rename] {
            fail_next(dir.path(), step);
            let e = writer.write(&g).unwrap_err();
            assert!(e.to_string().contains("game-f-000001.csa"), "{step:?}: {e}");
            assert!(matches!(e, RecordError::Write(ref w) if w.step == step), "{step:?}: {e:?}");
            let mut names: Vec<String> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            assert_eq!(names, ["game-f-000000.csa"], "{step:?}");
            assert_eq!(std::fs::read(&first).unwrap(), first_bytes);
        }
        assert!(writer.write(&g).unwrap().ends_with("game-f-000001.csa"));
    }

    #[test]
    fn tee_writes_records_and_passes_games_on() {
        let dir = tempfile::tempdir().unwrap();
        let (next, received) = unbounded();
        let tee = RecordWriter::new(dir.path(), Format::Csa, "tee").unwrap().spawn_tee(next);
        let g =
            game(Position::startpos(), &["7g7f", "3c3d"], GameResult { winner: None, reason: EndReason::Repetition });
        let sender = tee.sender();
        sender.send(g.clone()).unwrap();
        sender.send(g.clone()).unwrap();
        drop(sender);
        let summary = tee.finish();
        assert_eq!((summary.written, summary.failed), (2, 0));
        assert_eq!(received.try_iter().collect::<Vec<_>>(), vec![g.clone(), g]);
        assert!(dir.path().join("game-tee-000001.csa").exists());
    }

    #[test]
    fn an_illegal_game_is_refused() {
        let mut g = game(Position::startpos(), &["7g7f"], GameResult { winner: None, reason: EndReason::Abort });
        g.moves.push(Move::from_usi("7f7e").unwrap()); // White to move: not White's pawn
        assert!(game_record(&g).is_err());
    }
}
