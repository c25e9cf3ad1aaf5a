//! `koma show`: a readable board diagram with both hands, for people: in English (SFEN letters),
//! Vietnamese (piece names) or Japanese (a KIF board diagram).

use anyhow::{bail, Context, Result};
use clap::builder::PossibleValuesParser;
use koma_shogi::record::bod::board_diagram;
use koma_shogi::usi::parse_position;
use koma_shogi::{Handicap, Position};

#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["sfen", "usi", "handicap"])))]
pub struct Args {
    /// The position as SFEN.
    #[arg(long)]
    sfen: Option<String>,
    /// The position as USI position arguments, e.g. "startpos moves 7g7f 3c3d".
    #[arg(long)]
    usi: Option<String>,
    /// A handicap start, by name (`two-piece`, `three-piece`, `right-lance`, … or the KIF name
    /// such as 二枚落ち).
    #[arg(long)]
    handicap: Option<String>,
    /// Language of the diagram: `en` (SFEN letters), `vi` (Vietnamese piece names) or `ja` (KIF
    /// board diagram).
    #[arg(long, default_value = "en", ignore_case = true, value_parser = PossibleValuesParser::new(["en", "vi", "ja"]))]
    lang: String,
}

pub fn run(args: Args) -> Result<()> {
    let pos = match (&args.sfen, &args.usi, &args.handicap) {
        (Some(sfen), _, _) => Position::from_sfen(sfen).with_context(|| format!("--sfen {sfen:?}"))?,
        (None, Some(usi), _) => parse_position(usi).with_context(|| format!("--usi {usi:?}"))?,
        (None, None, Some(name)) => match Handicap::from_name(name) {
            Some(h) => h.position(),
            None => bail!("--handicap {name:?}: expected one of {}", Handicap::names()),
        },
        (None, None, None) => unreachable!("clap requires one of --sfen, --usi and --handicap"),
    };
    match args.lang.to_ascii_lowercase().as_str() {
        "en" => println!("{}", pos.diagram()),
        "vi" => println!("{}", pos.diagram_vietnamese()),
        "ja" => print!("{}", board_diagram(&pos)),
        other => bail!("--lang {other:?}: expected en, vi or ja"),
    }
    Ok(())
}
