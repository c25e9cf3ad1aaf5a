//! `koma`: the command-line front end of the koma shogi training pipeline.
//!
//! `main` parses the command line, sets up logging and hands over to [`commands`], which holds
//! one module per subcommand.

mod commands;
mod interrupt;
mod limits;
mod logging;

use std::process::ExitCode;

use clap::Parser;

/// AlphaZero-style self-play training for shogi.
#[derive(Debug, Parser)]
#[command(name = "koma", version, propagate_version = true)]
struct Cli {
    /// More log output on stderr: -v debug, -vv trace (RUST_LOG, when set, overrides this).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    interrupt::ignore_file_size_signal();
    let cli = Cli::parse();
    if cli.command.exits_quietly_on_closed_output() {
        interrupt::exit_quietly_on_closed_output();
    }
    logging::init(cli.verbose);
    limits::raise_open_file_limit();
    match cli.command.run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The whole chain on one line, each cause once: "reading X: No such file …".
            eprintln!("koma: error: {}", koma_base::error::Report(err.as_ref()));
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn verbose_is_global_and_counts() {
        let cli = Cli::try_parse_from(["koma", "info", "-vv"]).unwrap();
        assert_eq!(cli.verbose, 2);
        let cli = Cli::try_parse_from(["koma", "-v", "info"]).unwrap();
        assert_eq!(cli.verbose, 1);
    }
}
