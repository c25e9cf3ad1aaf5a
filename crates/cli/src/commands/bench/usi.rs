//! `koma bench usi`: the USI engine's nodes per second by search thread count (`SearchThreads`),
//! each figure from a `koma usi` process of its own searching fixed positions for `--movetime`,
//! the thread counts taking turns over `--rounds` (the best of each kept: a shared machine only
//! ever slows a measurement down).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use koma_nn::{ModelConfig, Network, RunOptions, TrainingInfo};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Search thread counts to compare.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    threads: Vec<u64>,
    /// A checkpoint to search with (default: a fresh network of --net).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Preset or model config file of the fresh network when no --model is given.
    #[arg(long, default_value = "tiny")]
    net: String,
    /// Milliseconds per search.
    #[arg(long, default_value_t = 3000)]
    movetime: u64,
    #[arg(long, default_value_t = 2)]
    rounds: usize,
    /// The engine's BatchSize (0: its default, 8 on the CPU, 32 on CUDA).
    #[arg(long, default_value_t = 0)]
    batch_size: u64,
    /// The engine's Device.
    #[arg(long, default_value = "cpu")]
    device: String,
}

/// Positions searched by every measurement: the start, a bishop exchange, a ranging rook.
const POSITIONS: [&str; 3] = [
    "startpos",
    "startpos moves 7g7f 3c3d 2g2f 8c8d 2f2e 8d8e 6i7h 4a3b 2e2d 2c2d 2h2d 8e8f 8g8f 8b8f",
    "startpos moves 7g7f 3c3d 2g2f 4c4d 3i4h 3a4b 5g5f 8b4b 2f2e 2b3c 4i5h 5a6b 5i6h 6b7b 6h7h 7a8b",
];

/// Nodes per second of one `koma usi` process with `threads` search threads: the mean over the
/// positions of the last `info` line's nps.
fn measure(koma: &Path, model: &Path, args: &Args, threads: u64) -> Result<f64> {
    let mut child = Command::new(koma)
        .arg("usi")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {} usi", koma.display()))?;
    let mut input = child.stdin.take().context("engine stdin")?;
    let mut output = BufReader::new(child.stdout.take().context("engine stdout")?);
    let mut send = |line: &str| writeln!(input, "{line}").context("writing to the engine");
    send("usi")?;
    send(&format!("setoption name Model value {}", model.display()))?;
    send(&format!("setoption name Device value {}", args.device))?;
    send(&format!("setoption name SearchThreads value {threads}"))?;
    send(&format!("setoption name BatchSize value {}", args.batch_size))?;
    send("setoption name MateRootPlies value 0")?;
    send("isready")?;
    let mut read_until = |prefix: &str| -> Result<Vec<String>> {
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            if output.read_line(&mut line)? == 0 {
                bail!("the engine ended before `{prefix}` (threads {threads})");
            }
            let line = line.trim_end().to_string();
            let done = line.starts_with(prefix);
            lines.push(line);
            if done {
                return Ok(lines);
            }
        }
    };
    read_until("readyok")?;
    let mut rates = Vec::new();
    for position in POSITIONS {
        send("usinewgame")?;
        send(&format!("position {position}"))?;
        send(&format!("go movetime {}", args.movetime))?;
        let lines = read_until("bestmove")?;
        let nps = lines
            .iter()
            .rev()
            .find_map(|l| {
                let mut words = l.split_whitespace().skip_while(|w| *w != "nps");
                words.next()?;
                words.next()?.parse::<f64>().ok()
            })
            .with_context(|| format!("no nps in the engine's info lines ({position})"))?;
        rates.push(nps);
    }
    send("quit")?;
    child.wait()?;
    Ok(rates.iter().sum::<f64>() / rates.len() as f64)
}

pub fn run(args: Args) -> Result<()> {
    if args.threads.is_empty() || args.threads.contains(&0) {
        bail!("--threads: thread counts of at least 1");
    }
    let koma = std::env::current_exe().context("the koma binary")?;
    let scratch = tempfile::tempdir()?;
    let model = match &args.model {
        Some(m) => m.clone(),
        None => {
            let config = ModelConfig::from_preset_or_file(&args.net)?;
            let path = scratch.path().join("bench.safetensors");
            Network::new(&config, &RunOptions::cpu(), Some(1))?.save(&path, &TrainingInfo::default())?;
            path
        }
    };
    let mut best = vec![0.0f64; args.threads.len()];
    for round in 0..args.rounds.max(1) {
        for k in 0..args.threads.len() {
            let i = (k + round) % args.threads.len();
            let nps = measure(&koma, &model, &args, args.threads[i])?;
            if !args.json {
                eprintln!("round {}: {} search threads: {nps:.0} nps", round + 1, args.threads[i]);
            }
            best[i] = best[i].max(nps);
        }
    }
    let base = best[0];
    let rows: Vec<_> = args
        .threads
        .iter()
        .zip(&best)
        .map(|(&t, &nps)| json!({ "threads": t, "nps": nps, "speedup": nps / base }))
        .collect();
    if args.json {
        println!(
            "{}",
            json!({ "model": model, "device": args.device, "movetime_ms": args.movetime, "rounds": args.rounds, "results": rows })
        );
    } else {
        println!("search threads   nps        speedup over {} thread(s)", args.threads[0]);
        for (&t, &nps) in args.threads.iter().zip(&best) {
            println!("{t:>14}   {nps:>9.0}  {:>6.2}", nps / base);
        }
    }
    Ok(())
}
