//! `koma arena`: a match between two players (koma checkpoints, reference players, USI engines)
//! in colour-swapped pairs from an opening suite, with live W/D/L, Elo ± 95% CI and SPRT; or a
//! round robin or gauntlet of more, all games rated together. USI engines take options and play
//! on clocks (main time, byoyomi or increment) that the arena keeps.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Arg, ArgAction, ArgMatches};
use indicatif::{ProgressBar, ProgressStyle};
use koma_arena::clock::{parse_duration, TimeControl, Timing};
use koma_arena::matches::{run_match, MatchConfig, PlayerFactory};
use koma_arena::player::{Overridden, Player};
use koma_arena::spec::{parse_option, parse_player, PlayerKind, PlayerSpec};
use koma_arena::stats::Sprt;
use koma_arena::tournament::{pairings, run_tournament, Entrant, Format, Tournament};
use koma_arena::usi_client::{GoLimit, UsiEngine, UsiEngineConfig};
use koma_pipeline::players::{
    checkpoint_factory, reference_factory, split_budget, PlayRoot, PlaySearch, PlayerNameError,
};
use koma_shogi::rules::{GameRules, ImpasseRule, MaxMovesRule};
use koma_shogi::{Handicap, OpeningSuite};

use super::choices::{impasse_rule, max_moves_rule, play_root};
use super::nn_args::RunArgs;

/// The `--player` values, each with the `--option NAME=VALUE`s that follow it, in command-line
/// order (clap's derive cannot interleave two flags, so this part is written by hand).
#[derive(Debug, Clone)]
pub struct PlayerList(Vec<(String, Vec<String>)>);

impl clap::FromArgMatches for PlayerList {
    fn from_arg_matches(matches: &ArgMatches) -> std::result::Result<Self, clap::Error> {
        let indexed = |id: &str| -> Vec<(usize, String)> {
            match (matches.indices_of(id), matches.get_many::<String>(id)) {
                (Some(i), Some(v)) => i.zip(v.cloned()).collect(),
                _ => Vec::new(),
            }
        };
        let mut players: Vec<(usize, String, Vec<String>)> =
            indexed("player").into_iter().map(|(i, p)| (i, p, Vec::new())).collect();
        for (index, option) in indexed("option") {
            match players.iter_mut().rev().find(|p| p.0 < index) {
                Some(player) => player.2.push(option),
                None => {
                    return Err(clap::Error::raw(
                        clap::error::ErrorKind::ArgumentConflict,
                        format!("--option {option}: an option applies to the --player before it, and there is none\n"),
                    ))
                }
            }
        }
        Ok(PlayerList(players.into_iter().map(|(_, p, o)| (p, o)).collect()))
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> std::result::Result<(), clap::Error> {
        *self = Self::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Args for PlayerList {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        cmd.arg(
            Arg::new("player")
                .long("player")
                .action(ArgAction::Append)
                .required(true)
                .value_name("SPEC")
                .help("A player (twice for a match, more with --round-robin or --gauntlet): random, greedy, mcts-material[@BUDGET], alphabeta@DEPTH, a checkpoint PATH.safetensors[@BUDGET], usi:PATH [ARGS…] for a USI engine, or file:PLAYER.toml")
                .long_help("A player (twice for a match, more with --round-robin or --gauntlet): `random`, `greedy`, `mcts-material[@BUDGET]`, `alphabeta@DEPTH` (a material alpha-beta search of DEPTH plies, 1 to 4, with quiescence), a checkpoint `models/model-00001000.safetensors[@BUDGET]`, `usi:PATH [ARGS…]` for a USI engine (a path with spaces is given whole, or quoted: no shell is involved), or a player file `file:PLAYER.toml` (engine path, args, options, name and time control; docs/arena.md). BUDGET is simulations per move (`@800`) or milliseconds per move (`@500ms`)."),
        )
        .arg(
            Arg::new("option")
                .long("option")
                .action(ArgAction::Append)
                .value_name("NAME=VALUE")
                .help("A USI option for the --player before it (sent as setoption after usiok; repeatable)"),
        )
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    players: PlayerList,
    /// Every pair of players plays a match (games per pairing: --games); all games are rated
    /// together.
    #[arg(long, conflicts_with = "gauntlet")]
    round_robin: bool,
    /// The first player plays a match against each of the others; all games are rated together.
    #[arg(long)]
    gauntlet: bool,
    /// Games per pairing (rounded up to colour-swapped pairs).
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
    /// Checkpoints' root: `puct`, or `gumbel` (Gumbel AlphaZero's sequential halving over the
    /// 16 likeliest moves, without draws).
    #[arg(long, default_value = PlaySearch::default().root.name(), value_parser = play_root())]
    root: PlayRoot,
    /// Leaves a checkpoint's search adds to one batch: fewer make the same simulations choose
    /// more carefully (each batch sees the values of the last), more evaluate faster.
    #[arg(long, default_value_t = PlaySearch::default().leaves as u16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    leaves: u16,
    /// USI engines' main time (`60s`, `2m`, `500ms`; a bare number is milliseconds). With
    /// neither --byoyomi nor --increment: sudden death.
    #[arg(long, value_parser = duration)]
    main_time: Option<Duration>,
    /// USI engines' byoyomi: time per move once the main time is spent (default 1s when no time
    /// control is given at all; a bare number is milliseconds).
    #[arg(long, value_parser = duration)]
    byoyomi: Option<Duration>,
    /// USI engines' increment, added after each move (Fischer); excludes --byoyomi.
    #[arg(long, value_parser = duration)]
    increment: Option<Duration>,
    /// Grace beyond a clock's allowance before a move loses on time (pipe and process latency).
    #[arg(long, value_parser = duration, default_value = "100ms")]
    time_margin: Duration,
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
    /// Print the result as one JSON object on stdout (for a round robin or gauntlet: players
    /// with Elo ± 95% CI, and W/D/L per pairing; docs/arena.md).
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

fn duration(text: &str) -> std::result::Result<Duration, koma_arena::error::SpecError> {
    parse_duration(text)
}

/// The time control USI engines play on unless their player file sets one: the flags, or 1 s of
/// byoyomi per move when none is given (what `--byoyomi 1000` always was).
fn engine_time_control(args: &Args) -> Result<TimeControl> {
    let (main, byoyomi, increment) = (args.main_time, args.byoyomi, args.increment);
    if main.is_none() && byoyomi.is_none() && increment.is_none() {
        return Ok(TimeControl::byoyomi_only(Duration::from_secs(1)));
    }
    TimeControl::new(main.unwrap_or_default(), byoyomi.unwrap_or_default(), increment.unwrap_or_default())
        .context("--main-time/--byoyomi/--increment")
}

/// A player's factory. A USI engine plays on its player file's time control, else the match's;
/// a built-in player or checkpoint keeps its simulation budget unless its player file gives it a
/// clock, on which it then searches ([`koma_arena::clock::TurnClock::move_budget`]) and can lose
/// on time.
fn factory(spec: &PlayerSpec, args: &Args, engine_time: TimeControl, rules: GameRules) -> Result<PlayerFactory> {
    let margin = args.time_margin;
    let built = match &spec.kind {
        PlayerKind::Engine { path, args: engine_args } => {
            let command = path.to_str().with_context(|| format!("engine path {} is not UTF-8", path.display()))?;
            let config = UsiEngineConfig {
                name: spec.name.clone().unwrap_or_default(),
                command: command.to_string(),
                args: engine_args.clone(),
                options: spec.options.clone(),
                limit: GoLimit::Clock(spec.time.unwrap_or(engine_time)),
                margin,
                startup_timeout: Duration::from_secs(60),
                working_dir: spec.dir.clone(),
            };
            return Ok(Arc::new(move |_| Ok(Box::new(UsiEngine::start(config.clone())?) as Box<dyn Player>)));
        }
        PlayerKind::Builtin(text) => builtin_factory(text, args, rules)?,
    };
    if spec.name.is_none() && spec.time.is_none() {
        return Ok(built);
    }
    let (name, timing) = (spec.name.clone(), spec.time.map(|control| Timing { control, margin }));
    Ok(Arc::new(move |seed| {
        built(seed).map(|inner| Box::new(Overridden { name: name.clone(), timing, inner }) as Box<dyn Player>)
    }))
}

fn builtin_factory(spec: &str, args: &Args, rules: GameRules) -> Result<PlayerFactory> {
    match reference_factory(spec, args.simulations, rules) {
        Ok(reference) => return Ok(reference),
        Err(PlayerNameError::NotReference(_)) => {}
        Err(error @ PlayerNameError::Depth { .. }) => return Err(error.into()),
        // Not a reference's budget: perhaps a checkpoint's, read again below.
        Err(PlayerNameError::Budget { .. }) => {}
    }
    let (path, budget) = split_budget(spec, args.simulations)?;
    let path = PathBuf::from(path);
    if !path.exists() {
        bail!("player {spec:?}: not random, greedy, mcts-material, alphabeta@D, usi:…, file:….toml or an existing checkpoint");
    }
    let search = PlaySearch { root: args.root, leaves: usize::from(args.leaves) };
    checkpoint_factory(&path, budget, search, rules, &args.run.options()?)
        .with_context(|| format!("loading {}", path.display()))
}

/// The players, named: each factory is asked once for its player's name, and a name already
/// taken (two engines reporting the same `id name`) gets `#2`, `#3`, … so that results and
/// ratings tell them apart.
fn entrants(args: &Args, rules: GameRules) -> Result<Vec<Entrant>> {
    let engine_time = engine_time_control(args)?;
    let mut out: Vec<Entrant> = Vec::new();
    for (k, (text, options)) in args.players.0.iter().enumerate() {
        let context = || format!("--player {text:?} (player {})", k + 1);
        let mut spec = parse_player(text).with_context(context)?;
        for option in options {
            let (name, value) = parse_option(option).with_context(context)?;
            spec.set_option(&name, &value).with_context(context)?;
        }
        let built = factory(&spec, args, engine_time, rules).with_context(context)?;
        let own = built(0).map_err(anyhow::Error::from_boxed).with_context(context)?.name();
        let mut name = own.clone();
        let mut n = 1;
        while out.iter().any(|e| e.name == name) {
            n += 1;
            name = format!("{own}#{n}");
        }
        let factory: PlayerFactory = if name == own {
            built
        } else {
            let renamed = name.clone();
            Arc::new(move |seed| {
                built(seed).map(|inner| {
                    Box::new(Overridden { name: Some(renamed.clone()), timing: None, inner }) as Box<dyn Player>
                })
            })
        };
        out.push(Entrant { name, factory });
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<()> {
    let format = match (args.round_robin, args.gauntlet) {
        (true, _) => Some(Format::RoundRobin),
        (_, true) => Some(Format::Gauntlet),
        _ => None,
    };
    let count = args.players.0.len();
    match format {
        None if count != 2 => {
            bail!("--player must be given twice for a match (found {count}); more players need --round-robin or --gauntlet")
        }
        Some(f) if count < 2 => bail!("--{} needs at least two players (found {count})", f.name()),
        Some(f) if args.sprt.is_some() => bail!("--sprt is for a match of two players, not a --{}", f.name()),
        _ => {}
    }
    let rules = GameRules {
        max_plies: args.max_plies,
        max_moves_rule: args.max_moves_rule,
        impasse: args.impasse,
        ..GameRules::default()
    };
    let openings = match (&args.openings, &args.handicap) {
        (Some(spec), _) => {
            let suite = OpeningSuite::load(spec).with_context(|| format!("--openings {spec}"))?;
            suite.map(|suite| suite.positions().to_vec()).unwrap_or_default()
        }
        (None, Some(name)) => match Handicap::from_name(name) {
            Some(h) => vec![h.position()],
            None => bail!("--handicap {name:?}: expected one of {}", Handicap::names()),
        },
        (None, None) => Vec::new(),
    };
    let sprt = args.sprt.as_deref().map(Sprt::parse).transpose()?;
    let entrants = entrants(&args, rules)?;
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
    match format {
        Some(format) => run_many(&args, format, &entrants, &config),
        None => run_two(&args, &entrants, &config),
    }
}

fn interrupted_note(played: usize) {
    if crate::interrupt::stop_flag().load(std::sync::atomic::Ordering::SeqCst) {
        eprintln!("interrupted: the games in progress were dropped; {played} finished games are scored below");
    }
}

fn run_two(args: &Args, entrants: &[Entrant], config: &MatchConfig) -> Result<()> {
    let (a, b) = (entrants[0].factory.clone(), entrants[1].factory.clone());
    let bar = ProgressBar::new(args.games.div_ceil(2) as u64 * 2);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} games  {msg}").expect("valid template"));
    let state = run_match(a, b, config, &mut |_, s| {
        bar.set_position(s.played as u64);
        let elo = s.elo().map(|e| format!("Elo {:+.0} ± {:.0}", e.elo, e.margin())).unwrap_or_default();
        let llr = s.llr.map(|l| format!("  LLR {l:.2}")).unwrap_or_default();
        bar.set_message(format!("+{} ={} -{}  score {:.3}  {elo}{llr}", s.wins, s.draws, s.losses, s.score()));
    })?;
    bar.finish_and_clear();
    interrupted_note(state.played);
    if args.json {
        println!("{}", result_json(&state, args));
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

/// A round robin or gauntlet: the pairings one after another, one progress bar over all games,
/// then a table of every player's Elo ± 95% CI (all games fitted together, the first player at
/// 0) and each pairing's W/D/L.
fn run_many(args: &Args, format: Format, entrants: &[Entrant], config: &MatchConfig) -> Result<()> {
    let plan = pairings(entrants.len(), format);
    let per_pairing = args.games.div_ceil(2).max(1) * 2;
    let bar = ProgressBar::new((plan.len() * per_pairing) as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} games  {msg}").expect("valid template"));
    let tournament = run_tournament(entrants, format, config, &mut |k, _, s| {
        bar.set_position((k * per_pairing + s.played) as u64);
        bar.set_message(format!(
            "pairing {}/{}: {} vs {} +{} ={} -{}",
            k + 1,
            plan.len(),
            s.a_name,
            s.b_name,
            s.wins,
            s.draws,
            s.losses
        ));
    })?;
    bar.finish_and_clear();
    interrupted_note(tournament.games);
    if args.json {
        println!("{}", tournament_json(&tournament, args));
        return failed_pairings(&tournament);
    }
    println!(
        "{} of {} players: {} games ({per_pairing} per pairing), Elo relative to {}",
        format.name(),
        tournament.players.len(),
        tournament.games,
        tournament.anchor.as_deref().unwrap_or("nobody (no game was finished)")
    );
    let width = tournament.players.iter().map(|p| p.chars().count()).max().unwrap_or(6).max(6);
    println!("{:>4}  {:<width$}  {:>8}  {:>8}  {:>6}  {:>7}", "rank", "player", "Elo", "± 95%", "games", "points");
    for (rank, r) in tournament.ratings.iter().enumerate() {
        println!(
            "{:>4}  {:<width$}  {:>+8.1}  {:>8.1}  {:>6}  {:>7.1}",
            rank + 1,
            r.player,
            r.elo,
            r.margin,
            r.games,
            r.points
        );
    }
    for p in &tournament.pairings {
        let s = &p.state;
        let elo = s.elo().map(|e| format!("  Elo {:+.0} ± {:.0}", e.elo, e.margin())).unwrap_or_default();
        println!("{} vs {}: +{} ={} -{}, score {:.3}{elo}", s.a_name, s.b_name, s.wins, s.draws, s.losses, s.score());
    }
    for f in &tournament.failed {
        let (a, b) = (&tournament.players[f.a], &tournament.players[f.b]);
        match &f.state {
            Some(s) => println!("{a} vs {b}: +{} ={} -{} before it failed", s.wins, s.draws, s.losses),
            None => println!("{a} vs {b}: failed before its first game"),
        }
    }
    println!("results appended to {}, games saved under {}", args.results.display(), args.records.display());
    failed_pairings(&tournament)
}

/// After the results of the rest: an error naming every pairing that failed.
fn failed_pairings(tournament: &Tournament) -> Result<()> {
    if tournament.failed.is_empty() {
        return Ok(());
    }
    let errors: Vec<String> = tournament.failed.iter().map(|f| f.describe(&tournament.players)).collect();
    bail!(
        "{} of {} pairings failed (their finished games are rated above): {}",
        tournament.failed.len(),
        tournament.failed.len() + tournament.pairings.len(),
        errors.join("; ")
    )
}

/// The round robin or gauntlet for scripts (schema in docs/arena.md).
fn tournament_json(t: &Tournament, args: &Args) -> serde_json::Value {
    let players: Vec<serde_json::Value> = t
        .ratings
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.player,
                "elo": r.elo,
                "margin": r.margin,
                "lower": r.elo - r.margin,
                "upper": r.elo + r.margin,
                "games": r.games,
                "points": r.points,
            })
        })
        .collect();
    let pairs: Vec<serde_json::Value> = t
        .pairings
        .iter()
        .map(|p| {
            let s = &p.state;
            let elo = s.elo().map(|e| serde_json::json!({ "elo": e.elo, "lower": e.lower, "upper": e.upper }));
            serde_json::json!({
                "a": s.a_name,
                "b": s.b_name,
                "games": s.played,
                "wins": s.wins,
                "draws": s.draws,
                "losses": s.losses,
                "score": s.score(),
                "elo": elo,
            })
        })
        .collect();
    serde_json::json!({
        "format": t.format.name(),
        "anchor": t.anchor,
        "games": t.games,
        "players": players,
        "pairs": pairs,
        "failed": t
            .failed
            .iter()
            .map(|f| {
                let s = f.state.clone().unwrap_or_default();
                serde_json::json!({
                    "a": t.players[f.a],
                    "b": t.players[f.b],
                    "error": f.describe(&t.players),
                    "games": s.played,
                    "wins": s.wins,
                    "draws": s.draws,
                    "losses": s.losses,
                })
            })
            .collect::<Vec<_>>(),
        "results": args.results,
        "records": args.records,
    })
}
