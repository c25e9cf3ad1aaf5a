//! `koma info`: the koma version, which libtorch the process loaded, and whether CUDA is usable.
//!
//! Its first job is to prove the linking: the binary starts without LD_LIBRARY_PATH, libtorch is
//! found, and `libtorch_cuda.so` is loaded (so CUDA works where a GPU exists) even on a CPU-only
//! machine, where it reports "CUDA available: no" rather than failing.

use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// The libtorch directory torch-sys linked against on the build machine (see build.rs).
const BUILT_AGAINST: &str = env!("KOMA_LIBTORCH_LIB");

/// What the dynamic loader actually mapped into this process.
#[derive(Debug, Default)]
struct LoadedLibtorch {
    /// Directory holding the loaded `libtorch_cpu.so`.
    dir: Option<PathBuf>,
    /// Whether `libtorch_cuda.so` is loaded (the CUDA backend is linked in).
    cuda_linked: bool,
}

impl LoadedLibtorch {
    /// Reads `/proc/self/maps` (Linux). Elsewhere nothing is known and all fields stay empty.
    fn detect() -> Self {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        Self::from_maps(&maps)
    }

    fn from_maps(maps: &str) -> Self {
        let mut loaded = Self::default();
        // Each line ends with the mapped file's path, if any: "… 08:01 1234   /path/libx.so".
        // The fields before it hold no '/', and the path itself may contain spaces.
        for path in maps.lines().filter_map(|l| l.find('/').map(|i| Path::new(&l[i..]))) {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("libtorch_cpu.so") && loaded.dir.is_none() {
                loaded.dir = path.parent().map(Path::to_path_buf);
            }
            if name.starts_with("libtorch_cuda.so") {
                loaded.cuda_linked = true;
            }
        }
        loaded
    }

    /// The torch version, from the install around the loaded library: a PyTorch wheel has
    /// `torch/version.py` next to `torch/lib/`, a libtorch zip has `build-version`.
    fn version(&self) -> Option<String> {
        let root = self.dir.as_deref()?.parent()?;
        if let Ok(text) = std::fs::read_to_string(root.join("version.py")) {
            let line = text.lines().find(|l| l.starts_with("__version__"))?;
            let value = line.split_once('=')?.1.trim().trim_matches(['\'', '"']);
            return Some(value.to_owned());
        }
        let text = std::fs::read_to_string(root.join("build-version")).ok()?;
        Some(text.trim().to_owned())
    }
}

/// "13000" → "13.0" (CUDA encodes versions as major*1000 + minor*10).
fn cuda_version(v: i64) -> String {
    format!("{}.{}", v / 1000, (v % 1000) / 10)
}

/// "91900" → "9.19.0" (cuDNN 9 encodes versions as major*10000 + minor*100 + patch).
fn cudnn_version(v: i64) -> String {
    format!("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100)
}

pub fn run(args: Args) -> Result<()> {
    let loaded = LoadedLibtorch::detect();
    tracing::debug!(?loaded, built_against = BUILT_AGAINST, "libtorch");
    let torch_version = loaded.version();
    // These two are compile-time constants of libtorch_cuda; only ask when it is loaded (without
    // it libtorch throws "Cannot query CUDART version without ATen_cuda library").
    let (cudart, cudnn) = if loaded.cuda_linked {
        (Some(tch::utils::version_cudart()), Some(tch::utils::version_cudnn()))
    } else {
        (None, None)
    };
    let cuda_available = tch::Cuda::is_available();
    let device_count = tch::Cuda::device_count();
    let cudnn_available = tch::Cuda::cudnn_is_available();
    let device = match tch::Device::cuda_if_available() {
        tch::Device::Cuda(i) => format!("cuda:{i}"),
        other => format!("{other:?}").to_lowercase(),
    };
    let threads = tch::get_num_threads();
    let dir = loaded.dir.as_ref().map(|d| d.display().to_string());

    if args.json {
        let info = json!({
            "version": env!("CARGO_PKG_VERSION"),
            "libtorch": {
                "version": torch_version,
                "dir": dir,
                "built_against": BUILT_AGAINST,
                "cuda_linked": loaded.cuda_linked,
                "cuda_runtime": cudart.map(cuda_version),
                "cudnn": cudnn.map(cudnn_version),
            },
            "cuda": {
                "available": cuda_available,
                "device_count": device_count,
                "cudnn_available": cudnn_available,
            },
            "device": device,
            "threads": threads,
        });
        println!("{info}");
        return Ok(());
    }

    let unknown = || "unknown".to_owned();
    println!("koma {}", env!("CARGO_PKG_VERSION"));
    println!("libtorch        {}", torch_version.unwrap_or_else(unknown));
    println!("  loaded from   {}", dir.unwrap_or_else(unknown));
    println!("  built against {BUILT_AGAINST}");
    match (cudart, cudnn) {
        (Some(rt), Some(dnn)) => println!(
            "  CUDA backend  linked (libtorch_cuda.so; CUDA runtime {}, cuDNN {})",
            cuda_version(rt),
            cudnn_version(dnn)
        ),
        _ => println!("  CUDA backend  not linked (CPU-only libtorch or link problem)"),
    }
    let yes_no = |b: bool| if b { "yes" } else { "no" };
    println!("CUDA available  {} ({device_count} devices)", yes_no(cuda_available));
    println!("cuDNN available {}", yes_no(cudnn_available));
    println!("device          {device}");
    println!("threads         {threads} (intra-op)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
7f00-7f01 r--p 00000000 08:01 11 /opt/venv/site-packages/torch/lib/libtorch_cpu.so
7f01-7f02 r-xp 00001000 08:01 11 /opt/venv/site-packages/torch/lib/libtorch_cpu.so
7f02-7f03 r--p 00000000 08:01 12 /opt/venv/site-packages/torch/lib/libtorch_cuda.so
7f03-7f04 rw-p 00000000 00:00 0
7f04-7f05 r--p 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libc.so.6
";

    #[test]
    fn finds_libtorch_in_maps() {
        let loaded = LoadedLibtorch::from_maps(MAPS);
        assert_eq!(loaded.dir.as_deref(), Some(Path::new("/opt/venv/site-packages/torch/lib")));
        assert!(loaded.cuda_linked);
    }

    #[test]
    fn no_libtorch_in_maps() {
        let loaded = LoadedLibtorch::from_maps("7f03-7f04 rw-p 00000000 00:00 0\n");
        assert!(loaded.dir.is_none());
        assert!(!loaded.cuda_linked);
        assert!(loaded.version().is_none());
    }

    #[test]
    fn cuda_versions() {
        assert_eq!(cuda_version(13000), "13.0");
        assert_eq!(cuda_version(12080), "12.8");
        assert_eq!(cudnn_version(91900), "9.19.0");
    }
}
