//! `koma rules`: the rules oracle interface. Reads USI position arguments, one per line, and writes
//! one JSON line for each: the sorted legal moves, whether the side to move is in check, the game
//! status and the SFEN — or `{"error": …}`. It never stops on a bad line.

use std::io::{BufRead, Write};

use anyhow::Result;
use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule};
use koma_shogi::usi::parse_position;
use serde_json::json;

use super::choices::{impasse_rule, max_moves_rule};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plies after which the game is drawn.
    #[arg(long, default_value_t = 512)]
    max_plies: u32,
    /// At the move limit: `draw`, or `checks` (JSA): when the move at the limit is a check, play
    /// on while every move of the checking side is a check; drawn at its first move that is not.
    #[arg(long, default_value = "draw", value_parser = max_moves_rule())]
    max_moves_rule: MaxMovesRule,
    /// Impasse rule: `csa27` (CSA 27-point declaration), `jsa24` (24-point: 31+ wins, 24–30 draws),
    /// `try` (the Try rule, once both kings have entered), `try-unconditional`, `jishogi`
    /// (jishōgi by agreement: adjudicated by the 24-point count once both kings have entered) or
    /// `none`.
    #[arg(long, default_value = "csa27", value_parser = impasse_rule())]
    impasse: ImpasseRule,
}

fn game_rules(args: &Args) -> GameRules {
    GameRules {
        max_plies: args.max_plies,
        max_moves_rule: args.max_moves_rule,
        impasse: args.impasse,
        ..GameRules::default()
    }
}

/// The JSON answer for one input line.
fn answer(line: &str, rules: &GameRules) -> serde_json::Value {
    match parse_position(line) {
        Err(err) => json!({ "error": err.to_string() }),
        Ok(pos) => {
            let mut legal: Vec<String> = pos.legal_moves().iter().map(|m| m.to_usi()).collect();
            legal.sort_unstable();
            json!({
                "legal": legal,
                "in_check": pos.in_check(),
                "status": pos.status(rules).name(),
                "sfen": pos.to_sfen(),
            })
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let rules = game_rules(&args);
    serve_json_lines(|line| answer(line, &rules))
}

/// The loop of the oracle commands (`koma rules`, `koma mate`): one JSON answer per stdin line,
/// flushed whenever the input has nothing more buffered (so a driver can talk line by line). A
/// bug must not take the oracle down with the rest of the batch: a panic becomes an error line.
pub(super) fn serve_json_lines(mut answer: impl FnMut(&str) -> serde_json::Value) -> Result<()> {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if input.read_until(b'\n', &mut buf)? == 0 {
            break;
        }
        let line = String::from_utf8_lossy(&buf);
        let line = line.trim_end_matches(['\n', '\r']);
        let value = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| answer(line)))
            .unwrap_or_else(|_| json!({ "error": format!("internal error while handling {line:?}") }));
        writeln!(out, "{value}")?;
        if input.fill_buf().map(|b| b.is_empty()).unwrap_or(true) {
            out.flush()?;
        }
    }
    out.flush()?;
    Ok(())
}
