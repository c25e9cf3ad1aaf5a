//! Plot scripts run with the project's Python (matplotlib); embedded so they work from anywhere.

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::{Context, Result};

/// python/koma/plot.py, run as `python -c SCRIPT ARGS…`.
const PLOT_SCRIPT: &str = include_str!("../../../../python/koma/plot.py");

/// Runs python/koma/plot.py with `args` using the project's Python (`KOMA_PYTHON`, else the
/// bootstrap venv's, else `python3`); returns the files it wrote.
pub fn run_plot_script(args: &[&OsStr]) -> Result<Vec<PathBuf>> {
    let python = std::env::var("KOMA_PYTHON")
        .or_else(|_| std::env::var("KOMA_VENV").map(|venv| format!("{venv}/bin/python")))
        .unwrap_or_else(|_| "python3".into());
    let output = std::process::Command::new(&python)
        .args(["-c", PLOT_SCRIPT])
        .args(args)
        .output()
        .with_context(|| format!("running {python} for the plots"))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let hint = if stderr.contains("ModuleNotFoundError") {
        " (run koma through scripts/koma, or set KOMA_PYTHON to a python with matplotlib)"
    } else {
        ""
    };
    anyhow::ensure!(
        output.status.success(),
        "the plot script failed with {python}{hint}: {}",
        stderr.trim().lines().last().unwrap_or("")
    );
    Ok(String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).collect())
}

/// argv: ratings JSON (list of {player, elo, margin, step}), output PNG.
pub const RATINGS_PLOT: &str = r#"
import json, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
points = json.load(open(sys.argv[1]))
models = sorted((p for p in points if p["step"] is not None), key=lambda p: p["step"])
fig, ax = plt.subplots(figsize=(7, 4))
if models:
    ax.errorbar([p["step"] for p in models], [p["elo"] for p in models], yerr=[p["margin"] for p in models], marker="o", capsize=3, label="checkpoints")
for p in points:
    if p["step"] is None:
        ax.axhline(p["elo"], linestyle="--", linewidth=1, color="gray")
        ax.annotate(p["player"], (0, p["elo"]), textcoords="offset points", xytext=(4, 3), fontsize=8, color="gray", xycoords=("axes fraction", "data"))
ax.set_xlabel("training step")
ax.set_ylabel("Elo")
ax.set_title("Elo by training step (95% CI)")
ax.grid(alpha=0.3)
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
"#;
