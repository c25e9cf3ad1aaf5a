//! The single shard-writer thread. HDF5 serialises every call behind a global lock, so self-play
//! workers never touch it: they send finished games through a channel, and this thread batches
//! them into shards of `games_per_shard` games.

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

use crossbeam::channel::{unbounded, Sender};

use crate::error::{DataError, Result};
use crate::sample::GameSamples;
use crate::shard::write_shard_with;

/// What the writer wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriterSummary {
    pub shards: Vec<PathBuf>,
    pub games: usize,
    pub samples: usize,
}

pub struct ShardWriter {
    sender: Option<Sender<GameSamples>>,
    handle: Option<JoinHandle<Result<WriterSummary>>>,
}

/// The next free shard sequence number for `prefix` in `dir` (so a resumed run never overwrites).
fn next_sequence(dir: &Path, prefix: &str) -> Result<u64> {
    let entries = std::fs::read_dir(dir).map_err(|source| DataError::Io { path: dir.to_path_buf(), source })?;
    let mut next = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if let Some(seq) =
            name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')).and_then(|r| r.strip_suffix(".h5"))
        {
            if let Ok(n) = seq.parse::<u64>() {
                next = next.max(n + 1);
            }
        }
    }
    Ok(next)
}

impl ShardWriter {
    /// Starts the writer thread; shards are named `DIR/PREFIX-NNNNNN.h5`.
    pub fn spawn(dir: &Path, prefix: &str, games_per_shard: usize) -> Result<ShardWriter> {
        ShardWriter::spawn_with_attributes(dir, prefix, games_per_shard, Vec::new())
    }

    /// [`ShardWriter::spawn`], every shard carrying these string attributes (self-play's seed).
    pub fn spawn_with_attributes(
        dir: &Path,
        prefix: &str,
        games_per_shard: usize,
        attributes: Vec<(String, String)>,
    ) -> Result<ShardWriter> {
        std::fs::create_dir_all(dir).map_err(|source| DataError::Io { path: dir.to_path_buf(), source })?;
        let mut sequence = next_sequence(dir, prefix)?;
        let (sender, receiver) = unbounded::<GameSamples>();
        let dir = dir.to_path_buf();
        let prefix = prefix.to_string();
        let games_per_shard = games_per_shard.max(1);
        let handle = std::thread::Builder::new()
            .name("koma-shard-writer".into())
            .spawn(move || {
                let mut summary = WriterSummary::default();
                let mut pending = Vec::with_capacity(games_per_shard);
                let mut flush = |pending: &mut Vec<GameSamples>, summary: &mut WriterSummary| -> Result<()> {
                    if pending.is_empty() {
                        return Ok(());
                    }
                    let path = dir.join(format!("{prefix}-{sequence:06}.h5"));
                    sequence += 1;
                    let samples = write_shard_with(&path, pending, &attributes)?;
                    tracing::debug!(shard = %path.display(), games = pending.len(), samples, "wrote shard");
                    summary.games += pending.len();
                    summary.samples += samples;
                    summary.shards.push(path);
                    pending.clear();
                    Ok(())
                };
                for game in receiver {
                    pending.push(game);
                    if pending.len() >= games_per_shard {
                        flush(&mut pending, &mut summary)?;
                    }
                }
                flush(&mut pending, &mut summary)?;
                Ok(summary)
            })
            .map_err(|source| DataError::Io { path: PathBuf::from("<writer thread>"), source })?;
        Ok(ShardWriter { sender: Some(sender), handle: Some(handle) })
    }

    /// A handle for sending finished games (clone it for each worker).
    pub fn sender(&self) -> Sender<GameSamples> {
        self.sender.clone().expect("the sender lives until finish")
    }

    /// Writes what is still buffered and stops the thread. Games sent through clones of
    /// [`ShardWriter::sender`] are written once every clone is dropped.
    pub fn finish(mut self) -> Result<WriterSummary> {
        self.sender.take();
        match self.handle.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(DataError::Io {
                path: PathBuf::from("<writer thread>"),
                source: std::io::Error::other("shard writer panicked"),
            }),
            None => Ok(WriterSummary::default()),
        }
    }
}

impl Drop for ShardWriter {
    fn drop(&mut self) {
        self.sender.take();
        if let Some(handle) = self.handle.take() {
            if let Ok(Err(e)) = handle.join() {
                tracing::error!("shard writer: {e}");
            }
        }
    }
}
