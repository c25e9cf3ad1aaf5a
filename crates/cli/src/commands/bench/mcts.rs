//! `koma bench mcts`: search speed with a zero-cost evaluator (uniform priors, even value, no
//! network), single thread, over positions from random games — what the tree, the rules and the
//! bookkeeping cost per simulation — and the memory per node and edge.

use std::time::Instant;

use anyhow::Result;
use koma_base::Rng;
use koma_mcts::{Evaluation, Search, SearchConfig, Selection, EDGE_BYTES, NODE_BYTES};
use koma_shogi::rules::GameRules;
use koma_shogi::{Move, Position};
use rand::{RngExt, SeedableRng};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Simulations per search (one search per position).
    #[arg(long, default_value_t = 800)]
    simulations: u32,
    /// Number of positions (searches).
    #[arg(long, default_value_t = 200)]
    positions: usize,
    /// Mate search at new nodes: 0 off, 1 mate in one (the default config), 3 mate in three.
    #[arg(long, default_value_t = 1, value_parser = clap::builder::TypedValueParser::map(clap::builder::PossibleValuesParser::new(["0", "1", "3"]), |s: String| s.parse::<u32>().unwrap_or(1)))]
    mate_plies: u32,
}

/// Positions from quick random games, spread over the opening, middle game and endgame.
fn sample_positions(count: usize) -> Vec<Position> {
    let mut rng = Rng::seed_from_u64(2024);
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let mut pos = Position::startpos();
        let plies = 10 + rng.random_range(0..110);
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            let m: Move = moves[rng.random_range(0..moves.len())];
            pos.do_move(m);
        }
        if !pos.legal_moves().is_empty() {
            out.push(pos);
        }
    }
    out
}

pub fn run(args: Args) -> Result<()> {
    let positions = sample_positions(args.positions);
    let even = Evaluation { priors: Vec::new(), wdl: [0.0, 1.0, 0.0] };
    let mut simulations = 0u64;
    let mut nodes = 0usize;
    let mut edges_bytes = 0usize;
    let start = Instant::now();
    for (i, root) in positions.iter().enumerate() {
        let mut pos = root.clone();
        let config = SearchConfig { mate_plies: args.mate_plies, ..SearchConfig::default() };
        let mut search = Search::new(config, GameRules::default(), i as u64);
        search.start(&pos, args.simulations);
        let mut done = 0;
        while done < args.simulations {
            match search.select_leaf(&mut pos, |_| {}) {
                Selection::Leaf(id) => search.complete(id, &even),
                Selection::Resolved => {}
                Selection::Collision | Selection::Waiting | Selection::NoMoves => break,
            }
            done += 1;
        }
        simulations += done as u64;
        nodes += search.node_count();
        edges_bytes += search.memory_bytes() - search.node_count() * NODE_BYTES;
    }
    let seconds = start.elapsed().as_secs_f64();
    let per_second = simulations as f64 / seconds;
    let edges_per_node = edges_bytes as f64 / EDGE_BYTES as f64 / nodes.max(1) as f64;
    if args.json {
        println!(
            "{}",
            json!({
                "bench": "mcts", "threads": 1, "evaluator": "zero-cost uniform", "config": "self-play default (noise)", "mate_plies": args.mate_plies,
                "searches": positions.len(), "simulations_per_search": args.simulations,
                "simulations": simulations, "seconds": seconds, "simulations_per_second": per_second,
                "node_bytes": NODE_BYTES, "edge_bytes": EDGE_BYTES, "edges_per_node": edges_per_node,
                "bytes_per_visited_node": NODE_BYTES as f64 + edges_per_node * EDGE_BYTES as f64,
            })
        );
    } else {
        println!(
            "{simulations} simulations in {seconds:.2} s: {:.0} k simulations/s (1 thread, zero-cost evaluator, mate_plies {})",
            per_second / 1e3,
            args.mate_plies
        );
        println!(
            "node {NODE_BYTES} B + {edges_per_node:.1} edges × {EDGE_BYTES} B = {:.0} B per visited node",
            NODE_BYTES as f64 + edges_per_node * EDGE_BYTES as f64
        );
    }
    Ok(())
}
