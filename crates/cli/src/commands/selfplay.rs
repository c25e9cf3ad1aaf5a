//! `koma selfplay`: play games with a network and write them as HDF5 training shards, with live
//! progress and a summary.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use koma_data::ShardWriter;
use koma_nn::{Network, SharedNetwork};
use koma_pipeline::{Run, RunOverrides};
use koma_selfplay::{InferenceDevice, SelfPlayConfig, StartPositions};
use koma_shogi::OpeningSuite;

use super::nn_args::RunArgs;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The checkpoint that plays (model-STEP.safetensors with its JSON sidecar).
    #[arg(long, required_unless_present = "run_dir")]
    model: Option<PathBuf>,
    /// Games to play.
    #[arg(long, default_value_t = 100)]
    games: usize,
    /// Directory the shards are written to.
    #[arg(long, required_unless_present = "run_dir")]
    out: Option<PathBuf>,
    /// Self-play for a pipeline run as its own process (`koma pipeline` made the directory):
    /// plays with the run's current model under its config.toml, writes shards to RUN/selfplay/,
    /// switches to each new model the trainer publishes, until Ctrl-C. Several such processes
    /// can feed one `koma train --run DIR --follow`.
    #[arg(long = "run", requires = "follow", conflicts_with_all = ["model", "out", "config", "openings", "records"])]
    run_dir: Option<PathBuf>,
    /// With --run: keep playing and follow the run's models (required with --run).
    #[arg(long, requires = "run_dir")]
    follow: bool,
    /// TOML file with a [selfplay] table (see configs/); defaults otherwise.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Opening suite used for `openings_fraction` of the games: a file of USI position lines or
    /// `builtin:balanced-8`.
    #[arg(long)]
    openings: Option<String>,
    /// Games per shard.
    #[arg(long, default_value_t = 32)]
    games_per_shard: usize,
    /// Also save every finished game as a game record in this directory
    /// (game-selfplay-PID-NNNNNN.kif, one file per game).
    #[arg(long)]
    records: Option<PathBuf>,
    /// Format of the --records files: kif (Shift_JIS), kifu (UTF-8 KIF), csa, ki2, usi or sfen.
    #[arg(long, default_value = "kif", requires = "records")]
    record_format: koma_selfplay::RecordFormat,
    /// Seed of the games' randomness (openings, noise, coin flips): replays a process whose
    /// shards' `selfplay_seed` attribute it is. Default: `[selfplay] seed`, else a fresh seed per
    /// process, so that processes sharing a run play different games.
    #[arg(long)]
    seed: Option<u64>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    run: RunArgs,
}

pub fn load_selfplay_config(path: Option<&PathBuf>) -> Result<SelfPlayConfig> {
    let Some(path) = path else { return Ok(SelfPlayConfig::default()) };
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let file: toml::Table = toml::from_str(&text).with_context(|| format!("{}: not valid TOML", path.display()))?;
    let selfplay = file.get("selfplay").cloned().unwrap_or(toml::Value::Table(Default::default()));
    let config: SelfPlayConfig = selfplay.try_into().with_context(|| format!("{}: [selfplay]", path.display()))?;
    config.validate().map_err(anyhow::Error::msg).with_context(|| format!("{}: [selfplay]", path.display()))?;
    Ok(config)
}

/// `--run DIR --follow`: the pipeline's self-play stage with a status line, until Ctrl-C or the
/// run's end (`finished.json`, written when the trainer reaches `[run] steps`), then exit 0.
/// `device` replaces the run's `[run] device` (a cluster task names the devices it was given).
fn follow_run(dir: &std::path::Path, device: Option<&str>, seed: Option<u64>, json: bool) -> Result<()> {
    let overrides = RunOverrides { device: device.map(str::to_string), selfplay_seed: seed, steps: None };
    let run = Run::open(dir, &overrides)?;
    run.set_threads();
    let stop = crate::interrupt::stop_flag();
    let (sender, events) = crossbeam::channel::unbounded();
    let bar = ProgressBar::new_spinner();
    bar.set_style(ProgressStyle::with_template("{spinner} {msg}").expect("valid template"));
    bar.set_message(format!("self-play for {} (Ctrl-C stops cleanly)", run.dir.root.display()));
    let started = Instant::now();
    let summary = std::thread::scope(|scope| {
        let worker = scope.spawn(|| koma_pipeline::stages::selfplay::run(&run, stop.clone(), &sender, None, true));
        while !worker.is_finished() || !events.is_empty() {
            match events.recv_timeout(Duration::from_millis(250)) {
                Ok(koma_pipeline::Event::SelfPlay(s)) => bar.set_message(s.line()),
                Ok(koma_pipeline::Event::ModelSwitched { model }) => {
                    tracing::info!("self-play plays with {model}");
                }
                Ok(koma_pipeline::Event::SelfPlayWaiting) => bar.set_message("waiting for a model in models/"),
                _ => {}
            }
            bar.tick();
        }
        worker.join().unwrap_or_else(|_| {
            Err(koma_pipeline::PipelineError::Stage { stage: "self-play", message: "the thread panicked".into() })
        })
    })?;
    bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    if json {
        println!("{}", serde_json::json!({ "selfplay": summary, "seconds": seconds }));
    } else {
        println!(
            "{} games in {seconds:.1} s, {} samples in {} shards under {}; models: {}",
            summary.stats.games,
            summary.samples_written,
            summary.shards,
            run.dir.selfplay_dir().display(),
            summary.models.join(" → ")
        );
        if summary.run_finished {
            let end = run.dir.finished()?.map_or_else(String::new, |end| format!(" at {}", end.describe()));
            println!("the run is finished{end} ({})", run.dir.finished_file().display());
        }
    }
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    if let Some(dir) = &args.run_dir {
        return follow_run(dir, args.run.device.as_deref(), args.seed, args.json);
    }
    let (model, out) = match (&args.model, &args.out) {
        (Some(m), Some(o)) => (m.clone(), o.clone()),
        _ => anyhow::bail!("--model and --out are required without --run"),
    };
    let mut config = load_selfplay_config(args.config.as_ref())?;
    if args.seed.is_some() {
        config.seed = args.seed;
    }
    let config = config.seeded();
    let seed = config.seed.unwrap_or_default();
    tracing::info!("self-play seed {seed} (--seed {seed} replays it)");
    let model_name = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    // One copy of the network per device, each behind its own inference service.
    let devices = args
        .run
        .options_per_device()?
        .iter()
        .map(|options| {
            let network = Network::load(&model, options)
                .with_context(|| format!("loading {} on {}", model.display(), options.device))?;
            let accelerator = network.is_accelerator();
            Ok(InferenceDevice { slot: SharedNetwork::slot(network, &model_name), accelerator })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut starts = StartPositions::new(config.handicap_fraction, config.openings_fraction);
    if let Some(name) = &args.openings {
        if let Some(suite) = OpeningSuite::load(name).with_context(|| format!("--openings {name}"))? {
            starts = starts.with_suite(&suite);
        }
    }
    let prefix = koma_pipeline::stages::selfplay::shard_prefix();
    let writer = ShardWriter::spawn_with_attributes(
        &out,
        &prefix,
        args.games_per_shard,
        vec![(koma_selfplay::seed::SEED_ATTRIBUTE.to_string(), seed.to_string())],
    )?;
    let records = match &args.records {
        Some(dir) => {
            Some(koma_selfplay::RecordWriter::new(dir, args.record_format, &prefix)?.spawn_tee(writer.sender()))
        }
        None => None,
    };
    let bar = ProgressBar::new(args.games as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} games  {msg}").expect("valid template"));
    let started = Instant::now();
    let result = koma_selfplay::run(
        &config,
        starts,
        &devices,
        args.games,
        records.as_ref().map_or_else(|| writer.sender(), |r| r.sender()),
        // Ctrl-C stops cleanly: the games finished so far are written.
        crate::interrupt::stop_flag(),
        Duration::from_millis(500),
        &mut |p| {
            bar.set_position(p.stats.games as u64);
            bar.set_message(p.line());
        },
    );
    bar.finish_and_clear();
    // Whatever ended self-play, the games finished before it are written first.
    let records = records.map(|r| r.finish());
    let written = writer.finish()?;
    let stats =
        result.with_context(|| format!("self-play ({} finished games written to {})", written.games, out.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "stats": stats, "seconds": seconds, "seed": seed, "shards": written.shards, "samples_written": written.samples, "records_written": records.as_ref().map(|r| r.written) })
        );
    } else {
        println!(
            "{} games in {seconds:.1} s ({:.2} games/s), {} samples in {} shards under {}",
            stats.games,
            stats.games as f64 / seconds,
            written.samples,
            written.shards.len(),
            out.display()
        );
        println!(
            "results: Black {} / White {} / draws {}; average length {:.1} plies",
            stats.black_wins,
            stats.white_wins,
            stats.draws,
            stats.average_length()
        );
        println!("endings: {}", stats.endings.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
        if let Some(r) = &records {
            println!(
                "{} game records under {}{}",
                r.written,
                r.dir.display(),
                if r.failed > 0 { format!(" ({} could not be written)", r.failed) } else { String::new() }
            );
        }
        if stats.no_resign_games > 0 {
            let rate = stats.false_resignation_rate().map_or("n/a".to_string(), |r| format!("{:.1}%", 100.0 * r));
            println!(
                "resignations {}; false resignations {}/{} no-resign games that would have resigned ({}), \
                 of {} no-resign games; resigning below {:.3} now",
                stats.resignations,
                stats.false_resignations,
                stats.would_resign_games,
                rate,
                stats.no_resign_games,
                stats.resign_value
            );
        }
    }
    Ok(())
}
