//! `koma bench mate`: df-pn on a reproducible problem set (koma_mate::problems), next to cshogi's
//! df-pn on the same problems with the same depth and node limit (run through Python), each
//! problem with a fresh table. Problems solved per second is the fair figure: the two count nodes
//! alike (one per move made in the search) but spend different work per node.

use std::time::Instant;

use anyhow::{bail, Result};
use koma_mate::problems::random_problems;
use koma_mate::{DfPn, Limits, Outcome};
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    cshogi: super::CshogiArgs,
    /// Problems (positions from seeded random games with a check to give).
    #[arg(long, default_value_t = 300)]
    problems: usize,
    /// Seed of the problem set.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Longest mate searched, in plies.
    #[arg(long, default_value_t = 31)]
    depth: u32,
    /// Node limit per problem.
    #[arg(long, default_value_t = 100_000)]
    nodes: u64,
    /// MiB of koma's table.
    #[arg(long, default_value_t = koma_mate::DEFAULT_TABLE_MIB)]
    hash: usize,
}

#[derive(Deserialize)]
struct Reference {
    mate: bool,
    decided: bool,
    nodes: u64,
    seconds: f64,
    /// The length of cshogi's mate line (0 without one).
    #[serde(default)]
    plies: u32,
}

/// One solver's totals over the problem set.
#[derive(Default)]
struct Totals {
    mates: usize,
    no_mates: usize,
    undecided: usize,
    nodes: u64,
    seconds: f64,
}

impl Totals {
    fn json(&self, problems: usize) -> serde_json::Value {
        json!({
            "mates": self.mates, "no_mates": self.no_mates, "undecided": self.undecided,
            "nodes": self.nodes, "seconds": self.seconds,
            "problems_per_second": problems as f64 / self.seconds,
            "nodes_per_second": self.nodes as f64 / self.seconds,
        })
    }
}

pub fn run(args: Args) -> Result<()> {
    let problems = random_problems(args.problems, args.seed);
    let mut solver = DfPn::new(args.hash);
    let limits = Limits { max_plies: args.depth, max_nodes: args.nodes, ..Limits::default() };
    let mut koma = Totals::default();
    let mut outcomes = Vec::with_capacity(problems.len());
    let mut koma_nodes = Vec::with_capacity(problems.len());
    if !args.json {
        eprintln!("koma df-pn: {} problems, depth {}, {} nodes each …", problems.len(), args.depth, args.nodes);
    }
    for pos in &problems {
        let start = Instant::now();
        let outcome = solver.search(pos, &limits);
        koma.seconds += start.elapsed().as_secs_f64();
        koma.nodes += solver.nodes();
        koma_nodes.push(solver.nodes());
        match outcome {
            Outcome::Mate(_) => koma.mates += 1,
            Outcome::NoMate | Outcome::NoMateWithin => koma.no_mates += 1,
            Outcome::Unknown => koma.undecided += 1,
        }
        outcomes.push(outcome);
    }
    let mut report = json!({
        "bench": "mate", "problems": problems.len(), "seed": args.seed, "depth": args.depth,
        "node_limit": args.nodes, "hash_mib": args.hash, "koma": koma.json(problems.len()),
    });
    if !args.cshogi.skip {
        if !args.json {
            eprintln!("cshogi df-pn: the same problems and limits …");
        }
        let jobs: serde_json::Value =
            problems.iter().map(|p| json!({ "sfen": p.to_sfen(), "depth": args.depth, "nodes": args.nodes })).collect();
        let references: Vec<Reference> = super::run_cshogi(args.cshogi.python.as_deref(), "cshogi_mate", &jobs)?;
        if references.len() != problems.len() {
            bail!("the cshogi reference answered {} of {} problems", references.len(), problems.len());
        }
        let mut cshogi = Totals::default();
        let (mut disagreements, mut cshogi_only, mut koma_only) = (Vec::new(), Vec::new(), Vec::new());
        for (i, ((pos, outcome), r)) in problems.iter().zip(&outcomes).zip(&references).enumerate() {
            cshogi.seconds += r.seconds;
            cshogi.nodes += r.nodes;
            match (r.mate, r.decided) {
                (true, _) => cshogi.mates += 1,
                (false, true) => cshogi.no_mates += 1,
                (false, false) => cshogi.undecided += 1,
            }
            let koma_mate = matches!(outcome, Outcome::Mate(_));
            // cshogi may prove a mate longer than the depth (through its table), which koma's
            // "none within the depth" does not contradict.
            let koma_refuted = match outcome {
                Outcome::NoMate => true,
                Outcome::NoMateWithin => r.plies <= args.depth,
                _ => false,
            };
            if (koma_mate && !r.mate && r.decided) || (koma_refuted && r.mate) {
                disagreements.push(pos.to_sfen());
            }
            if r.mate && !koma_mate {
                cshogi_only.push(
                    json!({ "problem": i, "sfen": pos.to_sfen(), "cshogi_nodes": r.nodes, "cshogi_plies": r.plies }),
                );
            }
            if koma_mate && !r.mate {
                koma_only.push(json!({ "problem": i, "sfen": pos.to_sfen(), "koma_nodes": koma_nodes[i] }));
            }
        }
        let ratio = koma.json(problems.len())["problems_per_second"].as_f64().unwrap_or(f64::NAN)
            / cshogi.json(problems.len())["problems_per_second"].as_f64().unwrap_or(f64::NAN);
        report["cshogi"] = cshogi.json(problems.len());
        report["problems_per_second_ratio_vs_cshogi"] = json!(ratio);
        report["disagreements"] = json!(disagreements);
        report["mates_only_cshogi_found"] = json!(cshogi_only);
        report["mates_only_koma_found"] = json!(koma_only);
    }
    if args.json {
        println!("{report}");
    } else {
        println!(
            "{:<8} {:>6} {:>8} {:>10} {:>9} {:>10} {:>12}",
            "solver", "mates", "no mate", "undecided", "seconds", "problems/s", "k nodes/s"
        );
        for name in ["koma", "cshogi"] {
            let t = &report[name];
            if t.is_null() {
                continue;
            }
            let count = |k: &str| t[k].as_u64().unwrap_or(0);
            println!(
                "{:<8} {:>6} {:>8} {:>10} {:>9.2} {:>10.1} {:>12.0}",
                name,
                count("mates"),
                count("no_mates"),
                count("undecided"),
                t["seconds"].as_f64().unwrap_or(f64::NAN),
                t["problems_per_second"].as_f64().unwrap_or(f64::NAN),
                t["nodes_per_second"].as_f64().unwrap_or(f64::NAN) / 1e3
            );
        }
        if let Some(r) = report["problems_per_second_ratio_vs_cshogi"].as_f64() {
            println!("problems/s, koma / cshogi: {r:.2}×");
            for (key, who) in [("mates_only_cshogi_found", "only cshogi"), ("mates_only_koma_found", "only koma")] {
                let found = report[key].as_array().map(Vec::as_slice).unwrap_or_default();
                let problems: Vec<String> = found.iter().map(|m| m["problem"].to_string()).collect();
                println!(
                    "mates {who} found: {} {}",
                    found.len(),
                    if problems.is_empty() { String::new() } else { format!("(problems {})", problems.join(", ")) }
                );
            }
        }
    }
    if let Some(d) = report["disagreements"].as_array().filter(|d| !d.is_empty()) {
        bail!("koma and cshogi disagree (one proves a mate the other refutes) on {} problems: {d:?}", d.len());
    }
    Ok(())
}
