//! `koma ratings`: a Bradley–Terry fit over every game in arena results files (or a run's
//! arena/results.jsonl), printed as a table and, with --plot, drawn as Elo against training step.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use anyhow::Result;
use koma_arena::ratings::{fit, step_of_player, GameOutcome};
use koma_base::run_layout::RunLayout;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// results.jsonl files or run directories (their arena/results.jsonl is read).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The player rated 0 Elo.
    #[arg(long, default_value = "random")]
    anchor: String,
    /// Draw Elo against training step to this PNG (via the project's Python, matplotlib).
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Print one JSON object per player.
    #[arg(long)]
    json: bool,
}

fn read_results(path: &Path, out: &mut Vec<GameOutcome>) -> Result<()> {
    let file = if path.is_dir() { RunLayout::new(path).arena_results() } else { path.to_path_buf() };
    out.extend(koma_arena::ratings::read_results(&file)?);
    Ok(())
}

pub fn run(args: Args) -> Result<()> {
    let mut games = Vec::new();
    for input in &args.inputs {
        read_results(input, &mut games)?;
    }
    let ratings = fit(&games, &args.anchor);
    if args.json {
        for r in &ratings {
            println!(
                "{}",
                serde_json::json!({ "player": r.player, "elo": r.elo, "margin": r.margin, "games": r.games, "points": r.points, "step": step_of_player(&r.player) })
            );
        }
    } else {
        println!("{:<32} {:>8} {:>7} {:>7} {:>7}", "player", "Elo", "±95%", "games", "score");
        for r in &ratings {
            println!(
                "{:<32} {:>8.1} {:>7.1} {:>7.0} {:>6.1}%",
                r.player,
                r.elo,
                r.margin,
                r.games,
                100.0 * r.points / r.games.max(1.0)
            );
        }
    }
    if let Some(png) = &args.plot {
        let points: Vec<serde_json::Value> = ratings
            .iter()
            .map(|r| serde_json::json!({ "player": r.player, "elo": r.elo, "margin": r.margin, "step": step_of_player(&r.player) }))
            .collect();
        let points_file = tempfile::Builder::new().prefix("koma-ratings-").suffix(".json").tempfile()?;
        std::fs::write(points_file.path(), serde_json::to_string(&points)?)?;
        super::plot::run_plot_script(&[points_file.path().as_os_str(), OsStr::new("--ratings"), png.as_os_str()])?;
        println!("plot written to {}", png.display());
    }
    Ok(())
}
