//! HDF5 replay shards: one file per batch of finished games, struct-of-arrays with samples on
//! axis 0, sparse policies CSR-style, chunked with shuffle + gzip. The schema is documented in
//! docs/data-format.md. Files are written under a temporary name and renamed when complete, so a
//! reader never sees half a shard.

use std::path::{Path, PathBuf};
use std::str::FromStr;

use hdf5::types::VarLenUnicode;
use koma_base::durable::{StagedFile, Step};
use koma_shogi::{GameResult, Move};
use ndarray::Array1;

use crate::error::{h5, DataError, Result};
use crate::packed::{PackedPosition, PACKED_BYTES, PACKED_ENCODING};
use crate::sample::{
    end_reason_code, end_reason_from_code, winner_code, winner_from_code, GameSamples, RootValues, Sample,
    ROOT_VALUE_NAMES,
};

pub const FORMAT: &str = "koma-replay";
pub const FORMAT_VERSION: u32 = 1;
pub const MOVE_ENCODING: &str = "koma-move16-v1";
/// Rows per chunk of the per-sample datasets: small chunks keep random access cheap.
const SAMPLE_CHUNK: usize = 128;
const POLICY_CHUNK: usize = 4096;
const DEFLATE_LEVEL: u8 = 4;

/// Per-sample datasets, all of length N.
const SAMPLE_DATASETS: [&str; 8] = ["position", "move", "root_wdl", "result", "ply", "flags", "game", "policy_offsets"];

fn write_array<T: hdf5::H5Type + Clone>(file: &hdf5::File, name: &str, data: &[T], chunk: usize) -> hdf5::Result<()> {
    let mut builder = file.new_dataset_builder();
    if !data.is_empty() {
        builder = builder.chunk(chunk.min(data.len())).shuffle().deflate(DEFLATE_LEVEL);
    }
    builder.with_data(&Array1::from_iter(data.iter().cloned())).create(name)?;
    Ok(())
}

fn write_strings(file: &hdf5::File, name: &str, data: &[String]) -> hdf5::Result<()> {
    let values: Vec<VarLenUnicode> = data
        .iter()
        .map(|s| VarLenUnicode::from_str(s).unwrap_or_else(|_| VarLenUnicode::from_str("").expect("empty string")))
        .collect();
    file.new_dataset_builder().with_data(&Array1::from(values)).create(name)?;
    Ok(())
}

fn write_attr_str(file: &hdf5::File, name: &str, value: &str) -> hdf5::Result<()> {
    let v = VarLenUnicode::from_str(value).map_err(|e| hdf5::Error::from(e.to_string()))?;
    file.new_attr::<VarLenUnicode>().shape(()).create(name)?.as_writer().write_scalar(&v)
}

/// Quantizes a policy's weights to u16 (they are renormalised when read).
fn quantize(weight: f32) -> u16 {
    (weight.clamp(0.0, 1.0) * 65535.0).round() as u16
}

/// Writes `games` to `path` durably (`koma_base::durable`: the old shard or the new one, never
/// part of one). Returns the sample count.
pub fn write_shard(path: &Path, games: &[GameSamples]) -> Result<usize> {
    write_shard_with(path, games, &[])
}

/// [`write_shard`] with string attributes of the file besides the format's own (self-play's
/// `selfplay_seed`, say).
pub fn write_shard_with(path: &Path, games: &[GameSamples], attributes: &[(String, String)]) -> Result<usize> {
    let staged = StagedFile::new(path);
    let tmp = staged.temporary();
    let n: usize = games.iter().map(|g| g.samples.len()).sum();
    let mut position = Vec::with_capacity(n);
    let mut moves = Vec::with_capacity(n);
    let mut root_wdl = Vec::with_capacity(n);
    let mut result = Vec::with_capacity(n);
    let mut ply = Vec::with_capacity(n);
    let mut flags = Vec::with_capacity(n);
    let mut game = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n + 1);
    let mut policy_move = Vec::new();
    let mut policy_weight = Vec::new();
    let mut first_sample = Vec::with_capacity(games.len() + 1);
    offsets.push(0u32);
    for (g, record) in games.iter().enumerate() {
        first_sample.push(position.len() as u32);
        for s in &record.samples {
            position.push(s.position.0);
            moves.push(s.played.map_or(0, Move::to_u16));
            root_wdl.push(s.root_wdl);
            result.push(s.result);
            ply.push(s.ply);
            flags.push(s.flags);
            game.push(g as u32);
            for &(m, w) in &s.policy {
                policy_move.push(m.to_u16());
                policy_weight.push(quantize(w));
            }
            offsets.push(policy_move.len() as u32);
        }
    }
    first_sample.push(position.len() as u32);
    let starts: Vec<String> = games.iter().map(|g| g.start_sfen.clone()).collect();
    let models: Vec<String> = games.iter().map(|g| g.model.clone()).collect();
    let winners: Vec<i8> = games.iter().map(|g| winner_code(g.result.winner)).collect();
    let ends: Vec<u8> = games.iter().map(|g| end_reason_code(g.result.reason)).collect();
    let lengths: Vec<u16> = games.iter().map(|g| g.length).collect();
    // Root value estimates: a row per sample, NaN for the samples of games without them.
    let root_values: Vec<RootValues> = if games.iter().any(|g| !g.root_values.is_empty()) {
        games
            .iter()
            .flat_map(|g| {
                (0..g.samples.len())
                    .map(move |i| g.root_values.get(i).copied().unwrap_or([f32::NAN; ROOT_VALUE_NAMES.len()]))
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut move_offsets = vec![0u32];
    let mut game_moves = Vec::new();
    for g in games {
        game_moves.extend(g.moves.iter().map(|m| m.to_u16()));
        move_offsets.push(game_moves.len() as u32);
    }

    let write = || -> hdf5::Result<()> {
        let file = hdf5::File::create(tmp)?;
        write_attr_str(&file, "format", FORMAT)?;
        file.new_attr::<u32>().shape(()).create("format_version")?.as_writer().write_scalar(&FORMAT_VERSION)?;
        write_attr_str(&file, "position_encoding", PACKED_ENCODING)?;
        write_attr_str(&file, "move_encoding", MOVE_ENCODING)?;
        for (name, value) in attributes {
            write_attr_str(&file, name, value)?;
        }
        write_array(&file, "position", &position, SAMPLE_CHUNK)?;
        write_array(&file, "move", &moves, SAMPLE_CHUNK)?;
        write_array(&file, "root_wdl", &root_wdl, SAMPLE_CHUNK)?;
        write_array(&file, "result", &result, SAMPLE_CHUNK)?;
        write_array(&file, "ply", &ply, SAMPLE_CHUNK)?;
        write_array(&file, "flags", &flags, SAMPLE_CHUNK)?;
        write_array(&file, "game", &game, SAMPLE_CHUNK)?;
        write_array(&file, "policy_offsets", &offsets, SAMPLE_CHUNK)?;
        write_array(&file, "policy_move", &policy_move, POLICY_CHUNK)?;
        write_array(&file, "policy_weight", &policy_weight, POLICY_CHUNK)?;
        write_strings(&file, "game_start", &starts)?;
        write_strings(&file, "game_model", &models)?;
        write_array(&file, "game_winner", &winners, SAMPLE_CHUNK)?;
        write_array(&file, "game_end", &ends, SAMPLE_CHUNK)?;
        write_array(&file, "game_length", &lengths, SAMPLE_CHUNK)?;
        write_array(&file, "game_first_sample", &first_sample, SAMPLE_CHUNK)?;
        write_array(&file, "game_move_offsets", &move_offsets, SAMPLE_CHUNK)?;
        write_array(&file, "game_moves", &game_moves, POLICY_CHUNK)?;
        if !root_values.is_empty() {
            write_array(&file, "root_values", &root_values, SAMPLE_CHUNK)?;
        }
        file.flush()?;
        Ok(())
    };
    staged.check(Step::Create)?;
    staged.check(Step::Write)?;
    // A failure drops `staged`, which removes the temporary.
    write().map_err(h5(path))?;
    staged.publish()?;
    Ok(n)
}

/// Game-level metadata of one game in a shard.
#[derive(Clone, Debug, PartialEq)]
pub struct GameInfo {
    pub start_sfen: String,
    pub result: GameResult,
    pub length: u16,
    pub model: String,
    pub moves: Vec<Move>,
    /// Index of the game's first sample and one past its last.
    pub samples: std::ops::Range<usize>,
}

/// The datasets random reads touch, kept open so that their chunk caches (decompressed chunks)
/// last from one read to the next.
const READ_DATASETS: [&str; 9] =
    ["position", "move", "root_wdl", "result", "ply", "flags", "policy_move", "policy_weight", "game"];
/// Chunk cache per open dataset: enough for the whole of a typical self-play shard's datasets, so
/// that repeated random reads (the replay window) decompress each chunk once.
const CHUNK_CACHE_BYTES: usize = 4 << 20;
/// Hash slots of each chunk cache (a prime, as HDF5 advises): chunk k of a dataset takes slot
/// k mod 1031, so shards of up to 1031 chunks per dataset (131k samples) never collide. The slot
/// table is allocated at open, 8 bytes a slot per dataset: 10,007 slots cost 0.7 MiB per open
/// shard, which the replay window multiplies by the hundreds of shards it holds open.
const CHUNK_CACHE_SLOTS: usize = 1031;

/// An open, validated shard. Only the policy offsets are held in memory; samples are read on
/// demand (decompressed chunks stay in HDF5's chunk cache, up to 4 MiB per dataset).
pub struct ShardReader {
    path: PathBuf,
    file: hdf5::File,
    offsets: Vec<u32>,
    datasets: Vec<hdf5::Dataset>,
    /// Every game's moves (`game_move_offsets`, `game_moves`), read on the first
    /// [`ShardReader::continuations`] (2 bytes per move).
    game_moves: std::sync::OnceLock<(Vec<u32>, Vec<u16>)>,
}

/// The sample columns of a read, row k for the k-th sample asked for (policy entries in CSR order).
pub(crate) struct Columns {
    pub(crate) position: Vec<[u8; PACKED_BYTES]>,
    pub(crate) moves: Vec<u16>,
    pub(crate) root_wdl: Vec<[f32; 3]>,
    pub(crate) result: Vec<i8>,
    pub(crate) ply: Vec<u16>,
    pub(crate) flags: Vec<u8>,
    pub(crate) policy_move: Vec<u16>,
    pub(crate) policy_weight: Vec<u16>,
}

impl Columns {
    /// Rows `indices` (in that order) of columns that hold a whole shard, whose sample `i` has
    /// the policy entries `offsets[i]..offsets[i + 1]`.
    pub(crate) fn gather(&self, offsets: &[u32], indices: &[usize]) -> Columns {
        let entries: Vec<usize> = indices.iter().flat_map(|&i| offsets[i] as usize..offsets[i + 1] as usize).collect();
        Columns {
            position: indices.iter().map(|&i| self.position[i]).collect(),
            moves: indices.iter().map(|&i| self.moves[i]).collect(),
            root_wdl: indices.iter().map(|&i| self.root_wdl[i]).collect(),
            result: indices.iter().map(|&i| self.result[i]).collect(),
            ply: indices.iter().map(|&i| self.ply[i]).collect(),
            flags: indices.iter().map(|&i| self.flags[i]).collect(),
            policy_move: entries.iter().map(|&j| self.policy_move[j]).collect(),
            policy_weight: entries.iter().map(|&j| self.policy_weight[j]).collect(),
        }
    }

    /// Heap bytes the columns hold.
    pub(crate) fn bytes(&self) -> usize {
        self.position.capacity() * PACKED_BYTES
            + (self.moves.capacity() + self.ply.capacity()) * 2
            + self.root_wdl.capacity() * 12
            + self.result.capacity()
            + self.flags.capacity()
            + (self.policy_move.capacity() + self.policy_weight.capacity()) * 2
    }
}

impl ShardReader {
    pub fn open(path: &Path) -> Result<ShardReader> {
        let err = h5(path);
        let file = hdf5::File::with_options()
            .with_fapl(|p| p.chunk_cache(CHUNK_CACHE_SLOTS, CHUNK_CACHE_BYTES, 0.75))
            .open(path)
            .map_err(&err)?;
        let format = file
            .attr("format")
            .and_then(|a| a.read_scalar::<VarLenUnicode>())
            .map(|s| s.as_str().to_string())
            .unwrap_or_default();
        if format != FORMAT {
            return Err(DataError::NotAShard { path: path.to_path_buf(), found: format });
        }
        let version = file.attr("format_version").and_then(|a| a.read_scalar::<u32>()).map_err(&err)?;
        if version != FORMAT_VERSION {
            return Err(DataError::FormatVersion {
                path: path.to_path_buf(),
                found: version,
                expected: FORMAT_VERSION,
            });
        }
        let dataset = |name: &str| {
            file.dataset(name)
                .map_err(|_| DataError::MissingDataset { path: path.to_path_buf(), name: name.to_string() })
        };
        let offsets: Vec<u32> = dataset("policy_offsets")?.read_raw().map_err(&err)?;
        let n = offsets.len().checked_sub(1).ok_or_else(|| DataError::Inconsistent {
            path: path.to_path_buf(),
            what: "policy_offsets is empty".into(),
        })?;
        for name in SAMPLE_DATASETS {
            let len = dataset(name)?.shape().first().copied().unwrap_or(0);
            let expected = if name == "policy_offsets" { n + 1 } else { n };
            if len != expected {
                return Err(DataError::Inconsistent {
                    path: path.to_path_buf(),
                    what: format!("{name} has {len} rows, expected {expected}"),
                });
            }
        }
        let entries = offsets[n] as usize;
        for name in ["policy_move", "policy_weight"] {
            let len = dataset(name)?.shape().first().copied().unwrap_or(0);
            if len != entries {
                return Err(DataError::Inconsistent {
                    path: path.to_path_buf(),
                    what: format!("{name} has {len} entries, policy_offsets says {entries}"),
                });
            }
        }
        if offsets[0] != 0 {
            return Err(DataError::Inconsistent {
                path: path.to_path_buf(),
                what: format!("policy_offsets start at {}, not 0", offsets[0]),
            });
        }
        if offsets.windows(2).any(|w| w[0] > w[1]) {
            return Err(DataError::Inconsistent { path: path.to_path_buf(), what: "policy_offsets decrease".into() });
        }
        for name in [
            "game_start",
            "game_model",
            "game_winner",
            "game_end",
            "game_length",
            "game_first_sample",
            "game_move_offsets",
            "game_moves",
        ] {
            dataset(name)?;
        }
        let datasets = READ_DATASETS.iter().map(|name| dataset(name)).collect::<Result<Vec<_>>>()?;
        Ok(ShardReader { path: path.to_path_buf(), file, offsets, datasets, game_moves: std::sync::OnceLock::new() })
    }

    /// A string attribute of the file (None when missing or not a string).
    pub fn attr_string(&self, name: &str) -> Option<String> {
        self.file.attr(name).and_then(|a| a.read_scalar::<VarLenUnicode>()).ok().map(|s| s.as_str().to_string())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A dataset random reads use: the handle kept open (with its cache) when it is one of them.
    fn open_dataset(&self, name: &str) -> Result<std::borrow::Cow<'_, hdf5::Dataset>> {
        match READ_DATASETS.iter().position(|&n| n == name) {
            Some(i) => Ok(std::borrow::Cow::Borrowed(&self.datasets[i])),
            None => Ok(std::borrow::Cow::Owned(self.file.dataset(name).map_err(h5(&self.path))?)),
        }
    }

    fn points<T: hdf5::H5Type + Clone>(&self, name: &str, indices: &[usize]) -> Result<Vec<T>> {
        if indices.is_empty() {
            return Ok(Vec::new());
        }
        let ds = self.open_dataset(name)?;
        let selection = Array1::from(indices.to_vec());
        Ok(ds.read_slice_1d::<T, _>(selection).map_err(h5(&self.path))?.to_vec())
    }

    /// Reads the samples at `indices` (any order, repeats allowed), in that order.
    pub fn read(&self, indices: &[usize]) -> Result<Vec<Sample>> {
        check_indices(&self.path, self.len(), indices)?;
        let position: Vec<[u8; PACKED_BYTES]> = self.points("position", indices)?;
        let moves: Vec<u16> = self.points("move", indices)?;
        let root_wdl: Vec<[f32; 3]> = self.points("root_wdl", indices)?;
        let result: Vec<i8> = self.points("result", indices)?;
        let ply: Vec<u16> = self.points("ply", indices)?;
        let flags: Vec<u8> = self.points("flags", indices)?;
        let entries: Vec<usize> =
            indices.iter().flat_map(|&i| self.offsets[i] as usize..self.offsets[i + 1] as usize).collect();
        let policy_move: Vec<u16> = self.points("policy_move", &entries)?;
        let policy_weight: Vec<u16> = self.points("policy_weight", &entries)?;
        let columns = Columns { position, moves, root_wdl, result, ply, flags, policy_move, policy_weight };
        assemble(&self.path, &self.offsets, indices.iter().copied(), columns)
    }

    /// What the game did after each sample at `indices` (`samples` as read for those indices):
    /// the moves after the sample's own move, `game_moves[ply + 1 ..]`, at most `plies` of them
    /// and fewer where the game ended, derived from what every shard stores (no format change).
    /// The first is the opponent's reply (the reply head's target); the position `plies` later
    /// gives the material value target (docs/training.md). A final position (no move) has an
    /// empty continuation. `None` when it is unknown: the ply is unknown (hcpe imports, which
    /// have no game moves), or the sample's own move is not the game's move at its ply (an
    /// inconsistent shard; nothing is guessed).
    pub fn continuations(&self, indices: &[usize], samples: &[Sample], plies: usize) -> Result<Vec<Option<Vec<Move>>>> {
        assert_eq!(indices.len(), samples.len(), "one sample per index");
        check_indices(&self.path, self.len(), indices)?;
        let games: Vec<u32> = self.points("game", indices)?;
        let game_moves = self.game_moves()?;
        Ok(samples.iter().zip(&games).map(|(s, &g)| continuation(s, g, game_moves, plies)).collect())
    }

    /// [`ShardReader::read`] with each sample's continuation ([`ShardReader::continuations`]).
    pub fn read_with_continuations(&self, indices: &[usize], plies: usize) -> Result<Vec<(Sample, Option<Vec<Move>>)>> {
        let samples = self.read(indices)?;
        let continuations = self.continuations(indices, &samples, plies)?;
        Ok(samples.into_iter().zip(continuations).collect())
    }

    /// Every game's moves: `game_moves` and `game_move_offsets` (G + 1 entries from 0: game g's
    /// moves are `game_moves[offsets[g]..offsets[g + 1]]`).
    pub(crate) fn game_moves(&self) -> Result<&(Vec<u32>, Vec<u16>)> {
        if let Some(gm) = self.game_moves.get() {
            return Ok(gm);
        }
        let offsets: Vec<u32> = self.dataset_raw("game_move_offsets")?;
        let moves: Vec<u16> = self.dataset_raw("game_moves")?;
        if offsets.windows(2).any(|w| w[0] > w[1]) || offsets.last().is_some_and(|&e| e as usize > moves.len()) {
            return Err(DataError::Inconsistent {
                path: self.path.clone(),
                what: "game_move_offsets do not index game_moves".into(),
            });
        }
        Ok(self.game_moves.get_or_init(|| (offsets, moves)))
    }

    /// All samples, in order.
    pub fn read_all(&self) -> Result<Vec<Sample>> {
        self.read_range(0..self.len())
    }

    /// Every sample's root value estimates ([`ROOT_VALUE_NAMES`]; NaN where a game had none), or
    /// `None` when the shard has none (imports, shards written before December 2026).
    pub fn root_values(&self) -> Result<Option<Vec<RootValues>>> {
        if self.file.link_exists("root_values") {
            let values: Vec<RootValues> = self.dataset_raw("root_values")?;
            if values.len() != self.len() {
                return Err(DataError::Inconsistent {
                    path: self.path.clone(),
                    what: format!("root_values has {} rows for {} samples", values.len(), self.len()),
                });
            }
            return Ok(Some(values));
        }
        Ok(None)
    }

    /// A whole dataset, with an error naming it.
    pub fn dataset_raw<T: hdf5::H5Type>(&self, name: &str) -> Result<Vec<T>> {
        let ds = self
            .file
            .dataset(name)
            .map_err(|_| DataError::MissingDataset { path: self.path.clone(), name: name.to_string() })?;
        ds.read_raw()
            .map_err(|e| DataError::Hdf5 { path: self.path.clone(), message: format!("dataset {name:?}: {e}") })
    }

    fn slice<T: hdf5::H5Type + Clone>(&self, name: &str, range: std::ops::Range<usize>) -> Result<Vec<T>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let ds = self.open_dataset(name)?;
        Ok(ds.read_slice_1d::<T, _>(range).map_err(h5(&self.path))?.to_vec())
    }

    /// The samples in `range` (contiguous reads: much faster than [`ShardReader::read`] for many
    /// rows).
    pub fn read_range(&self, range: std::ops::Range<usize>) -> Result<Vec<Sample>> {
        let n = self.len();
        if range.end > n || range.start > range.end {
            return Err(DataError::BadSample {
                path: self.path.clone(),
                index: range.end.saturating_sub(1),
                message: format!("out of range (shard has {n} samples)"),
            });
        }
        let columns = self.columns(range.clone())?;
        assemble(&self.path, &self.offsets, range, columns)
    }

    /// The columns of the samples in `range` (contiguous reads).
    pub(crate) fn columns(&self, range: std::ops::Range<usize>) -> Result<Columns> {
        let entries = self.offsets[range.start] as usize..self.offsets[range.end] as usize;
        Ok(Columns {
            position: self.slice("position", range.clone())?,
            moves: self.slice("move", range.clone())?,
            root_wdl: self.slice("root_wdl", range.clone())?,
            result: self.slice("result", range.clone())?,
            ply: self.slice("ply", range.clone())?,
            flags: self.slice("flags", range)?,
            policy_move: self.slice("policy_move", entries.clone())?,
            policy_weight: self.slice("policy_weight", entries)?,
        })
    }

    /// Each sample's game (its row in the game datasets).
    pub(crate) fn sample_games(&self) -> Result<Vec<u32>> {
        self.slice("game", 0..self.len())
    }

    /// The policy offsets: sample `i`'s entries are `offsets[i]..offsets[i + 1]`.
    pub(crate) fn policy_offsets(&self) -> &[u32] {
        &self.offsets
    }

    /// Game-level metadata.
    pub fn games(&self) -> Result<Vec<GameInfo>> {
        let err = h5(&self.path);
        let read = |name: &str| self.file.dataset(name).map_err(&err);
        let starts: Vec<VarLenUnicode> = read("game_start")?.read_raw().map_err(&err)?;
        let models: Vec<VarLenUnicode> = read("game_model")?.read_raw().map_err(&err)?;
        let winners: Vec<i8> = read("game_winner")?.read_raw().map_err(&err)?;
        let ends: Vec<u8> = read("game_end")?.read_raw().map_err(&err)?;
        let lengths: Vec<u16> = read("game_length")?.read_raw().map_err(&err)?;
        let first: Vec<u32> = read("game_first_sample")?.read_raw().map_err(&err)?;
        let move_offsets: Vec<u32> = read("game_move_offsets")?.read_raw().map_err(&err)?;
        let moves: Vec<u16> = read("game_moves")?.read_raw().map_err(&err)?;
        let g = starts.len();
        if [models.len(), winners.len(), ends.len(), lengths.len()].iter().any(|&l| l != g)
            || first.len() != g + 1
            || move_offsets.len() != g + 1
            || move_offsets.windows(2).any(|w| w[0] > w[1])
            || move_offsets.last().is_some_and(|&end| end as usize != moves.len())
        {
            return Err(DataError::Inconsistent {
                path: self.path.clone(),
                what: "game datasets differ in length".into(),
            });
        }
        (0..g)
            .map(|i| {
                let reason = end_reason_from_code(ends[i]).ok_or_else(|| DataError::Inconsistent {
                    path: self.path.clone(),
                    what: format!("game {i}: end reason code {}", ends[i]),
                })?;
                let game_moves = moves[move_offsets[i] as usize..move_offsets[i + 1] as usize]
                    .iter()
                    .map(|&code| Move::from_u16(code))
                    .collect::<Option<Vec<Move>>>()
                    .ok_or_else(|| DataError::Inconsistent {
                        path: self.path.clone(),
                        what: format!("game {i}: bad move code"),
                    })?;
                Ok(GameInfo {
                    start_sfen: starts[i].as_str().to_string(),
                    moves: game_moves,
                    result: GameResult { winner: winner_from_code(winners[i]), reason },
                    length: lengths[i],
                    model: models[i].as_str().to_string(),
                    samples: first[i] as usize..first[i + 1] as usize,
                })
            })
            .collect()
    }
}

/// Builds the samples `indices` (in order) of the shard at `path`, whose sample `i` has
/// `offsets[i + 1] - offsets[i]` policy entries, from their columns as read (row k for the k-th
/// index; each sample's policy entries follow the previous one's in `policy_move`/`policy_weight`).
pub(crate) fn assemble(
    path: &Path,
    offsets: &[u32],
    indices: impl ExactSizeIterator<Item = usize>,
    c: Columns,
) -> Result<Vec<Sample>> {
    let mut cursor = 0;
    let mut out = Vec::with_capacity(indices.len());
    for (k, i) in indices.enumerate() {
        let len = (offsets[i + 1] - offsets[i]) as usize;
        let bad = |message: String| DataError::BadSample { path: path.to_path_buf(), index: i, message };
        let total: f32 = c.policy_weight[cursor..cursor + len].iter().map(|&w| w as f32).sum();
        let mut policy = Vec::with_capacity(len);
        for j in cursor..cursor + len {
            let m = Move::from_u16(c.policy_move[j])
                .ok_or_else(|| bad(format!("policy move code {}", c.policy_move[j])))?;
            policy.push((m, if total > 0.0 { c.policy_weight[j] as f32 / total } else { 0.0 }));
        }
        cursor += len;
        let played = match c.moves[k] {
            0 => None,
            code => Some(Move::from_u16(code).ok_or_else(|| bad(format!("move code {code}")))?),
        };
        out.push(Sample {
            position: PackedPosition(c.position[k]),
            played,
            policy,
            root_wdl: c.root_wdl[k],
            result: c.result[k],
            ply: c.ply[k],
            flags: c.flags[k],
        });
    }
    Ok(out)
}

/// The moves of game `game` after `sample`'s own move, at most `plies` of them
/// ([`ShardReader::continuations`]), from a shard's `(game_move_offsets, game_moves)`.
pub(crate) fn continuation(
    sample: &Sample,
    game: u32,
    game_moves: &(Vec<u32>, Vec<u16>),
    plies: usize,
) -> Option<Vec<Move>> {
    let (offsets, moves) = game_moves;
    if sample.ply == crate::sample::PLY_UNKNOWN {
        return None;
    }
    let g = game as usize;
    let (start, end) = (*offsets.get(g)? as usize, (*offsets.get(g + 1)? as usize).min(moves.len()));
    let at = start + sample.ply as usize;
    let Some(played) = sample.played else {
        // A final position stands at the game's end; anywhere else it is inconsistent.
        return (at == end).then(Vec::new);
    };
    if at >= end || moves[at] != played.to_u16() {
        return None;
    }
    moves[at + 1..end].iter().take(plies).map(|&code| Move::from_u16(code)).collect()
}

/// An error naming the first of `indices` that a shard of `len` samples does not have.
pub(crate) fn check_indices(path: &Path, len: usize, indices: &[usize]) -> Result<()> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&bad) => Err(DataError::BadSample {
            path: path.to_path_buf(),
            index: bad,
            message: format!("out of range (shard has {len} samples)"),
        }),
        None => Ok(()),
    }
}
