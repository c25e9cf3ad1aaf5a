//! Drives the engine loop through in-memory pipes: lines in, lines out, with timeouts.

#![allow(dead_code)]

use std::io::{self, BufReader, Read, Write};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use koma_engine::{EngineConfig, Options};
use koma_shogi::{Move, Position};

struct ChannelReader {
    rx: Receiver<Vec<u8>>,
    buf: Vec<u8>,
    pos: usize,
}

impl Read for ChannelReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.pos >= self.buf.len() {
            match self.rx.recv() {
                Ok(chunk) => {
                    self.buf = chunk;
                    self.pos = 0;
                }
                Err(_) => return Ok(0),
            }
        }
        let n = out.len().min(self.buf.len() - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

struct ChannelWriter {
    tx: Sender<String>,
    partial: Vec<u8>,
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        for &b in data {
            if b == b'\n' {
                let line = String::from_utf8(std::mem::take(&mut self.partial)).expect("engine output is UTF-8");
                let _ = self.tx.send(line);
            } else {
                self.partial.push(b);
            }
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub struct Harness {
    input: Option<Sender<Vec<u8>>>,
    output: Receiver<String>,
    thread: Option<JoinHandle<()>>,
    /// Every line the engine wrote, in order.
    pub log: Vec<String>,
}

pub const LONG: Duration = Duration::from_secs(30);

impl Harness {
    /// An engine with default options, no model, and the uniform stand-in asked for.
    pub fn new() -> Harness {
        Harness::with_options(Options { uniform_stand_in: true, ..Options::default() })
    }

    pub fn with_options(options: Options) -> Harness {
        Harness::with_config(EngineConfig::new(options))
    }

    /// `KOMA_TEST_SEARCH_THREADS=N` runs every harness with N search threads (unless a test set
    /// its own): how the protocol tests run again with several (protocol.rs).
    pub fn with_config(mut config: EngineConfig) -> Harness {
        if let Some(n) = std::env::var("KOMA_TEST_SEARCH_THREADS").ok().and_then(|v| v.parse().ok()) {
            if config.options.search_threads == 1 {
                config.options.search_threads = n;
            }
        }
        let (in_tx, in_rx) = channel::<Vec<u8>>();
        let (out_tx, out_rx) = channel::<String>();
        let thread = std::thread::spawn(move || {
            let reader = BufReader::new(ChannelReader { rx: in_rx, buf: Vec::new(), pos: 0 });
            let writer = ChannelWriter { tx: out_tx, partial: Vec::new() };
            koma_engine::run(reader, writer, config).expect("engine loop");
        });
        Harness { input: Some(in_tx), output: out_rx, thread: Some(thread), log: Vec::new() }
    }

    pub fn send(&self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    pub fn send_bytes(&self, bytes: &[u8]) {
        if std::env::var_os("KOMA_TEST_TRACE").is_some() {
            eprintln!("> {}", String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim_end());
        }
        if let Some(tx) = &self.input {
            let _ = tx.send(bytes.to_vec());
        }
    }

    /// The next line, or `None` after `timeout`.
    pub fn recv(&mut self, timeout: Duration) -> Option<String> {
        match self.output.recv_timeout(timeout) {
            Ok(line) => {
                if std::env::var_os("KOMA_TEST_TRACE").is_some() {
                    eprintln!("< {line}");
                }
                self.log.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => None,
        }
    }

    /// Lines up to and including the first one that satisfies `done`; panics after `timeout`.
    pub fn until(&mut self, timeout: Duration, done: impl Fn(&str) -> bool) -> Vec<String> {
        let deadline = Instant::now() + timeout;
        let mut lines = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.recv(left) {
                Some(line) => {
                    let stop = done(&line);
                    lines.push(line);
                    if stop {
                        return lines;
                    }
                }
                None => panic!("no matching line within {timeout:?}; got {lines:?}"),
            }
        }
    }

    /// Waits for `bestmove` and returns its line and the lines before it.
    pub fn bestmove(&mut self, timeout: Duration) -> (String, Vec<String>) {
        let mut lines = self.until(timeout, |l| l.starts_with("bestmove"));
        let last = lines.pop().unwrap();
        (last, lines)
    }

    /// Sends `isready` and waits for `readyok`.
    pub fn ready(&mut self) -> Vec<String> {
        self.send("isready");
        self.until(LONG, |l| l == "readyok")
    }

    /// How late answers come on this machine right now: four times the slowest of five `isready`
    /// round trips through the loop (after one that may still pay for start-up), at most a
    /// second. Upper bounds on answer times add it, so that they test the engine's own time
    /// limits and still hold while other work loads the machine (a build beside the tests); on an
    /// idle machine it is a millisecond or less.
    pub fn scheduling_slack(&mut self) -> Duration {
        self.ready();
        let slowest = (0..5)
            .map(|_| {
                let t = Instant::now();
                self.ready();
                t.elapsed()
            })
            .max()
            .unwrap_or_default();
        (slowest * 4).min(Duration::from_secs(1))
    }

    /// Whether no line arrives within `wait`.
    pub fn silent_for(&mut self, wait: Duration) -> bool {
        self.recv(wait).is_none()
    }

    /// Closes the input (EOF) and waits for the loop to end; whether it ended within `timeout`.
    pub fn close(&mut self, timeout: Duration) -> bool {
        self.input = None;
        self.wait_exit(timeout)
    }

    /// Waits for the loop to end (after `quit`).
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                if let Some(t) = self.thread.take() {
                    t.join().expect("engine thread panicked");
                }
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            self.send("quit");
            self.input = None;
            let _ = self.wait_exit(Duration::from_secs(10));
        }
    }
}

/// The move of a `bestmove` line (`None` for resign/win).
pub fn best_of(line: &str) -> Option<Move> {
    let word = line.split_whitespace().nth(1).expect("bestmove has a move");
    match word {
        "resign" | "win" => None,
        text => Some(Move::from_usi(text).unwrap_or_else(|| panic!("bestmove {text:?} is not a USI move"))),
    }
}

/// The ponder move of a `bestmove` line.
pub fn ponder_of(line: &str) -> Option<Move> {
    let words: Vec<&str> = line.split_whitespace().collect();
    (words.get(2) == Some(&"ponder")).then(|| Move::from_usi(words[3]).expect("ponder move parses"))
}

/// The value after `key` in an `info` line.
pub fn info_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let words: Vec<&str> = line.split_whitespace().collect();
    words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1).copied())
}

/// A position command (without `position`) for `pos`.
pub fn position_args(pos: &Position) -> String {
    koma_shogi::usi::position_command(pos)
}

/// A tiny random network saved in `dir` (its path).
pub fn tiny_model(dir: &std::path::Path) -> String {
    let path = dir.join("tiny.safetensors");
    let mut net =
        koma_nn::Network::new(&koma_nn::ModelConfig::tiny(), &koma_nn::RunOptions::cpu(), Some(7)).expect("tiny net");
    net.save(&path, &koma_nn::TrainingInfo::default()).expect("save");
    path.to_string_lossy().into_owned()
}
