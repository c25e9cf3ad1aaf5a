//! koma-engine: a USI engine that plays a koma network with Monte Carlo tree search.
//!
//! [`run`] speaks the USI protocol on any reader and writer (the `koma usi` subcommand gives it
//! stdin and stdout; tests give it in-memory pipes). The command loop never blocks on work:
//! searches run on their own thread ([`think`](crate::think)), networks load on another
//! ([`net_loader`]), so `stop` and `quit` are handled at once.
//!
//! - [`options`]: the USI options (`Model`, `Device`, `Threads`, `BatchSize`, `Playouts`, …).
//! - [`time`]: `go` arguments and time management (soft and hard deadlines, latency margin).
//! - mates come from koma-mate: df-pn for `go mate` and beside the MCTS, the exact short search
//!   for quick mates before each move.
//! - [`score`]: win rate → centipawns for `info score cp`.
//!
//! docs/engine.md describes the protocol support, the options and the time management.

mod engine;
pub mod io;
pub mod net_loader;
pub mod options;
pub mod score;
mod think;
pub mod time;

pub use engine::{run, EngineConfig};
pub use net_loader::{network_loader, LoadError, LoadFn, LoadKey, LoadedNet};
pub use options::Options;
