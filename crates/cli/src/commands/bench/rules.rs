//! `koma bench rules`: perft speed on three standard positions and the cost of one legal-move
//! generation, next to cshogi's bulk perft on the same positions (run through Python).

use std::time::Instant;

use anyhow::{bail, Result};
use koma_shogi::{perft, MoveList, Position};
use serde::Deserialize;
use serde_json::json;

struct Case {
    name: &'static str,
    sfen: &'static str,
    depth: u32,
}

const CASES: [Case; 3] = [
    Case { name: "startpos", sfen: koma_shogi::STARTPOS_SFEN, depth: 6 },
    Case { name: "max-moves-593", sfen: "R8/2K1S1SSk/4B4/9/9/9/9/9/1L1L1L3 b RBGSNLP3g3n17p 1", depth: 3 },
    Case { name: "midgame", sfen: "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w GR5pnsg 1", depth: 4 },
];

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cshogi: super::CshogiArgs,
    /// Reduce every depth by this much (for a quick smoke run).
    #[arg(long, default_value_t = 0)]
    shallower: u32,
    /// Rounds (each side's best time is kept).
    #[arg(long, default_value_t = 3)]
    rounds: u32,
}

#[derive(Deserialize)]
struct ReferenceResult {
    nodes: u64,
    seconds: f64,
}

/// Nanoseconds per `generate_legal` call on `pos`, over about a quarter of a second.
fn movegen_ns(pos: &Position) -> (f64, usize) {
    let mut list = MoveList::new();
    let mut calls = 0u64;
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < 0.25 {
        for _ in 0..1000 {
            pos.generate_legal(&mut list);
            std::hint::black_box(&list);
        }
        calls += 1000;
    }
    (start.elapsed().as_secs_f64() * 1e9 / calls as f64, list.len())
}

pub fn run(args: Args) -> Result<()> {
    let depth = |c: &Case| c.depth.saturating_sub(args.shallower).max(1);
    // Rounds alternate koma and cshogi and keep each side's best time: on a shared machine the
    // minimum is the estimate least disturbed by other work, and alternation exposes both sides
    // to the same conditions.
    let mut best_koma = vec![f64::INFINITY; CASES.len()];
    let mut best_cshogi = vec![f64::INFINITY; CASES.len()];
    let mut nodes = vec![0u64; CASES.len()];
    let jobs: serde_json::Value = CASES.iter().map(|c| json!({ "sfen": c.sfen, "depth": depth(c) })).collect();
    for round in 0..args.rounds.max(1) {
        for (i, case) in CASES.iter().enumerate() {
            let mut pos = Position::from_sfen(case.sfen)?;
            if !args.json {
                eprintln!("round {}: koma perft {} depth {} …", round + 1, case.name, depth(case));
            }
            let start = Instant::now();
            nodes[i] = perft(&mut pos, depth(case));
            best_koma[i] = best_koma[i].min(start.elapsed().as_secs_f64());
        }
        if !args.cshogi.skip {
            if !args.json {
                eprintln!("round {}: cshogi perft (same positions and depths) …", round + 1);
            }
            for (i, reference) in
                super::run_cshogi::<ReferenceResult>(args.cshogi.python.as_deref(), "cshogi_perft", &jobs)?
                    .into_iter()
                    .enumerate()
            {
                if reference.nodes != nodes[i] {
                    bail!(
                        "node counts differ from cshogi on {}: koma {} vs cshogi {}",
                        CASES[i].name,
                        nodes[i],
                        reference.nodes
                    );
                }
                best_cshogi[i] = best_cshogi[i].min(reference.seconds);
            }
        }
    }
    let mut rows = Vec::new();
    for (i, case) in CASES.iter().enumerate() {
        let pos = Position::from_sfen(case.sfen)?;
        let (ns, legal) = movegen_ns(&pos);
        let nps = nodes[i] as f64 / best_koma[i];
        let mut row = json!({
            "name": case.name, "sfen": case.sfen, "depth": depth(case), "nodes": nodes[i],
            "seconds": best_koma[i], "nps": nps,
            "legal_moves": legal, "movegen_ns_per_call": ns, "movegen_calls_per_second": 1e9 / ns,
        });
        if !args.cshogi.skip {
            let cshogi_nps = nodes[i] as f64 / best_cshogi[i];
            row["cshogi_seconds"] = json!(best_cshogi[i]);
            row["cshogi_nps"] = json!(cshogi_nps);
            row["ratio_vs_cshogi"] = json!(nps / cshogi_nps);
        }
        rows.push(row);
    }
    if args.json {
        println!(
            "{}",
            json!({ "bench": "rules", "threads": 1, "rounds": args.rounds, "timing": "best of rounds", "positions": rows })
        );
        return Ok(());
    }
    println!(
        "{:<15} {:>5} {:>12} {:>10} {:>12} {:>10} {:>8}",
        "position", "depth", "nodes", "M nps", "cshogi M nps", "ratio", "ns/gen"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "{:<15} {:>5} {:>12} {:>10.1} {:>12.1} {:>9.2}x {:>8.0}",
            r["name"].as_str().unwrap_or(""),
            r["depth"],
            r["nodes"],
            f("nps") / 1e6,
            f("cshogi_nps") / 1e6,
            f("ratio_vs_cshogi"),
            f("movegen_ns_per_call")
        );
    }
    Ok(())
}
