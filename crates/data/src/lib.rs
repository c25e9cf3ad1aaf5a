//! koma-data: training samples and the replay buffer between self-play and the trainer.
//!
//! Samples pack their position into 40 bytes ([`PackedPosition`]); finished games are written to
//! HDF5 shards ([`write_shard`], [`ShardReader`]) by one writer thread ([`ShardWriter`]); the
//! trainer samples uniformly from the newest shards through a [`ReplayWindow`].

mod error;
mod packed;
mod sample;
mod shard;
mod window;
mod writer;

pub use error::{DataError, Result};
pub use packed::{PackError, PackedPosition, PACKED_BYTES, PACKED_ENCODING};
pub use sample::{end_reason_code, end_reason_from_code, flags, result_for, GameSamples, Sample};
pub use shard::{write_shard, GameInfo, ShardReader, FORMAT, FORMAT_VERSION};
pub use window::{ReplayWindow, SampleWeights, WindowSize};
pub use writer::{ShardWriter, WriterSummary};
