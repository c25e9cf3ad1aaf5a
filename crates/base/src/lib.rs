//! koma-base: what every koma crate shares and no stage owns.
//!
//! - [`Rng`]: the one seeded random number generator (search, self-play, arena, trainer).
//! - [`stop`]: the stop flag's guards, and the message of a caught panic.
//! - [`cpu`]: the cores this process may use and how many other work is using now.
//! - [`durable`]: the durable write; every file koma publishes goes through it.
//! - [`error`]: an error printed with its causes, each said once.
//! - [`host`]: this machine's name and file-name prefixes unique across the hosts of a run.
//! - [`python`]: the one way koma finds and runs Python (plots, ONNX export, benchmarks).
//! - [`run_layout`]: the paths of a run directory, spelled once for every stage.

pub mod cpu;
pub mod durable;
pub mod error;
pub mod host;
pub mod python;
mod rng;
pub mod run_layout;
pub mod stop;

pub use rng::Rng;
