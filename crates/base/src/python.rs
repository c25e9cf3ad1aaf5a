//! The one way koma runs Python. The binary carries the modules of `python/koma/` it needs
//! (embedded at build time), writes them out as the package `koma` into a temporary directory and
//! runs `python -m koma.MODULE` with that directory on `PYTHONPATH`: ONNX export, plots, the
//! PyTorch training reference and the cshogi references of the benchmarks work from any directory,
//! with no checkout beside the binary.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The modules of `python/koma/` the binary runs, with the package's `__init__.py`.
const MODULES: &[(&str, &str)] = &[
    ("__init__.py", include_str!("../../../python/koma/__init__.py")),
    ("model.py", include_str!("../../../python/koma/model.py")),
    ("export.py", include_str!("../../../python/koma/export.py")),
    ("plot.py", include_str!("../../../python/koma/plot.py")),
    ("durable.py", include_str!("../../../python/koma/durable.py")),
    ("bench_train.py", include_str!("../../../python/koma/bench_train.py")),
    ("cshogi_perft.py", include_str!("../../../python/koma/cshogi_perft.py")),
    ("cshogi_mate.py", include_str!("../../../python/koma/cshogi_mate.py")),
];

/// The interpreter koma runs: `KOMA_PYTHON` when set, else the bootstrap venv's
/// (`$KOMA_VENV/bin/python`, set by scripts/koma) when it exists, else `python3` on `PATH`.
pub fn interpreter() -> String {
    if let Ok(python) = std::env::var("KOMA_PYTHON") {
        if !python.is_empty() {
            return python;
        }
    }
    if let Some(venv) = std::env::var_os("KOMA_VENV") {
        let python = Path::new(&venv).join("bin/python");
        if python.exists() {
            return python.to_string_lossy().into_owned();
        }
    }
    "python3".into()
}

/// The embedded package written out for one use: a temporary directory holding `koma/`, removed
/// when this is dropped. Its directory doubles as scratch space for the module's inputs.
pub struct Python {
    program: String,
    package: tempfile::TempDir,
}

impl Python {
    /// Writes the package out; runs `program` (None: [`interpreter`]).
    pub fn new(program: Option<&str>) -> std::io::Result<Python> {
        let package = tempfile::Builder::new().prefix("koma-python-").tempdir()?;
        let dir = package.path().join("koma");
        std::fs::create_dir(&dir)?;
        for (name, text) in MODULES {
            std::fs::write(dir.join(name), text)?;
        }
        Ok(Python { program: program.map(str::to_string).unwrap_or_else(interpreter), package })
    }

    /// The interpreter this runs, for messages.
    pub fn program(&self) -> &str {
        &self.program
    }

    /// A directory for inputs and outputs of the module, removed with the package.
    pub fn scratch(&self) -> &Path {
        self.package.path()
    }

    /// A path in [`Python::scratch`].
    pub fn scratch_file(&self, name: &str) -> PathBuf {
        self.package.path().join(name)
    }

    /// `python -m koma.MODULE ARGS…` with the package on `PYTHONPATH` (ahead of anything there).
    pub fn module<I, S>(&self, module: &str, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut path = std::ffi::OsString::from(self.package.path());
        if let Some(old) = std::env::var_os("PYTHONPATH").filter(|p| !p.is_empty()) {
            path.push(":");
            path.push(old);
        }
        let mut command = Command::new(&self.program);
        command.env("PYTHONPATH", path).arg("-m").arg(format!("koma.{module}")).args(args);
        command
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_package_holds_every_module_and_goes_away_with_its_owner() {
        let python = Python::new(Some("python3")).unwrap();
        let dir = python.scratch().to_path_buf();
        for (name, text) in MODULES {
            assert_eq!(std::fs::read_to_string(dir.join("koma").join(name)).unwrap(), *text);
        }
        let command = python.module("plot", ["RUN"]);
        let args: Vec<_> = command.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        assert_eq!(args, ["-m", "koma.plot", "RUN"]);
        let pythonpath = command.get_envs().find(|(k, _)| *k == "PYTHONPATH").and_then(|(_, v)| v).unwrap();
        assert!(pythonpath.to_string_lossy().starts_with(&*dir.to_string_lossy()));
        drop(python);
        assert!(!dir.exists());
    }
}
