//! koma-data: training samples and the replay buffer between self-play and the trainer.
//!
//! Samples pack their position into 40 bytes ([`PackedPosition`]); finished games are written to
//! HDF5 shards ([`write_shard`], [`ShardReader`]) by one writer thread ([`ShardWriter`]); the
//! trainer samples uniformly from the newest shards through a [`ReplayWindow`], which holds them
//! decoded in memory ([`ResidentShard`]) or reads them on demand. [`import`] turns
//! game records and dlshogi hcpe files ([`hcp`]) into shards; [`inspect`] gives statistics and
//! checks of shards.

pub mod calibration;
mod error;
pub mod hcp;
pub mod import;
pub mod inspect;
mod packed;
mod resident;
mod sample;
mod shard;
mod window;
mod writer;

pub use error::{DataError, Result};
pub use packed::{PackError, PackedPosition, PACKED_BYTES, PACKED_ENCODING};
pub use resident::ResidentShard;
pub use sample::{
    end_reason_code, end_reason_from_code, end_reason_name, flags, result_for, winner_code, winner_from_code,
    GameSamples, RootValues, Sample, PLY_UNKNOWN, ROOT_VALUE_NAMES,
};
pub use shard::{write_shard, write_shard_with, GameInfo, ShardReader, FORMAT, FORMAT_VERSION, MOVE_ENCODING};
pub use window::{OpenFailures, ReplayWindow, SampleWeights, WindowSize, WindowStorage, OPEN_TRIES};
pub use writer::{ShardWriter, WriterSummary};
