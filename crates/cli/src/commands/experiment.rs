//! `koma experiment`: variants of a run config trained for the same budget from the same model 0,
//! rated in a round robin (koma_pipeline::experiment does the work). This front end shows the
//! progress, draws the Elo-over-time plot and prints the table.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam::channel::unbounded;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use koma_pipeline::experiment::{
    self, BudgetKind, ExperimentEvent, ExperimentOptions, ExperimentReport, Outcome, SpecOverrides,
};

use super::pipeline::{drain, duration, LiveStatus};
use super::plot;
use crate::{interrupt, logging};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment directory: experiment.toml, state.json, runs/NAME/, results.jsonl,
    /// report.md, report.json, elo-over-time.png (docs/experiment.md).
    #[arg(long)]
    dir: PathBuf,
    /// A variant: NAME=CONFIG, a run config as `koma pipeline --config` takes it (or just CONFIG,
    /// named after the file). Give two or more; they train in this order. With --resume, a name
    /// the experiment lacks adds that variant (its runs train, then only their pairings play),
    /// so a new idea can be screened against runs already trained.
    #[arg(long = "variant", value_name = "NAME=CONFIG")]
    variants: Vec<String>,
    /// An experiment file (TOML) with the variants and settings; flags given too replace its
    /// settings. The resolved spec is written to DIR/experiment.toml.
    #[arg(long, value_name = "FILE")]
    spec: Option<PathBuf>,
    /// Budget of each variant in wall-clock minutes.
    #[arg(long, conflicts_with_all = ["cpu_minutes", "evals"])]
    minutes: Option<f64>,
    /// Budget of each variant in minutes of process CPU time (user + system, all threads): equal
    /// compute even when the machine's load changes between variants.
    #[arg(long, value_name = "MINUTES", conflicts_with = "evals")]
    cpu_minutes: Option<f64>,
    /// Budget of each variant in positions its self-play evaluates with the network: the same
    /// work on any machine (`koma pipeline --evals`).
    #[arg(long)]
    evals: Option<u64>,
    /// Games per pairing of the round robin (colour-swapped pairs over the openings) [default: 32].
    #[arg(long)]
    games: Option<usize>,
    /// Another reference player for the round robin (random, mcts-material[@N]); greedy is
    /// always in. Repeatable.
    #[arg(long = "reference", value_name = "PLAYER")]
    references: Vec<String>,
    /// Simulations per move of every network player [default: 32].
    #[arg(long)]
    simulations: Option<u32>,
    /// Opening suite of the matches: builtin:balanced-8, a file of USI lines, or "" [default:
    /// builtin:balanced-8].
    #[arg(long)]
    openings: Option<String>,
    /// Intermediate checkpoints per variant on the Elo-over-time plot [default: 4].
    #[arg(long)]
    curve_points: Option<usize>,
    /// Games each of those plays against greedy and against model 0 (0: no curve) [default: 8].
    #[arg(long)]
    curve_games: Option<usize>,
    /// Games played at once in the matches [default: 2].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Game length limit of the matches in plies [default: 256].
    #[arg(long)]
    max_plies: Option<u32>,
    /// Train each variant this many times (NAME.r1 … NAME.rN, different seeds, the same model 0);
    /// the report gives each variant's Elo spread across its runs and claims a gain only when
    /// the interval across runs excludes 0 [default: 1]. With --resume, a larger N adds runs to
    /// the experiment: only their training and their pairings are new.
    #[arg(long)]
    replicates: Option<usize>,
    /// Continue the experiment in --dir (an interrupted variant, the matches), or only redo the
    /// report of a finished one.
    #[arg(long)]
    resume: bool,
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// The command line as typed, quoted where needed.
fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if a.is_empty() || a.chars().any(|c| c.is_whitespace() || "\"'$`\\".contains(c)) {
                format!("'{}'", a.replace('\'', "'\\''"))
            } else {
                a
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Three live lines: the phase, the variant training now, the matches. Without a terminal the
/// same lines are printed every 30 seconds, and events as they come.
struct Status {
    bars: MultiProgress,
    header: ProgressBar,
    training: ProgressBar,
    matches: ProgressBar,
    started: Instant,
    dir: PathBuf,
    variants: usize,
    /// How the budget is counted (the progress shows time, or evaluations).
    kind: BudgetKind,
    phase: String,
    plain: bool,
    last_plain: Instant,
}

impl Status {
    fn new(dir: &std::path::Path, variants: usize, kind: BudgetKind) -> Status {
        let plain = !std::io::stderr().is_terminal();
        let bars = MultiProgress::with_draw_target(if plain {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        });
        let header = bars.add(ProgressBar::new_spinner());
        header.set_style(ProgressStyle::with_template("{prefix:>10.bold} {msg}").expect("template"));
        header.set_prefix("experiment");
        let bar = |prefix: &str| {
            let b = bars.add(ProgressBar::new(1));
            b.set_style(
                ProgressStyle::with_template("{prefix:>10.bold} [{bar:30}] {msg}")
                    .expect("template")
                    .progress_chars("=> "),
            );
            b.set_prefix(prefix.to_string());
            b
        };
        let training = bar("training");
        let matches = bar("matches");
        Status {
            bars,
            header,
            training,
            matches,
            started: Instant::now(),
            dir: dir.to_path_buf(),
            kind,
            variants,
            phase: "starting".into(),
            plain,
            last_plain: Instant::now(),
        }
    }

    /// A line worth keeping: to the log (and stderr without a terminal), above the bars.
    fn line(&self, text: String) {
        tracing::info!("{text}");
        if !self.plain {
            let _ = self.bars.println(text);
        }
    }

    /// Budget used or given: a duration, or evaluations.
    fn amount(&self, units: f64) -> String {
        match self.kind {
            BudgetKind::Evals => format!("{} evals", experiment::evals_text(units)),
            _ => duration(units),
        }
    }

    fn apply(&mut self, e: ExperimentEvent) {
        match e {
            ExperimentEvent::VariantStarted { name, index, segment, command } => {
                self.phase = format!("training variant {}/{}: {name}", index + 1, self.variants);
                let again = if segment > 1 { format!(" (continued, process {segment})") } else { String::new() };
                self.line(format!("variant {name}{again}: {command}"));
                self.training.set_position(0);
            }
            ExperimentEvent::VariantProgress { name, used, budget, wall, cpu, step } => {
                self.training.set_length((budget * 10.0) as u64);
                self.training.set_position((used.min(budget) * 10.0) as u64);
                let step = step.map(|s| format!(" · step {s}")).unwrap_or_default();
                self.training.set_message(format!(
                    "{name}: {} of {} · wall {} · CPU {}{step}",
                    self.amount(used),
                    self.amount(budget),
                    duration(wall),
                    duration(cpu)
                ));
            }
            ExperimentEvent::VariantEnded { name, reason, used, budget } => {
                self.line(format!(
                    "variant {name}: stopped ({reason}) after {} of {}",
                    self.amount(used),
                    self.amount(budget)
                ));
            }
            ExperimentEvent::Match { label, index, count, played, games, done, total } => {
                self.phase = format!("match {}/{count}", index + 1);
                self.matches.set_length(total as u64);
                self.matches.set_position(done as u64);
                self.matches.set_message(format!("{done}/{total} games · {label}: {played}/{games}"));
            }
            ExperimentEvent::Note(text) => self.line(text),
        }
    }

    fn tick(&mut self) {
        self.header.set_message(format!(
            "{} · {} · {} · Ctrl-C stops cleanly",
            self.dir.display(),
            self.phase,
            duration(self.started.elapsed().as_secs_f64())
        ));
        if self.plain && self.last_plain.elapsed() >= Duration::from_secs(30) {
            self.last_plain = Instant::now();
            for bar in [&self.header, &self.training, &self.matches] {
                if !bar.message().is_empty() {
                    eprintln!("{:>10} {}", bar.prefix(), bar.message());
                }
            }
        }
    }

    fn finish(&self) {
        for bar in [&self.header, &self.training, &self.matches] {
            bar.finish_and_clear();
        }
    }
}

impl LiveStatus<ExperimentEvent> for Status {
    fn apply(&mut self, event: ExperimentEvent) {
        Status::apply(self, event)
    }

    fn tick(&mut self) {
        Status::tick(self)
    }
}

fn print_summary(r: &ExperimentReport, report_md: &std::path::Path, plot: &Result<PathBuf, String>) {
    println!(
        "koma experiment: {} — {} variants, {} each; round robin at {} simulations, {} games per pairing ({} = 0 Elo)",
        r.directory,
        r.variants.len(),
        r.budget_kind.describe(r.budget),
        r.simulations,
        r.games_per_pairing,
        r.anchor
    );
    println!(
        "  {:<16} {:>6} {:>15} {:>11} {:>9} {:>9} {:>8} {:>8}",
        "variant", "Elo", "95% CI", "vs greedy", "sp games", "steps", "CPU min", "wall min"
    );
    let mut rows: Vec<_> = r.variants.iter().collect();
    rows.sort_by(|a, b| b.elo.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.elo.unwrap_or(f64::NEG_INFINITY)));
    for v in rows {
        let (elo, ci) = match (v.elo, v.margin) {
            (Some(e), Some(m)) => (format!("{e:+.0}"), format!("[{:+.0}, {:+.0}]", e - m, e + m)),
            _ => ("-".into(), "-".into()),
        };
        let score = v.score_vs_anchor.map(|s| format!("{s:.3}")).unwrap_or_else(|| "-".into());
        println!(
            "  {:<16} {elo:>6} {ci:>15} {score:>11} {:>9} {:>9} {:>8.1} {:>8.1}",
            v.variant, v.selfplay_games, v.trainer_steps, v.cpu_minutes, v.wall_minutes
        );
    }
    if r.model_zero.len() > 1 {
        println!("  (the variants differ in [model]: one model 0 per network shape, same seed)");
    }
    println!("report: {}", report_md.display());
    match plot {
        Ok(p) => println!("plot: {}", p.display()),
        Err(e) => println!("plot: none ({e})"),
    }
}

pub fn run(args: Args) -> Result<()> {
    let stop = interrupt::stop_flag();
    let overrides = SpecOverrides {
        minutes: args.minutes,
        cpu_minutes: args.cpu_minutes,
        evals: args.evals,
        games: args.games,
        simulations: args.simulations,
        openings: args.openings.clone(),
        references: args.references.clone(),
        curve_points: args.curve_points,
        curve_games: args.curve_games,
        concurrency: args.concurrency,
        max_plies: args.max_plies,
        replicates: args.replicates,
        variants: args.variants.clone(),
    };
    let options = ExperimentOptions {
        dir: args.dir.clone(),
        spec_file: args.spec.clone(),
        overrides,
        resume: args.resume,
        exe: std::env::current_exe().context("finding the koma binary for the variants' pipelines")?,
        stop: stop.clone(),
        command_line: command_line(),
    };
    let prepared = experiment::prepare(&options)?;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let log = prepared.dir.logs().join(format!("experiment-{stamp}.log"));
    logging::log_to_file(&log).with_context(|| format!("opening the log {}", log.display()))?;
    tracing::info!(
        "koma experiment {} {}: {}",
        if prepared.resumed { "resumes" } else { "starts" },
        prepared.dir.root.display(),
        options.command_line
    );
    let mut status = Status::new(&prepared.dir.root, prepared.variants.len(), prepared.spec.budget().0);
    logging::quiet_stderr(!status.plain);
    let (sender, events) = unbounded();
    let result = std::thread::scope(|scope| {
        let worker = scope.spawn(|| experiment::run(&prepared, &options, &sender));
        drain(&events, &mut status, &|| worker.is_finished());
        worker.join().unwrap_or_else(|_| {
            Err(koma_pipeline::PipelineError::Stage { stage: "experiment", message: "a thread panicked".into() })
        })
    });
    status.finish();
    logging::quiet_stderr(false);
    let report = match result? {
        Outcome::Interrupted => {
            let again = format!("koma experiment --dir {} --resume", prepared.dir.root.display());
            eprintln!("koma experiment: stopped; everything so far is kept. Continue with: {again}");
            if args.json {
                println!(
                    "{}",
                    serde_json::json!({ "complete": false, "directory": prepared.dir.root, "resume": again })
                );
            }
            return Ok(());
        }
        Outcome::Complete(report) => report,
    };
    let plot = plot::run_plot_script(&[std::ffi::OsStr::new("--experiment"), prepared.dir.root.as_os_str()])
        .map_err(|e| format!("{e:#}"))
        .and_then(|files| files.into_iter().next().ok_or_else(|| "the plot script wrote nothing".to_string()));
    if let Err(e) = &plot {
        tracing::warn!("no Elo-over-time plot: {e}");
    }
    let report_md = experiment::write_markdown(&prepared.dir, &report, plot.as_deref().map_err(String::as_str))?;
    tracing::info!("report written to {}", report_md.display());
    if args.json {
        println!("{}", serde_json::to_string(&*report)?);
    } else {
        print_summary(&report, &report_md, &plot);
        println!("log: {}", log.display());
    }
    Ok(())
}
