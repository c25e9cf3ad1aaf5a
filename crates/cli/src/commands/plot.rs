//! Plots, drawn by python/koma/plot.py (matplotlib) through the embedded Python package.

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use koma_base::python::Python;

/// Runs `python -m koma.plot ARGS…` with the project's Python ([`koma_base::python::interpreter`]);
/// returns the files it wrote.
pub fn run_plot_script(args: &[&OsStr]) -> Result<Vec<PathBuf>> {
    let python = Python::new(None).context("writing out the embedded Python package")?;
    let output =
        python.module("plot", args).output().with_context(|| format!("running {} for the plots", python.program()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    let hint = if stderr.contains("ModuleNotFoundError") {
        " (run koma through scripts/koma, or set KOMA_PYTHON to a python with matplotlib)"
    } else {
        ""
    };
    anyhow::ensure!(
        output.status.success(),
        "the plot script failed with {}{hint}: {}",
        python.program(),
        stderr.trim().lines().last().unwrap_or("")
    );
    Ok(String::from_utf8_lossy(&output.stdout).lines().map(PathBuf::from).collect())
}
