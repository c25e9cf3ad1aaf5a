//! `koma init --config PRESET|FILE --out model.safetensors`: a freshly initialised network,
//! saved as a checkpoint (weights + JSON sidecar) at step 0.

use std::path::PathBuf;

use anyhow::{Context, Result};
use koma_nn::{ModelConfig, Network, RunOptions, TrainingInfo};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Architecture: a preset (tiny = 5x64, standard = 10x192, resnet10-swish), a TOML file (a run
    /// config's [model] table, `preset = NAME` or model keys, or model keys at the top level) or a
    /// JSON file (a model config or a checkpoint sidecar).
    #[arg(long)]
    config: String,
    /// Checkpoint to write (`.safetensors`; the sidecar goes next to it as `.json`).
    #[arg(long)]
    out: PathBuf,
    /// Seed of the initial weights.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also randomise batch-norm statistics and biases (for parity tests between
    /// implementations; not for training).
    #[arg(long, hide = true)]
    randomize: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let config = ModelConfig::from_preset_or_file(&args.config)?;
    let mut net = Network::new(&config, &RunOptions::cpu(), Some(args.seed)).context("building the network")?;
    if args.randomize {
        koma_nn::model::randomize(net.var_store(), args.seed.wrapping_add(1));
    }
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let meta = net.save(&args.out, &TrainingInfo::default())?;
    let sidecar = koma_nn::checkpoint::sidecar_path(&args.out);
    if args.json {
        println!(
            "{}",
            json!({
                "out": args.out,
                "sidecar": sidecar,
                "model": meta.model,
                "parameters": meta.parameters,
                "weights_sha256": meta.weights_sha256,
            })
        );
    } else {
        println!(
            "wrote {} (+ {}): {}, {} parameters, sha256 {}",
            args.out.display(),
            sidecar.display(),
            config.describe(),
            meta.parameters,
            meta.weights_sha256
        );
    }
    Ok(())
}
