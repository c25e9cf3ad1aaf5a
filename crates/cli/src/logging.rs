//! Logging: `tracing` events to stderr, filtered by `RUST_LOG` or else by the `-v` count.

use tracing_subscriber::EnvFilter;

/// The filter used when `RUST_LOG` is not set: info by default, -v debug, -vv and more trace.
fn default_directive(verbose: u8) -> &'static str {
    match verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    }
}

/// Installs the global subscriber. Results go to stdout; logs and progress go to stderr, so
/// `koma … --json | jq` keeps working at any verbosity.
pub fn init(verbose: u8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(default_directive(verbose)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
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
