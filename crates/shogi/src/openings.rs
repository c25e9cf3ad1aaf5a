//! Opening suites: start positions as USI position lines (`startpos moves 7g7f 3c3d`, `sfen …`),
//! one per line, blank lines and `#` comments skipped. Self-play starts a share of its games from
//! one, the arena plays colour-swapped pairs from each. Every `--openings` and `openings =` names a
//! suite the same way: `builtin:NAME` for a suite shipped in the binary (data/openings/), anything
//! else is a file, and an empty name is no suite.

use std::path::PathBuf;

use crate::usi::{parse_position, UsiPositionError};
use crate::Position;

/// The suites shipped in the binary, by name.
pub const BUILTIN_SUITES: &[(&str, &str)] = &[("balanced-8", include_str!("../../../data/openings/balanced-8.txt"))];

/// Why a suite could not be had.
#[derive(Debug, thiserror::Error)]
pub enum OpeningSuiteError {
    #[error("opening suite {name:?}: there is no such built-in suite (built in: {known})")]
    UnknownBuiltin { name: String, known: String },
    #[error("opening suite {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("opening suite {origin}, line {line}: {source}")]
    Line { origin: String, line: usize, source: UsiPositionError },
}

/// A parsed suite: its name (`builtin:NAME`, the file's path, or "" for none) and its positions in
/// file order, each with the line it came from. The default is the empty suite "".
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpeningSuite {
    name: String,
    positions: Vec<Position>,
    lines: Vec<String>,
}

impl OpeningSuite {
    /// The suite `name` names, "" giving the empty suite: what a config field holds.
    pub fn named(name: &str) -> Result<OpeningSuite, OpeningSuiteError> {
        Ok(OpeningSuite::load(name)?.unwrap_or_default())
    }

    /// A suite shipped in the binary (`builtin:NAME`), for defaults.
    pub fn builtin(name: &str) -> OpeningSuite {
        OpeningSuite::named(&format!("builtin:{name}")).expect("the built-in suites parse (tested)")
    }

    /// The suite `name` names: `builtin:NAME`, a file's path, or None for "" (no suite).
    pub fn load(name: &str) -> Result<Option<OpeningSuite>, OpeningSuiteError> {
        let name = name.trim();
        if name.is_empty() {
            return Ok(None);
        }
        if let Some(builtin) = name.strip_prefix("builtin:") {
            let text = BUILTIN_SUITES.iter().find(|(n, _)| *n == builtin).map(|(_, text)| *text).ok_or_else(|| {
                OpeningSuiteError::UnknownBuiltin {
                    name: name.to_string(),
                    known: BUILTIN_SUITES.iter().map(|(n, _)| format!("builtin:{n}")).collect::<Vec<_>>().join(", "),
                }
            })?;
            return OpeningSuite::parse(text, name).map(Some);
        }
        let path = PathBuf::from(name);
        let text = std::fs::read_to_string(&path).map_err(|source| OpeningSuiteError::Read { path, source })?;
        OpeningSuite::parse(&text, name).map(Some)
    }

    /// Parses a suite's text; `origin` names it (in errors too, which also give the line).
    pub fn parse(text: &str, origin: &str) -> Result<OpeningSuite, OpeningSuiteError> {
        let mut suite = OpeningSuite { name: origin.to_string(), ..OpeningSuite::default() };
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let position = parse_position(line).map_err(|source| OpeningSuiteError::Line {
                origin: origin.to_string(),
                line: i + 1,
                source,
            })?;
            suite.positions.push(position);
            suite.lines.push(line.to_string());
        }
        Ok(suite)
    }

    /// What the suite was loaded as: `builtin:NAME`, a path, or "" for the empty suite.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn positions(&self) -> &[Position] {
        &self.positions
    }

    /// The USI lines, as written in the suite.
    pub fn lines(&self) -> &[String] {
        &self.lines
    }

    pub fn len(&self) -> usize {
        self.positions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.positions.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_suite_loads_and_plays_its_moves() {
        let suite = OpeningSuite::load("builtin:balanced-8").unwrap().unwrap();
        // 100 openings of 8 plies each (its header says so).
        assert_eq!(suite.len(), 100);
        assert!(suite.positions().iter().all(|p| p.plies_from_root() == 8));
        assert_eq!(suite.lines().len(), 100);
        assert_eq!(suite.name(), "builtin:balanced-8");
        assert_eq!(OpeningSuite::builtin("balanced-8"), suite);
        assert!(OpeningSuite::load("").unwrap().is_none());
        assert!(OpeningSuite::load("  ").unwrap().is_none());
        let none = OpeningSuite::named("").unwrap();
        assert!(none.is_empty() && none.name().is_empty());
    }

    #[test]
    fn errors_name_the_suite_and_the_line() {
        let e = OpeningSuite::load("builtin:balanced-9").unwrap_err().to_string();
        assert!(e.contains("builtin:balanced-9") && e.contains("builtin:balanced-8"), "{e}");
        let e = OpeningSuite::load("/nonexistent/suite.txt").unwrap_err().to_string();
        assert!(e.contains("/nonexistent/suite.txt"), "{e}");
        let e = OpeningSuite::parse("# two openings\nstartpos\n\nstartpos moves 7g7f 7g7f\n", "mine.txt")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mine.txt") && e.contains("line 4") && e.contains("illegal"), "{e}");
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let suite = OpeningSuite::parse("# a\n\nstartpos moves 7g7f\n  startpos  \n", "t").unwrap();
        assert_eq!(suite.lines(), ["startpos moves 7g7f", "startpos"]);
        assert_eq!(suite.positions()[1], Position::startpos());
    }
}
