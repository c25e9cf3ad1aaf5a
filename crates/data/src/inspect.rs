//! Looking at shards: [`shard_stats`] (what a data set holds, for `koma data stats`) and
//! [`verify_shard`] (everything a reader relies on, for `koma data verify`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdf5::types::VarLenUnicode;
use koma_shogi::record::result_is_consistent;
use koma_shogi::{Color, GameResult, Move, Position};
use serde::Serialize;

use crate::calibration::{Calibration, CalibrationSums};
use crate::error::{DataError, Result};
use crate::packed::{PackedPosition, PACKED_BYTES, PACKED_ENCODING};
use crate::sample::{
    end_reason_from_code, end_reason_name, flags, result_for, winner_from_code, RootValues, PLY_UNKNOWN,
};
use crate::shard::{ShardReader, MOVE_ENCODING};

/// Every `.h5` file under the given files and directories (recursively, sorted).
pub fn list_shards(inputs: &[PathBuf]) -> Result<Vec<PathBuf>> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
        let io = |source| DataError::Io { path: dir.to_path_buf(), source };
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<_>>()
            .map_err(io)?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|e| e == "h5") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input).map_err(|source| DataError::Io { path: input.clone(), source })?;
        if meta.is_dir() {
            walk(input, &mut out)?;
        } else {
            out.push(input.clone());
        }
    }
    Ok(out)
}

/// All datasets of a shard, read whole.
pub struct RawShard {
    pub position: Vec<[u8; PACKED_BYTES]>,
    pub moves: Vec<u16>,
    pub root_wdl: Vec<[f32; 3]>,
    pub result: Vec<i8>,
    pub ply: Vec<u16>,
    pub flags: Vec<u8>,
    pub game: Vec<u32>,
    pub policy_offsets: Vec<u32>,
    pub policy_move: Vec<u16>,
    pub policy_weight: Vec<u16>,
    pub game_start: Vec<String>,
    pub game_model: Vec<String>,
    pub game_winner: Vec<i8>,
    pub game_end: Vec<u8>,
    pub game_length: Vec<u16>,
    pub game_first_sample: Vec<u32>,
    pub game_move_offsets: Vec<u32>,
    pub game_moves: Vec<u16>,
    /// Root value estimates per sample (`ROOT_VALUE_NAMES`), when the shard has them.
    pub root_values: Option<Vec<RootValues>>,
}

impl RawShard {
    pub fn read(reader: &ShardReader) -> Result<RawShard> {
        let strings = |name: &str| -> Result<Vec<String>> {
            Ok(reader.dataset_raw::<VarLenUnicode>(name)?.iter().map(|s| s.as_str().to_string()).collect())
        };
        Ok(RawShard {
            position: reader.dataset_raw("position")?,
            moves: reader.dataset_raw("move")?,
            root_wdl: reader.dataset_raw("root_wdl")?,
            result: reader.dataset_raw("result")?,
            ply: reader.dataset_raw("ply")?,
            flags: reader.dataset_raw("flags")?,
            game: reader.dataset_raw("game")?,
            policy_offsets: reader.dataset_raw("policy_offsets")?,
            policy_move: reader.dataset_raw("policy_move")?,
            policy_weight: reader.dataset_raw("policy_weight")?,
            game_start: strings("game_start")?,
            game_model: strings("game_model")?,
            game_winner: reader.dataset_raw("game_winner")?,
            game_end: reader.dataset_raw("game_end")?,
            game_length: reader.dataset_raw("game_length")?,
            game_first_sample: reader.dataset_raw("game_first_sample")?,
            game_move_offsets: reader.dataset_raw("game_move_offsets")?,
            game_moves: reader.dataset_raw("game_moves")?,
            root_values: reader.root_values()?,
        })
    }

    pub fn samples(&self) -> usize {
        self.position.len()
    }

    /// Games, pseudo-games (hcpe chunks, empty start) included.
    pub fn games(&self) -> usize {
        self.game_start.len()
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Winners {
    pub black: u64,
    pub white: u64,
    pub draw: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Outcomes {
    pub win: u64,
    pub draw: u64,
    pub loss: u64,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub min: u64,
    pub max: u64,
    pub mean: f64,
    pub p10: u64,
    pub median: u64,
    pub p90: u64,
    /// (from, to exclusive, count) in equal bins (20 wide, wider for long games).
    pub histogram: Vec<(u64, u64, u64)>,
}

impl Distribution {
    fn of(mut values: Vec<u64>, bin: u64) -> Distribution {
        if values.is_empty() {
            return Distribution::default();
        }
        values.sort_unstable();
        let n = values.len();
        let q = |f: f64| values[((n - 1) as f64 * f).round() as usize];
        let max = values[n - 1];
        // At most about 25 bins: widen them (to a multiple of 10) for long games.
        let bin = bin.max(((max + 1).div_ceil(25)).div_ceil(10) * 10);
        let mut histogram = Vec::new();
        let mut from = 0;
        while from <= max {
            let to = from + bin;
            let count = (values.partition_point(|&v| v < to) - values.partition_point(|&v| v < from)) as u64;
            histogram.push((from, to, count));
            from = to;
        }
        Distribution {
            count: n as u64,
            min: values[0],
            max,
            mean: values.iter().sum::<u64>() as f64 / n as f64,
            p10: q(0.1),
            median: q(0.5),
            p90: q(0.9),
            histogram,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PolicyStats {
    pub entries: u64,
    pub mean_per_sample: f64,
    pub max_per_sample: u64,
    pub samples_without_policy: u64,
}

/// What a set of shards holds.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ShardStats {
    pub shards: usize,
    /// Shards that could not be read (path: error); they are left out of every figure.
    pub unreadable: Vec<String>,
    pub bytes: u64,
    pub samples: u64,
    pub bytes_per_sample: f64,
    /// Games (pseudo-games of hcpe records not included).
    pub games: u64,
    /// Pseudo-games: chunks of hcpe records (no game structure).
    pub position_sets: u64,
    pub winners: Winners,
    /// Games by how they ended.
    pub end_reasons: BTreeMap<String, u64>,
    /// Game lengths in plies.
    pub game_length: Distribution,
    /// Sample results for the side to move.
    pub sample_results: Outcomes,
    pub samples_black_to_move: u64,
    pub samples_with_move: u64,
    pub samples_with_root_value: u64,
    pub samples_ply_unknown: u64,
    pub full_search: u64,
    pub no_resign: u64,
    pub imported: u64,
    pub policy: PolicyStats,
    /// The value estimates against the results (`None` without any value estimate).
    pub calibration: Option<Calibration>,
    #[serde(skip)]
    calibration_sums: CalibrationSums,
    /// Policy-target mass per (move code, side to move), indexed `move + 65536 · colour`.
    #[serde(skip)]
    pub move_mass: Vec<f64>,
}

impl ShardStats {
    fn add(&mut self, raw: &RawShard, bytes: u64, lengths: &mut Vec<u64>) {
        self.shards += 1;
        self.bytes += bytes;
        let n = raw.samples();
        self.samples += n as u64;
        if self.move_mass.is_empty() {
            self.move_mass = vec![0.0; 2 * 65536];
        }
        for g in 0..raw.games() {
            if raw.game_start[g].is_empty() {
                self.position_sets += 1;
                continue;
            }
            self.games += 1;
            match winner_from_code(raw.game_winner[g]) {
                Some(Color::Black) => self.winners.black += 1,
                Some(Color::White) => self.winners.white += 1,
                None => self.winners.draw += 1,
            }
            let reason = end_reason_from_code(raw.game_end[g]).map_or("unknown", end_reason_name);
            *self.end_reasons.entry(reason.to_string()).or_default() += 1;
            lengths.push(raw.game_length[g] as u64);
        }
        let mut max_entries = self.policy.max_per_sample;
        for i in 0..n {
            match raw.result[i] {
                1 => self.sample_results.win += 1,
                -1 => self.sample_results.loss += 1,
                _ => self.sample_results.draw += 1,
            }
            let white = raw.position[i][0] & 1;
            if white == 0 {
                self.samples_black_to_move += 1;
            }
            self.samples_with_move += (raw.moves[i] != 0) as u64;
            let wdl = raw.root_wdl[i];
            self.samples_with_root_value += (wdl.iter().sum::<f32>() > 0.0) as u64;
            self.samples_ply_unknown += (raw.ply[i] == PLY_UNKNOWN) as u64;
            self.calibration_sums.add(raw.ply[i], raw.result[i], wdl, raw.root_values.as_ref().map(|v| &v[i]));
            let f = raw.flags[i];
            self.full_search += (f & flags::FULL_SEARCH != 0) as u64;
            self.no_resign += (f & flags::NO_RESIGN != 0) as u64;
            self.imported += (f & flags::IMPORTED != 0) as u64;
            let (a, b) = (raw.policy_offsets[i] as usize, raw.policy_offsets[i + 1] as usize);
            let k = (b - a) as u64;
            self.policy.entries += k;
            max_entries = max_entries.max(k);
            let total: f64 = raw.policy_weight[a..b].iter().map(|&w| w as f64).sum();
            if k == 0 || total <= 0.0 {
                self.policy.samples_without_policy += 1;
                continue;
            }
            for j in a..b {
                self.move_mass[raw.policy_move[j] as usize + 65536 * white as usize] +=
                    raw.policy_weight[j] as f64 / total;
            }
        }
        self.policy.max_per_sample = max_entries;
    }

    /// The policy mass by move and side to move, largest first.
    pub fn moves_by_mass(&self) -> Vec<(Move, Color, f64)> {
        let mut out: Vec<(Move, Color, f64)> = self
            .move_mass
            .iter()
            .enumerate()
            .filter(|(_, &m)| m > 0.0)
            .filter_map(|(k, &m)| {
                let color = if k >= 65536 { Color::White } else { Color::Black };
                Move::from_u16((k % 65536) as u16).map(|mv| (mv, color, m))
            })
            .collect();
        out.sort_by(|a, b| b.2.total_cmp(&a.2));
        out
    }
}

/// Statistics over the shards; unreadable shards are listed and left out. `progress` gets the
/// samples of each shard read.
pub fn shard_stats(paths: &[PathBuf], progress: &mut dyn FnMut(&Path, usize)) -> ShardStats {
    let mut stats = ShardStats::default();
    let mut lengths = Vec::new();
    for path in paths {
        let read = ShardReader::open(path)
            .and_then(|r| RawShard::read(&r).and_then(|raw| check_lengths(path, &raw).map(|()| raw)));
        match read {
            Ok(raw) => {
                let bytes = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
                stats.add(&raw, bytes, &mut lengths);
                progress(path, raw.samples());
            }
            Err(e) => {
                stats.unreadable.push(e.to_string());
                progress(path, 0);
            }
        }
    }
    stats.bytes_per_sample = if stats.samples > 0 { stats.bytes as f64 / stats.samples as f64 } else { 0.0 };
    stats.policy.mean_per_sample =
        if stats.samples > 0 { stats.policy.entries as f64 / stats.samples as f64 } else { 0.0 };
    stats.game_length = Distribution::of(lengths, 20);
    stats.calibration = stats.calibration_sums.finish();
    stats
}

/// Dataset lengths agree (what every use of a [`RawShard`] indexes by).
fn check_lengths(path: &Path, raw: &RawShard) -> Result<()> {
    let n = raw.samples();
    let g = raw.games();
    let bad = |what: String| Err(DataError::Inconsistent { path: path.to_path_buf(), what });
    for (name, len) in [
        ("move", raw.moves.len()),
        ("root_wdl", raw.root_wdl.len()),
        ("result", raw.result.len()),
        ("ply", raw.ply.len()),
        ("flags", raw.flags.len()),
        ("game", raw.game.len()),
    ] {
        if len != n {
            return bad(format!("{name} has {len} rows, position has {n}"));
        }
    }
    if raw.policy_offsets.len() != n + 1 {
        return bad(format!("policy_offsets has {} rows, expected {}", raw.policy_offsets.len(), n + 1));
    }
    if raw.policy_offsets[0] != 0
        || raw.policy_offsets.windows(2).any(|w| w[0] > w[1])
        || raw.policy_offsets[n] as usize != raw.policy_move.len()
        || raw.policy_weight.len() != raw.policy_move.len()
    {
        return bad(format!(
            "policy CSR: offsets run {}..{} (non-decreasing?) for {} moves and {} weights",
            raw.policy_offsets[0],
            raw.policy_offsets[n],
            raw.policy_move.len(),
            raw.policy_weight.len()
        ));
    }
    for (name, len) in [
        ("game_model", raw.game_model.len()),
        ("game_winner", raw.game_winner.len()),
        ("game_end", raw.game_end.len()),
        ("game_length", raw.game_length.len()),
    ] {
        if len != g {
            return bad(format!("{name} has {len} rows, game_start has {g}"));
        }
    }
    let csr_ok = |v: &[u32], end: usize| {
        v.len() == g + 1 && v[0] == 0 && v.windows(2).all(|w| w[0] <= w[1]) && v[g] as usize == end
    };
    if !csr_ok(&raw.game_first_sample, n) {
        return bad(format!("game_first_sample is not a CSR index of {n} samples over {g} games"));
    }
    if !csr_ok(&raw.game_move_offsets, raw.game_moves.len()) {
        return bad(format!("game_move_offsets is not a CSR index of {} moves over {g} games", raw.game_moves.len()));
    }
    Ok(())
}

/// The outcome of [`verify_shard`].
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ShardCheck {
    pub path: PathBuf,
    pub samples: usize,
    pub games: usize,
    /// The first problems found (at most [`MAX_PROBLEMS_LISTED`]).
    pub problems: Vec<String>,
    pub problem_count: usize,
}

impl ShardCheck {
    pub fn is_ok(&self) -> bool {
        self.problem_count == 0
    }

    fn problem(&mut self, what: String) {
        self.problem_count += 1;
        if self.problems.len() < MAX_PROBLEMS_LISTED {
            self.problems.push(what);
        }
    }
}

pub const MAX_PROBLEMS_LISTED: usize = 20;

/// Checks a shard: its attributes and every dataset, the CSR indices, that every position unpacks
/// and every move (played, policy, game) is legal where it is played, that samples agree with
/// their game (position at their ply, move played, result for the side to move), and that each
/// game's result is consistent.
pub fn verify_shard(path: &Path) -> ShardCheck {
    let mut check = ShardCheck { path: path.to_path_buf(), ..ShardCheck::default() };
    let reader = match ShardReader::open(path) {
        Ok(r) => r,
        Err(e) => {
            check.problem(e.to_string());
            return check;
        }
    };
    for (name, expected) in [("position_encoding", PACKED_ENCODING), ("move_encoding", MOVE_ENCODING)] {
        match reader.attr_string(name) {
            Some(v) if v == expected => {}
            other => check.problem(format!("attribute {name} is {other:?}, expected {expected:?}")),
        }
    }
    let raw = match RawShard::read(&reader).and_then(|raw| check_lengths(path, &raw).map(|()| raw)) {
        Ok(raw) => raw,
        Err(e) => {
            check.problem(e.to_string());
            return check;
        }
    };
    check.samples = raw.samples();
    check.games = raw.games();
    let n = raw.samples();

    // Games: result codes, consistency, and every move replayed from the start.
    let mut replays: Vec<Option<Vec<PackedPosition>>> = Vec::with_capacity(raw.games());
    let mut results: Vec<Option<GameResult>> = Vec::with_capacity(raw.games());
    for g in 0..raw.games() {
        let moves = &raw.game_moves[raw.game_move_offsets[g] as usize..raw.game_move_offsets[g + 1] as usize];
        let samples = raw.game_first_sample[g] as usize..raw.game_first_sample[g + 1] as usize;
        for i in samples.clone() {
            if raw.game[i] as usize != g {
                check.problem(format!("sample {i}: game {} but game_first_sample puts it in game {g}", raw.game[i]));
            }
        }
        let reason = end_reason_from_code(raw.game_end[g]);
        let winner = match raw.game_winner[g] {
            0 => Some(None),
            c => winner_from_code(c).map(Some),
        };
        let (Some(reason), Some(winner)) = (reason, winner) else {
            check.problem(format!("game {g}: winner code {} / end code {}", raw.game_winner[g], raw.game_end[g]));
            replays.push(None);
            results.push(None);
            continue;
        };
        let result = GameResult { winner, reason };
        if raw.game_start[g].is_empty() {
            // A pseudo-game (hcpe records): no start, no moves.
            if !moves.is_empty() || raw.game_length[g] != 0 {
                check.problem(format!("game {g}: no start position but {} moves", moves.len()));
            }
            replays.push(None);
            results.push(None);
            continue;
        }
        if !result_is_consistent(result) {
            check.problem(format!("game {g}: winner {winner:?} does not fit the end {}", end_reason_name(reason)));
        }
        if raw.game_length[g] as usize != moves.len() {
            check.problem(format!("game {g}: game_length {} but {} moves", raw.game_length[g], moves.len()));
        }
        let mut pos = match Position::from_sfen(&raw.game_start[g]) {
            Ok(p) => p,
            Err(e) => {
                check.problem(format!("game {g}: start position {:?}: {e}", raw.game_start[g]));
                replays.push(None);
                results.push(None);
                continue;
            }
        };
        let mut packed = Vec::with_capacity(moves.len() + 1);
        let mut ok = true;
        for (k, &code) in moves.iter().enumerate() {
            packed.push(PackedPosition::pack(&pos).ok());
            match Move::from_u16(code).filter(|&m| pos.is_legal(m)) {
                Some(m) => pos.do_move(m),
                None => {
                    check.problem(format!(
                        "game {g}: move {} (code {code:#06x}) is illegal in {}",
                        k + 1,
                        pos.to_sfen()
                    ));
                    ok = false;
                    break;
                }
            }
        }
        packed.push(PackedPosition::pack(&pos).ok());
        replays.push(ok.then(|| packed.into_iter().map(|p| p.unwrap_or(PackedPosition([0; PACKED_BYTES]))).collect()));
        results.push(Some(result));
    }

    // Samples.
    for i in 0..n {
        let pos = match PackedPosition(raw.position[i]).unpack() {
            Ok(p) => p,
            Err(e) => {
                check.problem(format!("sample {i}: position: {e}"));
                continue;
            }
        };
        let legal = |code: u16| Move::from_u16(code).filter(|&m| pos.is_legal(m));
        if !(-1..=1).contains(&raw.result[i]) {
            check.problem(format!("sample {i}: result {}", raw.result[i]));
        }
        let wdl = raw.root_wdl[i];
        let sum: f32 = wdl.iter().sum();
        if wdl.iter().any(|x| !x.is_finite() || *x < 0.0) || (sum != 0.0 && (sum - 1.0).abs() > 1e-3) {
            check.problem(format!("sample {i}: root_wdl {wdl:?} is not a distribution (nor all zero)"));
        }
        if raw.moves[i] != 0 && legal(raw.moves[i]).is_none() {
            check.problem(format!("sample {i}: move (code {:#06x}) is illegal in {}", raw.moves[i], pos.to_sfen()));
        }
        let (a, b) = (raw.policy_offsets[i] as usize, raw.policy_offsets[i + 1] as usize);
        for j in a..b {
            if legal(raw.policy_move[j]).is_none() {
                check.problem(format!(
                    "sample {i}: policy move (code {:#06x}) is illegal in {}",
                    raw.policy_move[j],
                    pos.to_sfen()
                ));
                break;
            }
        }
        if b > a && raw.policy_weight[a..b].iter().all(|&w| w == 0) {
            check.problem(format!("sample {i}: policy weights are all zero"));
        }
        let g = raw.game[i] as usize;
        let (Some(Some(replay)), Some(Some(result))) = (replays.get(g), results.get(g)) else { continue };
        let ply = raw.ply[i] as usize;
        if ply >= replay.len() {
            check.problem(format!("sample {i}: ply {ply} is beyond game {g} ({} plies)", replay.len() - 1));
            continue;
        }
        if replay[ply] != PackedPosition(raw.position[i]) {
            check.problem(format!("sample {i}: position {} is not game {g}'s position at ply {ply}", pos.to_sfen()));
        }
        let game_move =
            raw.game_moves.get(raw.game_move_offsets[g] as usize + ply).copied().filter(|_| ply + 1 < replay.len());
        if raw.moves[i] != 0 && Some(raw.moves[i]) != game_move {
            check.problem(format!("sample {i}: move played is not game {g}'s move at ply {ply}"));
        }
        if raw.result[i] != result_for(pos.side_to_move(), result.winner) {
            check.problem(format!("sample {i}: result {} but game {g} was won by {:?}", raw.result[i], result.winner));
        }
    }
    check
}
