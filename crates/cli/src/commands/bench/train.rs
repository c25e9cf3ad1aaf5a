//! `koma bench train`: training samples per second at batch 256 for the tiny and standard
//! networks, koma's trainer against the identical network and batch in plain PyTorch
//! (python/koma/bench_train.py) in the same run, in PyTorch's default layout (the ratio, which
//! must be at least 1) and with PyTorch's channels-last recipe. See koma_train::bench.

use anyhow::{Context, Result};
use koma_nn::{ModelConfig, Precision};
use koma_train::bench::{run as bench, BenchOptions};
use koma_train::config::MemoryFormat;
use koma_train::TrainConfig;

use crate::commands::choices::{one_of, precision};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Networks: presets (tiny, standard) or model config files.
    #[arg(long, value_delimiter = ',', default_value = "tiny,standard")]
    nets: Vec<String>,
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Seconds per measurement (after a warm-up step; at least --min-steps steps).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long, default_value_t = 2)]
    min_steps: usize,
    /// Alternate koma and PyTorch this many times (the order rotating), keeping the fastest and
    /// median step of each over all rounds.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Python with torch for the reference (default: $KOMA_VENV/bin/python, else python3).
    #[arg(long, env = "KOMA_PYTHON")]
    python: Option<String>,
    /// Skip the PyTorch reference (no ratio).
    #[arg(long)]
    no_pytorch: bool,
    /// Skip PyTorch's channels-last variant (the default-layout reference still runs).
    #[arg(long)]
    no_pytorch_channels_last: bool,
    /// koma's activation layout: auto (channels-last on the CPU), channels_last or contiguous.
    #[arg(long, default_value = "auto", value_parser = one_of::<MemoryFormat>(MemoryFormat::NAMES))]
    memory_format: MemoryFormat,
    /// Also measure `koma train` end to end (shards in a temporary directory, loader thread).
    #[arg(long)]
    end_to_end: bool,
    /// cpu, cuda, cuda:N or auto; several (cuda:0,cuda:1) train data parallel.
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Also measure data-parallel scaling over these devices (cuda:0,cuda:1, cuda:all; cpu,cpu
    /// on a machine without GPUs): koma on the first alone against all of them, same batch.
    #[arg(long)]
    devices: Option<String>,
    /// Half precision on CUDA only.
    #[arg(long, default_value = "f32", value_parser = precision())]
    precision: Precision,
    /// libtorch CPU threads (default: libtorch's choice); PyTorch gets the same.
    #[arg(long)]
    threads: Option<usize>,
}

pub fn run(args: Args) -> Result<()> {
    let nets =
        args.nets.iter().map(|n| Ok((n.clone(), ModelConfig::from_preset_or_file(n)?))).collect::<Result<Vec<_>>>()?;
    let config = TrainConfig {
        device: args.device.parse().with_context(|| format!("--device {}", args.device))?,
        precision: args.precision,
        threads: args.threads,
        memory_format: args.memory_format,
        batch_size: args.batch_size,
        ..TrainConfig::default()
    };
    config.validate()?;
    let options = BenchOptions {
        nets,
        batch_size: args.batch_size,
        seconds: args.seconds,
        min_steps: args.min_steps,
        rounds: args.rounds,
        python: (!args.no_pytorch).then(|| args.python.clone().unwrap_or_else(koma_base::python::interpreter)),
        pytorch_channels_last: !args.no_pytorch_channels_last,
        end_to_end: args.end_to_end,
        config,
        scaling_devices: args.devices.clone(),
    };
    let json = args.json;
    let report = bench(&options, &mut |line| {
        if !json {
            eprintln!("{line}");
        }
    })?;
    if json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "device {} ({}), {} threads, batch {}, koma {}, {} rounds",
            report.device, report.precision, report.threads, args.batch_size, report.memory_format, report.rounds
        );
        let sps = |f: Option<&koma_train::bench::Figures>| {
            f.map(|f| format!("{:.1} / {:.1}", f.samples_per_second, f.median_samples_per_second))
                .unwrap_or_else(|| "-".into())
        };
        let ratio = |r: Option<f64>, m: Option<f64>, c: Option<f64>| match (r, m) {
            (Some(r), Some(m)) => {
                format!("{r:.3} / {m:.3} / {}", c.map(|c| format!("{c:.3}")).unwrap_or_else(|| "-".into()))
            }
            _ => "-".into(),
        };
        println!("samples/s: fastest step / median step; ratios: fastest / median / median CPU time");
        for n in &report.nets {
            let cl = n.pytorch_channels_last.as_ref();
            println!(
                "{:>10} ({}): koma {}, pytorch {} (ratio {}), pytorch channels-last {} (ratio {}){}",
                n.name,
                n.describe,
                sps(Some(&n.koma)),
                sps(n.pytorch.as_ref()),
                ratio(n.ratio, n.ratio_median, n.ratio_cpu),
                sps(cl.map(|r| &r.figures)),
                ratio(cl.map(|r| r.ratio), cl.map(|r| r.ratio_median), cl.and_then(|r| r.ratio_cpu)),
                n.end_to_end
                    .as_ref()
                    .map(|e| format!(", end to end {:.1} samples/s", e.samples_per_second))
                    .unwrap_or_default()
            );
            if let Some(s) = &n.scaling {
                println!(
                    "{:>10} data parallel on {}: {:.1} samples/s, one device {:.1}: speedup {:.2}, efficiency {:.2}",
                    n.name,
                    s.devices,
                    s.all_devices.samples_per_second,
                    s.one_device.samples_per_second,
                    s.speedup,
                    s.efficiency
                );
            }
        }
        match report.ratio_ok {
            Some(true) => println!("ratio ≥ 1 for every net: ok"),
            Some(false) => println!("ratio BELOW 1 for some net"),
            None => {}
        }
    }
    Ok(())
}
