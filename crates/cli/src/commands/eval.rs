//! `koma eval --model M --sfen SFEN…`: what a network says about positions: W/D/L and the top
//! moves with their priors.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use koma_mcts::Evaluation;
use koma_nn::encoding::{self, InputBatch};
use koma_nn::network::RawOutput;
use koma_nn::Network;
use koma_shogi::usi::parse_position;
use koma_shogi::Position;
use serde_json::json;

use super::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Checkpoint (`.safetensors` with its `.json` sidecar).
    #[arg(long)]
    model: PathBuf,
    /// A position as SFEN (repeatable; all are evaluated in one batch).
    #[arg(long)]
    sfen: Vec<String>,
    /// A position as USI position arguments, e.g. "startpos moves 7g7f" (repeatable).
    #[arg(long)]
    usi: Vec<String>,
    /// How many moves to list (0 for all).
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Print one JSON object per position instead of text.
    #[arg(long)]
    json: bool,
    /// With --json: also the raw outputs (2187 policy logits and the W/D/L logits).
    #[arg(long, requires = "json")]
    raw: bool,
    #[command(flatten)]
    run: RunArgs,
}

pub fn run(args: Args) -> Result<()> {
    let mut positions: Vec<Position> = Vec::new();
    for sfen in &args.sfen {
        positions.push(Position::from_sfen(sfen).map_err(|e| anyhow::anyhow!("--sfen {sfen:?}: {e}"))?);
    }
    for usi in &args.usi {
        positions.push(parse_position(usi).with_context(|| format!("--usi {usi:?}"))?);
    }
    if positions.is_empty() {
        bail!("give at least one --sfen or --usi position");
    }
    let net = Network::load(&args.model, &args.run.options()?)
        .with_context(|| format!("loading {}", args.model.display()))?;
    // One forward pass with every logit (--json prints them); the evaluations from it.
    let mut batch = InputBatch::new();
    batch.encode(&positions);
    let mut raw = RawOutput::new();
    net.forward(&batch, &mut raw)?;
    let evals: Vec<Evaluation> = positions
        .iter()
        .enumerate()
        .map(|(i, pos)| {
            let mut labels = Vec::new();
            encoding::legal_labels(pos, &pos.legal_moves(), &mut labels);
            let mut priors = Vec::new();
            encoding::legal_priors(raw.policy(i), &labels, &mut priors);
            let mut wdl = raw.wdl_logits(i);
            encoding::softmax_in_place(&mut wdl);
            Evaluation { priors, wdl }
        })
        .collect();

    if !args.json {
        let meta = net.meta().expect("loaded from a checkpoint");
        println!(
            "model {} ({}, step {}) on {} ({:?})",
            args.model.display(),
            net.config().describe(),
            meta.step,
            koma_nn::device::device_name(net.device()),
            net.kind()
        );
    }
    for (i, (pos, e)) in positions.iter().zip(&evals).enumerate() {
        // The priors are in legal-move order.
        let legal = pos.legal_moves();
        let mut order: Vec<usize> = (0..legal.len()).collect();
        order.sort_by(|&a, &b| e.priors[b].total_cmp(&e.priors[a]));
        if args.top > 0 {
            order.truncate(args.top);
        }
        if args.json {
            let moves: Vec<_> = order
                .iter()
                .map(|&k| {
                    json!({
                        "move": legal[k].to_usi(),
                        "prior": e.priors[k],
                        "label": encoding::move_label(legal[k], pos.side_to_move()),
                    })
                })
                .collect();
            let mut obj = json!({
                "sfen": pos.to_sfen(),
                "wdl": e.wdl,
                "score": e.score(),
                "legal_moves": legal.len(),
                "moves": moves,
            });
            if args.raw {
                obj["policy_logits"] = json!(raw.policy(i));
                obj["wdl_logits"] = json!(raw.wdl_logits(i));
            }
            println!("{obj}");
        } else {
            println!();
            println!("{}", pos.to_sfen());
            println!(
                "W/D/L {:.3} / {:.3} / {:.3}   score {:.3}   ({} legal moves)",
                e.wdl[0],
                e.wdl[1],
                e.wdl[2],
                e.score(),
                legal.len()
            );
            for (rank, &k) in order.iter().enumerate() {
                println!("{:>4}. {:<6} {:.4}", rank + 1, legal[k].to_usi(), e.priors[k]);
            }
        }
    }
    Ok(())
}
