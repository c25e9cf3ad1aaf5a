//! `koma encode --input FILE --output OUT.h5`: dlshogi features and move labels of positions,
//! for tests against other implementations and for quick datasets.
//!
//! Input: one position per line, `<sfen> [<usi-move>]` (the SFEN's move number may be left
//! out); blank lines and lines starting with `#` are skipped. Output datasets: `input1`
//! (N,62,9,9) u8, `input2` (N,57,9,9) u8, `label` (N,) i32 (−1 where the line has no move),
//! chunked and deflate-compressed, plus file attributes `encoding_version` and
//! `features1_num`/`features2_num`/`move_labels`. The file is written under a temporary name and
//! renamed into place.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use koma_nn::encoding::{self, InputBatch, FEATURES1_NUM, FEATURES2_NUM, MOVE_LABELS};
use koma_shogi::{Move, Position};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Text file of `<sfen> [<usi-move>]` lines (`-` for stdin).
    #[arg(long)]
    input: PathBuf,
    /// HDF5 file to write.
    #[arg(long)]
    output: PathBuf,
    /// Print one JSON summary object instead of text.
    #[arg(long)]
    json: bool,
}

/// Positions per encoding/writing block.
const BLOCK: usize = 4096;
/// Rows per HDF5 chunk of the feature datasets (62·81 B · 128 ≈ 640 KiB, under 1 MiB).
const CHUNK_ROWS: usize = 128;

/// Parses one input line into a position and an optional move.
pub fn parse_line(line: &str) -> Result<(Position, Option<Move>)> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    if tokens.len() < 3 {
        bail!("expected `<sfen> [<usi-move>]`");
    }
    let (sfen, rest) = if tokens.len() >= 4 && tokens[3].bytes().all(|b| b.is_ascii_digit()) {
        (tokens[..4].join(" "), &tokens[4..])
    } else {
        (format!("{} 1", tokens[..3].join(" ")), &tokens[3..])
    };
    let pos = Position::from_sfen(&sfen).map_err(|e| anyhow::anyhow!("invalid SFEN {sfen:?}: {e}"))?;
    let mv = match rest {
        [] => None,
        [usi] => {
            let m = Move::from_usi(usi).with_context(|| format!("invalid USI move {usi:?}"))?;
            if !pos.legal_moves().contains(&m) {
                bail!("move {usi} is not legal in {sfen}");
            }
            Some(m)
        }
        _ => bail!("trailing text after the move: {:?}", rest[1..].join(" ")),
    };
    Ok((pos, mv))
}

/// The non-blank, non-comment lines with their 1-based line numbers. Positions are parsed block by
/// block later (a parsed `Position` keeps room for its history, so a million of them at once
/// would be gigabytes).
fn read_lines(input: &Path) -> Result<Vec<(usize, String)>> {
    let text = if input.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).context("reading stdin")?
    } else {
        std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?
    };
    Ok(text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| (i, l.to_string()))
        .collect())
}

fn write_h5(path: &Path, input: &Path, rows: &[(usize, String)]) -> Result<(usize, f64)> {
    use ndarray::{s, ArrayView1, ArrayView4};
    let n = rows.len();
    let file = hdf5::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let deflate = hdf5::filters::deflate_available();
    let features = |name: &str, planes: usize| -> Result<hdf5::Dataset> {
        let mut b = file.new_dataset::<u8>();
        if n > 0 {
            b = b.chunk((CHUNK_ROWS.min(n), planes, 9, 9));
            if deflate {
                b = b.deflate(1);
            }
        }
        Ok(b.shape((n, planes, 9, 9)).create(name)?)
    };
    let in1 = features("input1", FEATURES1_NUM)?;
    let in2 = features("input2", FEATURES2_NUM)?;
    let label = file.new_dataset::<i32>().shape(n).create("label")?;
    for (key, value) in [
        ("encoding_version", encoding::ENCODING_VERSION),
        ("features1_num", FEATURES1_NUM as u32),
        ("features2_num", FEATURES2_NUM as u32),
        ("move_labels", MOVE_LABELS as u32),
    ] {
        file.new_attr::<u32>().create(key)?.write_scalar(&value)?;
    }

    let mut batch = InputBatch::with_capacity(BLOCK.min(n));
    let mut labels = Vec::with_capacity(n);
    let mut encode_seconds = 0.0;
    for (b, lines) in rows.chunks(BLOCK).enumerate() {
        let block = lines
            .iter()
            .map(|(i, l)| parse_line(l).with_context(|| format!("{} line {i}", input.display())))
            .collect::<Result<Vec<_>>>()?;
        let start = Instant::now();
        let positions: Vec<&Position> = block.iter().map(|(p, _)| p).collect();
        batch.encode(&positions);
        encode_seconds += start.elapsed().as_secs_f64();
        let (lo, hi) = (b * BLOCK, b * BLOCK + block.len());
        let k = block.len();
        in1.write_slice(ArrayView4::from_shape((k, FEATURES1_NUM, 9, 9), batch.input1())?, s![lo..hi, .., .., ..])?;
        in2.write_slice(ArrayView4::from_shape((k, FEATURES2_NUM, 9, 9), batch.input2())?, s![lo..hi, .., .., ..])?;
        labels.extend(block.iter().map(|(p, m)| m.map_or(-1, |m| encoding::move_label(m, p.side_to_move()) as i32)));
    }
    label.write(ArrayView1::from(&labels))?;
    file.close()?;
    Ok((labels.iter().filter(|&&l| l >= 0).count(), encode_seconds))
}

pub fn run(args: Args) -> Result<()> {
    let start = Instant::now();
    let rows = read_lines(&args.input)?;
    // Written beside the output and renamed when whole: an error leaves the old file, if any.
    let staged = koma_base::durable::StagedFile::new(&args.output);
    let (with_moves, encode_seconds) = write_h5(staged.temporary(), &args.input, &rows)
        .with_context(|| format!("writing {}", args.output.display()))?;
    staged.publish()?;
    let seconds = start.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            json!({
                "positions": rows.len(),
                "with_move": with_moves,
                "output": args.output,
                "seconds": seconds,
                "encode_seconds": encode_seconds,
            })
        );
    } else {
        println!(
            "encoded {} positions ({} with a move) into {} in {:.2} s (encoding {:.3} s)",
            rows.len(),
            with_moves,
            args.output.display(),
            seconds,
            encode_seconds
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines() {
        let (p, m) = parse_line("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 7g7f").unwrap();
        assert_eq!(p.to_sfen(), Position::startpos().to_sfen());
        assert_eq!(m.unwrap().to_usi(), "7g7f");
        let (_, m) = parse_line("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b -").unwrap();
        assert!(m.is_none());
        let (_, m) = parse_line("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 2g2f").unwrap();
        assert_eq!(m.unwrap().to_usi(), "2g2f");
        assert!(parse_line("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1 7g7e").is_err());
        assert!(parse_line("garbage").is_err());
    }
}
