//! koma-nn: the neural network side of koma.
//!
//! - [`encoding`]: dlshogi-compatible input features (62 + 57 planes of 9×9) and the 2187 move
//!   labels, batch encoding into reusable buffers, legal-move masks and prior extraction.
//! - [`config`]: the architecture as a serde struct ([`ModelConfig`]).
//! - [`model`]: the residual network in tch ([`Net`]).
//! - [`checkpoint`]: `model-STEP.safetensors` + JSON sidecar, verified on load.
//! - [`device`]: `cpu|cuda|cuda:N|auto`, precision (f32/f16/bf16), CPU threads.
//! - [`leaves`]: a batch of search leaves staged for a forward pass (pinned memory, legal-move
//!   labels, padding) and decoded from its answer.
//! - [`simulated`]: a simulated accelerator standing in for the forward pass, to compare inference
//!   designs without a GPU (`koma bench selfplay --simulate-device`).
//! - [`network`]: [`Network`], its evaluations (`koma_mcts::Evaluation`), and [`SharedNetwork`]
//!   for many threads (the search side's inference service merges their batches).
//!
//! docs/nn.md describes the encoding, the architecture and the checkpoint format.

pub mod checkpoint;
pub mod config;
pub mod device;
pub mod encoding;
mod error;
mod faults;
pub mod leaves;
pub mod model;
pub mod network;
mod search_evaluator;
pub mod simulated;
pub use search_evaluator::{ThreadBudget, ThreadedNetwork};

pub use checkpoint::{CheckpointMeta, EncodingInfo, TrainingInfo};
pub use config::{Activation, GlobalPoolConfig, ModelConfig, SeConfig};
pub use device::{DeviceList, DeviceSpec, Precision, RunOptions};
pub use encoding::{InputBatch, FEATURES1_NUM, FEATURES2_NUM, MOVE_LABELS};
pub use error::{Error, Result};
pub use leaves::{LeafBatch, LeafOutput};
pub use model::Net;
pub use network::{Network, RawOutput, SharedNetwork};
