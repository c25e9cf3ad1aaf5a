//! `koma usi [--model M]`: the USI engine on stdin/stdout, for shogi GUIs (ShogiHome,
//! Shogidokoro, …) and match runners. Everything a GUI needs comes from the command line; every
//! setting is also a USI option the GUI can change (`--option NAME=VALUE` sets any of them).
//! See docs/engine.md.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use koma_engine::{EngineConfig, Options};

use super::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Checkpoint to play (`.safetensors` with its `.json` sidecar). Without one (and without a
    /// `setoption name Model`) the engine reports the error and resigns every game.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Without a model, play with uniform priors and an even value (protocol tests, smoke runs):
    /// the USI option UniformStandIn.
    #[arg(long)]
    uniform: bool,
    #[command(flatten)]
    run: RunArgs,
    /// Leaves per network batch (0: 32 on CUDA, 8 on the CPU).
    #[arg(long)]
    batch_size: Option<u64>,
    /// Playouts per move (0: no limit; time decides).
    #[arg(long)]
    playouts: Option<u64>,
    /// Initial value of any USI option (repeatable), e.g. `--option USI_Hash=4096`.
    #[arg(long = "option", value_name = "NAME=VALUE")]
    options: Vec<String>,
}

pub fn run(args: Args) -> Result<()> {
    let mut options = Options::default();
    let mut set = |name: &str, value: &str| -> Result<()> {
        match options.set(name, value) {
            Ok(None) => Ok(()),
            Ok(Some(warning)) => {
                eprintln!("koma usi: {warning}");
                Ok(())
            }
            Err(e) => bail!("{e}"),
        }
    };
    if let Some(model) = &args.model {
        if !model.exists() {
            bail!("--model {}: no such file", model.display());
        }
        let absolute = std::fs::canonicalize(model).with_context(|| format!("--model {}", model.display()))?;
        set("Model", &absolute.to_string_lossy())?;
    }
    if args.uniform {
        set("UniformStandIn", "true")?;
    }
    // Validate --device/--precision the way every other subcommand does.
    args.run.options()?;
    set("Device", args.run.device())?;
    set("Precision", &args.run.precision.to_string())?;
    if let Some(threads) = args.run.threads {
        set("Threads", &threads.to_string())?;
    }
    if let Some(batch) = args.batch_size {
        set("BatchSize", &batch.to_string())?;
    }
    if let Some(playouts) = args.playouts {
        set("Playouts", &playouts.to_string())?;
    }
    for option in &args.options {
        let Some((name, value)) = option.split_once('=') else {
            bail!("--option {option:?}: expected NAME=VALUE");
        };
        set(name.trim(), value)?;
    }
    let stdin = std::io::stdin();
    koma_engine::run(stdin.lock(), std::io::stdout(), EngineConfig::new(options)).context("USI engine")?;
    Ok(())
}
