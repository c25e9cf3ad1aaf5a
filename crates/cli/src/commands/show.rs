//! `koma show`: a readable board diagram with both hands, for people.

use anyhow::{Context, Result};
use koma_shogi::usi::parse_position;
use koma_shogi::Position;

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["sfen", "usi"])))]
pub struct Args {
    /// The position as SFEN.
    #[arg(long)]
    sfen: Option<String>,
    /// The position as USI position arguments, e.g. "startpos moves 7g7f 3c3d".
    #[arg(long)]
    usi: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    let pos = match (&args.sfen, &args.usi) {
        (Some(sfen), _) => Position::from_sfen(sfen).with_context(|| format!("--sfen {sfen:?}"))?,
        (None, Some(usi)) => parse_position(usi).with_context(|| format!("--usi {usi:?}"))?,
        (None, None) => unreachable!("clap requires one of --sfen and --usi"),
    };
    println!("{}", pos.diagram());
    Ok(())
}
