//! A USI client: any USI engine as a [`Player`]. The engine runs as a child process; its output
//! is read on a separate thread so every wait has a timeout. A crash, a timeout or garbage where
//! a move should be forfeits the game with a clear message. The process is then not trusted for
//! another game (it may be dead, or still answering the old position): the next game starts a
//! fresh one. An engine that forfeits [`MAX_FORFEITS_IN_A_ROW`] games in a row, or cannot be
//! restarted, stops the match rather than handing its opponent a win every game.

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam::channel::{bounded, Receiver, RecvTimeoutError};
use koma_shogi::usi::position_command;
use koma_shogi::{Move, Position};

use crate::clock::{TimeControl, Timing, TurnClock};
use crate::engine_output::next_line;
use crate::error::EngineStartError;
use crate::player::{Action, Player, PlayerError};

/// Games in a row an engine may forfeit (crash, timeout, garbage) before the match stops.
pub const MAX_FORFEITS_IN_A_ROW: u32 = 3;

/// How often a wait for the engine looks at the match's cancel flag.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// How the engine is asked to think.
#[derive(Clone, Debug, PartialEq)]
pub enum GoLimit {
    /// `go btime 0 wtime 0 byoyomi MS`: the same as a [`GoLimit::Clock`] of byoyomi only.
    Byoyomi(u64),
    /// On a clock: `go btime B wtime W byoyomi Y` (or `binc I winc J`), the arena keeping both
    /// clocks; a `bestmove` later than the clock allows plus `margin` loses on time.
    Clock(TimeControl),
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
    /// Grace beyond the move's time limit before the engine loses on time (pipe and process
    /// latency).
    pub margin: Duration,
    /// Limit for `usiok` / `readyok` (loading a network can take a while).
    pub startup_timeout: Duration,
    /// The folder the engine starts in; koma's own when None.
    pub working_dir: Option<PathBuf>,
}

/// Lines of an engine's output read ahead of the game.
const LINES_AHEAD: usize = 1024;

/// A running engine process: its stdin, and its stdout lines as read by a thread of their own
/// ([`crate::engine_output`]: any bytes, bounded lines).
struct Process {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<String>,
    /// Killed and reaped: its pid may belong to another process now, so nothing signals it again.
    reaped: bool,
}

impl Process {
    fn spawn(config: &UsiEngineConfig) -> Result<Process, EngineStartError> {
        let mut command = Command::new(&config.command);
        if let Some(dir) = &config.working_dir {
            if !dir.is_dir() {
                return Err(EngineStartError::NotAFolder { command: config.command.clone(), dir: dir.clone() });
            }
            // A relative program path means the same program as without `dir` (Unix resolves it
            // after changing folder).
            let program = Path::new(&config.command);
            if program.is_relative() && program.components().count() > 1 {
                let here = std::env::current_dir().map_err(EngineStartError::CurrentDir)?;
                command = Command::new(here.join(program));
            }
            command.current_dir(dir);
        }
        // Its own process group: an engine started through a wrapper script (`run.sh` that
        // execs nothing) is killed with everything it started, not just the shell.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .args(&config.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|source| EngineStartError::Spawn { command: config.command.clone(), source })?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        // Bounded: an engine that floods its output waits for the game to read it (at most
        // LINES_AHEAD lines of MAX_LINE_BYTES each are held).
        let (sender, lines) = bounded(LINES_AHEAD);
        std::thread::Builder::new()
            .name("koma-usi-reader".into())
            .spawn(move || {
                let (mut reader, mut buffer) = (BufReader::new(stdout), Vec::new());
                while let Some(line) = next_line(&mut reader, &mut buffer) {
                    if sender.send(line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|source| EngineStartError::ReaderThread { command: config.command.clone(), source })?;
        Ok(Process { child, stdin, lines, reaped: false })
    }

    /// Whether the process has exited, without reaping it: until it is reaped its pid stays
    /// reserved, so [`Process::kill`] can still signal its process group.
    fn exited(&mut self) -> bool {
        #[cfg(unix)]
        {
            let pid: libc::id_t = self.child.id();
            // SAFETY: waitid writes only into `info`, a zeroed siginfo_t that lives on this stack.
            unsafe {
                let mut info: libc::siginfo_t = std::mem::zeroed();
                let found = libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
                found != 0 || info.si_pid() != 0
            }
        }
        #[cfg(not(unix))]
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Ends the process and everything it started at once (it may be hung, or hold a GPU the next
    /// one needs).
    fn kill(&mut self) {
        if self.reaped {
            return;
        }
        #[cfg(unix)]
        if let Ok(group) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) with a negative pid signals that process group; it touches no memory.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.reaped = true;
    }
}

impl Drop for Process {
    /// `quit`, half a second to obey, then a kill of its process group either way: what a wrapper
    /// script started goes too.
    fn drop(&mut self) {
        if self.reaped {
            return;
        }
        let _ = writeln!(self.stdin, "quit").and_then(|_| self.stdin.flush());
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline && !self.exited() {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.kill();
    }
}

pub struct UsiEngine {
    config: UsiEngineConfig,
    process: Process,
    name: String,
    /// The process failed a request (crashed, timed out, answered garbage, or was cut off by a
    /// cancel): whatever it says next may belong to the old position, so the next game starts a
    /// fresh one.
    needs_restart: bool,
    /// Why the engine forfeited the game in progress, if it did.
    forfeit: Option<String>,
    /// Games forfeited one after another (counted as the next game starts).
    forfeits_in_a_row: u32,
}

impl UsiEngine {
    /// Starts the engine and completes the `usi` / `isready` handshake.
    pub fn start(config: UsiEngineConfig) -> Result<UsiEngine, EngineStartError> {
        let process = Process::spawn(&config)?;
        let mut engine = UsiEngine {
            name: config.name.clone(),
            config,
            process,
            needs_restart: false,
            forfeit: None,
            forfeits_in_a_row: 0,
        };
        engine
            .handshake(&AtomicBool::new(false))
            .map_err(|source| EngineStartError::Handshake { command: engine.config.command.clone(), source })?;
        Ok(engine)
    }

    fn handshake(&mut self, cancel: &AtomicBool) -> Result<(), PlayerError> {
        let engine = self;
        engine.send("usi")?;
        let startup = engine.config.startup_timeout;
        let mut id_name = String::new();
        engine.wait_for(startup, cancel, |line| {
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
        engine.wait_for(startup, cancel, |line| line.trim() == "readyok")?;
        Ok(())
    }

    /// Replaces the process with a fresh one and its handshake. The old one is killed first.
    fn restart(&mut self, cancel: &AtomicBool) -> Result<(), PlayerError> {
        self.process.kill();
        self.process = Process::spawn(&self.config).map_err(|e| PlayerError::failure(e.to_string()))?;
        self.handshake(cancel)?;
        self.needs_restart = false;
        Ok(())
    }

    fn send(&mut self, line: &str) -> Result<(), PlayerError> {
        writeln!(self.process.stdin, "{line}")
            .and_then(|_| self.process.stdin.flush())
            .map_err(|e| PlayerError::failure(format!("engine {} stopped reading ({e})", self.config.command)))
    }

    fn wait_for(
        &mut self,
        timeout: Duration,
        cancel: &AtomicBool,
        mut done: impl FnMut(&str) -> bool,
    ) -> Result<String, PlayerError> {
        let deadline = Instant::now() + timeout;
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Err(PlayerError::failure("the match was cancelled"));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.process.lines.recv_timeout(left.min(CANCEL_POLL)) {
                Ok(line) if done(&line) => return Ok(line),
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) if left > CANCEL_POLL => {}
                Err(RecvTimeoutError::Timeout) => {
                    return Err(PlayerError::timeout(format!("no answer in time ({:.1} s)", timeout.as_secs_f64())))
                }
                Err(RecvTimeoutError::Disconnected) => {
                    return Err(PlayerError::failure("engine crashed (its output closed)"))
                }
            }
        }
    }

    /// The engine's time control, when it plays on a clock.
    fn time_control(&self) -> Option<TimeControl> {
        match self.config.limit {
            GoLimit::Clock(control) => Some(control),
            GoLimit::Byoyomi(ms) => Some(TimeControl::byoyomi_only(Duration::from_millis(ms))),
            GoLimit::MoveTime(_) | GoLimit::Nodes(_) => None,
        }
    }

    /// One move: `position`, `go` with `arguments`, and the `bestmove` read back within `limit`
    /// plus the margin.
    fn think(
        &mut self,
        pos: &Position,
        arguments: &str,
        limit: Duration,
        cancel: &AtomicBool,
    ) -> Result<Action, PlayerError> {
        self.send(&format!("position {}", position_command(pos)))?;
        self.send(&format!("go {arguments}"))?;
        let line = self
            .wait_for(limit + self.config.margin, cancel, |l| l.starts_with("bestmove"))
            .map_err(|e| PlayerError { message: format!("no bestmove: {e}"), ..e })?;
        let word = line.split_whitespace().nth(1).unwrap_or("");
        match word {
            "resign" => Ok(Action::Resign),
            "win" => Ok(Action::Declare),
            "" => Err(PlayerError::failure("bestmove without a move")),
            text => Move::from_usi(text)
                .map(Action::Play)
                .ok_or_else(|| PlayerError::failure(format!("bestmove {text:?} is not a USI move"))),
        }
    }

    /// After a failed request: the process is not trusted for another game.
    fn note_failure(&mut self, action: &Result<Action, PlayerError>, cancel: &AtomicBool) {
        if let Err(error) = action {
            self.needs_restart = true;
            if !cancel.load(Ordering::Relaxed) {
                self.forfeit = Some(error.message.clone());
            }
        }
    }
}

impl Player for UsiEngine {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn new_game(&mut self, cancel: &AtomicBool) -> Result<(), PlayerError> {
        match self.forfeit.take() {
            Some(last) => {
                self.forfeits_in_a_row += 1;
                if self.forfeits_in_a_row >= MAX_FORFEITS_IN_A_ROW {
                    return Err(PlayerError::fatal(format!(
                        "USI engine {} forfeited {} games in a row (the last: {last}); the match stops",
                        self.name, self.forfeits_in_a_row
                    )));
                }
            }
            None => self.forfeits_in_a_row = 0,
        }
        if self.needs_restart {
            tracing::warn!("restarting USI engine {} before the next game", self.name);
            self.restart(cancel)
                .map_err(|e| PlayerError::fatal(format!("USI engine {} could not be restarted: {e}", self.name)))?;
        }
        // A failure here shows up as a forfeit on the first move.
        let _ = self.send("usinewgame");
        Ok(())
    }

    fn act(&mut self, pos: &Position, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        let (arguments, limit) = match self.config.limit {
            GoLimit::Byoyomi(ms) => (format!("btime 0 wtime 0 byoyomi {ms}"), Duration::from_millis(ms)),
            GoLimit::MoveTime(ms) => (format!("movetime {ms}"), Duration::from_millis(ms)),
            GoLimit::Nodes(n) => (format!("nodes {n}"), Duration::from_secs(60)),
            GoLimit::Clock(control) => (
                format!("btime {0} wtime {0} byoyomi {1}", control.main.as_millis(), control.byoyomi.as_millis()),
                control.main + control.byoyomi,
            ),
        };
        let action = self.think(pos, &arguments, limit, cancel);
        self.note_failure(&action, cancel);
        action
    }

    fn timing(&self) -> Option<Timing> {
        self.time_control().map(|control| Timing { control, margin: self.config.margin })
    }

    fn act_on_clock(&mut self, pos: &Position, clock: &TurnClock, cancel: &AtomicBool) -> Result<Action, PlayerError> {
        let action = self.think(pos, &clock.go_arguments(), clock.own().allowed(), cancel);
        self.note_failure(&action, cancel);
        action
    }
}
