//! Importers: game records (CSA, KIF/KIFU, KI2) and dlshogi hcpe and hcpe3 files to replay
//! shards, and shards back to hcpe or hcpe3. docs/data-format.md describes what each source
//! becomes.
//!
//! [`import`] walks the inputs (files, or directories recursively), converts what it can, and
//! reports every bad file or record (file, line or record index, reason) without stopping, unless
//! `strict` is set. Games go through a [`ShardWriter`]: `games_per_shard` games per shard for
//! records and hcpe3 games; for hcpe, which has no games, each shard holds one pseudo-game of up to
//! `positions_per_shard` consecutive records of one file.

pub mod hcpe;
pub mod hcpe3;
pub mod records;

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crossbeam::channel::Sender;
use koma_shogi::record::{read_file, Format};
use koma_shogi::{EndReason, GameResult};

use crate::error::{DataError, Result};
use crate::hcp::HCPE_BYTES;
use crate::sample::GameSamples;
use crate::shard::ShardReader;
use crate::writer::ShardWriter;

pub use hcpe::{hcpe_to_sample, read_hcpe, sample_to_hcpe, HcpeWriter};
pub use hcpe3::{game_to_hcpe3, hcpe3_to_game, sample_to_hcpe3, Hcpe3Game, Hcpe3Reader, Hcpe3Writer};
pub use records::{floodgate_ratings, record_to_game, usable_result, RecordOptions, Skip};

/// What the inputs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Csa,
    /// KIF or KIFU (`.kif`, `.kifu`).
    Kif,
    Ki2,
    Hcpe,
    Hcpe3,
    /// By extension: `.csa`, `.kif`/`.kifu`, `.ki2`, `.hcpe`, `.hcpe3`.
    Auto,
}

impl Source {
    /// The names [`Source::from_name`] reads.
    pub const NAMES: [&'static str; 7] = ["auto", "csa", "kif", "kifu", "ki2", "hcpe", "hcpe3"];

    pub fn from_name(name: &str) -> Option<Source> {
        Some(match name.to_ascii_lowercase().as_str() {
            "csa" => Source::Csa,
            "kif" | "kifu" => Source::Kif,
            "ki2" => Source::Ki2,
            "hcpe" => Source::Hcpe,
            "hcpe3" => Source::Hcpe3,
            "auto" => Source::Auto,
            _ => return None,
        })
    }

    /// The concrete source of a file with extension `ext` (None: not read).
    fn of_extension(self, ext: &str) -> Option<Source> {
        let by_ext = match ext.to_ascii_lowercase().as_str() {
            "csa" => Source::Csa,
            "kif" | "kifu" => Source::Kif,
            "ki2" => Source::Ki2,
            "hcpe" => Source::Hcpe,
            "hcpe3" => Source::Hcpe3,
            _ => return None,
        };
        (self == Source::Auto || self == by_ext).then_some(by_ext)
    }

    fn record_format(self) -> Option<Format> {
        match self {
            Source::Csa => Some(Format::Csa),
            Source::Kif => Some(Format::Kif),
            Source::Ki2 => Some(Format::Ki2),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ImportOptions {
    pub source: Source,
    pub records: RecordOptions,
    /// Scale of hcpe and hcpe3 evaluations (centipawns per logit).
    pub eval_scale: f64,
    pub games_per_shard: usize,
    pub positions_per_shard: usize,
    /// Shards are named `PREFIX-NNNNNN.h5` (records, hcpe3) and `PREFIX-hcpe-NNNNNN.h5` (hcpe).
    pub prefix: String,
    /// Stop at the first bad file or record.
    pub strict: bool,
}

impl Default for ImportOptions {
    fn default() -> ImportOptions {
        ImportOptions {
            source: Source::Auto,
            records: RecordOptions::default(),
            eval_scale: crate::hcp::DLSHOGI_EVAL_SCALE,
            games_per_shard: 1000,
            positions_per_shard: 100_000,
            prefix: "import".into(),
            strict: false,
        }
    }
}

/// A bad input: the file, where in it (line, game or record), and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}

/// Problems kept in [`ImportSummary::problems`]; more are only counted.
pub const MAX_PROBLEMS_KEPT: usize = 1000;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImportSummary {
    pub files: usize,
    /// Files that could not be read at all, or held bad records.
    pub bad_files: usize,
    pub games_read: usize,
    pub games: usize,
    /// Games skipped, by reason ([`Skip::name`]).
    pub skipped: BTreeMap<&'static str, usize>,
    pub hcpe_records: usize,
    pub bad_records: usize,
    /// Pseudo-games (chunks of hcpe records) written.
    pub hcpe_chunks: usize,
    pub samples: usize,
    pub shards: Vec<PathBuf>,
    pub problems: Vec<Problem>,
    pub problem_count: usize,
}

/// Progress reports of [`import`].
pub enum ImportEvent<'a> {
    /// The inputs were listed: files and total bytes.
    Start { files: usize, bytes: u64 },
    /// Bytes of input processed since the last report.
    Bytes(u64),
    /// A bad file or record (also kept in the summary).
    Problem(&'a Problem),
}

/// Lists the files to import: each input file as is, and under each directory (recursively, in
/// name order) the files whose extension belongs to `source`.
pub fn collect_inputs(inputs: &[PathBuf], source: Source) -> Result<Vec<(PathBuf, Source)>> {
    fn walk(dir: &Path, source: Source, out: &mut Vec<(PathBuf, Source)>) -> Result<()> {
        let io = |source| DataError::Io { path: dir.to_path_buf(), source };
        let mut entries: Vec<PathBuf> =
            fs::read_dir(dir).map_err(io)?.map(|e| e.map(|e| e.path())).collect::<std::io::Result<_>>().map_err(io)?;
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, source, out)?;
            } else if let Some(s) = p.extension().and_then(|e| e.to_str()).and_then(|e| source.of_extension(e)) {
                out.push((p, s));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    for input in inputs {
        let meta = fs::metadata(input).map_err(|source| DataError::Io { path: input.clone(), source })?;
        if meta.is_dir() {
            walk(input, source, &mut out)?;
        } else {
            let ext = input.extension().and_then(|e| e.to_str()).unwrap_or("");
            let s = match source {
                Source::Auto => Source::Auto.of_extension(ext).ok_or_else(|| DataError::BadInput {
                    path: input.clone(),
                    message: "unknown extension: use --from csa|kif|ki2|hcpe|hcpe3".into(),
                })?,
                s => s,
            };
            out.push((input.clone(), s));
        }
    }
    Ok(out)
}

struct Run<'a> {
    options: &'a ImportOptions,
    summary: ImportSummary,
    progress: &'a mut dyn FnMut(&ImportEvent<'_>),
}

impl Run<'_> {
    /// Records a problem; `Err` in strict mode.
    fn problem(&mut self, path: &Path, message: String) -> Result<()> {
        let p = Problem { path: path.to_path_buf(), message };
        self.summary.problem_count += 1;
        (self.progress)(&ImportEvent::Problem(&p));
        if self.options.strict {
            return Err(DataError::BadInput { path: p.path, message: p.message });
        }
        if self.summary.problems.len() < MAX_PROBLEMS_KEPT {
            self.summary.problems.push(p);
        }
        Ok(())
    }
}

fn display_name(path: &Path, roots: &[PathBuf]) -> String {
    for r in roots {
        if let Ok(rel) = path.strip_prefix(r) {
            if !rel.as_os_str().is_empty() {
                return rel.display().to_string();
            }
        }
    }
    path.file_name().map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Imports `inputs` into shards under `out`. Returns what was done; bad files and records are in
/// the summary (and reported through `progress`) unless `strict`, where the first one is an error.
pub fn import(
    inputs: &[PathBuf],
    out: &Path,
    options: &ImportOptions,
    progress: &mut dyn FnMut(&ImportEvent),
) -> Result<ImportSummary> {
    let files = collect_inputs(inputs, options.source)?;
    let bytes: u64 = files.iter().map(|(p, _)| fs::metadata(p).map(|m| m.len()).unwrap_or(0)).sum();
    progress(&ImportEvent::Start { files: files.len(), bytes });
    fs::create_dir_all(out).map_err(|source| DataError::Io { path: out.to_path_buf(), source })?;
    let mut record_writer: Option<ShardWriter> = None;
    let mut hcpe_writer: Option<ShardWriter> = None;
    let mut run = Run { options, summary: ImportSummary::default(), progress };
    let roots: Vec<PathBuf> = inputs.iter().filter(|p| p.is_dir()).cloned().collect();
    let outcome = (|| -> Result<()> {
        for (path, source) in &files {
            run.summary.files += 1;
            let size = fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            let name = display_name(path, &roots);
            let bad_before = run.summary.problem_count;
            if *source == Source::Hcpe {
                if hcpe_writer.is_none() {
                    hcpe_writer = Some(ShardWriter::spawn(out, &format!("{}-hcpe", options.prefix), 1)?);
                }
                let sender = hcpe_writer.as_ref().expect("spawned").sender();
                import_hcpe_file(&mut run, path, &name, &sender)?;
            } else {
                // Records and hcpe3 games share the game shards.
                if record_writer.is_none() {
                    record_writer = Some(ShardWriter::spawn(out, &options.prefix, options.games_per_shard)?);
                }
                let sender = record_writer.as_ref().expect("spawned").sender();
                if *source == Source::Hcpe3 {
                    import_hcpe3_file(&mut run, path, &name, &sender)?;
                } else {
                    import_record_file(&mut run, path, *source, &name, &sender)?;
                }
            }
            if run.summary.problem_count > bad_before {
                run.summary.bad_files += 1;
            }
            (run.progress)(&ImportEvent::Bytes(size));
        }
        Ok(())
    })();
    let mut summary = run.summary;
    // Write what was sent, even after an error (the shards are complete in themselves).
    for w in [record_writer, hcpe_writer].into_iter().flatten() {
        let written = w.finish()?;
        summary.samples += written.samples;
        summary.shards.extend(written.shards);
    }
    summary.shards.sort();
    outcome.map(|()| summary)
}

fn import_record_file(
    run: &mut Run,
    path: &Path,
    source: Source,
    name: &str,
    sender: &Sender<GameSamples>,
) -> Result<()> {
    let format = source.record_format().expect("a record source");
    let games = match read_file(path, format) {
        Ok(g) => g,
        Err(e) => {
            let message = match e {
                koma_shogi::record::RecordError::Parse { error, .. } => error.to_string(),
                koma_shogi::record::RecordError::Io { source, .. } => source.to_string(),
                other => other.to_string(),
            };
            return run.problem(path, message);
        }
    };
    let several = games.len() > 1;
    for (i, record) in games.iter().enumerate() {
        run.summary.games_read += 1;
        let source_name = if several { format!("{name}#{}", i + 1) } else { name.to_string() };
        match record_to_game(record, &source_name, &run.options.records) {
            Ok(game) => {
                run.summary.games += 1;
                if sender.send(game).is_err() {
                    return Err(DataError::Io {
                        path: path.to_path_buf(),
                        source: std::io::Error::other("the shard writer stopped"),
                    });
                }
            }
            Err(skip) => {
                *run.summary.skipped.entry(skip.name()).or_default() += 1;
                if let Skip::Invalid(message) = skip {
                    run.problem(path, format!("game {}: {message}", i + 1))?;
                }
            }
        }
    }
    Ok(())
}

/// Imports the games of an hcpe3 file: a bad game is reported (`FILE: game K (from byte B): …`)
/// and skipped; a truncated or corrupt stream stops the file, keeping the games before it.
fn import_hcpe3_file(run: &mut Run, path: &Path, name: &str, sender: &Sender<GameSamples>) -> Result<()> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return run.problem(path, e.to_string()),
    };
    let mut reader = Hcpe3Reader::new(std::io::BufReader::with_capacity(1 << 20, file));
    let mut k = 0usize;
    loop {
        let (game, start) = match reader.next_game() {
            Ok(Some(g)) => g,
            Ok(None) => return Ok(()),
            Err(e) => return run.problem(path, e.to_string()),
        };
        run.summary.games_read += 1;
        k += 1;
        match hcpe3_to_game(&game, &format!("hcpe3:{name}#{k}"), run.options.eval_scale) {
            Ok(g) => {
                run.summary.games += 1;
                if sender.send(g).is_err() {
                    return Err(DataError::Io {
                        path: path.to_path_buf(),
                        source: std::io::Error::other("the shard writer stopped"),
                    });
                }
            }
            Err(message) => {
                *run.summary.skipped.entry("invalid").or_default() += 1;
                run.problem(path, format!("game {k} (from byte {start}): {message}"))?;
            }
        }
    }
}

/// The pseudo-game holding hcpe records: no start, no moves, no result of its own.
fn pseudo_game(source: &str, samples: Vec<crate::Sample>) -> GameSamples {
    GameSamples {
        start_sfen: String::new(),
        result: GameResult { winner: None, reason: EndReason::Abort },
        length: 0,
        model: source.to_string(),
        moves: Vec::new(),
        samples,
        root_values: Vec::new(),
    }
}

fn import_hcpe_file(run: &mut Run, path: &Path, name: &str, sender: &Sender<GameSamples>) -> Result<()> {
    let file = match fs::File::open(path) {
        Ok(f) => f,
        Err(e) => return run.problem(path, e.to_string()),
    };
    let per_shard = run.options.positions_per_shard.max(1);
    let scale = run.options.eval_scale;
    let source = format!("hcpe:{name}");
    let mut chunk = Vec::with_capacity(per_shard.min(1 << 20));
    let mut failure: Option<DataError> = None;
    let sent_error =
        || DataError::Io { path: path.to_path_buf(), source: std::io::Error::other("the shard writer stopped") };
    let result = read_hcpe(std::io::BufReader::with_capacity(1 << 20, file), |index, record| {
        run.summary.hcpe_records += 1;
        match hcpe_to_sample(record, scale) {
            Ok(s) => chunk.push(s),
            Err(message) => {
                run.summary.bad_records += 1;
                if let Err(e) = run.problem(path, format!("record {index}: {message}")) {
                    failure = Some(e);
                    return false;
                }
            }
        }
        if chunk.len() >= per_shard {
            if sender.send(pseudo_game(&source, std::mem::take(&mut chunk))).is_err() {
                failure = Some(sent_error());
                return false;
            }
            run.summary.hcpe_chunks += 1;
        }
        true
    });
    if let Some(e) = failure {
        return Err(e);
    }
    if !chunk.is_empty() {
        sender.send(pseudo_game(&source, chunk)).map_err(|_| sent_error())?;
        run.summary.hcpe_chunks += 1;
    }
    match result {
        Err(e) => run.problem(path, e.to_string()),
        Ok((_, 0)) => Ok(()),
        Ok((records, tail)) => run.problem(
            path,
            format!(
                "{} bytes is not a multiple of {HCPE_BYTES}: record {records} is truncated ({tail} of {HCPE_BYTES} bytes); the {records} complete records were imported",
                records * HCPE_BYTES + tail
            ),
        ),
    }
}

/// What [`export_hcpe`] wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExportSummary {
    pub shards: usize,
    pub records: usize,
    /// Samples that could not be written (position not encodable), with the first reasons.
    pub skipped: usize,
    pub problems: Vec<String>,
}

/// Writes every sample of `shards` (in order) to the hcpe file `out`.
pub fn export_hcpe(
    shards: &[PathBuf],
    out: &Path,
    eval_scale: f64,
    progress: &mut dyn FnMut(usize),
) -> Result<ExportSummary> {
    let mut writer = HcpeWriter::create(out)?;
    let mut summary = ExportSummary::default();
    for shard in shards {
        let reader = ShardReader::open(shard)?;
        let samples = reader.read_all()?;
        for (i, s) in samples.iter().enumerate() {
            match sample_to_hcpe(s, eval_scale) {
                Ok(r) => writer.write(&r)?,
                Err(message) => {
                    skip_sample(&mut summary.skipped, &mut summary.problems, shard, format!("sample {i}: {message}"))
                }
            }
        }
        summary.shards += 1;
        progress(samples.len());
    }
    summary.records = writer.finish()?;
    Ok(summary)
}

/// What [`export_hcpe3`] wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Hcpe3ExportSummary {
    pub shards: usize,
    /// Games written (a sample without a game, from hcpe, is written as a one-move game).
    pub games: usize,
    /// Moves written with candidates: the samples that made it.
    pub positions: usize,
    /// Samples that could not be written, with the first reasons in `problems`.
    pub skipped: usize,
    pub problems: Vec<String>,
}

impl Hcpe3ExportSummary {
    fn skip(&mut self, shard: &Path, what: String) {
        skip_sample(&mut self.skipped, &mut self.problems, shard, what);
    }
}

/// Reasons an export keeps (the count of skipped samples goes on).
const EXPORT_PROBLEMS_KEPT: usize = 100;

/// Counts a sample an export could not write, keeping the first reasons.
fn skip_sample(skipped: &mut usize, problems: &mut Vec<String>, shard: &Path, what: String) {
    *skipped += 1;
    if problems.len() < EXPORT_PROBLEMS_KEPT {
        problems.push(format!("{}: {what}", shard.display()));
    }
}

/// Writes the games of `shards` (in order) to the hcpe3 file `out`: each game from its start with
/// every move, its samples as candidates; the samples of pseudo-games (hcpe imports) as one-move
/// games.
pub fn export_hcpe3(
    shards: &[PathBuf],
    out: &Path,
    eval_scale: f64,
    progress: &mut dyn FnMut(usize),
) -> Result<Hcpe3ExportSummary> {
    let mut writer = Hcpe3Writer::create(out)?;
    let mut summary = Hcpe3ExportSummary::default();
    for shard in shards {
        let reader = ShardReader::open(shard)?;
        let samples = reader.read_all()?;
        for (g, info) in reader.games()?.iter().enumerate() {
            let Some(game_samples) = samples.get(info.samples.clone()) else {
                return Err(DataError::Inconsistent {
                    path: shard.clone(),
                    what: format!("game {g}: samples {:?} beyond the {} samples", info.samples, samples.len()),
                });
            };
            if info.start_sfen.is_empty() {
                for (k, s) in game_samples.iter().enumerate() {
                    match sample_to_hcpe3(s, eval_scale) {
                        Ok(game) => {
                            writer.write(&game)?;
                            summary.games += 1;
                            summary.positions += 1;
                        }
                        Err(message) => summary.skip(shard, format!("sample {}: {message}", info.samples.start + k)),
                    }
                }
                continue;
            }
            match game_to_hcpe3(info, game_samples, info.samples.start, eval_scale) {
                Ok((game, export)) => {
                    writer.write(&game)?;
                    summary.games += 1;
                    summary.positions += export.positions;
                    for (i, why) in export.skipped {
                        summary.skip(shard, format!("sample {i}: {why}"));
                    }
                }
                Err(message) => {
                    let n = info.samples.len();
                    summary.skip(shard, format!("game {g}: {message} (its {n} samples are not written)"));
                    summary.skipped += n.saturating_sub(1);
                }
            }
        }
        summary.shards += 1;
        progress(samples.len());
    }
    writer.finish()?;
    Ok(summary)
}
