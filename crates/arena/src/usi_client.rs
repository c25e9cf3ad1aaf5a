//! A USI client: any USI engine as a [`Player`]. The engine runs as a child process; its output
//! is read on a separate thread so every wait has a timeout. A crash, a timeout or garbage where
//! a move should be forfeits the game with a clear message.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam::channel::{unbounded, Receiver, RecvTimeoutError};
use koma_shogi::usi::position_command;
use koma_shogi::{Move, Position};

use crate::player::{Action, Player, PlayerError};

/// How the engine is asked to think.
#[derive(Clone, Debug, PartialEq)]
pub enum GoLimit {
    /// `go btime 0 wtime 0 byoyomi MS`.
    Byoyomi(u64),
    /// `go movetime MS`.
    MoveTime(u64),
    /// `go nodes N` (answered within `timeout`).
    Nodes(u64),
}

#[derive(Clone, Debug)]
pub struct UsiEngineConfig {
    /// Shown in tables; the engine's own `id name` when empty.
    pub name: String,
    pub command: String,
    pub args: Vec<String>,
    pub options: Vec<(String, String)>,
    pub limit: GoLimit,
    /// Grace beyond the move's time limit before the engine forfeits on time.
    pub margin: Duration,
    /// Limit for `usiok` / `readyok` (loading a network can take a while).
    pub startup_timeout: Duration,
}

pub struct UsiEngine {
    config: UsiEngineConfig,
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    name: String,
}

impl UsiEngine {
    /// Starts the engine and completes the `usi` / `isready` handshake.
    pub fn start(config: UsiEngineConfig) -> Result<UsiEngine, String> {
        let mut child = Command::new(&config.command)
            .args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start USI engine {:?}: {e}", config.command))?;
        let stdin = child.stdin.take().ok_or("engine stdin")?;
        let stdout = child.stdout.take().ok_or("engine stdout")?;
        let (sender, lines) = unbounded();
        std::thread::Builder::new()
            .name("koma-usi-reader".into())
            .spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("reader thread: {e}"))?;
        let mut engine = UsiEngine { name: config.name.clone(), config, child, stdin, lines };
        engine.handshake().map_err(|e| format!("USI engine {:?}: {e}", engine.config.command))?;
        Ok(engine)
    }

    fn handshake(&mut self) -> Result<(), PlayerError> {
        let engine = self;
        engine.send("usi")?;
        let startup = engine.config.startup_timeout;
        let mut id_name = String::new();
        engine.wait_for(startup, |line| {
            if let Some(name) = line.strip_prefix("id name ") {
                id_name = name.trim().to_string();
            }
            line.trim() == "usiok"
        })?;
        if engine.name.is_empty() {
            engine.name = if id_name.is_empty() { engine.config.command.clone() } else { id_name };
        }
        for (name, value) in engine.config.options.clone() {
            engine.send(&format!("setoption name {name} value {value}"))?;
        }
        engine.send("isready")?;
        engine.wait_for(startup, |line| line.trim() == "readyok")?;
        Ok(())
    }

    fn send(&mut self, line: &str) -> Result<(), PlayerError> {
        writeln!(self.stdin, "{line}")
            .and_then(|_| self.stdin.flush())
            .map_err(|e| PlayerError::failure(format!("engine {} stopped reading ({e})", self.config.command)))
    }

    fn wait_for(&mut self, timeout: Duration, mut done: impl FnMut(&str) -> bool) -> Result<String, PlayerError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if done(&line) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(PlayerError::timeout(format!("no answer in time ({:.1} s)", timeout.as_secs_f64())))
                }
                Err(RecvTimeoutError::Disconnected) => return Err(PlayerError::failure("engine crashed (its output closed)")),
            }
        }
    }
}

impl Player for UsiEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn new_game(&mut self) {
        // A failure here shows up as a forfeit on the first move.
        let _ = self.send("usinewgame");
    }

    fn act(&mut self, pos: &Position) -> Result<Action, PlayerError> {
        self.send(&format!("position {}", position_command(pos)))?;
        let (go, limit) = match self.config.limit {
            GoLimit::Byoyomi(ms) => (format!("go btime 0 wtime 0 byoyomi {ms}"), Duration::from_millis(ms)),
            GoLimit::MoveTime(ms) => (format!("go movetime {ms}"), Duration::from_millis(ms)),
            GoLimit::Nodes(n) => (format!("go nodes {n}"), Duration::from_secs(60)),
        };
        self.send(&go)?;
        let line = self.wait_for(limit + self.config.margin, |l| l.starts_with("bestmove")).map_err(|e| PlayerError { message: format!("no bestmove: {e}"), ..e })?;
        let word = line.split_whitespace().nth(1).unwrap_or("");
        match word {
            "resign" => Ok(Action::Resign),
            "win" => Ok(Action::Declare),
            text => Move::from_usi(text).map(Action::Play).ok_or_else(|| PlayerError::failure(format!("bestmove {text:?} is not a USI move"))),
        }
    }
}

impl Drop for UsiEngine {
    fn drop(&mut self) {
        let _ = self.send("quit");
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
