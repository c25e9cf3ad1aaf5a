//! Ctrl-C (and SIGTERM): the first one sets a stop flag that long-running commands poll, so they
//! finish cleanly (checkpoint written, shards flushed); a second one exits at once, and so does a
//! clean stop that has not ended after a grace period (`KOMA_STOP_GRACE_SECONDS`, default 60): a
//! thread stuck in a call that never returns (a hung GPU) cannot poll the flag, and a batch job's
//! SIGTERM must not wait on it forever. Every file is published whole or not at all
//! (`koma_base::durable`), so exiting then loses only what was in memory. SIGXFSZ:
//! ignored, so that a file-size limit makes a write fail like a full disk does. SIGPIPE: the
//! default (exit quietly) for the short report commands and `usi`
//! ([`crate::commands::Command::exits_quietly_on_closed_output`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// How long a clean stop may take before the process exits anyway.
const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(60);

/// The grace period: `KOMA_STOP_GRACE_SECONDS` when it is a non-negative number, else the default.
fn stop_grace() -> Duration {
    grace_from(std::env::var("KOMA_STOP_GRACE_SECONDS").ok().as_deref())
}

fn grace_from(text: Option<&str>) -> Duration {
    text.and_then(|text| text.trim().parse::<f64>().ok())
        .and_then(|seconds| Duration::try_from_secs_f64(seconds).ok())
        .unwrap_or(DEFAULT_STOP_GRACE)
}

/// Exits the process if it is still running `grace` after the first stop signal.
fn exit_after(grace: Duration) {
    let spawned = std::thread::Builder::new().name("koma-stop-grace".into()).spawn(move || {
        std::thread::sleep(grace);
        let _ = writeln!(
            std::io::stderr(),
            "\nkoma: still not stopped {:.0} s after the stop signal (a call that never returns, such as a hung \
             GPU); exiting now: every file published so far is whole (KOMA_STOP_GRACE_SECONDS sets this wait)",
            grace.as_secs_f64()
        );
        tracing::error!("still not stopped {:.0} s after the stop signal; exiting", grace.as_secs_f64());
        std::process::exit(130);
    });
    if let Err(e) = spawned {
        let _ = writeln!(std::io::stderr(), "koma: cannot start the stop timer ({e}); Ctrl-C again to exit");
    }
}

/// The process's stop flag, with the handler installed on first use.
pub fn stop_flag() -> Arc<AtomicBool> {
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        let installed = ctrlc::set_handler(move || {
            // Written, not `eprintln!`: stderr may be a pipe that Ctrl-C closed too (`| tee`), and
            // the clean stop must not die of a failed message.
            if handler_flag.swap(true, Ordering::SeqCst) {
                let _ = writeln!(std::io::stderr(), "\nkoma: interrupted again, exiting now");
                std::process::exit(130);
            }
            let _ = writeln!(std::io::stderr(), "\nkoma: stopping cleanly (Ctrl-C again to exit at once)…");
            exit_after(stop_grace());
        });
        if let Err(e) = installed {
            tracing::warn!("cannot install the Ctrl-C handler: {e}");
        }
        flag
    })
    .clone()
}

/// Ignores SIGXFSZ, whose default action kills the process in the middle of a write: with it
/// ignored, a write beyond a file-size limit (`ulimit -f`) fails with EFBIG, and koma reports it,
/// removes the half-written temporary file and keeps everything written before, as for a full disk.
pub fn ignore_file_size_signal() {
    // SAFETY: setting a signal's disposition to SIG_IGN installs no handler code; it is
    // async-signal-safe and done once at start-up, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

/// Restores SIGPIPE's default action, which Rust's runtime sets to ignored: `koma … | head` then
/// ends quietly when `head` closes the pipe, as Unix tools do, instead of panicking in `println!`.
/// Only for the commands [`crate::commands::Command::exits_quietly_on_closed_output`] names.
pub fn exit_quietly_on_closed_output() {
    // SAFETY: as above: a disposition, no handler code, set once before other threads exist.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_is_a_number_of_seconds_or_the_default() {
        assert_eq!(grace_from(Some("2.5")), Duration::from_millis(2500));
        assert_eq!(grace_from(Some(" 0 ")), Duration::ZERO);
        for bad in [None, Some(""), Some("-1"), Some("soon"), Some("inf"), Some("NaN")] {
            assert_eq!(grace_from(bad), DEFAULT_STOP_GRACE, "{bad:?}");
        }
    }
}
