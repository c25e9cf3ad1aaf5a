//! dlshogi hcpe3 files (games with their searches' visit counts) to games of samples, and games
//! of shards back to hcpe3.
//!
//! An hcpe3 file is a sequence of games, little-endian and packed (docs/data-format.md):
//!
//! - a 36-byte header: `hcp` (32 bytes, HuffmanCodedPos of the start), `moveNum` (u16, moves that
//!   follow), `result` (u8: bits 0–1 0 draw, 1 Black won, 2 White won; bit 2 repetition, bit 3
//!   declaration (入玉宣言), bit 4 move limit), `opponent` (u8: 0 self-play, 1 or 2 a USI engine
//!   played Black or White);
//! - per move a 6-byte `MoveInfo`: `selectedMove16` (u16, the move played), `eval` (i16,
//!   centipawns from the side to move, ±30000 for a proven win or loss), `candidateNum` (u16);
//! - then `candidateNum` 4-byte `MoveVisits`: `move16` (u16) and `visitNum` (u16).
//!
//! A move with `candidateNum` 0 was played but is no training position (dlshogi's random opening
//! moves, the move of a found mate); any other is a sample whose policy target is the visit
//! distribution, whose result is the game's for the side to move and whose root value is the
//! evaluation `[σ(eval/s), 0, σ(−eval/s)]`, as for hcpe.
//!
//! Written from the format description and dlshogi's readers and writers (read for the layout
//! only); checked against files cshogi and numpy write (python/tests/test_hcpe3.py).

use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use koma_base::durable::{DurableError, StagedFile, Step};
use koma_shogi::{Color, EndReason, GameResult, Move, Position};
use thiserror::Error;

use crate::hcp::{decode_hcp, encode_hcp, eval_to_wdl, move_from_move16, move_to_move16, wdl_to_eval, HCP_BYTES};
use crate::packed::PackedPosition;
use crate::sample::{flags, result_for, GameSamples, Sample};
use crate::shard::GameInfo;

pub const HEADER_BYTES: usize = 36;
pub const MOVE_INFO_BYTES: usize = 6;
pub const MOVE_VISITS_BYTES: usize = 4;
/// The most legal moves a shogi position has. dlshogi's readers assume `candidateNum` stays
/// within it; a larger count means the file is not hcpe3 or its framing is lost.
pub const MAX_CANDIDATES: u16 = 593;

/// Bits of the header's `result` byte.
pub mod result_bits {
    /// Bits 0–1: 0 draw, 1 Black won, 2 White won.
    pub const WINNER: u8 = 0x3;
    pub const BLACK_WIN: u8 = 1;
    pub const WHITE_WIN: u8 = 2;
    /// A repetition (千日手) ended the game.
    pub const REPETITION: u8 = 0x4;
    /// A declaration (入玉宣言) ended the game.
    pub const DECLARATION: u8 = 0x8;
    /// The move limit ended the game. dlshogi's self-play writes this draw as 0x16 (its constant
    /// `GAMERESULT_MAXMOVE` is 0x16, which also sets bits 1 and 2); any byte with bit 4 set is
    /// read as a move-limit draw.
    pub const MAX_MOVES: u8 = 0x10;
}

/// One move of an hcpe3 game.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hcpe3Move {
    pub selected_move16: u16,
    /// Centipawns from the side to move.
    pub eval: i16,
    /// (move16, visits) of the search's candidates; empty: not a training position.
    pub candidates: Vec<(u16, u16)>,
}

/// One hcpe3 game: its start, result byte, opponent byte and moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hcpe3Game {
    pub hcp: [u8; HCP_BYTES],
    pub result: u8,
    pub opponent: u8,
    pub moves: Vec<Hcpe3Move>,
}

impl Hcpe3Game {
    /// Bytes the game takes in a file.
    pub fn byte_len(&self) -> usize {
        HEADER_BYTES
            + self.moves.iter().map(|m| MOVE_INFO_BYTES + MOVE_VISITS_BYTES * m.candidates.len()).sum::<usize>()
    }

    /// Writes the game. Fails (writing nothing) when it has more than 65535 moves or a move more
    /// than [`MAX_CANDIDATES`] candidates, which the format cannot hold.
    pub fn write_to<W: Write>(&self, out: &mut W) -> io::Result<()> {
        let move_num = u16::try_from(self.moves.len())
            .map_err(|_| io::Error::other(format!("{} moves do not fit hcpe3's u16 moveNum", self.moves.len())))?;
        if let Some(m) = self.moves.iter().find(|m| m.candidates.len() > MAX_CANDIDATES as usize) {
            return Err(io::Error::other(format!("{} candidates, more than {MAX_CANDIDATES}", m.candidates.len())));
        }
        let mut bytes = Vec::with_capacity(self.byte_len());
        bytes.extend_from_slice(&self.hcp);
        bytes.extend_from_slice(&move_num.to_le_bytes());
        bytes.push(self.result);
        bytes.push(self.opponent);
        for m in &self.moves {
            bytes.extend_from_slice(&m.selected_move16.to_le_bytes());
            bytes.extend_from_slice(&m.eval.to_le_bytes());
            bytes.extend_from_slice(&(m.candidates.len() as u16).to_le_bytes());
            for &(code, visits) in &m.candidates {
                bytes.extend_from_slice(&code.to_le_bytes());
                bytes.extend_from_slice(&visits.to_le_bytes());
            }
        }
        out.write_all(&bytes)
    }
}

/// Why an hcpe3 stream could not be read on: the game (1-based), the byte offset where it starts,
/// and the offset of the field that failed. Games before it were complete.
#[derive(Debug, Error)]
pub enum Hcpe3ReadError {
    #[error("game {game} (from byte {start}) is truncated: {field} at byte {offset} needs {need} bytes, the file ends after {got}; the {complete} complete games before it were read", complete = game - 1)]
    Truncated { game: usize, start: u64, field: &'static str, offset: u64, need: usize, got: usize },
    #[error("game {game} (from byte {start}): move {ply}: candidateNum {count} at byte {offset} is more than {MAX_CANDIDATES} (not an hcpe3 file, or a corrupt one); the {complete} complete games before it were read", complete = game - 1)]
    TooManyCandidates { game: usize, start: u64, ply: usize, count: u16, offset: u64 },
    #[error("reading game {game} at byte {offset}: {source}")]
    Io { game: usize, offset: u64, source: io::Error },
}

/// Reads hcpe3 games one at a time from a stream.
pub struct Hcpe3Reader<R> {
    inner: R,
    offset: u64,
    games: usize,
}

impl<R: Read> Hcpe3Reader<R> {
    pub fn new(inner: R) -> Hcpe3Reader<R> {
        Hcpe3Reader { inner, offset: 0, games: 0 }
    }

    /// Bytes consumed so far (the offset of the next game after a successful read).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Fills `buf` as far as the stream goes; the number of bytes read.
    fn fill(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut got = 0;
        while got < buf.len() {
            match self.inner.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }

    /// The next game, `Ok(None)` at the end of the stream (which must fall between games).
    pub fn next_game(&mut self) -> Result<Option<(Hcpe3Game, u64)>, Hcpe3ReadError> {
        let game = self.games + 1;
        let start = self.offset;
        let read = |this: &mut Self, buf: &mut [u8], field: &'static str| -> Result<bool, Hcpe3ReadError> {
            let offset = this.offset;
            let got = this.fill(buf).map_err(|source| Hcpe3ReadError::Io { game, offset, source })?;
            this.offset += got as u64;
            if got == buf.len() {
                Ok(true)
            } else if got == 0 && field == "header" {
                Ok(false)
            } else {
                Err(Hcpe3ReadError::Truncated { game, start, field, offset, need: buf.len(), got })
            }
        };
        let mut header = [0u8; HEADER_BYTES];
        if !read(self, &mut header, "header")? {
            return Ok(None);
        }
        let mut hcp = [0u8; HCP_BYTES];
        hcp.copy_from_slice(&header[..HCP_BYTES]);
        let move_num = u16::from_le_bytes([header[32], header[33]]) as usize;
        let mut moves = Vec::with_capacity(move_num);
        for ply in 1..=move_num {
            let mut info = [0u8; MOVE_INFO_BYTES];
            read(self, &mut info, "MoveInfo")?;
            let count = u16::from_le_bytes([info[4], info[5]]);
            if count > MAX_CANDIDATES {
                return Err(Hcpe3ReadError::TooManyCandidates { game, start, ply, count, offset: self.offset - 2 });
            }
            let mut visits = vec![0u8; MOVE_VISITS_BYTES * count as usize];
            read(self, &mut visits, "MoveVisits")?;
            moves.push(Hcpe3Move {
                selected_move16: u16::from_le_bytes([info[0], info[1]]),
                eval: i16::from_le_bytes([info[2], info[3]]),
                candidates: visits
                    .chunks_exact(MOVE_VISITS_BYTES)
                    .map(|c| (u16::from_le_bytes([c[0], c[1]]), u16::from_le_bytes([c[2], c[3]])))
                    .collect(),
            });
        }
        self.games += 1;
        Ok(Some((Hcpe3Game { hcp, result: header[34], opponent: header[35], moves }, start)))
    }
}

/// The winner and end flags of a `result` byte, or why it is not one.
fn decode_result(byte: u8) -> Result<(Option<Color>, u8), String> {
    use result_bits::*;
    if byte & !(WINNER | REPETITION | DECLARATION | MAX_MOVES) != 0 {
        return Err(format!("result {byte:#04x} has bits set that hcpe3 does not define (bits 5-7)"));
    }
    if byte & MAX_MOVES != 0 {
        return Ok((None, MAX_MOVES));
    }
    let winner = match byte & WINNER {
        0 => None,
        BLACK_WIN => Some(Color::Black),
        WHITE_WIN => Some(Color::White),
        _ => return Err(format!("result {byte:#04x}: winner bits 3 (expected 0 draw, 1 Black, 2 White)")),
    };
    Ok((winner, byte & (REPETITION | DECLARATION)))
}

/// How the game ended, from the result byte and the final position (hcpe3 records no reason for
/// a decisive game without flags: checkmate when the side to move has no legal move, else
/// resignation; a draw without flags is kept as an abort).
fn end_of(winner: Option<Color>, flag: u8, last: &Position) -> GameResult {
    use result_bits::*;
    let reason = if flag == MAX_MOVES {
        EndReason::MaxMoves
    } else if flag & DECLARATION != 0 {
        EndReason::Declaration
    } else if flag & REPETITION != 0 {
        // dlshogi flags only the drawn repetition; a decided one is a perpetual check.
        if winner.is_some() {
            EndReason::PerpetualCheck
        } else {
            EndReason::Repetition
        }
    } else if winner.is_none() {
        EndReason::Abort
    } else if last.legal_moves().is_empty() && winner == Some(!last.side_to_move()) {
        EndReason::Checkmate
    } else {
        EndReason::Resignation
    };
    GameResult { winner, reason }
}

/// A legal move of `pos` from its move16 code, or what is wrong with it.
fn legal_move(pos: &Position, code: u16, field: &str) -> Result<Move, String> {
    match move_from_move16(code) {
        Some(m) if pos.is_legal(m) => Ok(m),
        Some(m) => Err(format!("{field} {code:#06x} ({}) is illegal in {}", m.to_usi(), pos.to_sfen())),
        None => Err(format!("{field} {code:#06x} is not a move")),
    }
}

/// The game and samples of one hcpe3 game, replayed from its start with every move checked, or
/// what is wrong with it (the move, 1-based, and why). `source` becomes the game's model name.
pub fn hcpe3_to_game(game: &Hcpe3Game, source: &str, eval_scale: f64) -> Result<GameSamples, String> {
    let mut pos = decode_hcp(&game.hcp).map_err(|e| format!("start position: {e}"))?;
    let (winner, flag) = decode_result(game.result)?;
    let start_sfen = pos.to_sfen();
    let mut moves = Vec::with_capacity(game.moves.len());
    let mut samples = Vec::new();
    for (ply, m) in game.moves.iter().enumerate() {
        let at = |e: String| format!("move {}: {e}", ply + 1);
        let played = legal_move(&pos, m.selected_move16, "selectedMove16").map_err(at)?;
        if !m.candidates.is_empty() {
            let total: u32 = m.candidates.iter().map(|&(_, v)| v as u32).sum();
            if total == 0 {
                return Err(at("every candidate has 0 visits".into()));
            }
            let mut policy: Vec<(Move, f32)> = Vec::with_capacity(m.candidates.len());
            for &(code, visits) in &m.candidates {
                let cand = legal_move(&pos, code, "candidate move16").map_err(at)?;
                if policy.iter().any(|&(c, _)| c == cand) {
                    return Err(at(format!("candidate {} is listed twice", cand.to_usi())));
                }
                policy.push((cand, visits as f32 / total as f32));
            }
            samples.push(Sample {
                position: PackedPosition::pack(&pos).map_err(|e| at(e.to_string()))?,
                played: Some(played),
                policy,
                root_wdl: eval_to_wdl(m.eval as f64, eval_scale),
                result: result_for(pos.side_to_move(), winner),
                ply: ply as u16,
                flags: flags::FULL_SEARCH,
            });
        }
        pos.do_move(played);
        moves.push(played);
    }
    Ok(GameSamples {
        start_sfen,
        result: end_of(winner, flag, &pos),
        length: moves.len() as u16,
        model: source.to_string(),
        moves,
        samples,
        root_values: Vec::new(),
    })
}

/// The `result` byte of a game result (the inverse of the import's reading where hcpe3 can say
/// it: repetition, perpetual check, declaration and the move limit are flagged; other endings
/// keep only the winner).
pub fn result_byte(result: GameResult) -> u8 {
    use result_bits::*;
    let winner = match result.winner {
        None => 0,
        Some(Color::Black) => BLACK_WIN,
        Some(Color::White) => WHITE_WIN,
    };
    winner
        | match result.reason {
            EndReason::Repetition | EndReason::PerpetualCheck => REPETITION,
            EndReason::Declaration => DECLARATION,
            EndReason::MaxMoves => MAX_MOVES,
            _ => 0,
        }
}

/// A policy target as hcpe3 candidates: each weight scaled to a total of 65535 visits (the
/// resolution of a shard's u16 weights; shards keep proportions, not counts), rounded, and at
/// least 1, so that a candidate whose share rounded to 0 in the shard (under 1/131070) stays a
/// candidate. Empty when no weight is positive.
pub fn policy_to_visits(policy: &[(Move, f32)]) -> Vec<(u16, u16)> {
    let total: f32 = policy.iter().map(|&(_, w)| if w > 0.0 { w } else { 0.0 }).sum();
    if !(total > 0.0 && total.is_finite()) {
        return Vec::new();
    }
    policy.iter().map(|&(m, w)| (move_to_move16(m), ((w.max(0.0) / total * 65535.0).round() as u16).max(1))).collect()
}

fn eval_of(sample: &Sample, eval_scale: f64) -> i16 {
    wdl_to_eval(sample.root_wdl, eval_scale).unwrap_or(0)
}

/// What exporting one game left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GameExport {
    /// Moves written with candidates (training positions).
    pub positions: usize,
    /// Samples that could not be written, with why.
    pub skipped: Vec<(usize, String)>,
}

/// The hcpe3 game of a shard's game: its start and moves, with candidates at the moves that
/// have a sample (the sample's policy as visits, its root value as `eval`). `samples` are the
/// game's samples, `first` the shard index of the first (for messages). A sample without a move
/// (a resigning player's last search) or whose move is not the game's at its ply is skipped.
pub fn game_to_hcpe3(
    info: &GameInfo,
    samples: &[Sample],
    first: usize,
    eval_scale: f64,
) -> Result<(Hcpe3Game, GameExport), String> {
    let start = Position::from_sfen(&info.start_sfen).map_err(|e| format!("start {:?}: {e}", info.start_sfen))?;
    let hcp = encode_hcp(&start).map_err(|e| e.to_string())?;
    let mut moves: Vec<Hcpe3Move> = info
        .moves
        .iter()
        .map(|&m| Hcpe3Move { selected_move16: move_to_move16(m), eval: 0, candidates: Vec::new() })
        .collect();
    let mut export = GameExport::default();
    for (k, s) in samples.iter().enumerate() {
        let ply = s.ply as usize;
        let fits = s.played.is_some() && info.moves.get(ply).copied() == s.played;
        let candidates = policy_to_visits(&s.policy);
        if !fits {
            let why = if s.played.is_none() {
                "no move was played from it (hcpe3 records only positions with a move)".to_string()
            } else {
                format!("its move is not the game's move at ply {ply}")
            };
            export.skipped.push((first + k, why));
        } else if candidates.is_empty() {
            export.skipped.push((first + k, "no policy target".into()));
        } else {
            let m = &mut moves[ply];
            m.eval = eval_of(s, eval_scale);
            m.candidates = candidates;
            export.positions += 1;
        }
    }
    Ok((Hcpe3Game { hcp, result: result_byte(info.result), opponent: 0, moves }, export))
}

/// A sample without a game (hcpe imports) as a one-move hcpe3 game: its position, the move
/// played (else the policy's largest entry) with the policy as candidates (else the move, one
/// visit), its root value as `eval`, and a result byte that gives it its result.
pub fn sample_to_hcpe3(sample: &Sample, eval_scale: f64) -> Result<Hcpe3Game, String> {
    let pos = sample.position.unpack().map_err(|e| e.to_string())?;
    let hcp = encode_hcp(&pos).map_err(|e| e.to_string())?;
    let best = sample
        .played
        .or_else(|| sample.policy.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1)).map(|(m, _)| m))
        .ok_or("no move and no policy target")?;
    let mut candidates = policy_to_visits(&sample.policy);
    if candidates.is_empty() {
        candidates.push((move_to_move16(best), 1));
    }
    let us = pos.side_to_move();
    let winner = match sample.result {
        1 => Some(us),
        -1 => Some(!us),
        _ => None,
    };
    Ok(Hcpe3Game {
        hcp,
        result: result_byte(GameResult { winner, reason: EndReason::Resignation }),
        opponent: 0,
        moves: vec![Hcpe3Move { selected_move16: move_to_move16(best), eval: eval_of(sample, eval_scale), candidates }],
    })
}

/// Writes hcpe3 games to `path` durably (`koma_base::durable`): the file appears whole when
/// [`Hcpe3Writer::finish`] succeeds; an error or a drop before that leaves no file and no temporary.
pub struct Hcpe3Writer {
    out: BufWriter<std::fs::File>,
    staged: StagedFile,
    pub games: usize,
}

impl Hcpe3Writer {
    pub fn create(path: &Path) -> Result<Hcpe3Writer, DurableError> {
        let staged = StagedFile::new(path);
        let out = BufWriter::new(staged.create()?);
        Ok(Hcpe3Writer { out, staged, games: 0 })
    }

    pub fn write(&mut self, game: &Hcpe3Game) -> Result<(), DurableError> {
        self.staged.check(Step::Write)?;
        game.write_to(&mut self.out).map_err(|e| self.staged.error(Step::Write, e))?;
        self.games += 1;
        Ok(())
    }

    pub fn finish(self) -> Result<usize, DurableError> {
        let Hcpe3Writer { out, staged, games } = self;
        staged.publish_buffered(out)?;
        Ok(games)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hcp::DLSHOGI_EVAL_SCALE;

    fn mv(usi: &str) -> u16 {
        move_to_move16(Move::from_usi(usi).unwrap())
    }

    /// A game from the start: 7g7f (random, no candidates), 3c3d (searched), 8h2b+ (searched),
    /// 3a2b (searched); Black won.
    fn sample_game() -> Hcpe3Game {
        let m = |usi: &str, eval: i16, candidates: &[(&str, u16)]| Hcpe3Move {
            selected_move16: mv(usi),
            eval,
            candidates: candidates.iter().map(|&(u, v)| (mv(u), v)).collect(),
        };
        Hcpe3Game {
            hcp: encode_hcp(&Position::startpos()).unwrap(),
            result: result_bits::BLACK_WIN,
            opponent: 0,
            moves: vec![
                m("7g7f", 0, &[]),
                m("3c3d", -120, &[("3c3d", 600), ("8c8d", 300), ("4a3b", 100)]),
                m("8h2b+", 250, &[("8h2b+", 7000), ("2g2f", 3)]),
                m("3a2b", 30000, &[("3a2b", 1)]),
            ],
        }
    }

    fn bytes_of(games: &[Hcpe3Game]) -> Vec<u8> {
        let mut out = Vec::new();
        for g in games {
            g.write_to(&mut out).unwrap();
        }
        out
    }

    fn read_all(bytes: &[u8]) -> (Vec<Hcpe3Game>, Option<Hcpe3ReadError>) {
        let mut r = Hcpe3Reader::new(bytes);
        let mut games = Vec::new();
        loop {
            match r.next_game() {
                Ok(Some((g, _))) => games.push(g),
                Ok(None) => return (games, None),
                Err(e) => return (games, Some(e)),
            }
        }
    }

    #[test]
    fn bytes_round_trip() {
        let g = sample_game();
        let bytes = bytes_of(&[g.clone(), g.clone()]);
        assert_eq!(bytes.len(), 2 * g.byte_len());
        assert_eq!(g.byte_len(), 36 + 4 * 6 + 6 * 4);
        let (games, err) = read_all(&bytes);
        assert!(err.is_none());
        assert_eq!(games, vec![g.clone(), g]);
        // The header layout: moveNum at 32, result at 34, opponent at 35.
        assert_eq!((&bytes[32..34], bytes[34], bytes[35]), (&[4u8, 0][..], 1, 0));
    }

    #[test]
    fn truncation_is_reported_with_game_and_offset() {
        let g = sample_game();
        let bytes = bytes_of(&[g.clone(), g.clone()]);
        let len = g.byte_len();
        for cut in [len + 10, len + 36 + 3, bytes.len() - 1] {
            let (games, err) = read_all(&bytes[..cut]);
            assert_eq!(games.len(), 1, "cut at {cut}");
            let msg = err.unwrap().to_string();
            assert!(msg.contains("game 2") && msg.contains(&format!("from byte {len}")), "{msg}");
            assert!(msg.contains("truncated") && msg.contains("1 complete games"), "{msg}");
        }
        let msg = read_all(&bytes[..len + 10]).1.unwrap().to_string();
        assert!(
            msg.contains("header at byte") && msg.contains("needs 36 bytes") && msg.contains("ends after 10"),
            "{msg}"
        );
        // A count no position has: the framing is lost.
        let mut bad = bytes.clone();
        bad[len + 36 + 4..len + 36 + 6].copy_from_slice(&1000u16.to_le_bytes());
        let msg = read_all(&bad).1.unwrap().to_string();
        assert!(msg.contains("candidateNum 1000") && msg.contains(&format!("byte {}", len + 40)), "{msg}");
    }

    #[test]
    fn games_replay_into_samples() {
        let g = hcpe3_to_game(&sample_game(), "hcpe3:x#1", DLSHOGI_EVAL_SCALE).unwrap();
        assert_eq!(g.moves.len(), 4);
        assert_eq!(g.result, GameResult { winner: Some(Color::Black), reason: EndReason::Resignation });
        assert_eq!(g.samples.len(), 3);
        let s = &g.samples[0];
        assert_eq!((s.ply, s.result, s.flags), (1, -1, flags::FULL_SEARCH));
        assert_eq!(s.played, Some(Move::from_usi("3c3d").unwrap()));
        let weights: Vec<f32> = s.policy.iter().map(|p| p.1).collect();
        assert_eq!(weights, vec![0.6, 0.3, 0.1]);
        assert!((s.root_wdl[0] - 1.0 / (1.0 + (120.0f32 / 756.0865).exp())).abs() < 1e-6);
        assert_eq!(g.samples[1].result, 1);
        assert!(g.samples[2].root_wdl[0] > 0.999_999);
    }

    #[test]
    fn bad_moves_and_results_are_refused_with_the_move() {
        let mut g = sample_game();
        g.moves[2].selected_move16 = mv("2b8h");
        let err = hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err();
        assert!(err.starts_with("move 3: selectedMove16") && err.contains("is illegal in"), "{err}");
        let mut g = sample_game();
        g.moves[1].candidates[2].0 = mv("5a4a");
        let err = hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err();
        assert!(err.starts_with("move 2: candidate move16") && err.contains("(5a4a) is illegal"), "{err}");
        let mut g = sample_game();
        g.moves[1].candidates[2].0 = mv("3c3d");
        assert!(hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err().contains("listed twice"));
        let mut g = sample_game();
        g.moves[1].candidates.iter_mut().for_each(|c| c.1 = 0);
        assert!(hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err().contains("0 visits"));
        let mut g = sample_game();
        g.moves[0].selected_move16 = 0x8000;
        assert!(hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err().contains("is not a move"));
        for bad in [3u8, 0x20, 0x83] {
            let g = Hcpe3Game { result: bad, ..sample_game() };
            assert!(hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err().contains("result"), "{bad:#x}");
        }
        let g = Hcpe3Game { hcp: [0xff; 32], ..sample_game() };
        assert!(hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap_err().starts_with("start position"));
    }

    #[test]
    fn result_bytes() {
        let end = |byte| {
            let g = Hcpe3Game { result: byte, ..sample_game() };
            hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap().result
        };
        let r = |winner, reason| GameResult { winner, reason };
        assert_eq!(end(0x16), r(None, EndReason::MaxMoves)); // dlshogi's self-play move limit
        assert_eq!(end(0x10), r(None, EndReason::MaxMoves));
        assert_eq!(end(0x04), r(None, EndReason::Repetition));
        assert_eq!(end(0x06), r(Some(Color::White), EndReason::PerpetualCheck));
        assert_eq!(end(0x09), r(Some(Color::Black), EndReason::Declaration));
        assert_eq!(end(0x00), r(None, EndReason::Abort));
        for result in [
            r(None, EndReason::MaxMoves),
            r(None, EndReason::Repetition),
            r(Some(Color::White), EndReason::PerpetualCheck),
            r(Some(Color::Black), EndReason::Declaration),
            r(Some(Color::Black), EndReason::Resignation),
        ] {
            assert_eq!(end(result_byte(result)), result);
        }
        // A checkmate is recognised from the final position.
        let mut g = sample_game();
        g.moves.truncate(0);
        g.hcp = encode_hcp(&Position::from_sfen("4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1").unwrap()).unwrap();
        assert_eq!(
            hcpe3_to_game(&g, "", DLSHOGI_EVAL_SCALE).unwrap().result,
            r(Some(Color::Black), EndReason::Checkmate)
        );
    }

    #[test]
    fn game_export_round_trip() {
        let original = sample_game();
        let game = hcpe3_to_game(&original, "src", DLSHOGI_EVAL_SCALE).unwrap();
        let info = GameInfo {
            start_sfen: game.start_sfen.clone(),
            result: game.result,
            length: game.length,
            model: game.model.clone(),
            moves: game.moves.clone(),
            samples: 0..game.samples.len(),
        };
        let (back, export) = game_to_hcpe3(&info, &game.samples, 0, DLSHOGI_EVAL_SCALE).unwrap();
        assert_eq!((export.positions, export.skipped.len()), (3, 0));
        assert_eq!((back.hcp, back.result, back.opponent), (original.hcp, original.result, 0));
        for (a, b) in back.moves.iter().zip(&original.moves) {
            assert_eq!(a.selected_move16, b.selected_move16);
            assert!((a.eval - b.eval).abs() <= 1 || b.eval.abs() == 30000, "{} vs {}", a.eval, b.eval);
            let ta: f64 = a.candidates.iter().map(|c| c.1 as f64).sum();
            let tb: f64 = b.candidates.iter().map(|c| c.1 as f64).sum();
            assert_eq!(a.candidates.len(), b.candidates.len());
            for (ca, cb) in a.candidates.iter().zip(&b.candidates) {
                assert_eq!(ca.0, cb.0);
                assert!((ca.1 as f64 / ta - cb.1 as f64 / tb).abs() < 2e-5);
            }
            assert!(a.candidates.iter().all(|c| c.1 > 0) && ta <= 65536.0);
        }
        // And again into samples: the same positions, moves and (to the weights' precision) policies.
        let again = hcpe3_to_game(&back, "src", DLSHOGI_EVAL_SCALE).unwrap();
        assert_eq!((again.start_sfen, again.moves, again.result), (game.start_sfen, game.moves, game.result));
        for (a, b) in again.samples.iter().zip(&game.samples) {
            assert_eq!((a.position, a.played, a.ply, a.result), (b.position, b.played, b.ply, b.result));
            for (pa, pb) in a.policy.iter().zip(&b.policy) {
                assert_eq!(pa.0, pb.0);
                assert!((pa.1 - pb.1).abs() < 2e-5);
            }
        }
        // A sample without a move played is skipped and named.
        let mut samples = game.samples.clone();
        samples[2].played = None;
        let (_, export) = game_to_hcpe3(&info, &samples, 10, DLSHOGI_EVAL_SCALE).unwrap();
        assert_eq!(export.positions, 2);
        assert_eq!(export.skipped[0].0, 12);
    }

    #[test]
    fn visits_scale_to_65535() {
        let m = |u: &str| Move::from_usi(u).unwrap();
        let v = policy_to_visits(&[(m("7g7f"), 0.5), (m("2g2f"), 0.5), (m("5i5h"), 0.0), (m("1g1f"), 1e-9)]);
        assert_eq!(v.iter().map(|c| c.1).collect::<Vec<_>>(), vec![32768, 32768, 1, 1]);
        assert!(policy_to_visits(&[(m("7g7f"), 0.0)]).is_empty());
    }
}
