//! `koma bench …`: the speed figures each stage promises, measured in one process and one run so
//! that ratios against reference implementations are meaningful on a shared, noisy machine.

use anyhow::Result;
use clap::Subcommand;

mod data;
mod mate;
mod mcts;
pub(crate) mod nn;
mod rules;
mod selfplay;
mod train;
mod usi;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    target: Target,
}

#[derive(Debug, Subcommand)]
enum Target {
    /// perft and legal-move generation speed, against cshogi's perft in the same run.
    Rules(rules::Args),
    /// df-pn mate solving: problems and nodes per second, against cshogi's df-pn on the same problems.
    Mate(mate::Args),
    /// Search simulations per second with a zero-cost evaluator, and bytes per node.
    Mcts(mcts::Args),
    /// Network evaluations/s inside self-play against the plain forward pass of the same net.
    Selfplay(selfplay::Args),
    /// Network throughput (encode / forward / evaluate / plain tch) by batch size, tiny and standard nets.
    Nn(nn::Args),
    /// Training samples/s at batch 256, tiny and standard nets, against the same training in plain PyTorch.
    Train(train::Args),
    /// The USI engine's nodes per second by search thread count (SearchThreads).
    Usi(usi::Args),
    /// Training data: shard writes, replay-window sampling and loader batches/s against the trainer's consumption.
    Data(data::Args),
}

pub fn run(args: Args) -> Result<()> {
    match args.target {
        Target::Rules(a) => rules::run(a),
        Target::Mate(a) => mate::run(a),
        Target::Mcts(a) => mcts::run(a),
        Target::Selfplay(a) => selfplay::run(a),
        Target::Nn(a) => nn::run(a),
        Target::Train(a) => train::run(a),
        Target::Data(a) => data::run(a),
        Target::Usi(a) => usi::run(a),
    }
}

/// The cshogi reference of the benches that compare with it (`bench rules`, `bench mate`).
#[derive(Debug, clap::Args)]
pub(crate) struct CshogiArgs {
    /// Python with cshogi installed (default: $KOMA_VENV/bin/python, which scripts/koma sets, else python3).
    #[arg(long, env = "KOMA_PYTHON")]
    python: Option<String>,
    /// Skip the cshogi reference (no ratios).
    #[arg(long = "no-cshogi")]
    skip: bool,
}

/// Runs a cshogi reference module of the embedded package (`python -m koma.MODULE`) with `jobs`
/// as JSON on its stdin and parses one JSON object per line of its output.
pub(crate) fn run_cshogi<T: serde::de::DeserializeOwned>(
    python: Option<&str>,
    module: &str,
    jobs: &serde_json::Value,
) -> Result<Vec<T>> {
    use anyhow::{bail, Context};
    use std::io::Write;
    use std::process::Stdio;
    let python = koma_base::python::Python::new(python).context("writing out the embedded Python package")?;
    let program = python.program();
    let mut child = python
        .module(module, std::iter::empty::<&str>())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {program} for the cshogi reference (use --no-cshogi to skip it)"))?;
    child.stdin.take().context("python stdin")?.write_all(jobs.to_string().as_bytes())?;
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!("the cshogi reference failed ({}); is cshogi installed for {program}?", output.status);
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).with_context(|| format!("cshogi reference printed {l:?}")))
        .collect()
}
