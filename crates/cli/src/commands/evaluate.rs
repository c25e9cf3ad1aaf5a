//! `koma evaluate --run DIR`: a run's evaluator as its own process (a cluster's evaluator job,
//! `deploy/slurm/submit --evaluator`): every `[arena] every_models` new checkpoints the newest
//! plays model 0 (`arena/results.jsonl`, TensorBoard's `arena/` curves), and when the trainer
//! has finished the run (`finished.json`) it rates the last model, plays the end-of-run report
//! (`[arena] games` > 0) and exits. What `koma pipeline` does beside its trainer, for a run
//! whose stages are separate processes.

use std::path::PathBuf;

use anyhow::Result;
use koma_pipeline::evaluation::report;
use koma_pipeline::{Event, Run, RunOverrides};

use crate::interrupt;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// The run directory (`koma pipeline --run DIR --config FILE --prepare` made it).
    #[arg(long)]
    run: PathBuf,
    /// Where the matches' networks run: cpu, cuda, cuda:N or auto (the run's `[run] device`).
    #[arg(long, env = "KOMA_DEVICE")]
    device: Option<String>,
    /// At the run's end, skip the end-of-run report (only the last model's evaluation).
    #[arg(long)]
    no_report: bool,
}

pub fn run(args: Args) -> Result<()> {
    let stop = interrupt::stop_flag();
    let overrides = RunOverrides { device: args.device.clone(), steps: None, selfplay_seed: None };
    let run = Run::open(&args.run, &overrides)?;
    run.set_threads();
    if run.config.arena.curve_games == 0 && run.config.arena.games == 0 {
        // A job submitted for every run ends at once, and says why.
        eprintln!(
            "koma evaluate: {}: [arena] curve_games and games are both 0, so this run has nothing to evaluate",
            run.dir.config_file().display()
        );
        return Ok(());
    }
    let (events, received) = crossbeam::channel::unbounded();
    let printer = std::thread::spawn(move || {
        for event in received {
            match event {
                Event::Arena { label, summary } => println!("{label}: {}", summary.line()),
                Event::Note(note) => eprintln!("{note}"),
                Event::ReportProgress { done, planned, current, .. } => {
                    eprintln!("report: match {} of {planned}: {current}", done + 1)
                }
                _ => {}
            }
        }
    });
    let every = match run.config.arena.every_models {
        0 => "at the run's end".to_string(),
        n => format!("every {n} new models and at the run's end"),
    };
    eprintln!("koma evaluate: {} · the newest model against model 0 {every}", run.dir.root.display());
    let ended = koma_pipeline::stages::evaluator::run(&run, stop.clone(), &events, true)?;
    let mut rated = None;
    if ended && !args.no_report && run.config.arena.games > 0 {
        rated = report(&run.dir, &run.config, stop.clone(), &events)?;
    }
    drop(events);
    let _ = printer.join();
    match (ended, rated) {
        (false, _) => eprintln!("koma evaluate: stopped before the run's end"),
        (true, None) => eprintln!("koma evaluate: the run is finished"),
        (true, Some(r)) => super::pipeline::print_ratings(&r.ratings, ""),
    }
    Ok(())
}
