//! Matches: games in colour-swapped pairs from the same opening, several at once, results
//! appended to a JSONL file as they finish, live statistics, and an optional SPRT that stops the
//! match early.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam::channel::unbounded;
use koma_shogi::record::kif::write_kif;
use koma_shogi::record::GameRecord;
use koma_shogi::rules::GameRules;
use koma_shogi::{Color, Position};
use serde_json::json;

use crate::error::{BoxError, MatchError};
use crate::game::{play_game, PlayedGame, Unfinished};
use crate::player::Player;
use crate::stats::{EloEstimate, Pentanomial, Sprt, SprtDecision, Trinomial};

/// Makes a fresh player for a worker thread (each thread plays with its own instances).
pub type PlayerFactory = Arc<dyn Fn(u64) -> Result<Box<dyn Player>, BoxError> + Send + Sync>;

#[derive(Clone)]
pub struct MatchConfig {
    /// Games to play (rounded up to whole pairs).
    pub games: usize,
    pub concurrency: usize,
    pub rules: GameRules,
    pub openings: Vec<Position>,
    pub sprt: Option<Sprt>,
    /// JSONL file the results are appended to, one whole line per game.
    pub results: Option<PathBuf>,
    /// Directory each game is saved to as UTF-8 KIF (`BLACK-vs-WHITE-pair-NNNNN.kifu`).
    pub records: Option<PathBuf>,
    /// Set to end the match early: games in progress are dropped unscored (within a move, or a
    /// search batch), no new ones start.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// One finished game of the match.
#[derive(Clone, Debug)]
pub struct MatchGame {
    pub pair: usize,
    /// True when player A had Black.
    pub a_black: bool,
    pub opening: usize,
    pub game: PlayedGame,
}

impl MatchGame {
    /// Player A's points.
    pub fn a_points(&self) -> f64 {
        let a_color = if self.a_black { Color::Black } else { Color::White };
        match self.game.result.winner {
            None => 0.5,
            Some(w) if w == a_color => 1.0,
            Some(_) => 0.0,
        }
    }
}

/// Running totals, from player A's side.
#[derive(Clone, Debug, Default)]
pub struct MatchState {
    pub a_name: String,
    pub b_name: String,
    pub wins: usize,
    pub draws: usize,
    pub losses: usize,
    /// A's points as Black and as White, and games with each colour.
    pub by_colour: [(f64, usize); 2],
    pub penta: Pentanomial,
    pub games: Trinomial,
    pub llr: Option<f64>,
    pub decision: Option<SprtDecision>,
    pub played: usize,
    pub planned: usize,
}

impl MatchState {
    pub fn score(&self) -> f64 {
        let n = self.wins + self.draws + self.losses;
        if n == 0 {
            0.5
        } else {
            (self.wins as f64 + 0.5 * self.draws as f64) / n as f64
        }
    }

    /// Elo with a 95% interval: pentanomial once pairs are complete, else trinomial.
    pub fn elo(&self) -> Option<EloEstimate> {
        if self.penta.pairs() >= 2 {
            self.penta.elo()
        } else {
            self.games.elo()
        }
    }
}

/// Saves a game's KIF as `DIR/BLACK-vs-WHITE-pair-NNNNN.kifu` (`-2`, `-3`, … when that name is
/// taken: a self-match, or the same pairing in another match), written durably, never overwriting an
/// earlier game. The name is reserved by creating the file exclusively (`create_new`), so two
/// processes saving the same pairing at once take different names; the record then replaces the
/// empty file it reserved.
fn save_record(dir: &std::path::Path, g: &MatchGame, state: &MatchState, text: &str) -> Result<(), BoxError> {
    let (black, white) = if g.a_black { (&state.a_name, &state.b_name) } else { (&state.b_name, &state.a_name) };
    let safe = |name: &str| -> String {
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect()
    };
    let stem = format!("{}-vs-{}-pair-{:05}", safe(black), safe(white), g.pair);
    std::fs::create_dir_all(dir)?;
    let path = (1..)
        .map(|k| dir.join(if k == 1 { format!("{stem}.kifu") } else { format!("{stem}-{k}.kifu") }))
        .find_map(|p| match OpenOptions::new().write(true).create_new(true).open(&p) {
            Ok(_) => Some(Ok(p)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => None,
            Err(e) => Some(Err(e)),
        })
        .expect("some name is free")?;
    Ok(koma_base::durable::write(&path, text.as_bytes())?)
}

/// The game as a KIF record with player names and result.
fn kif_record(g: &MatchGame, a: &str, b: &str) -> Result<String, koma_shogi::record::WriteError> {
    let (black, white) = if g.a_black { (a, b) } else { (b, a) };
    let mut record = GameRecord::new(g.game.start.clone());
    for &m in &g.game.moves {
        record.push(m)?;
    }
    record.black = Some(black.to_string());
    record.white = Some(white.to_string());
    record.result = Some(g.game.result);
    write_kif(&record)
}

/// Opens the results file for appending. Bytes after its last newline are a line torn by a kill
/// or a full disk; they are cut off (with a warning), so that the next line starts clean. The cut
/// and every append hold an exclusive lock on the file ([`append_line`]), so a process opening the
/// file never cuts a line another process is writing into the same file.
fn open_results(path: &Path) -> Result<File, MatchError> {
    let failed = |source: std::io::Error| MatchError::Results { action: "opening", path: path.into(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|source| MatchError::Results {
            action: "creating",
            path: dir.into(),
            source,
        })?;
    }
    let mut file = OpenOptions::new().create(true).read(true).append(true).open(path).map_err(failed)?;
    file.lock().map_err(failed)?;
    let cut = (|| {
        let len = file.metadata()?.len();
        let whole_lines = end_of_last_line(&mut file, len)?;
        if whole_lines < len {
            tracing::warn!(
                "{}: cutting off a torn last line ({} bytes without a newline, left by a kill or a full disk)",
                path.display(),
                len - whole_lines
            );
            file.set_len(whole_lines)?;
        }
        Ok(())
    })();
    let unlocked = file.unlock();
    cut.and(unlocked).map_err(failed)?;
    Ok(file)
}

/// Appends `line` in one write under an exclusive lock: processes appending to one results file
/// (two matches of a run, an arena beside the pipeline) never interleave or cut each other's
/// lines.
fn append_line(file: &mut File, line: &str) -> std::io::Result<()> {
    file.lock()?;
    let written = file.write_all(line.as_bytes());
    let unlocked = file.unlock();
    written.and(unlocked)
}

/// Where the last newline of `file` (`len` bytes) ends; 0 when it has none. Reads backwards, so a
/// long results file costs only its tail.
fn end_of_last_line(file: &mut File, len: u64) -> std::io::Result<u64> {
    let mut buffer = [0u8; 4096];
    let mut end = len;
    while end > 0 {
        let start = end.saturating_sub(buffer.len() as u64);
        let chunk = &mut buffer[..(end - start) as usize];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(chunk)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

fn result_line(g: &MatchGame, a: &str, b: &str) -> serde_json::Value {
    let (black, white) = if g.a_black { (a, b) } else { (b, a) };
    let moves: Vec<String> = g.game.moves.iter().map(|m| m.to_usi()).collect();
    json!({
        "pair": g.pair,
        "opening": g.opening,
        "black": black,
        "white": white,
        "winner": match g.game.result.winner { Some(Color::Black) => json!("black"), Some(Color::White) => json!("white"), None => json!(null) },
        "reason": format!("{:?}", g.game.result.reason),
        "plies": g.game.moves.len(),
        "start": g.game.start.to_sfen(),
        "moves": moves.join(" "),
        "note": g.game.note,
    })
}

/// Plays the match. `on_game` sees every finished game and the running state.
pub fn run_match(
    a: PlayerFactory,
    b: PlayerFactory,
    config: &MatchConfig,
    on_game: &mut dyn FnMut(&MatchGame, &MatchState),
) -> Result<MatchState, MatchError> {
    let probe_a = a(0).map_err(MatchError::Player)?;
    let probe_b = b(0).map_err(MatchError::Player)?;
    let mut state = MatchState { a_name: probe_a.name(), b_name: probe_b.name(), ..MatchState::default() };
    drop((probe_a, probe_b));
    let pairs = config.games.div_ceil(2).max(1);
    state.planned = pairs * 2;
    let openings = if config.openings.is_empty() { vec![Position::startpos()] } else { config.openings.clone() };
    let mut results_file = config.results.as_deref().map(open_results).transpose()?;
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let not_cancelled = AtomicBool::new(false);
    let cancel: &AtomicBool = config.cancel.as_deref().unwrap_or(&not_cancelled);
    let (sender, receiver) = unbounded::<Result<MatchGame, BoxError>>();
    let mut pending_pairs: std::collections::HashMap<usize, f64> = std::collections::HashMap::new();
    let mut failure = None;
    std::thread::scope(|scope| {
        for worker in 0..config.concurrency.max(1) {
            let (a, b, sender, next, stop, openings) = (a.clone(), b.clone(), sender.clone(), &next, &stop, &openings);
            let rules = config.rules;
            scope.spawn(move || {
                let players = a(worker as u64 + 1).and_then(|pa| b(worker as u64 + 1001).map(|pb| (pa, pb)));
                let (mut pa, mut pb) = match players {
                    Ok(p) => p,
                    Err(e) => {
                        let _ = sender.send(Err(e));
                        return;
                    }
                };
                loop {
                    if stop.load(Ordering::Relaxed) || cancel.load(Ordering::Relaxed) {
                        return;
                    }
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= pairs * 2 {
                        return;
                    }
                    let (pair, a_black) = (index / 2, index % 2 == 0);
                    let opening = pair % openings.len();
                    let start = &openings[opening];
                    let played = if a_black {
                        play_game(pa.as_mut(), pb.as_mut(), start, &rules, cancel)
                    } else {
                        play_game(pb.as_mut(), pa.as_mut(), start, &rules, cancel)
                    };
                    let message = match played {
                        Ok(game) => Ok(MatchGame { pair, a_black, opening, game }),
                        Err(Unfinished::Cancelled) => return,
                        Err(Unfinished::Failed(e)) => Err(e.into()),
                    };
                    let fatal = message.is_err();
                    if sender.send(message).is_err() || fatal {
                        return;
                    }
                }
            });
        }
        drop(sender);
        for message in receiver.iter() {
            let g = match message {
                Ok(g) => g,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    failure.get_or_insert(MatchError::Player(e));
                    continue;
                }
            };
            let points = g.a_points();
            if points == 1.0 {
                state.wins += 1;
            } else if points == 0.0 {
                state.losses += 1;
            } else {
                state.draws += 1;
            }
            let colour = if g.a_black { 0 } else { 1 };
            state.by_colour[colour].0 += points;
            state.by_colour[colour].1 += 1;
            state.games.add_game(points);
            if let Some(first) = pending_pairs.remove(&g.pair) {
                state.penta.add_pair(first + points);
            } else {
                pending_pairs.insert(g.pair, points);
            }
            state.played += 1;
            if let Some(sprt) = &config.sprt {
                let llr = state.penta.llr(sprt.elo0, sprt.elo1);
                state.llr = Some(llr);
                let decision = sprt.decide(llr);
                if decision != SprtDecision::Continue {
                    state.decision = Some(decision);
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if let Some(file) = results_file.as_mut() {
                // One write per line: a kill or a full disk can then tear only the last line, which
                // the next open cuts off and the reader skips.
                let mut line = result_line(&g, &state.a_name, &state.b_name).to_string();
                line.push('\n');
                if let Err(e) = append_line(file, &line) {
                    let path = config.results.clone().unwrap_or_else(|| "results".into());
                    failure.get_or_insert(MatchError::Results { action: "writing", path, source: e });
                    stop.store(true, Ordering::Relaxed);
                }
            }
            if let Some(dir) = &config.records {
                let written = kif_record(&g, &state.a_name, &state.b_name)
                    .map_err(BoxError::from)
                    .and_then(|text| save_record(dir, &g, &state, &text));
                if let Err(e) = written {
                    tracing::warn!("could not save a game record under {}: {e}", dir.display());
                }
            }
            on_game(&g, &state);
        }
    });
    match failure {
        Some(e) if state.played == 0 => Err(e),
        // The games played stay in the results file; the match itself failed.
        Some(e) => Err(MatchError::After { played: state.played, source: Box::new(e) }),
        None => Ok(state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A process that opens the results file while another is halfway through appending a line
    /// waits for that line instead of cutting it off as torn.
    #[test]
    fn opening_waits_for_a_line_being_appended_instead_of_cutting_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        std::fs::write(&path, "{\"game\":1}\n").unwrap();
        let mut writer = OpenOptions::new().append(true).open(&path).unwrap();
        writer.lock().unwrap();
        writer.write_all(b"{\"game\":").unwrap();
        let opener = {
            let path = path.clone();
            std::thread::spawn(move || open_results(&path).map(drop))
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!opener.is_finished(), "the opener did not wait for the lock");
        writer.write_all(b"2}\n").unwrap();
        writer.unlock().unwrap();
        opener.join().unwrap().unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"game\":1}\n{\"game\":2}\n");
    }

    /// Appends from several processes' worth of threads, each with its own handle, all land whole.
    #[test]
    fn concurrent_appends_keep_every_line_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let path = path.clone();
                std::thread::spawn(move || {
                    let mut file = open_results(&path).unwrap();
                    for i in 0..100 {
                        append_line(
                            &mut file,
                            &format!("{{\"thread\":{t},\"game\":{i},\"pad\":\"{}\"}}\n", "x".repeat(500)),
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 400);
        assert!(text.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));
    }
}
