//! `koma openings`: generate a balanced opening suite (USI position lines) for `koma arena` and
//! self-play: short random openings that a quick search scores as even.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use koma_arena::openings::{generate_suite, SuiteSpec};
use koma_arena::player::MaterialEvaluator;
use koma_mcts::Evaluator;
use koma_nn::{Network, SharedNetwork};

use super::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Openings to generate.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Plies of each opening.
    #[arg(long, default_value_t = 8)]
    plies: usize,
    /// Keep openings whose searched value (in [-1, 1], side to move) is within ±this.
    #[arg(long, default_value_t = 0.2)]
    max_value: f32,
    /// Simulations of the balance check.
    #[arg(long, default_value_t = 64)]
    simulations: u32,
    /// Judge balance with this checkpoint (default: material, which a reference player shares).
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file (default: stdout).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the openings and the settings as one JSON object on stdout (the file is still
    /// written with --out).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: Args) -> Result<()> {
    let evaluator: Arc<dyn Evaluator> = match &args.model {
        Some(path) => Arc::new(SharedNetwork::new(
            Network::load(path, &args.run.options()?).with_context(|| format!("loading {}", path.display()))?,
        )),
        None => Arc::new(MaterialEvaluator),
    };
    let spec = SuiteSpec {
        count: args.count,
        plies: args.plies,
        max_abs_value: args.max_value,
        simulations: args.simulations,
        seed: args.seed,
    };
    let judge = args.model.as_ref().map_or("material".to_string(), |p| p.display().to_string());
    let lines = generate_suite(&spec, evaluator.as_ref()).with_context(|| format!("judging openings with {judge}"))?;
    let mut text = format!(
        "# {} balanced openings of {} plies (|value| <= {} after {} simulations, judged by {judge}; seed {})\n",
        lines.len(),
        args.plies,
        args.max_value,
        args.simulations,
        args.seed
    );
    for line in &lines {
        text.push_str(line);
        text.push('\n');
    }
    if args.json {
        let summary = serde_json::json!({
            "openings": lines,
            "requested": args.count,
            "plies": args.plies,
            "max_value": args.max_value,
            "simulations": args.simulations,
            "judge": judge,
            "seed": args.seed,
            "out": args.out,
        });
        println!("{summary}");
    }
    match &args.out {
        Some(path) => {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            koma_base::durable::write(path, text.as_bytes())?;
            eprintln!("{} openings written to {}", lines.len(), path.display());
        }
        None if !args.json => print!("{text}"),
        None => {}
    }
    if lines.len() < args.count {
        anyhow::bail!(
            "only {} of {} openings passed the balance check; raise --max-value or lower --plies",
            lines.len(),
            args.count
        );
    }
    Ok(())
}
