//! Command-line options shared by the subcommands that run a network (`eval`, `bench nn`, …).

use anyhow::Result;
use koma_nn::{DeviceList, DeviceSpec, Precision, RunOptions};

use super::choices::precision;

#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Where to run the network: cpu, cuda, cuda:N or auto (CUDA when available; the default).
    /// Self-play takes several (cuda:0,cuda:1 or cuda:all): a copy of the network and an
    /// inference service on each; with --run it replaces the run's [run] device.
    #[arg(long, env = "KOMA_DEVICE")]
    pub device: Option<String>,
    /// Weights and activations: auto (f16 on CUDA, f32 on CPU), f32, f16 or bf16 (CUDA only).
    #[arg(long, default_value = "auto", value_parser = precision())]
    pub precision: Precision,
    /// libtorch threads for CPU inference (default: libtorch's choice, usually the core count).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl RunArgs {
    /// `--device`, `auto` when not given.
    pub fn device(&self) -> &str {
        self.device.as_deref().unwrap_or("auto")
    }

    pub fn options(&self) -> Result<RunOptions> {
        Ok(RunOptions {
            device: self.device().parse::<DeviceSpec>()?,
            precision: self.precision,
            cpu_threads: self.threads,
        })
    }

    /// The options for each device of a `--device` list.
    pub fn options_per_device(&self) -> Result<Vec<RunOptions>> {
        let devices = self.device().parse::<DeviceList>()?.specs()?;
        Ok(devices
            .into_iter()
            .map(|device| RunOptions { device, precision: self.precision, cpu_threads: self.threads })
            .collect())
    }
}
