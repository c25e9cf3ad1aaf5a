//! The precision the trainer computes in:
//! - f32: plain;
//! - f16 (CUDA): the forward pass under `tch::autocast` (f16 matmuls and convolutions, f32 master
//!   weights), the loss scaled by a [`crate::scaler::LossScaler`] we maintain, steps with inf/NaN
//!   gradients skipped (with the batch-norm statistics the forward pass changed put back);
//! - bf16 (CUDA): tch's autocast is f16-only, so a bf16 copy of the network computes the forward
//!   and backward passes (`replicas.rs`); its gradients (as f32) update the f32 master weights,
//!   which are copied back into it after every step (batch-norm statistics flow the other way).
//!   bf16 has f32's range: no loss scaling.

use koma_nn::Precision;
use tch::Device;

use crate::error::{Result, TrainError};

/// The precision the trainer computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    F32,
    F16,
    Bf16,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::F32 => "f32",
            Mode::F16 => "f16",
            Mode::Bf16 => "bf16",
        }
    }

    pub(crate) fn resolve(p: Precision, device: Device, allow_cpu_half: bool) -> Result<Mode> {
        let cuda = matches!(device, Device::Cuda(_));
        let mode = match p {
            Precision::Auto if cuda => Mode::F16,
            Precision::Auto | Precision::F32 => Mode::F32,
            Precision::F16 => Mode::F16,
            Precision::Bf16 => Mode::Bf16,
        };
        if mode != Mode::F32 && !cuda && !allow_cpu_half {
            return Err(TrainError::Config(format!(
                "precision {} is for CUDA devices; on the CPU the trainer runs in f32",
                mode.name()
            )));
        }
        Ok(mode)
    }
}
