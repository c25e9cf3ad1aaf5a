//! `koma config`: what a run config may hold, and whether a file is valid.
//!
//! - `koma config reference`: every field of the run config and the experiment spec, as Markdown
//!   tables (docs/config-reference.md is this output).
//! - `koma config schema [--experiment]`: the same as JSON Schema, for editors that check TOML.
//! - `koma config check FILE…`: parses and validates run configs; `--show` prints each with every
//!   default filled in.

use std::path::PathBuf;

use anyhow::{bail, Result};
use koma_pipeline::config_reference::{experiment_schema, reference_markdown, run_config_schema};
use koma_pipeline::PipelineConfig;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print the field reference of run configs and experiment specs (Markdown).
    Reference,
    /// Print the JSON Schema of a run config (or, with --experiment, of an experiment spec).
    Schema {
        /// The experiment spec's schema instead.
        #[arg(long)]
        experiment: bool,
    },
    /// Parse and validate run configs; exits non-zero naming the first bad field of each.
    Check {
        /// Run config files (TOML), as `koma pipeline --config` reads them.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Also print each config with every default filled in (TOML).
        #[arg(long)]
        show: bool,
        /// Print one JSON object per file instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: Args) -> Result<()> {
    match args.action {
        Action::Reference => print!("{}", reference_markdown()),
        Action::Schema { experiment } => {
            let schema = if experiment { experiment_schema() } else { run_config_schema() };
            println!("{}", serde_json::to_string_pretty(&schema)?);
        }
        Action::Check { files, show, json } => {
            let mut bad = 0;
            for file in &files {
                let config = PipelineConfig::from_file(file);
                if let Err(e) = &config {
                    bad += 1;
                    if !json {
                        eprintln!("{e}");
                    }
                }
                let effective = match (&config, show) {
                    (Ok(config), true) => Some(toml::to_string(config)?),
                    _ => None,
                };
                if json {
                    let error = config.as_ref().err().map(|e| e.to_string());
                    println!(
                        "{}",
                        json!({ "file": file, "valid": error.is_none(), "error": error, "config": effective })
                    );
                } else if let Some(text) = effective {
                    println!("# {} (valid; every default filled in)\n{text}", file.display());
                } else if config.is_ok() {
                    println!("{}: valid", file.display());
                }
            }
            if bad > 0 {
                bail!("{bad} of {} config files are not valid", files.len());
            }
        }
    }
    Ok(())
}
