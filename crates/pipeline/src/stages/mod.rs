//! The stages of a run. Each is a function `run(&Run, stop, …)` that works on the run directory
//! until `stop` is set (or it fails) and returns its summary; they share nothing but the files of
//! the run, so `koma pipeline` runs them as threads of one process and `koma selfplay --run`,
//! `koma train --run` each run one of them alone, through the same function.
//!
//! - [`selfplay`]: games with the current model into `selfplay/` shards.
//! - [`trainer`]: the network trained on those shards, checkpoints into `models/`.
//! - [`gatekeeper`]: with `[gating] enabled`, which checkpoint self-play plays.
//! - [`evaluator`]: with `[arena] every_models`, matches against model 0 while the run goes on.

pub mod evaluator;
pub mod gatekeeper;
pub mod selfplay;
pub mod trainer;
