//! `koma export --model M --format onnx|safetensors --out FILE`.
//!
//! - `onnx`: runs python/koma/export.py (embedded in the binary, with the PyTorch mirror of the
//!   network) with a Python that has torch and onnx (the project venv): inputs `input1`,
//!   `input2`, outputs `output_policy` (logits) and `output_value` (P(win) + P(draw)/2), dynamic
//!   batch axis; checked against onnxruntime when installed.
//! - `safetensors`: a verified copy of the checkpoint (weights re-serialised from the loaded
//!   network, new sidecar with the same training lineage).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use koma_nn::{Network, RunOptions};
use serde_json::json;

const PY_INIT: &str = include_str!("../../../../python/koma/__init__.py");
const PY_MODEL: &str = include_str!("../../../../python/koma/model.py");
const PY_EXPORT: &str = include_str!("../../../../python/koma/export.py");

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

fn default_python() -> String {
    if let Some(venv) = std::env::var_os("KOMA_VENV") {
        let p = Path::new(&venv).join("bin/python");
        if p.exists() {
            return p.to_string_lossy().into_owned();
        }
    }
    "python3".into()
}

fn export_onnx(args: &Args) -> Result<serde_json::Value> {
    // Check the checkpoint here first, for Rust's clearer messages.
    koma_nn::checkpoint::read_meta(&args.model)?;
    let dir = std::env::temp_dir().join(format!("koma-export-{}", std::process::id()));
    let pkg = dir.join("koma");
    std::fs::create_dir_all(&pkg).with_context(|| format!("creating {}", pkg.display()))?;
    let result = (|| {
        for (name, text) in [("__init__.py", PY_INIT), ("model.py", PY_MODEL), ("export.py", PY_EXPORT)] {
            std::fs::write(pkg.join(name), text)?;
        }
        let python = args.python.clone().unwrap_or_else(default_python);
        let mut cmd = Command::new(&python);
        cmd.env("PYTHONPATH", &dir)
            .args(["-m", "koma.export", "--model"])
            .arg(&args.model)
            .arg("--out")
            .arg(&args.out)
            .arg("--opset")
            .arg(args.opset.to_string());
        if args.no_verify {
            cmd.arg("--no-verify");
        }
        let out = cmd.output().with_context(|| format!("running {python} (set --python or KOMA_PYTHON)"))?;
        if !out.status.success() {
            bail!("{python} -m koma.export failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let line = stdout.lines().last().unwrap_or("");
        serde_json::from_str::<serde_json::Value>(line).with_context(|| format!("export printed {stdout:?}"))
    })();
    let _ = std::fs::remove_dir_all(&dir);
    result
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
