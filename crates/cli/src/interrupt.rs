//! Ctrl-C (and SIGTERM): the first one sets a stop flag that long-running commands poll, so they
//! finish cleanly (checkpoint written, shards flushed); a second one exits at once. SIGXFSZ:
//! ignored, so that a file-size limit makes a write fail like a full disk does. SIGPIPE: the
//! default (exit quietly) for the short report commands and `usi`
//! ([`crate::commands::Command::exits_quietly_on_closed_output`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

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
