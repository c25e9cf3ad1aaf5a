//! `koma mate`: the mate solver's oracle interface. Reads USI position arguments, one per line,
//! and writes one JSON line for each: whether the side to move mates (df-pn, koma-mate), the line
//! when it does, and the descents and time it took — or `{"error": …}`. It never stops on a bad
//! line. docs/mate.md describes the answers.

use std::time::{Duration, Instant};

use anyhow::Result;
use koma_mate::{DfPn, Limits, Outcome};
use koma_shogi::usi::parse_position;
use serde_json::json;

use super::rules::serve_json_lines;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The depth searched, in plies (attacker and defender moves): every mate this long or
    /// shorter is found given the nodes; a longer one only through a transposition.
    #[arg(long, default_value_t = 31)]
    plies: u32,
    /// Report only mates that fit in `--plies` (proofs met through transpositions that take
    /// longer are not used; fewer mates at equal nodes).
    #[arg(long)]
    within_plies: bool,
    /// After a mate, look for the shortest one and its main line (the longest defence), as
    /// `go mate` does, with up to `--nodes` further descents: `"shortest": true` once proved.
    #[arg(long)]
    shortest: bool,
    /// Descents (moves made in the search) before giving up: `unknown`.
    #[arg(long, default_value_t = 1_000_000)]
    nodes: u64,
    /// Milliseconds per position before giving up (0: no limit).
    #[arg(long, default_value_t = 0)]
    millis: u64,
    /// MiB of the solver's table (each position starts with an empty one).
    #[arg(long, default_value_t = koma_mate::DEFAULT_TABLE_MIB)]
    hash: usize,
}

pub fn run(args: Args) -> Result<()> {
    let mut solver = DfPn::new(args.hash);
    serve_json_lines(|line| {
        let pos = match parse_position(line) {
            Ok(pos) => pos,
            Err(err) => return json!({ "error": err.to_string() }),
        };
        let started = Instant::now();
        let limits = Limits {
            max_plies: args.plies,
            max_nodes: args.nodes,
            deadline: (args.millis > 0).then(|| started + Duration::from_millis(args.millis)),
            stop: None,
            proofs_within_depth: args.within_plies,
        };
        let (outcome, shortest) = if args.shortest {
            let answer = solver.search_shortest(&pos, &limits, args.nodes, |_, _| {});
            (answer.outcome, Some(answer.proved))
        } else {
            (solver.search(&pos, &limits), None)
        };
        let seconds = started.elapsed().as_secs_f64();
        let (result, pv) = match &outcome {
            Outcome::Mate(line) => ("mate", line.iter().map(|m| m.to_usi()).collect()),
            Outcome::NoMate => ("nomate", Vec::new()),
            Outcome::NoMateWithin => ("nomate_within", Vec::new()),
            Outcome::Unknown => ("unknown", Vec::new()),
        };
        let mut answer = json!({ "result": result, "pv": pv, "nodes": solver.nodes(), "seconds": seconds });
        if let Some(proved) = shortest {
            answer["shortest"] = json!(proved);
        }
        answer
    })
}
