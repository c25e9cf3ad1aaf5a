//! `koma data loss`: networks' policy and value losses on held-out samples, so that checkpoints
//! can be compared on data none of them trained on: a run's published (averaged) model against
//! the raw weights of its training state, models of one run on another run's games, or any
//! model on imported professional or Floodgate records.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use koma_data::inspect::list_shards;
use koma_nn::Network;
use koma_train::held_out::{held_out_metrics, spread_samples};
use koma_train::{BatchMetrics, LossConfig};
use serde_json::json;

use crate::commands::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub(super) struct LossArgs {
    /// Shards of the held-out samples, or directories searched recursively for `.h5` files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// A checkpoint (`.safetensors`) to measure; repeatable.
    #[arg(long)]
    model: Vec<PathBuf>,
    /// A training state directory (`RUN/train/state`): measures its raw weights, the ones the
    /// trainer trains (not the published average); repeatable.
    #[arg(long)]
    state: Vec<PathBuf>,
    /// Samples to measure on, spread evenly over the shards.
    #[arg(long, default_value_t = 8192)]
    samples: usize,
    /// Weight of the game result in the value target, the rest being the search's root value
    /// (`[train] loss.result_weight`); 1 measures against the result alone.
    #[arg(long, default_value_t = 1.0)]
    result_weight: f64,
    /// Print one JSON object per network instead of the table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    run: RunArgs,
}

pub(super) fn run(args: LossArgs) -> Result<()> {
    if args.model.is_empty() && args.state.is_empty() {
        bail!("name at least one network: --model CHECKPOINT or --state RUN/train/state");
    }
    if !(0.0..=1.0).contains(&args.result_weight) {
        bail!("--result-weight must be in [0, 1]");
    }
    if args.samples == 0 {
        bail!("--samples must be at least 1");
    }
    let shards = list_shards(&args.inputs)?;
    if shards.is_empty() {
        bail!("no .h5 shards in {:?}", args.inputs);
    }
    let (samples, total) = spread_samples(&shards, args.samples).context("reading the held-out samples")?;
    if samples.is_empty() {
        bail!("the {} shards in {:?} hold no samples", shards.len(), args.inputs);
    }
    let loss = LossConfig { result_weight: args.result_weight, ..LossConfig::default() };
    let options = args.run.options()?;
    let mut networks: Vec<(String, Network)> = Vec::new();
    for path in &args.model {
        let net = Network::load(path, &options).with_context(|| format!("loading {}", path.display()))?;
        networks.push((path.display().to_string(), net));
    }
    for dir in &args.state {
        networks.push((format!("{} (raw)", dir.display()), raw_network_of_state(dir, &options)?));
    }
    if !args.json {
        println!(
            "{} samples of {} in {} shards; value target: {} result",
            samples.len(),
            total,
            shards.len(),
            args.result_weight
        );
        println!("{:>11} {:>10} {:>11} {:>9}  network", "policy loss", "value loss", "policy top1", "value acc");
    }
    for (name, network) in &networks {
        let m: BatchMetrics = held_out_metrics(network, &samples, &loss);
        if args.json {
            println!(
                "{}",
                json!({
                    "network": name,
                    "samples": samples.len(),
                    "policy_loss": m.policy_loss,
                    "value_loss": m.value_loss,
                    "policy_top1": m.policy_top1,
                    "value_accuracy": m.value_accuracy,
                })
            );
        } else {
            println!(
                "{:>11.4} {:>10.4} {:>11.3} {:>9.3}  {name}",
                m.policy_loss, m.value_loss, m.policy_top1, m.value_accuracy
            );
        }
    }
    Ok(())
}

/// The raw weights of the training state in `dir` (`RUN/train/state`; the run's `models/` only
/// names the newest checkpoint in errors).
fn raw_network_of_state(dir: &Path, options: &koma_nn::RunOptions) -> Result<Network> {
    if !koma_train::state::exists(dir) {
        bail!(
            "--state {}: not a training state directory (it has no state.json; a run's is RUN/train/state)",
            dir.display()
        );
    }
    let models = dir.parent().and_then(Path::parent).map(|run| run.join("models")).unwrap_or_default();
    let read =
        || -> koma_train::Result<Network> { koma_train::state::load(dir, &models)?.raw_network(dir, &models, options) };
    // A trainer saving its state beside us replaces the tensors file: read again once.
    read().or_else(|_| read()).with_context(|| format!("reading the training state in {}", dir.display()))
}
