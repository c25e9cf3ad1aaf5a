//! `koma perft`: count the leaves of the legal-move tree (bulk-counted), for checking the rules
//! core against published numbers and other engines, and for measuring its speed.

use std::time::Instant;

use anyhow::{Context, Result};
use koma_shogi::{divide, perft, Position};
use serde_json::json;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("start").required(true).args(["startpos", "sfen"])))]
pub struct Args {
    /// Start from the initial position of an even game.
    #[arg(long)]
    startpos: bool,
    /// Start from this SFEN.
    #[arg(long)]
    sfen: Option<String>,
    /// Depth in plies.
    #[arg(long)]
    depth: u32,
    /// Also print the count below each first move (sorted by USI), to compare with another engine.
    #[arg(long)]
    divide: bool,
    /// Print one JSON object: {"nodes", "seconds", "nps"} (and "divide" when asked).
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    let mut pos = match &args.sfen {
        Some(sfen) => Position::from_sfen(sfen).with_context(|| format!("--sfen {sfen:?}"))?,
        None => Position::startpos(),
    };
    let start = Instant::now();
    let (nodes, split) = if args.divide {
        let split = divide(&mut pos, args.depth);
        (split.iter().map(|(_, n)| n).sum::<u64>(), split)
    } else {
        (perft(&mut pos, args.depth), Vec::new())
    };
    let seconds = start.elapsed().as_secs_f64();
    let nps = if seconds > 0.0 { nodes as f64 / seconds } else { 0.0 };
    if args.json {
        let mut out = json!({ "nodes": nodes, "seconds": seconds, "nps": nps });
        if args.divide {
            out["divide"] = split.iter().map(|(m, n)| (m.clone(), json!(n))).collect::<serde_json::Map<_, _>>().into();
        }
        println!("{out}");
    } else {
        for (m, n) in &split {
            println!("{m}: {n}");
        }
        println!("perft({}) = {nodes}   {seconds:.3} s   {:.1} M nodes/s", args.depth, nps / 1e6);
    }
    Ok(())
}
