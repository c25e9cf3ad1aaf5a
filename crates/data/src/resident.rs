//! A shard decoded into memory: its sample columns as stored (packed positions, sparse policy
//! targets in CSR order, game moves), read once with contiguous reads and the file closed.
//!
//! The replay window's in-memory storage ([`crate::WindowStorage::Memory`]) holds its shards this
//! way. Drawing a sample is then a copy from memory instead of an HDF5 point read through a
//! chunk cache: at gpu-small's window (5 M samples over about 3,000 shards) the on-disk window
//! draws about 4 k samples/s on one core, a fifth of what its trainer takes (docs/benchmarks.md).
//! Memory costs about what the shard holds uncompressed: 66 bytes a sample, 4 a policy entry and
//! 2 a game move.

use std::path::{Path, PathBuf};

use koma_shogi::Move;

use crate::error::{DataError, Result};
use crate::sample::Sample;
use crate::shard::{assemble, check_indices, continuation, Columns, ShardReader};

pub struct ResidentShard {
    path: PathBuf,
    /// Sample `i`'s policy entries are `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u32>,
    columns: Columns,
    /// Each sample's game.
    games: Vec<u32>,
    /// `game_move_offsets` and `game_moves`, or why they could not be read: as on disk, that
    /// fails only the reads that need continuations.
    game_moves: std::result::Result<(Vec<u32>, Vec<u16>), String>,
}

impl ResidentShard {
    /// Opens the shard at `path` (validated as [`ShardReader::open`] does) and reads all of it.
    pub fn load(path: &Path) -> Result<ResidentShard> {
        ResidentShard::read_from(&ShardReader::open(path)?)
    }

    /// Reads all of an open shard.
    pub fn read_from(reader: &ShardReader) -> Result<ResidentShard> {
        let games = reader.sample_games()?;
        // The error without its leading path: it is named again when a read needs the moves.
        let prefix = format!("{}: ", reader.path().display());
        let game_moves = reader.game_moves().cloned().map_err(|e| {
            let message = e.to_string();
            message.strip_prefix(&prefix).map_or(message.clone(), str::to_string)
        });
        Ok(ResidentShard {
            path: reader.path().to_path_buf(),
            offsets: reader.policy_offsets().to_vec(),
            columns: reader.columns(0..reader.len())?,
            games,
            game_moves,
        })
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

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.columns.bytes()
            + (self.offsets.capacity() + self.games.capacity()) * 4
            + self.game_moves.as_ref().map_or(0, |(offsets, moves)| offsets.capacity() * 4 + moves.capacity() * 2)
    }

    /// The samples at `indices` (any order, repeats allowed), in that order: what
    /// [`ShardReader::read`] gives for the same shard.
    pub fn read(&self, indices: &[usize]) -> Result<Vec<Sample>> {
        check_indices(&self.path, self.len(), indices)?;
        assemble(&self.path, &self.offsets, indices.iter().copied(), self.columns.gather(&self.offsets, indices))
    }

    /// [`ResidentShard::read`] with each sample's continuation, as
    /// [`ShardReader::read_with_continuations`] gives it.
    pub fn read_with_continuations(&self, indices: &[usize], plies: usize) -> Result<Vec<(Sample, Option<Vec<Move>>)>> {
        let samples = self.read(indices)?;
        let game_moves = self.game_moves.as_ref().map_err(|message| DataError::BadInput {
            path: self.path.clone(),
            message: format!("game moves: {message}"),
        })?;
        Ok(samples
            .into_iter()
            .zip(indices)
            .map(|(s, &i)| {
                let next = continuation(&s, self.games[i], game_moves, plies);
                (s, next)
            })
            .collect())
    }
}
