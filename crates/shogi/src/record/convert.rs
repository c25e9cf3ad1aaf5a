//! Whole files and directories: what `koma convert` calls.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::error::RecordError;
use super::{read_games, write_games, Format, GameRecord};

/// What happened to one input file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutcome {
    pub input: PathBuf,
    /// Files written (empty when the output went to standard output).
    pub outputs: Vec<PathBuf>,
    pub games: usize,
}

/// The result of [`convert_path`]: the files converted, and the files that failed with their
/// errors (file, line and move number). The conversion goes on after a bad file.
#[derive(Debug, Default)]
pub struct ConvertSummary {
    pub converted: Vec<FileOutcome>,
    pub errors: Vec<RecordError>,
}

impl ConvertSummary {
    /// Games converted in all files.
    pub fn games(&self) -> usize {
        self.converted.iter().map(|f| f.games).sum()
    }

    /// Whether every file converted.
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Reads every game of a file (KIF: one game; CSA: every game separated by `/`; USI/SFEN: one
/// game per line). The encoding (UTF-8 or Shift_JIS) is detected.
pub fn read_file(path: &Path, format: Format) -> Result<Vec<GameRecord>, RecordError> {
    let bytes = fs::read(path).map_err(|source| RecordError::Io { path: path.to_path_buf(), source })?;
    read_games(&bytes, format).map_err(|error| RecordError::Parse { path: path.to_path_buf(), error })
}

/// Converts a file or a directory of records from one format to another.
///
/// * `input` a file, `output` `None`: the converted text goes to standard output (several KIF games
///   one after the other, separated by a blank line).
/// * `input` a file, `output` an existing directory: written there as `<stem>.<ext>`; otherwise
///   `output` is the file to write.
/// * `input` a directory: every file under it (recursively, sorted) whose extension belongs to
///   `from` (`.csa`; `.kif`/`.kifu`; `.usi`/`.sfen`) is converted, to the same relative path under
///   `output`, or next to the input when `output` is `None`, with `to`'s extension.
///
/// KIF holds one game per file: a file with several games gives `<stem>-1.kif`, `<stem>-2.kif`, ….
/// A file that fails to read or write is recorded in [`ConvertSummary::errors`] and the others
/// still convert; `Err` is returned only when `input` itself cannot be read.
pub fn convert_path(
    input: &Path,
    from: Format,
    to: Format,
    output: Option<&Path>,
) -> Result<ConvertSummary, RecordError> {
    let meta = fs::metadata(input).map_err(|source| RecordError::Io { path: input.to_path_buf(), source })?;
    let mut summary = ConvertSummary::default();
    if meta.is_dir() {
        let mut files = Vec::new();
        collect(input, from, &mut HashSet::new(), &mut files, &mut summary.errors)
            .map_err(|source| RecordError::Io { path: input.to_path_buf(), source })?;
        files.sort();
        for file in files {
            let rel = file.strip_prefix(input).unwrap_or(&file).to_path_buf();
            let target = match output {
                Some(dir) => dir.join(&rel).with_extension(to.extension()),
                None => file.with_extension(to.extension()),
            };
            convert_one(&file, from, to, Some(&target), &mut summary);
        }
    } else {
        let target = match output {
            Some(p) if p.is_dir() => {
                let stem = input.file_stem().map(PathBuf::from).unwrap_or_else(|| PathBuf::from("game"));
                Some(p.join(stem).with_extension(to.extension()))
            }
            Some(p) => Some(p.to_path_buf()),
            None => None,
        };
        convert_one(input, from, to, target.as_deref(), &mut summary);
    }
    Ok(summary)
}

/// Every record file under `dir`, following symlinks but entering each real directory once: a
/// link back to a directory already on the way (a loop) is reported in `loops` and not followed.
fn collect(
    dir: &Path,
    from: Format,
    visited: &mut HashSet<(u64, u64)>,
    out: &mut Vec<PathBuf>,
    loops: &mut Vec<RecordError>,
) -> std::io::Result<()> {
    let meta = fs::metadata(dir)?;
    if !visited.insert((meta.dev(), meta.ino())) {
        loops.push(RecordError::Invalid {
            path: dir.to_path_buf(),
            message: "a symbolic link back to a directory already being converted (a loop): not followed".into(),
        });
        return Ok(());
    }
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, from, visited, out, loops)?;
        } else if path.extension().and_then(|e| e.to_str()).is_some_and(|e| from.reads_extension(e)) {
            out.push(path);
        }
    }
    Ok(())
}

fn convert_one(input: &Path, from: Format, to: Format, target: Option<&Path>, summary: &mut ConvertSummary) {
    let games = match read_file(input, from) {
        Ok(g) => g,
        Err(e) => {
            summary.errors.push(e);
            return;
        }
    };
    if let Some(t) = target {
        if same_file(input, t) {
            summary.errors.push(RecordError::Invalid {
                path: input.to_path_buf(),
                message: format!("the output {} would overwrite the input", t.display()),
            });
            return;
        }
    }
    // One output per game for one-game formats, else one output for all.
    let chunks: Vec<&[GameRecord]> = if to.one_game_per_file() { games.chunks(1).collect() } else { vec![&games[..]] };
    let mut outputs = Vec::new();
    let mut stdout_text: Vec<u8> = Vec::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let bytes = match write_games(chunk, to) {
            Ok(b) => b,
            Err(error) => {
                summary.errors.push(RecordError::Write { path: input.to_path_buf(), game: i + 1, error });
                return;
            }
        };
        match target {
            None => {
                if i > 0 {
                    stdout_text.push(b'\n');
                }
                stdout_text.extend_from_slice(&bytes);
            }
            Some(t) => {
                let path = if chunks.len() > 1 {
                    let stem = t.file_stem().and_then(|s| s.to_str()).unwrap_or("game");
                    t.with_file_name(format!("{stem}-{}.{}", i + 1, to.extension()))
                } else {
                    t.to_path_buf()
                };
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    if let Err(source) = fs::create_dir_all(parent) {
                        summary.errors.push(RecordError::Io { path: parent.to_path_buf(), source });
                        return;
                    }
                }
                if let Err(e) = koma_base::durable::write(&path, &bytes) {
                    summary.errors.push(RecordError::Io { path, source: e.source });
                    return;
                }
                outputs.push(path);
            }
        }
    }
    if target.is_none() {
        let mut out = std::io::stdout().lock();
        if let Err(source) = out.write_all(&stdout_text).and_then(|_| out.flush()) {
            summary.errors.push(RecordError::Io { path: PathBuf::from("<stdout>"), source });
            return;
        }
    }
    summary.converted.push(super::convert::FileOutcome { input: input.to_path_buf(), outputs, games: games.len() });
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}
