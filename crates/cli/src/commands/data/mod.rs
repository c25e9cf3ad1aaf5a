//! `koma data …`: training data outside self-play.
//!
//! - `import`: game records (CSA, KIF/KIFU, KI2; files or directories) and dlshogi hcpe and hcpe3
//!   files to replay shards;
//! - `export`: shards to an hcpe or hcpe3 file;
//! - `stats`: what shards hold (games, results, lengths, policy entries, move labels, bytes);
//! - `verify`: every dataset of every shard read and checked; exit status 1 if any is bad;
//! - `loss`: networks' losses on held-out samples (`loss.rs`).
//!
//! docs/data-format.md describes what each source becomes.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::builder::PossibleValuesParser;
use indicatif::{ProgressBar, ProgressStyle};
use koma_data::import::{self, ImportEvent, ImportOptions, RecordOptions, Source};
use koma_data::inspect::{list_shards, shard_stats, verify_shard, ShardStats};
use koma_nn::encoding::{direction, move_label, MOVE_LABELS, SQUARES};
use koma_shogi::{PieceType, Square};

mod loss;

#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Import game records (CSA, KIF/KIFU, KI2) or dlshogi hcpe/hcpe3 files into replay shards.
    Import(ImportArgs),
    /// Write the samples of shards to a dlshogi hcpe file, or their games to an hcpe3 file.
    Export(ExportArgs),
    /// Statistics of shards: games, results, lengths, policy entries, move labels, bytes.
    Stats(StatsArgs),
    /// Losses of networks (checkpoints, or a training state's raw weights) on samples of shards
    /// they were not trained on.
    Loss(loss::LossArgs),
    /// Read and check every shard; exit status 1 if any is bad.
    Verify(VerifyArgs),
}

#[derive(Debug, clap::Args)]
struct ImportArgs {
    /// Input format (kif reads .kifu too); auto: by each file's extension.
    #[arg(long, default_value = "auto", value_parser = PossibleValuesParser::new(Source::NAMES))]
    from: String,
    /// Files, or directories read recursively (files with the format's extensions).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Directory for the shards (created if needed; numbering continues after existing shards).
    #[arg(long)]
    out: PathBuf,
    /// Games per shard (records, hcpe3).
    #[arg(long, default_value_t = 1000)]
    games_per_shard: usize,
    /// Positions per shard (hcpe).
    #[arg(long, default_value_t = 100_000)]
    positions_per_shard: usize,
    /// Skip games with fewer moves (plies).
    #[arg(long, default_value_t = 0)]
    min_moves: usize,
    /// Keep only games whose both players have at least this Floodgate rating (CSA
    /// `'black_rate:` / `'white_rate:` comments); games without ratings are skipped.
    #[arg(long)]
    min_rating: Option<f64>,
    /// Use the records' evaluations (CSA `'**`, KIF 評価値) as root values.
    #[arg(long)]
    evals: bool,
    /// Centipawns per logit when turning evaluations (records, hcpe, hcpe3) into values
    /// (dlshogi's constant).
    #[arg(long, default_value_t = koma_data::hcp::DLSHOGI_EVAL_SCALE)]
    eval_scale: f64,
    /// Shard file name prefix.
    #[arg(long, default_value = "import")]
    prefix: String,
    /// Stop at the first bad file or record (exit status 1).
    #[arg(long)]
    strict: bool,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct ExportArgs {
    /// Output format: hcpe (one record per sample) or hcpe3 (games with their visit counts).
    #[arg(long, default_value = "hcpe", value_parser = PossibleValuesParser::new(["hcpe", "hcpe3"]))]
    to: String,
    /// Shards, or directories searched recursively for `.h5` files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// The file to write.
    #[arg(long)]
    out: PathBuf,
    /// Scale of the logistic that turns a sample's value into the centipawn eval.
    #[arg(long, default_value_t = koma_data::hcp::DLSHOGI_EVAL_SCALE)]
    eval_scale: f64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct StatsArgs {
    /// Shards, or directories searched recursively for `.h5` files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Most frequent move labels to list.
    #[arg(long, default_value_t = 10)]
    top: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Debug, clap::Args)]
struct VerifyArgs {
    /// Shards, or directories searched recursively for `.h5` files.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args) -> Result<()> {
    match args.command {
        Command::Import(a) => run_import(a),
        Command::Export(a) => run_export(a),
        Command::Stats(a) => run_stats(a),
        Command::Verify(a) => run_verify(a),
        Command::Loss(a) => loss::run(a),
    }
}

fn bar(len: u64, template: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
    bar
}

/// Warnings printed before the rest are only counted.
const WARNINGS_PRINTED: usize = 50;

fn run_import(args: ImportArgs) -> Result<()> {
    let source = Source::from_name(&args.from)
        .with_context(|| format!("--from {:?}: expected csa, kif, ki2, hcpe, hcpe3 or auto", args.from))?;
    if args.games_per_shard == 0 || args.positions_per_shard == 0 {
        bail!("--games-per-shard and --positions-per-shard must be at least 1");
    }
    if !(args.eval_scale.is_finite() && args.eval_scale > 0.0) {
        bail!("--eval-scale must be a positive number");
    }
    let options = ImportOptions {
        source,
        records: RecordOptions {
            min_moves: args.min_moves,
            min_rating: args.min_rating,
            use_evals: args.evals,
            eval_scale: args.eval_scale,
        },
        eval_scale: args.eval_scale,
        games_per_shard: args.games_per_shard,
        positions_per_shard: args.positions_per_shard,
        prefix: args.prefix.clone(),
        strict: args.strict,
    };
    let progress = bar(0, "{bar:30} {bytes}/{total_bytes} {per_sec} eta {eta}  {msg}");
    let started = Instant::now();
    let mut printed = 0usize;
    let summary = import::import(&args.inputs, &args.out, &options, &mut |event| match event {
        ImportEvent::Start { files, bytes } => {
            progress.set_length(*bytes);
            progress.set_message(format!("{files} files"));
        }
        ImportEvent::Bytes(b) => progress.inc(*b),
        ImportEvent::Problem(p) => {
            if printed < WARNINGS_PRINTED {
                progress.suspend(|| eprintln!("koma: warning: {p}"));
            } else if printed == WARNINGS_PRINTED {
                progress.suspend(|| eprintln!("koma: warning: more problems; only counted from here on"));
            }
            printed += 1;
        }
    })
    .with_context(|| format!("importing into {}", args.out.display()))?;
    progress.finish_and_clear();
    if summary.files == 0 {
        bail!(
            "no files to import in {:?} (for directories: files ending in {})",
            args.inputs,
            match source {
                Source::Csa => ".csa",
                Source::Kif => ".kif or .kifu",
                Source::Ki2 => ".ki2",
                Source::Hcpe => ".hcpe",
                Source::Hcpe3 => ".hcpe3",
                Source::Auto => ".csa, .kif, .kifu, .ki2, .hcpe or .hcpe3",
            }
        );
    }
    let seconds = started.elapsed().as_secs_f64();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "files": summary.files,
                "bad_files": summary.bad_files,
                "games_read": summary.games_read,
                "games": summary.games,
                "skipped": summary.skipped,
                "hcpe_records": summary.hcpe_records,
                "bad_records": summary.bad_records,
                "hcpe_chunks": summary.hcpe_chunks,
                "samples": summary.samples,
                "shards": summary.shards,
                "problems": summary.problems.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
                "problem_count": summary.problem_count,
                "seconds": seconds,
            })
        );
    } else {
        let skipped: Vec<String> = summary.skipped.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let mut parts = Vec::new();
        if summary.games_read > 0 || summary.hcpe_records == 0 {
            parts.push(format!(
                "{} of {} games{}",
                summary.games,
                summary.games_read,
                if skipped.is_empty() { String::new() } else { format!(" (skipped: {})", skipped.join(", ")) }
            ));
        }
        if summary.hcpe_records > 0 {
            parts.push(format!(
                "{} of {} hcpe records",
                summary.hcpe_records - summary.bad_records,
                summary.hcpe_records
            ));
        }
        println!(
            "imported {} from {} files in {seconds:.1} s: {} samples in {} shards under {}",
            parts.join(" and "),
            summary.files,
            summary.samples,
            summary.shards.len(),
            args.out.display()
        );
        if summary.problem_count > 0 {
            println!(
                "{} problems in {} bad files (listed above{})",
                summary.problem_count,
                summary.bad_files,
                if summary.problem_count > WARNINGS_PRINTED { ", the first ones" } else { "" }
            );
        }
    }
    if summary.samples == 0 && summary.problem_count > 0 {
        bail!("nothing was imported ({} problems)", summary.problem_count);
    }
    Ok(())
}

fn run_export(args: ExportArgs) -> Result<()> {
    // `--to` takes only `hcpe` or `hcpe3` (its parser refuses anything else).
    let shards = list_shards(&args.inputs)?;
    if shards.is_empty() {
        bail!("no .h5 shards in {:?}", args.inputs);
    }
    if args.to == "hcpe3" {
        return run_export_hcpe3(args, &shards);
    }
    let summary = with_shard_progress(shards.len(), |on_shard| {
        import::export_hcpe(&shards, &args.out, args.eval_scale, on_shard)
    })?;
    warn_problems(&summary.problems);
    if args.json {
        let report = serde_json::json!({
            "out": args.out,
            "format": args.to,
            "records": summary.records,
            "shards": summary.shards,
            "skipped": summary.skipped,
            "problems": summary.problems,
        });
        println!("{report}");
        return Ok(());
    }
    println!("wrote {} hcpe records from {} shards to {}", summary.records, summary.shards, args.out.display());
    if summary.skipped > 0 {
        println!("{} samples could not be written as hcpe", summary.skipped);
    }
    Ok(())
}

/// Runs an export with a progress bar over the shards and the running count of samples.
fn with_shard_progress<S, E>(
    shards: usize,
    export: impl FnOnce(&mut dyn FnMut(usize)) -> std::result::Result<S, E>,
) -> std::result::Result<S, E> {
    let progress = bar(shards as u64, "{bar:30} {pos}/{len} shards  {msg}");
    let mut samples = 0usize;
    let summary = export(&mut |n| {
        samples += n;
        progress.inc(1);
        progress.set_message(format!("{samples} samples"));
    });
    progress.finish_and_clear();
    summary
}

fn warn_problems(problems: &[String]) {
    for p in problems {
        eprintln!("koma: warning: {p}");
    }
}

fn run_export_hcpe3(args: ExportArgs, shards: &[PathBuf]) -> Result<()> {
    let summary = with_shard_progress(shards.len(), |on_shard| {
        import::export_hcpe3(shards, &args.out, args.eval_scale, on_shard)
    })?;
    warn_problems(&summary.problems);
    if args.json {
        let report = serde_json::json!({
            "out": args.out,
            "format": args.to,
            "games": summary.games,
            "positions": summary.positions,
            "shards": summary.shards,
            "skipped": summary.skipped,
            "problems": summary.problems,
        });
        println!("{report}");
        return Ok(());
    }
    println!(
        "wrote {} hcpe3 games with {} training positions from {} shards to {}",
        summary.games,
        summary.positions,
        summary.shards,
        args.out.display()
    );
    if summary.skipped > 0 {
        println!("{} samples could not be written as hcpe3 (the first reasons are above)", summary.skipped);
    }
    Ok(())
}

/// A readable name of a dlshogi move label: direction (from the mover's side) and destination
/// square as seen by the mover.
fn label_name(label: usize) -> String {
    let (dir, to) = (label / SQUARES, label % SQUARES);
    const BOARD: [&str; 10] = [
        "up",
        "up-left",
        "up-right",
        "left",
        "right",
        "down",
        "down-left",
        "down-right",
        "knight-left",
        "knight-right",
    ];
    let square = Square::from_index(to as u8).map_or_else(|| to.to_string(), |s| s.to_string());
    if dir >= direction::DROP {
        // Drop directions follow the hand kinds' type numbers (`encoding::drop_index`).
        let pt = PieceType::HAND.get(dir - direction::DROP).map_or('?', |p| p.sfen_letter());
        format!("{pt}*{square}")
    } else if dir >= direction::PROMOTE_OFFSET {
        format!("{}+ to {square}", BOARD.get(dir - direction::PROMOTE_OFFSET).unwrap_or(&"?"))
    } else {
        format!("{} to {square}", BOARD.get(dir).unwrap_or(&"?"))
    }
}

struct Labels {
    distinct: usize,
    entropy_bits: f64,
    top: Vec<(usize, f64)>,
}

fn label_histogram(stats: &ShardStats, top: usize) -> Labels {
    let mut mass = vec![0.0f64; MOVE_LABELS];
    for (m, color, w) in stats.moves_by_mass() {
        mass[move_label(m, color)] += w;
    }
    let total: f64 = mass.iter().sum();
    let mut order: Vec<usize> = (0..MOVE_LABELS).filter(|&l| mass[l] > 0.0).collect();
    order.sort_by(|&a, &b| mass[b].total_cmp(&mass[a]));
    let entropy_bits =
        if total > 0.0 { -order.iter().map(|&l| mass[l] / total).map(|p| p * p.log2()).sum::<f64>() } else { 0.0 };
    Labels { distinct: order.len(), entropy_bits, top: order.iter().take(top).map(|&l| (l, mass[l] / total)).collect() }
}

fn run_stats(args: StatsArgs) -> Result<()> {
    let shards = list_shards(&args.inputs)?;
    if shards.is_empty() {
        bail!("no .h5 shards in {:?}", args.inputs);
    }
    let progress = bar(shards.len() as u64, "{bar:30} {pos}/{len} shards  {msg}");
    let mut samples = 0usize;
    let stats = shard_stats(&shards, &mut |_, n| {
        samples += n;
        progress.inc(1);
        progress.set_message(format!("{samples} samples"));
    });
    progress.finish_and_clear();
    let labels = label_histogram(&stats, args.top);
    if args.json {
        let mut value = serde_json::to_value(&stats)?;
        value["labels"] = serde_json::json!({
            "distinct": labels.distinct,
            "entropy_bits": labels.entropy_bits,
            "top": labels.top.iter().map(|&(l, share)| serde_json::json!({"label": l, "name": label_name(l), "share": share})).collect::<Vec<_>>(),
        });
        println!("{value}");
    } else {
        print_stats(&stats, &labels);
    }
    if stats.shards == 0 {
        bail!("none of the {} shards could be read", shards.len());
    }
    Ok(())
}

fn print_stats(s: &ShardStats, labels: &Labels) {
    println!(
        "{} shards ({} unreadable), {:.2} MB, {} samples, {:.1} bytes/sample on disk",
        s.shards + s.unreadable.len(),
        s.unreadable.len(),
        s.bytes as f64 / 1e6,
        s.samples,
        s.bytes_per_sample
    );
    for u in &s.unreadable {
        println!("  unreadable: {u}");
    }
    println!(
        "games {}: Black won {}, White won {}, draws {}{}",
        s.games,
        s.winners.black,
        s.winners.white,
        s.winners.draw,
        if s.position_sets > 0 {
            format!("; plus {} sets of positions without games (hcpe)", s.position_sets)
        } else {
            String::new()
        }
    );
    if !s.end_reasons.is_empty() {
        println!("endings: {}", s.end_reasons.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", "));
    }
    let d = &s.game_length;
    if d.count > 0 {
        println!(
            "game length (plies): min {}, p10 {}, median {}, mean {:.1}, p90 {}, max {}",
            d.min, d.p10, d.median, d.mean, d.p90, d.max
        );
        let widest = d.histogram.iter().map(|h| h.2).max().unwrap_or(1).max(1);
        for &(from, to, count) in &d.histogram {
            println!("  {from:>4}-{:<4} {count:>8} {}", to - 1, "#".repeat((40 * count).div_ceil(widest) as usize));
        }
    }
    let r = &s.sample_results;
    println!(
        "samples: result for the side to move win {} / draw {} / loss {}; Black to move {}",
        r.win, r.draw, r.loss, s.samples_black_to_move
    );
    println!(
        "  with a move played {}, with a root value {}, ply unknown {}; flags: full search {}, no-resign {}, imported {}",
        s.samples_with_move, s.samples_with_root_value, s.samples_ply_unknown, s.full_search, s.no_resign, s.imported
    );
    println!(
        "policy: {:.2} entries per sample (max {}), {} samples without a policy target",
        s.policy.mean_per_sample, s.policy.max_per_sample, s.policy.samples_without_policy
    );
    println!(
        "move labels (policy mass): {} distinct, entropy {:.2} bits; most frequent:",
        labels.distinct, labels.entropy_bits
    );
    for (i, &(l, share)) in labels.top.iter().enumerate() {
        println!("  {:>2}. {:>5} {:<22} {:>6.2}%", i + 1, l, label_name(l), share * 100.0);
    }
    if let Some(c) = &s.calibration {
        print_calibration(c);
    }
}

/// The value estimates against the results: overall, then the mean of each by ply.
fn print_calibration(c: &koma_data::calibration::Calibration) {
    println!("value calibration (side to move; result 1 win, 0 draw, −1 loss; bias = mean predicted − mean result):");
    println!("  {:<9} {:>9} {:>10} {:>9} {:>8} {:>7}", "estimate", "samples", "predicted", "result", "bias", "mse");
    for f in &c.overall {
        println!(
            "  {:<9} {:>9} {:>+10.3} {:>+9.3} {:>+8.3} {:>7.3}",
            f.estimate, f.samples, f.mean_predicted, f.mean_result, f.bias, f.mse
        );
    }
    println!("  by ply, mean result and each estimate's mean prediction:");
    let header: Vec<String> = c.estimates.iter().map(|e| format!("{e:>9}")).collect();
    println!("  {:<9} {:>8} {:>8} {}", "plies", "samples", "result", header.join(" "));
    for row in &c.by_ply {
        let plies = if row.to == u16::MAX { format!("{}+", row.from) } else { format!("{}-{}", row.from, row.to - 1) };
        let means: Vec<String> =
            row.mean_predicted.iter().map(|m| m.map_or(format!("{:>9}", "-"), |m| format!("{m:>+9.3}"))).collect();
        println!("  {:<9} {:>8} {:>+8.3} {}", plies, row.samples, row.mean_result, means.join(" "));
    }
}

fn run_verify(args: VerifyArgs) -> Result<()> {
    let shards = list_shards(&args.inputs)?;
    if shards.is_empty() {
        bail!("no .h5 shards in {:?}", args.inputs);
    }
    let progress = bar(shards.len() as u64, "{bar:30} {pos}/{len} shards  {msg}");
    let mut checks = Vec::with_capacity(shards.len());
    let mut bad = 0;
    let mut samples = 0;
    for path in &shards {
        let check = verify_shard(path);
        samples += check.samples;
        if !check.is_ok() {
            bad += 1;
            if !args.json {
                progress.suspend(|| {
                    println!("BAD {} ({} problems):", path.display(), check.problem_count);
                    for p in &check.problems {
                        println!("  {p}");
                    }
                    if check.problem_count > check.problems.len() {
                        println!("  … {} more", check.problem_count - check.problems.len());
                    }
                });
            }
        }
        progress.inc(1);
        progress.set_message(format!("{samples} samples, {bad} bad shards"));
        checks.push(check);
    }
    progress.finish_and_clear();
    if args.json {
        println!("{}", serde_json::json!({ "shards": checks.len(), "bad": bad, "samples": samples, "checks": checks }));
    } else {
        println!(
            "{} shards, {samples} samples: {}",
            checks.len(),
            if bad == 0 { "all good".to_string() } else { format!("{bad} BAD") }
        );
    }
    if bad > 0 {
        bail!("{bad} of {} shards are bad", checks.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use koma_shogi::{Color, Move};

    #[test]
    fn label_names() {
        let m = Move::from_usi("7g7f").unwrap();
        assert_eq!(label_name(move_label(m, Color::Black)), "up to 7f");
        assert_eq!(label_name(move_label(Move::from_usi("3c3d").unwrap(), Color::White)), "up to 7f");
        assert_eq!(label_name(move_label(Move::from_usi("P*5e").unwrap(), Color::Black)), "P*5e");
        assert_eq!(label_name(move_label(Move::from_usi("8h2b+").unwrap(), Color::Black)), "up-right+ to 2b");
    }
}
