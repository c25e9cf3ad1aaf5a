//! `koma export --model M --format onnx|safetensors --out FILE`.
//!
//! - `onnx`: runs python/koma/export.py (embedded in the binary, with the PyTorch mirror of the
//!   network) with a Python that has torch and onnx (the project venv): inputs `input1`,
//!   `input2`, outputs `output_policy` (logits) and `output_value` (P(win) + P(draw)/2), dynamic
//!   batch axis; checked against onnxruntime when installed.
//! - `safetensors`: a verified copy of the checkpoint (weights re-serialised from the loaded
//!   network, new sidecar with the same training lineage).

use std::ffi::OsStr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use koma_base::python::Python;
use koma_nn::{Network, RunOptions};
use serde_json::json;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Onnx,
    Safetensors,
}

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Checkpoint (`.safetensors` with its `.json` sidecar).
    #[arg(long)]
    model: PathBuf,
    #[arg(long, value_enum)]
    format: Format,
    /// File to write.
    #[arg(long)]
    out: PathBuf,
    /// ONNX opset.
    #[arg(long, default_value_t = 17)]
    opset: u32,
    /// Python with torch and onnx (default: $KOMA_VENV/bin/python, else python3).
    #[arg(long, env = "KOMA_PYTHON")]
    python: Option<String>,
    /// Skip the onnxruntime check of the exported file.
    #[arg(long)]
    no_verify: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn export_onnx(args: &Args) -> Result<serde_json::Value> {
    // Check the checkpoint here first, for Rust's clearer messages.
    koma_nn::checkpoint::read_meta(&args.model)?;
    let python = Python::new(args.python.as_deref()).context("writing out the embedded Python package")?;
    let mut cmd = python
        .module("export", [OsStr::new("--model"), args.model.as_os_str(), OsStr::new("--out"), args.out.as_os_str()]);
    cmd.arg("--opset").arg(args.opset.to_string());
    if args.no_verify {
        cmd.arg("--no-verify");
    }
    let program = python.program();
    let out = cmd.output().with_context(|| format!("running {program} (set --python or KOMA_PYTHON)"))?;
    if !out.status.success() {
        bail!("{program} -m koma.export failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or("");
    serde_json::from_str::<serde_json::Value>(line).with_context(|| format!("export printed {stdout:?}"))
}

pub fn run(args: Args) -> Result<()> {
    let summary = match args.format {
        Format::Onnx => export_onnx(&args)?,
        Format::Safetensors => {
            let mut net = Network::load(&args.model, &RunOptions::cpu())
                .with_context(|| format!("loading {}", args.model.display()))?;
            let training = net.meta().expect("loaded from a checkpoint").training();
            let meta = net.save(&args.out, &training)?;
            json!({"model": args.model, "out": args.out, "step": meta.step, "weights_sha256": meta.weights_sha256})
        }
    };
    if args.json {
        println!("{summary}");
    } else {
        let mut line = format!("exported {} to {}", args.model.display(), args.out.display());
        if let Some(d) = summary.get("max_abs_diff").and_then(|d| d.as_f64()) {
            line += &format!(" (onnxruntime vs PyTorch max abs diff {d:.2e})");
        }
        println!("{line}");
    }
    Ok(())
}
