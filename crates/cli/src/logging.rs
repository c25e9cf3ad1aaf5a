//! Logging: `tracing` events to stderr, filtered by `RUST_LOG` or else by the `-v` count, and,
//! once a command names one ([`log_to_file`]), also to a log file (the pipeline's `RUN/logs/`).

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing::Level;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::prelude::*;
use tracing_subscriber::EnvFilter;

static LOG_FILE: OnceLock<Mutex<std::fs::File>> = OnceLock::new();
/// While a live status display owns the terminal, only warnings and errors go to stderr.
static QUIET_STDERR: AtomicBool = AtomicBool::new(false);

/// The filter used when `RUST_LOG` is not set: info by default, -v debug, -vv and more trace.
fn default_directive(verbose: u8) -> &'static str {
    match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// Writes to the log file when there is one (and nowhere otherwise).
struct FileSink;

impl Write for FileSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(file) = LOG_FILE.get() {
            file.lock().unwrap_or_else(|e| e.into_inner()).write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs the global subscriber. Results go to stdout; logs and progress go to stderr, so
/// `koma … --json | jq` keeps working at any verbosity.
pub fn init(verbose: u8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(default_directive(verbose)),
    };
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter(filter_fn(|meta| !QUIET_STDERR.load(Ordering::Relaxed) || *meta.level() <= Level::WARN));
    let file = tracing_subscriber::fmt::layer()
        .with_writer(|| FileSink)
        .with_ansi(false)
        .with_target(false)
        .with_filter(filter_fn(|_| LOG_FILE.get().is_some()));
    tracing_subscriber::registry().with(filter).with(stderr).with(file).init();
}

/// From now on, log events also go to `path` (appended; created with its directory).
pub fn log_to_file(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
    let _ = LOG_FILE.set(Mutex::new(file));
    Ok(())
}

/// Keeps info and debug lines off stderr (a live display is drawn there); they still reach the
/// log file.
pub fn quiet_stderr(quiet: bool) {
    QUIET_STDERR.store(quiet, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbosity_maps_to_levels() {
        assert_eq!(default_directive(0), "info");
        assert_eq!(default_directive(1), "debug");
        assert_eq!(default_directive(2), "trace");
        assert_eq!(default_directive(9), "trace");
    }
}
