//! koma-pipeline: the training pipeline over one run directory.
//!
//! - [`config`]: the run configuration (`configs/*.toml`; `tiny-cpu` is compiled in).
//! - [`config_reference`]: the config files' JSON Schema and field reference, from the structs.
//! - [`run_dir`]: the files of a run (the layout) and which model self-play uses.
//! - [`Run`]: a run opened by one process: its directory, its config, this process's overrides.
//! - [`stages`]: self-play, the trainer, the gatekeeper and the evaluator, each a `run(&Run, …)`.
//! - [`prepare`] and [`run()`]: `koma pipeline`, every stage in one process.
//! - [`evaluation`]: matches between a run's checkpoints and references, the end-of-run report.
//! - [`players`]: arena players from names (references, checkpoints).
//! - [`plan`]: `koma plan`, a run's timeline from its config and two throughputs.
//! - [`events`]: what the stages report to the front end.
//! - [`resources`]: process CPU time (the `cpu_minutes` budget) and the load average.
//! - [`watchdog`]: notices a stage that makes no progress (`[run] stall_minutes`).
//! - [`experiment`]: `koma experiment`, variants of a config trained for the same budget from
//!   the same model 0, then rated in a round robin.
//!
//! docs/pipeline.md describes the run directory, the stages and the config.

pub mod config;
mod config_fields;
pub mod config_reference;
pub mod core_share;
mod error;
pub mod evaluation;
pub mod events;
pub mod experiment;
mod pipeline;
pub mod plan;
pub mod players;
pub mod resources;
mod run;
pub mod run_dir;
pub mod stages;
pub mod watchdog;

pub use config::{ConfigSource, PipelineConfig, DEFAULT_CONFIG};
pub use error::{PipelineError, Result};
pub use events::{Event, MatchSummary};
pub use pipeline::{prepare, run, PipelineOptions, PipelineSummary, Prepared, StopReason};
pub use run::{write_model_zero, Run, RunOverrides};
pub use run_dir::{copy_checkpoint, ModelRef, RunDir, RunFinished};
