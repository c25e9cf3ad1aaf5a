//! `koma convert`: game records between CSA, KIF/KIFU, KI2, USI and SFEN move lists, for one file
//! or a whole directory; or a record as readable move text (`--to notation`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::builder::PossibleValuesParser;
use koma_shogi::record::{self, notation, Format, GameRecord};

use super::choices::one_of;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Input format.
    #[arg(long, value_parser = one_of::<Format>(Format::ALL.map(Format::name)))]
    from: Format,
    /// Output format: a record format (kif is Shift_JIS, kifu UTF-8), or notation (readable moves).
    #[arg(long, value_parser = PossibleValuesParser::new(Format::ALL.map(Format::name).into_iter().chain([NOTATION])))]
    to: String,
    /// Move text style for `--to notation`: western (Hosking, `P-76`), hodges (`1. P-7f P-3d`),
    /// vietnamese (letters, `T-76`), vietnamese-names (`Tốt-76`) or japanese.
    #[arg(long, default_value = "western", value_parser = PossibleValuesParser::new(STYLES))]
    style: String,
    /// A record file or a directory of them.
    input: PathBuf,
    /// Output file or directory (default: stdout for a file, in place for a directory).
    output: Option<PathBuf>,
    /// Print a summary as one JSON object on stdout: games, the files written for each input,
    /// and the files that failed with their errors. Needs the records to go to files.
    #[arg(long)]
    json: bool,
}

/// `--to notation`: readable move text instead of a record.
const NOTATION: &str = "notation";

const STYLES: [&str; 5] = ["western", "hodges", "vietnamese", "vietnamese-names", "japanese"];

/// One numbered move per line in the chosen style (Hodges: numbered move pairs).
fn notation_text(game: &GameRecord, style: &str) -> Result<String> {
    if style == "hodges" {
        let moves: Vec<_> = game.moves.iter().map(|m| m.mv).collect();
        let mut out = notation::numbered_moves(&game.start, &moves, notation::hodges);
        if let Some(result) = game.result {
            out.push_str(&format!("{:?} {:?}\n", result.reason, result.winner));
        }
        return Ok(out);
    }
    let mut pos = game.start.clone();
    let mut out = String::new();
    let mut previous_to = None;
    for (i, m) in game.moves.iter().enumerate() {
        let text = match style {
            "western" => notation::western(&pos, m.mv),
            "vietnamese" => notation::vietnamese(&pos, m.mv),
            "vietnamese-names" => notation::vietnamese_names(&pos, m.mv),
            "japanese" => notation::japanese_with_mark(&pos, m.mv, previous_to),
            other => bail!("--style {other:?}: expected one of {}", STYLES.join(", ")),
        };
        out.push_str(&format!("{:>4} {text}\n", i + 1));
        previous_to = Some(m.mv.to());
        pos.do_move(m.mv);
    }
    if let Some(result) = game.result {
        out.push_str(&format!("     {:?} {:?}\n", result.reason, result.winner));
    }
    Ok(out)
}

pub fn run(args: Args) -> Result<()> {
    let from = args.from;
    if args.json && (args.to == NOTATION || (args.output.is_none() && !args.input.is_dir())) {
        bail!(
            "--json prints a summary on stdout: give an output file or directory for the records (and a record format)"
        );
    }
    if args.to == NOTATION {
        let games =
            record::read_file(&args.input, from).with_context(|| format!("reading {}", args.input.display()))?;
        let mut text = String::new();
        for game in &games {
            text.push_str(&notation_text(game, &args.style)?);
        }
        match &args.output {
            Some(path) => koma_base::durable::write(path, text.as_bytes())?,
            None => print!("{text}"),
        }
        return Ok(());
    }
    let to = Format::from_name(&args.to).with_context(|| format!("--to {:?}: not a record format", args.to))?;
    let summary = record::convert_path(&args.input, from, to, args.output.as_deref())?;
    for error in &summary.errors {
        eprintln!("koma: error: {error}");
    }
    let files = summary.converted.len();
    if args.json {
        let converted: Vec<_> = summary
            .converted
            .iter()
            .map(|f| serde_json::json!({ "input": f.input, "outputs": f.outputs, "games": f.games }))
            .collect();
        let failed: Vec<String> = summary.errors.iter().map(|e| e.to_string()).collect();
        println!("{}", serde_json::json!({ "games": summary.games(), "files": converted, "failed": failed }));
    } else if args.output.is_some() || args.input.is_dir() {
        eprintln!("converted {} games in {files} files, {} files failed", summary.games(), summary.errors.len());
    }
    if !summary.is_ok() {
        bail!("{} of {} files could not be converted", summary.errors.len(), files + summary.errors.len());
    }
    Ok(())
}
