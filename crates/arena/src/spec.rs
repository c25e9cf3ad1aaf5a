//! Player specs as `koma arena` takes them: a built-in player or checkpoint by name, a USI engine
//! as `usi:PATH [ARGS…]`, or a player file in TOML (`file:PATH` or `PATH.toml`) with the engine's
//! path, arguments, USI options, name and time control. No shell is involved: a path with spaces
//! is given whole, quoted, or in a player file, and is started as it is.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::clock::{parse_duration, TimeControl};
use crate::error::SpecError;

/// What plays.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlayerKind {
    /// A built-in player or a checkpoint, by the name `koma arena` has always taken (`random`,
    /// `greedy`, `mcts-material@16`, `models/model-00001000.safetensors@800`); the command
    /// resolves it.
    Builtin(String),
    /// A USI engine: the program (started directly, never through a shell) and its arguments.
    Engine { path: PathBuf, args: Vec<String> },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlayerSpec {
    pub kind: PlayerKind,
    /// Shown in tables and results instead of the player's own name.
    pub name: Option<String>,
    /// USI options, sent as `setoption` in this order after `usiok`.
    pub options: Vec<(String, String)>,
    /// The player's own time control, over the match's.
    pub time: Option<TimeControl>,
    /// The folder a USI engine starts in (a player file's `dir`), for engines that read their
    /// evaluation files or books relative to it; koma's own folder when None.
    pub dir: Option<PathBuf>,
}

impl PlayerSpec {
    /// Adds a USI option, replacing an earlier one of the same name (USI option names are
    /// case-insensitive). Only engines take options.
    pub fn set_option(&mut self, name: &str, value: &str) -> Result<(), SpecError> {
        if let PlayerKind::Builtin(spec) = &self.kind {
            return Err(SpecError::OptionForBuiltin { name: name.into(), value: value.into(), player: spec.clone() });
        }
        self.options.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.options.push((name.to_string(), value.to_string()));
        Ok(())
    }
}

/// Reads one `--player` value: `usi:…`, `file:PATH`, `PATH.toml`, or anything else as a built-in
/// player or checkpoint.
pub fn parse_player(text: &str) -> Result<PlayerSpec, SpecError> {
    let spec = |kind| PlayerSpec { kind, name: None, options: Vec::new(), time: None, dir: None };
    if let Some(command) = text.strip_prefix("usi:") {
        // A whole existing path is the program, spaces and all; otherwise words, quoted as in a
        // shell (but never given to one).
        if Path::new(command).is_file() {
            return Ok(spec(PlayerKind::Engine { path: command.into(), args: Vec::new() }));
        }
        let mut words =
            split_words(command).map_err(|e| SpecError::Player { text: text.into(), source: Box::new(e) })?.into_iter();
        let path = words.next().ok_or_else(|| SpecError::NoEnginePath(text.into()))?;
        return Ok(spec(PlayerKind::Engine { path: path.into(), args: words.collect() }));
    }
    if let Some(file) = text.strip_prefix("file:") {
        return read_player_file(Path::new(file));
    }
    if text.ends_with(".toml") {
        return read_player_file(Path::new(text));
    }
    if text.trim().is_empty() {
        return Err(SpecError::EmptyPlayer);
    }
    Ok(spec(PlayerKind::Builtin(text.to_string())))
}

/// `NAME=VALUE` (the value may contain `=` and spaces; the name may not be empty).
pub fn parse_option(text: &str) -> Result<(String, String), SpecError> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !name.trim().contains(char::is_whitespace) => {
            Ok((name.trim().to_string(), value.trim().to_string()))
        }
        _ => Err(SpecError::Option(text.into())),
    }
}

/// Splits a command line into words as a shell would quote them: spaces separate, `'…'` and
/// `"…"` keep spaces, a backslash escapes the next character (outside single quotes). Nothing
/// is expanded.
pub fn split_words(text: &str) -> Result<Vec<String>, SpecError> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => word.push(c),
                        None => return Err(SpecError::Unclosed('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c) => word.push(c),
                            None => return Err(SpecError::Unclosed('"')),
                        },
                        Some(c) => word.push(c),
                        None => return Err(SpecError::Unclosed('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                word.push(chars.next().ok_or(SpecError::TrailingBackslash)?);
            }
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// A player file. Either `path` (a USI engine) or `player` (a built-in player or checkpoint).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlayerFile {
    name: Option<String>,
    path: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    player: Option<String>,
    #[serde(default)]
    options: toml::Table,
    main_time: Option<String>,
    byoyomi: Option<String>,
    increment: Option<String>,
    dir: Option<String>,
}

/// Reads a player file; every error names the file (and, for TOML syntax, the line).
///
/// ```toml
/// name = "yane-1t"
/// path = "engines/YaneuraOu"        # relative to this file's folder when it has a folder part
/// args = []
/// options = { Threads = 1, USI_Hash = 64, EvalDir = "eval dir" }
/// dir = "engines"                   # the folder it starts in (relative to this file's folder)
/// main_time = "60s"                 # with byoyomi = "1s" or increment = "2s", or alone
/// byoyomi = "1s"
/// ```
pub fn read_player_file(path: &Path) -> Result<PlayerSpec, SpecError> {
    let failed = |e: SpecError| SpecError::File { path: path.into(), source: Box::new(e) };
    let text = std::fs::read_to_string(path).map_err(|source| SpecError::FileRead { path: path.into(), source })?;
    let file: PlayerFile =
        toml::from_str(&text).map_err(|source| SpecError::FileSyntax { path: path.into(), source })?;
    let kind = match (file.path, file.player) {
        (Some(engine), None) => {
            let engine = PathBuf::from(engine);
            // `engines/x` is relative to the file; a bare `x` is looked up on PATH.
            let resolved = match path.parent() {
                Some(dir) if engine.is_relative() && engine.components().count() > 1 => dir.join(&engine),
                _ => engine,
            };
            PlayerKind::Engine { path: resolved, args: file.args }
        }
        (None, Some(player)) => {
            if !file.args.is_empty() || !file.options.is_empty() || file.dir.is_some() {
                return Err(failed(SpecError::EngineFieldsForBuiltin(player)));
            }
            PlayerKind::Builtin(player)
        }
        (Some(_), Some(_)) => return Err(failed(SpecError::PathAndPlayer)),
        (None, None) => return Err(failed(SpecError::NoPathOrPlayer)),
    };
    let mut options = Vec::new();
    for (name, value) in &file.options {
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            other => return Err(failed(SpecError::NotUsiValue { name: name.clone(), kind: other.type_str() })),
        };
        options.push((name.clone(), value));
    }
    let duration = |key: &'static str, value: &Option<String>| -> Result<Duration, SpecError> {
        value.as_deref().map_or(Ok(Duration::ZERO), |v| {
            parse_duration(v).map_err(|e| failed(SpecError::Field { key, source: Box::new(e) }))
        })
    };
    let time = if file.main_time.is_some() || file.byoyomi.is_some() || file.increment.is_some() {
        let control = TimeControl::new(
            duration("main_time", &file.main_time)?,
            duration("byoyomi", &file.byoyomi)?,
            duration("increment", &file.increment)?,
        )
        .map_err(failed)?;
        Some(control)
    } else {
        None
    };
    if file.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        return Err(failed(SpecError::EmptyName));
    }
    let dir = file.dir.map(|d| match path.parent() {
        Some(folder) if Path::new(&d).is_relative() => folder.join(d),
        _ => PathBuf::from(d),
    });
    Ok(PlayerSpec { kind, name: file.name, options, time, dir })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine(spec: &PlayerSpec) -> (String, Vec<String>) {
        match &spec.kind {
            PlayerKind::Engine { path, args } => (path.display().to_string(), args.clone()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn usi_specs_keep_paths_with_spaces_whole() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("my engines").join("fake engine");
        std::fs::create_dir_all(program.parent().unwrap()).unwrap();
        std::fs::write(&program, "").unwrap();
        let whole = parse_player(&format!("usi:{}", program.display())).unwrap();
        assert_eq!(engine(&whole), (program.display().to_string(), vec![]));
        let quoted = parse_player(&format!("usi:'{}' --threads 1 \"a b\" c\\ d", program.display())).unwrap();
        let args = vec!["--threads".to_string(), "1".into(), "a b".into(), "c d".into()];
        assert_eq!(engine(&quoted), (program.display().to_string(), args));
        assert_eq!(engine(&parse_player("usi:koma usi --playouts 8").unwrap()).1, ["usi", "--playouts", "8"]);
        assert!(parse_player("usi:'/unclosed").unwrap_err().to_string().contains("not closed"));
        assert!(parse_player("usi:  ").unwrap_err().to_string().contains("needs the engine's path"));
        assert_eq!(parse_player("greedy").unwrap().kind, PlayerKind::Builtin("greedy".into()));
    }

    #[test]
    fn options_parse_and_replace_and_refuse_builtins() {
        assert_eq!(parse_option("USI_Hash=64").unwrap(), ("USI_Hash".into(), "64".into()));
        assert_eq!(parse_option("EvalDir=a b=c").unwrap(), ("EvalDir".into(), "a b=c".into()));
        assert!(parse_option("=3").is_err() && parse_option("Threads").is_err() && parse_option("A B=1").is_err());
        let mut spec = parse_player("usi:engine").unwrap();
        spec.set_option("Threads", "1").unwrap();
        spec.set_option("threads", "2").unwrap();
        assert_eq!(spec.options, vec![("threads".to_string(), "2".to_string())]);
        let err = parse_player("random").unwrap().set_option("Threads", "1").unwrap_err().to_string();
        assert!(err.contains("not a USI engine"), "{err}");
    }

    #[test]
    fn player_files_read_and_name_their_errors() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let path = write(
            "yane.toml",
            "name = \"yane\"\npath = \"bin dir/engine\"\nargs = [\"-x\"]\noptions = { Threads = 1, USI_Hash = 64, Ponder = false, EvalDir = \"e v\" }\nmain_time = \"60s\"\nbyoyomi = \"1s\"\n",
        );
        let spec = parse_player(&format!("file:{}", path.display())).unwrap();
        assert_eq!(spec.name.as_deref(), Some("yane"));
        assert_eq!(engine(&spec), (dir.path().join("bin dir/engine").display().to_string(), vec!["-x".to_string()]));
        let options: Vec<(&str, &str)> = spec.options.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        assert_eq!(options, [("EvalDir", "e v"), ("Ponder", "false"), ("Threads", "1"), ("USI_Hash", "64")]);
        assert_eq!(spec.time.unwrap().to_string(), "60s + 1s byoyomi");
        assert_eq!(spec.dir, None);
        let with_dir = parse_player(&write("d.toml", "path = \"/opt/e\"\ndir = \"engines/x\"\n").display().to_string());
        assert_eq!(with_dir.unwrap().dir, Some(dir.path().join("engines/x")));
        let builtin = parse_player(&write("m.toml", "player = \"greedy\"\nmain_time = \"5s\"\n").display().to_string());
        assert_eq!(builtin.unwrap().kind, PlayerKind::Builtin("greedy".into()));
        for (text, words) in [
            ("path = \"e\"\nthreads = 1\n", "unknown field `threads`"),
            ("path = \"e\"\noptions = { Threads = [1] }\n", "option Threads: array"),
            ("path = \"e\"\nmain_time = \"ten\"\n", "main_time"),
            ("path = \"e\"\nbyoyomi = \"1s\"\nincrement = \"1s\"\n", "one or the other"),
            ("player = \"random\"\noptions = { Threads = 1 }\n", "for USI engines"),
            ("player = \"random\"\ndir = \"x\"\n", "for USI engines"),
            ("path = \"e\"\nplayer = \"random\"\n", "not both"),
            ("name = \"x\"\n", "needs path"),
            ("path = \"e\n", "line 1"),
        ] {
            let path = write("bad.toml", text);
            let err = parse_player(&format!("file:{}", path.display())).unwrap_err().to_string();
            assert!(err.contains("bad.toml") && err.contains(words), "{text:?}: {err}");
        }
        let err = parse_player("file:/nonexistent/p.toml").unwrap_err();
        assert!(matches!(&err, SpecError::FileRead { source, .. } if source.kind() == std::io::ErrorKind::NotFound));
        assert!(err.to_string().contains("/nonexistent/p.toml"), "{err}");
    }
}
