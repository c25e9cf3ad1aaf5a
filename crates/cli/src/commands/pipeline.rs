//! `koma pipeline`: the main job. Self-play and training together over one run directory
//! (koma_pipeline does the work), with a live multi-line status, a log file in `RUN/logs/`, a
//! summary at the end, and plots (loss curves, Elo by step) drawn into the run directory.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam::channel::{unbounded, Receiver, RecvTimeoutError};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use koma_base::run_layout::RunLayout;
use koma_pipeline::{Event, PipelineOptions, PipelineSummary, StopReason};
use koma_train::{Progress, WaitReason};

use super::plot;
use crate::{interrupt, logging};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run configuration (TOML; see configs/). Default: the embedded configs/tiny-cpu.toml for a
    /// new run, the run's own config.toml with --resume.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The run directory (models/, selfplay/, train/, arena/, logs/).
    #[arg(long, default_value = "runs/default")]
    run: PathBuf,
    /// Continue the run in --run: the trainer resumes exactly, self-play follows the newest model.
    #[arg(long)]
    resume: bool,
    /// Stop after this many minutes (overrides [run] minutes; 0: no limit). With --steps or
    /// --evals too, the run ends at whichever limit comes first.
    #[arg(long)]
    minutes: Option<f64>,
    /// Stop after this many minutes of process CPU time, user + system over all threads
    /// (overrides [run] cpu_minutes; 0: no limit). Fairer than --minutes when the machine's load
    /// changes.
    #[arg(long, value_name = "MINUTES")]
    cpu_minutes: Option<f64>,
    /// Stop when the trainer reaches this step (overrides [run] steps; 0: no limit).
    #[arg(long)]
    steps: Option<u64>,
    /// Stop once self-play has evaluated this many positions with the network (overrides [run]
    /// evals; 0: no limit): the same work on any machine, where minutes are not. The summary
    /// gives the machine and its evals/s, so a run of N minutes here can be replayed elsewhere as
    /// --evals (N · 60 · evals/s).
    #[arg(long)]
    evals: Option<u64>,
    /// Devices for this process, overriding [run] device (not saved in the run's config): cpu,
    /// cuda:N, a list (cuda:0,cuda:1) or cuda:all.
    #[arg(long)]
    device: Option<String>,
    /// Start from this checkpoint as model 0 (a new run, or one without model 0 yet) instead of
    /// a fresh network from [model] and [run] seed; its architecture must be [model]'s.
    #[arg(long, value_name = "CHECKPOINT")]
    model_zero: Option<PathBuf>,
    /// Only create the run (its config.toml and model 0; with --resume, check it) and exit: for
    /// stages started as separate processes or cluster jobs (docs/cluster.md).
    #[arg(long, conflicts_with_all = ["minutes", "cpu_minutes", "steps", "evals", "no_report"])]
    prepare: bool,
    /// Skip the end-of-run arena report (the plots of the losses are still drawn).
    #[arg(long)]
    no_report: bool,
    /// Print the summary as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Seconds as `1h02m03s` / `2m03s` / `3s`.
pub(crate) fn duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    match (s / 3600, (s / 60) % 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, sec) => format!("{m}m{sec:02}s"),
        (h, m, sec) => format!("{h}h{m:02}m{sec:02}s"),
    }
}

/// The live status: one line per stage, redrawn from the stages' events. Without a terminal
/// (a log, CI) it prints the same lines every 30 seconds instead.
struct Status {
    bars: MultiProgress,
    header: ProgressBar,
    selfplay: ProgressBar,
    train: ProgressBar,
    models: ProgressBar,
    started: Instant,
    limit: Option<f64>,
    cpu_limit: Option<f64>,
    cpu_started: f64,
    run: PathBuf,
    model: String,
    checkpoints: usize,
    last_checkpoint: String,
    arena: String,
    train_line: String,
    loss_line: String,
    plain: bool,
    last_plain: Instant,
    /// Stages stalled now, with the line that says so.
    stalled: Vec<(&'static str, String)>,
}

impl Status {
    fn new(run: &Path, limit: Option<f64>, cpu_limit: Option<f64>) -> Status {
        let plain = !std::io::stderr().is_terminal();
        let bars = MultiProgress::with_draw_target(if plain {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        });
        let line = |prefix: &str| {
            let bar = bars.add(ProgressBar::new_spinner());
            bar.set_style(ProgressStyle::with_template("{prefix:>10.bold} {msg}").expect("template"));
            bar.set_prefix(prefix.to_string());
            bar
        };
        let header = line("pipeline");
        let selfplay = line("self-play");
        let train = line("train");
        let models = line("models");
        Status {
            bars,
            header,
            selfplay,
            train,
            models,
            started: Instant::now(),
            limit,
            cpu_limit,
            cpu_started: koma_pipeline::resources::process_cpu_seconds(),
            run: run.to_path_buf(),
            model: String::new(),
            checkpoints: 0,
            last_checkpoint: String::new(),
            arena: String::new(),
            train_line: "starting".into(),
            loss_line: String::new(),
            plain,
            last_plain: Instant::now(),
            stalled: Vec::new(),
        }
    }

    fn apply(&mut self, event: Event) {
        match event {
            Event::SelfPlayWaiting => self.selfplay.set_message("waiting for a model in models/"),
            Event::SelfPlay(s) => self.selfplay.set_message(s.line()),
            Event::ModelSwitched { model } => {
                tracing::info!("self-play now plays with {model}");
                self.model = model;
                self.redraw_models();
            }
            Event::Train(Progress::Started { step, resumed, window, device, precision, .. }) => {
                let what = if resumed { "resumed" } else { "started" };
                tracing::info!(
                    "trainer {what} at step {step} on {device} ({precision}); window {} of {} samples",
                    window.window_samples,
                    window.total_samples
                );
                self.train_line = format!("step {step} ({what} on {device}, {precision})");
                self.redraw_train();
            }
            Event::Train(Progress::Step(s)) => {
                self.train_line = format!("step {} · loss {:.3}", s.step, s.loss);
                self.redraw_train();
            }
            Event::Train(Progress::Metrics(m)) => {
                self.loss_line = format!(
                    "policy {:.3} value {:.3} · top-1 {:.1}% · value acc {:.1}% · {:.0} samples/s · window {}/{}",
                    m.policy_loss,
                    m.value_loss,
                    100.0 * m.policy_top1,
                    100.0 * m.value_accuracy,
                    m.samples_per_second,
                    m.window_samples,
                    m.total_samples
                );
                self.redraw_train();
            }
            Event::Train(Progress::Waiting(w)) => {
                self.train_line = match w.reason {
                    WaitReason::WindowTooSmall => {
                        format!("waiting for data: {} samples, need {}", w.window_samples, w.needed_total_samples)
                    }
                    WaitReason::AheadOfData => format!(
                        "waiting for self-play: {} samples produced, need {}",
                        w.total_samples, w.needed_total_samples
                    ),
                };
                self.redraw_train();
            }
            Event::Train(Progress::Checkpoint { step, path }) => {
                tracing::info!("checkpoint {} (step {step})", path.display());
                self.checkpoints += 1;
                self.last_checkpoint = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
                self.redraw_models();
            }
            Event::Gating { summary, accepted } => {
                self.arena = format!("gating {} → {}", summary.line(), if accepted { "accepted" } else { "rejected" });
                self.redraw_models();
            }
            Event::Arena { summary, .. } => {
                self.arena = summary.line();
                self.redraw_models();
            }
            Event::ReportProgress { done, planned, current, games } => {
                self.header
                    .set_message(format!("arena report: match {}/{planned}: {current} · {games} games", done + 1));
            }
            Event::Note(note) => {
                tracing::info!("{note}");
                let _ = self.bars.println(&note);
            }
            // The pipeline logged both already; here they show on screen and in the header.
            Event::Stalled { stage, activity, seconds } => {
                let line = format!("STALLED: {stage} has {activity} for {}", duration(seconds));
                let _ = self.bars.println(&line);
                self.stalled.push((stage, line));
            }
            Event::Unstalled { stage } => {
                self.stalled.retain(|(s, _)| *s != stage);
                let _ = self.bars.println(format!("{stage} progresses again"));
            }
        }
    }

    fn redraw_train(&self) {
        let sep = if self.loss_line.is_empty() { "" } else { " · " };
        self.train.set_message(format!("{}{sep}{}", self.train_line, self.loss_line));
    }

    fn redraw_models(&self) {
        let arena = if self.arena.is_empty() { String::new() } else { format!(" · last arena: {}", self.arena) };
        let latest = if self.last_checkpoint.is_empty() {
            String::new()
        } else {
            format!(" · newest {}", self.last_checkpoint)
        };
        self.models.set_message(format!(
            "self-play uses {} · {} published this session{latest}{arena}",
            self.model, self.checkpoints
        ));
    }

    fn tick(&mut self) {
        let elapsed = self.started.elapsed().as_secs_f64();
        let limit = self.limit.map(|l| format!(" of {}", duration(l * 60.0))).unwrap_or_default();
        let cpu = match self.cpu_limit {
            Some(l) => {
                let used = koma_pipeline::resources::process_cpu_seconds() - self.cpu_started;
                format!(" · CPU {} of {}", duration(used), duration(l * 60.0))
            }
            None => String::new(),
        };
        if !self.header.message().starts_with("arena report") {
            let stalled: String = self.stalled.iter().map(|(_, line)| format!(" · {line}")).collect();
            self.header.set_message(format!(
                "{} · {}{limit}{cpu}{stalled} · Ctrl-C stops cleanly",
                self.run.display(),
                duration(elapsed)
            ));
        }
        for bar in [&self.header, &self.selfplay, &self.train, &self.models] {
            bar.tick();
        }
        if self.plain && self.last_plain.elapsed() >= Duration::from_secs(30) {
            self.last_plain = Instant::now();
            for bar in [&self.header, &self.selfplay, &self.train, &self.models] {
                eprintln!("{:>10} {}", bar.prefix(), bar.message());
            }
        }
    }

    fn finish(&self) {
        for bar in [&self.header, &self.selfplay, &self.train, &self.models] {
            bar.finish_and_clear();
        }
    }
}

/// Draws train-loss.png, train-accuracy.png and elo.png into the run directory with the
/// project's Python (see [`plot::run_plot_script`]); returns the files written.
fn draw_plots(run: &Path) -> Result<Vec<PathBuf>> {
    let metrics = RunLayout::new(run).metrics_file();
    if std::fs::metadata(&metrics).map(|m| m.len() == 0).unwrap_or(true) {
        tracing::info!("no training metrics yet: no plots");
        return Ok(Vec::new());
    }
    plot::run_plot_script(&[run.as_os_str()])
}

fn print_summary(s: &PipelineSummary, plots: &[PathBuf]) {
    let reason = match s.stop_reason {
        StopReason::TimeLimit => "time limit reached",
        StopReason::CpuLimit => "CPU time limit reached",
        StopReason::EvalLimit => "evaluation budget reached",
        StopReason::StepsReached => "step count reached",
        StopReason::Interrupted => "interrupted",
    };
    println!(
        "koma pipeline: {} {} after {} ({} CPU; {reason})",
        s.run_dir.display(),
        if s.resumed { "resumed, stopped" } else { "stopped" },
        duration(s.seconds),
        duration(s.cpu_seconds)
    );
    let load =
        s.machine.load_average.map_or(String::new(), |l| format!(", load average {:.2} {:.2} {:.2}", l[0], l[1], l[2]));
    println!(
        "machine: {} ({} cores{load}); {} evaluations here, {:.0} evals/s; {} in the whole run (replay its \
         self-play work elsewhere with --evals {})",
        s.machine.cpu, s.machine.cores, s.evals, s.evals_per_second, s.evals_total, s.evals_total
    );
    let sp = &s.selfplay;
    let st = &sp.stats;
    println!(
        "self-play: {} games ({:.1}/min), {} samples in {} shards, average {:.0} plies; Black {} / White {} / draws {}",
        st.games,
        st.games as f64 * 60.0 / s.seconds.max(1e-9),
        sp.samples_written,
        sp.shards,
        st.average_length(),
        st.black_wins,
        st.white_wins,
        st.draws
    );
    println!("  endings: {}", st.endings.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    if st.no_resign_games > 0 {
        let rate = st.false_resignation_rate().map_or("n/a".to_string(), |r| format!("{:.1}%", 100.0 * r));
        println!(
            "  resignations {}; false resignations {}/{} no-resign games that would have resigned ({}), of {} \
             no-resign games; resigning below {:.3} at the end",
            st.resignations, st.false_resignations, st.would_resign_games, rate, st.no_resign_games, st.resign_value
        );
    }
    println!("  models played: {}", sp.models.join(" → "));
    let t = &s.train;
    println!(
        "train: steps {}..{} ({} samples seen, {:.0} samples/s with waits) on {} ({})",
        t.start_step, t.final_step, t.samples_seen, t.samples_per_second, t.device, t.precision
    );
    if let Some(m) = &t.last_metrics {
        println!(
            "  last {} steps: policy loss {:.3}, value loss {:.3}, policy top-1 {:.1}%, value accuracy {:.1}%",
            m.steps,
            m.policy_loss,
            m.value_loss,
            100.0 * m.policy_top1,
            100.0 * m.value_accuracy
        );
    }
    println!("models: {} in models/, newest {}", s.models, s.last_model.as_deref().unwrap_or("none"));
    if let Some(r) = &s.report {
        println!("arena report ({}){}:", duration(s.report_seconds), if r.cancelled { ", cut short" } else { "" });
        for (label, m) in &r.matches {
            println!("  {label}: {}", m.line());
        }
        print_ratings(&r.ratings, "  ");
    }
    for p in plots {
        println!("plot: {}", p.display());
    }
    let tensorboard = RunLayout::new(&s.run_dir).tensorboard_dir();
    if tensorboard.is_dir() {
        println!("curves: tensorboard --logdir {}", tensorboard.display());
    }
}

/// The ratings table of an arena report (nothing when there are none), indented by `indent`.
pub(super) fn print_ratings(ratings: &[koma_pipeline::evaluation::RatingPoint], indent: &str) {
    if ratings.is_empty() {
        return;
    }
    println!("{indent}ratings (Bradley–Terry over arena/results.jsonl, model 0 = 0 Elo):");
    for p in ratings {
        println!("{indent}  {:<28} {:>+7.0} ± {:<4.0} ({:.0} games)", p.player, p.elo, p.margin, p.games);
    }
}

/// A live status display fed by a stage's events and redrawn between them.
pub(crate) trait LiveStatus<E> {
    fn apply(&mut self, event: E);
    fn tick(&mut self);
}

impl LiveStatus<Event> for Status {
    fn apply(&mut self, event: Event) {
        Status::apply(self, event)
    }

    fn tick(&mut self) {
        Status::tick(self)
    }
}

/// Feeds `events` to `status` until the channel closes, or `done()` with nothing left to show.
pub(crate) fn drain<E>(events: &Receiver<E>, status: &mut impl LiveStatus<E>, done: &dyn Fn() -> bool) {
    loop {
        match events.recv_timeout(Duration::from_millis(250)) {
            Ok(e) => status.apply(e),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        status.tick();
        if done() && events.is_empty() {
            return;
        }
    }
}

pub fn run(args: Args) -> Result<()> {
    let stop = interrupt::stop_flag();
    let options = PipelineOptions {
        run_dir: args.run.clone(),
        config: args.config.clone(),
        resume: args.resume,
        minutes: args.minutes,
        cpu_minutes: args.cpu_minutes,
        steps: args.steps,
        evals: args.evals,
        device: args.device.clone(),
        model_zero: args.model_zero.clone(),
        stop,
        report: !args.no_report,
        prepare_only: args.prepare,
    };
    // The log opens first, so that it also holds how the run was set up (model 0, a refused
    // config).
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let log = koma_pipeline::RunDir::new(&args.run).logs_dir().join(format!("pipeline-{stamp}.log"));
    logging::log_to_file(&log).with_context(|| format!("opening the log {}", log.display()))?;
    let prepared = koma_pipeline::prepare(&options).inspect_err(|e| tracing::error!("{e}"))?;
    tracing::info!(
        "koma pipeline {} {} with {}",
        if prepared.resumed { "resumes" } else { "starts" },
        prepared.run.dir.root.display(),
        prepared.run.config_origin
    );
    if let Some(kept) = &prepared.replaced_config {
        tracing::warn!("--config replaces the run's config.toml; the previous one is kept as {}", kept.display());
    }
    if args.prepare {
        let model_zero = prepared.model_zero.path.display().to_string();
        if args.json {
            println!("{}", serde_json::json!({ "run_dir": prepared.run.dir.root, "model_zero": model_zero }));
        } else {
            println!("run {} ready: config.toml and model 0 ({model_zero})", prepared.run.dir.root.display());
        }
        return Ok(());
    }
    let (limit, cpu_limit) = options.time_limits(&prepared.run.config);
    let mut status =
        Status::new(&prepared.run.dir.root, (limit > 0.0).then_some(limit), (cpu_limit > 0.0).then_some(cpu_limit));
    logging::quiet_stderr(!status.plain);
    let (sender, events) = unbounded();
    let result = std::thread::scope(|scope| {
        let worker = scope.spawn(|| koma_pipeline::run(&prepared, &options, &sender));
        drain(&events, &mut status, &|| worker.is_finished());
        worker.join().unwrap_or_else(|_| {
            Err(koma_pipeline::PipelineError::Stage { stage: "pipeline", message: "a thread panicked".into() })
        })
    });
    status.finish();
    logging::quiet_stderr(false);
    let summary = result?;
    let plots = match draw_plots(&prepared.run.dir.root) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!("no plots: {e:#}");
            Vec::new()
        }
    };
    let summary_file = prepared.run.dir.logs_dir().join(format!("summary-{stamp}.json"));
    koma_base::durable::write(&summary_file, serde_json::to_string_pretty(&summary)?.as_bytes())?;
    tracing::info!("summary written to {}", summary_file.display());
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print_summary(&summary, &plots);
        println!("log: {}", log.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(3.2), "3s");
        assert_eq!(duration(125.0), "2m05s");
        assert_eq!(duration(3723.0), "1h02m03s");
    }
}
