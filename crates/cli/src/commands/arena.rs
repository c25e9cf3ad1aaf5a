//! `koma arena`: a match between two players (koma checkpoints, reference players, USI engines)
//! in colour-swapped pairs from an opening suite, with live W/D/L, Elo ± 95% CI and SPRT.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use koma_arena::matches::{run_match, MatchConfig, PlayerFactory};
use koma_arena::openings::read_suite;
use koma_arena::player::Player;
use koma_arena::stats::Sprt;
use koma_arena::usi_client::{GoLimit, UsiEngine, UsiEngineConfig};
use koma_pipeline::players::{checkpoint_factory, reference_factory, split_budget};
use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule};
use koma_shogi::Handicap;

use super::choices::{impasse_rule, max_moves_rule};
use super::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A player, given twice: `random`, `greedy`, `mcts-material[@BUDGET]`, a checkpoint path
    /// `models/model-00001000.safetensors[@BUDGET]`, or `usi:COMMAND [ARGS…]` for a USI engine.
    /// BUDGET is simulations per move (`@800`) or milliseconds per move (`@500ms`).
    #[arg(long = "player", required = true, num_args = 1)]
    players: Vec<String>,
    /// Games (rounded up to colour-swapped pairs).
    #[arg(long, default_value_t = 100)]
    games: usize,
    /// Opening suite: a file of USI positions, one per line, or `builtin:balanced-8` (the suite
    /// the pipeline and `koma experiment` use). Default: the start position.
    #[arg(long, conflicts_with = "handicap")]
    openings: Option<String>,
    /// Start every game from this handicap (`lance`, `right-lance`, `two-piece`, `three-piece`,
    /// `five-piece`, `left-five-piece`, … or the KIF name such as 二枚落ち).
    #[arg(long)]
    handicap: Option<String>,
    /// Games played at once.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Stop early on a decision: elo0,elo1,alpha,beta.
    #[arg(long)]
    sprt: Option<String>,
    /// Simulations per move for search players without @SIMS.
    #[arg(long, default_value_t = 200)]
    simulations: u32,
    /// Milliseconds per move for USI engines (byoyomi).
    #[arg(long, default_value_t = 1000)]
    byoyomi: u64,
    /// Plies after which a game is drawn.
    #[arg(long, default_value_t = 320)]
    max_plies: u32,
    /// At the move limit: `draw`, or `checks` (JSA: play on while the checking side keeps checking).
    #[arg(long, default_value = "draw", value_parser = max_moves_rule())]
    max_moves_rule: MaxMovesRule,
    /// Impasse rule.
    #[arg(long, default_value = "csa27", value_parser = impasse_rule())]
    impasse: ImpasseRule,
    /// Results are appended here, one JSON line per game.
    #[arg(long, default_value = "arena/results.jsonl")]
    results: PathBuf,
    /// Each game is saved here as a UTF-8 KIF file.
    #[arg(long, default_value = "arena/games")]
    records: PathBuf,
    /// Print the result as one JSON object on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    run: RunArgs,
}

/// The match's result for scripts: the same figures as the text summary.
fn result_json(state: &koma_arena::matches::MatchState, args: &Args) -> serde_json::Value {
    let elo = state.elo().map(|e| serde_json::json!({ "elo": e.elo, "lower": e.lower, "upper": e.upper }));
    let colour = |i: usize| serde_json::json!({ "points": state.by_colour[i].0, "games": state.by_colour[i].1 });
    serde_json::json!({
        "a": state.a_name,
        "b": state.b_name,
        "games": state.played,
        "wins": state.wins,
        "draws": state.draws,
        "losses": state.losses,
        "score": state.score(),
        "elo": elo,
        "as_black": colour(0),
        "as_white": colour(1),
        "sprt": state.decision.map(|d| serde_json::json!({ "decision": format!("{d:?}"), "llr": state.llr })),
        "results": args.results,
        "records": args.records,
    })
}

fn factory(spec: &str, simulations: u32, byoyomi: u64, rules: GameRules, run: &RunArgs) -> Result<PlayerFactory> {
    if let Some(command) = spec.strip_prefix("usi:") {
        let mut words = command.split_whitespace().map(String::from);
        let program = words.next().context("usi: needs a command")?;
        let config = UsiEngineConfig {
            name: String::new(),
            command: program,
            args: words.collect(),
            options: vec![],
            limit: GoLimit::Byoyomi(byoyomi),
            margin: Duration::from_millis(1000),
            startup_timeout: Duration::from_secs(60),
        };
        return Ok(Arc::new(move |_| UsiEngine::start(config.clone()).map(|e| Box::new(e) as Box<dyn Player>)));
    }
    if let Ok(reference) = reference_factory(spec, simulations, rules) {
        return Ok(reference);
    }
    let (path, budget) = split_budget(spec, simulations).map_err(anyhow::Error::msg)?;
    let path = PathBuf::from(path);
    if !path.exists() {
        bail!("player {spec:?}: not random, greedy, mcts-material, usi:… or an existing checkpoint");
    }
    checkpoint_factory(&path, budget, rules, &run.options()?).with_context(|| format!("loading {}", path.display()))
}

pub fn run(args: Args) -> Result<()> {
    if args.players.len() != 2 {
        bail!("--player must be given exactly twice (found {})", args.players.len());
    }
    let rules = GameRules {
        max_plies: args.max_plies,
        max_moves_rule: args.max_moves_rule,
        impasse: args.impasse,
        ..GameRules::default()
    };
    let a = factory(&args.players[0], args.simulations, args.byoyomi, rules, &args.run)?;
    let b = factory(&args.players[1], args.simulations, args.byoyomi, rules, &args.run)?;
    let openings = match (&args.openings, &args.handicap) {
        (Some(spec), _) => {
            let text = koma_pipeline::config::opening_suite_text(spec).map_err(anyhow::Error::msg)?.unwrap_or_default();
            read_suite(&text).map_err(anyhow::Error::msg).with_context(|| format!("--openings {spec}"))?
        }
        (None, Some(name)) => match Handicap::from_name(name) {
            Some(h) => vec![h.position()],
            None => bail!("--handicap {name:?}: expected one of {}", Handicap::names()),
        },
        (None, None) => Vec::new(),
    };
    let sprt = args.sprt.as_deref().map(Sprt::parse).transpose().map_err(anyhow::Error::msg)?;
    let config = MatchConfig {
        games: args.games,
        concurrency: args.concurrency,
        rules,
        openings,
        sprt,
        results: Some(args.results.clone()),
        records: Some(args.records.clone()),
        cancel: Some(crate::interrupt::stop_flag()),
    };
    let bar = ProgressBar::new(args.games.div_ceil(2) as u64 * 2);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} games  {msg}").expect("valid template"));
    let state = run_match(a, b, &config, &mut |_, s| {
        bar.set_position(s.played as u64);
        let elo = s.elo().map(|e| format!("Elo {:+.0} ± {:.0}", e.elo, e.margin())).unwrap_or_default();
        let llr = s.llr.map(|l| format!("  LLR {l:.2}")).unwrap_or_default();
        bar.set_message(format!("+{} ={} -{}  score {:.3}  {elo}{llr}", s.wins, s.draws, s.losses, s.score()));
    })
    .map_err(anyhow::Error::msg)?;
    bar.finish_and_clear();
    if crate::interrupt::stop_flag().load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("interrupted: the games in progress were dropped; {} finished games are scored below", state.played);
    }
    if args.json {
        println!("{}", result_json(&state, &args));
        return Ok(());
    }
    println!(
        "{} vs {}: {} games, +{} ={} -{}, score {:.3}",
        state.a_name,
        state.b_name,
        state.played,
        state.wins,
        state.draws,
        state.losses,
        state.score()
    );
    if let Some(e) = state.elo() {
        println!("Elo difference {:+.1} (95% CI {:+.1} … {:+.1})", e.elo, e.lower, e.upper);
    }
    for (i, colour) in ["Black", "White"].iter().enumerate() {
        let (points, games) = state.by_colour[i];
        if games > 0 {
            println!("as {colour}: {points:.1}/{games}");
        }
    }
    if let Some(d) = state.decision {
        println!("SPRT: {d:?} (LLR {:.2})", state.llr.unwrap_or(0.0));
    }
    println!("results appended to {}, games saved under {}", args.results.display(), args.records.display());
    Ok(())
}
