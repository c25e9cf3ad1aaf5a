//! The USI command loop. It only ever reads input and hands work to other threads (search,
//! model loading), so `stop`, `ponderhit` and `quit` are acted on at once, even mid-search.
//! Malformed input is reported (stderr, and `info string` where a GUI user should see it) and
//! otherwise ignored.

use std::io::{self, BufRead, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use koma_shogi::{Move, Position};

use crate::io::{read_line, Line, Output, MAX_LINE, QUOTE_MAX};
use crate::net_loader::{network_loader, LoadFn, LoadKey, Loader};
use crate::options::Options;
use crate::think::{self, Control, Job, MateSolver, TreeState};
use crate::time::{truncate, GoParams};

/// Stack of the search thread (virtual memory: only the pages a deep `go mate` touches are used).
const SEARCH_STACK_BYTES: usize = 64 << 20;

/// How the engine starts.
pub struct EngineConfig {
    /// Initial option values (the command line's); `setoption` changes them.
    pub options: Options,
    /// Loads `Model`; [`network_loader`] by default.
    pub loader: LoadFn,
    pub name: String,
    pub author: String,
}

impl EngineConfig {
    pub fn new(options: Options) -> EngineConfig {
        EngineConfig {
            options,
            loader: network_loader(),
            name: format!("koma {}", env!("CARGO_PKG_VERSION")),
            author: "the koma developers".into(),
        }
    }
}

/// Runs the USI protocol on `input`/`output` until `quit` or the end of the input.
pub fn run(mut input: impl BufRead, output: impl Write + Send + 'static, config: EngineConfig) -> io::Result<()> {
    let mut engine = Engine::new(config, Output::new(output));
    loop {
        let line = match read_line(&mut input) {
            Ok(line) => line,
            Err(e) => {
                engine.out.diag(&format!("reading input failed: {e}"));
                break;
            }
        };
        let received = Instant::now();
        match line {
            Line::Eof => break,
            Line::TooLong(n) => {
                engine.out.diag(&format!("ignored an input line of {n} bytes (the limit is {MAX_LINE})"))
            }
            Line::Text(text) => {
                let flow = catch_unwind(AssertUnwindSafe(|| engine.handle(&text, received))).unwrap_or_else(|_| {
                    engine
                        .out
                        .diag(&format!("internal error while handling {:?}; ignored", truncate(&text, QUOTE_MAX)));
                    Flow::Continue
                });
                if flow == Flow::Quit {
                    break;
                }
            }
        }
    }
    engine.stop_search(false);
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

struct Running {
    handle: JoinHandle<()>,
    control: Arc<Control>,
}

struct Engine {
    options: Options,
    name: String,
    author: String,
    out: Output,
    pos: Position,
    loader: Arc<Loader>,
    tree: Arc<Mutex<TreeState>>,
    mate: Arc<Mutex<MateSolver>>,
    running: Option<Running>,
}

impl Engine {
    fn new(config: EngineConfig, out: Output) -> Engine {
        Engine {
            options: config.options,
            name: config.name,
            author: config.author,
            loader: Loader::new(config.loader, out.clone()),
            out,
            pos: Position::startpos(),
            tree: Arc::new(Mutex::new(TreeState::default())),
            mate: Arc::new(Mutex::new(MateSolver::default())),
            running: None,
        }
    }

    fn handle(&mut self, line: &str, received: Instant) -> Flow {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&command) = words.first() else { return Flow::Continue };
        let args = &words[1..];
        match command {
            "usi" => {
                self.out.line(&format!("id name {}", self.name));
                self.out.line(&format!("id author {}", self.author));
                for option in self.options.usi_lines() {
                    self.out.line(&option);
                }
                self.out.line("usiok");
            }
            "isready" => {
                self.prepare_tables();
                self.loader.isready(&LoadKey::from_options(&self.options));
            }
            "setoption" => self.setoption(line, args),
            "usinewgame" => {
                self.stop_search(false);
                self.tree.lock().unwrap_or_else(|e| e.into_inner()).reset = true;
            }
            "position" => self.position(args),
            "go" => self.go(args, received),
            "stop" => self.stop_search(false),
            "ponderhit" => match &self.running {
                Some(r) if !r.control.answered.load(Ordering::Acquire) => {
                    let mut hit = r.control.ponderhit.lock().unwrap_or_else(|e| e.into_inner());
                    hit.get_or_insert(received);
                }
                _ => self.out.diag("ponderhit without a search; ignored"),
            },
            "gameover" => self.stop_search(false),
            "quit" => return Flow::Quit,
            "debug" | "register" => self.out.diag(&format!("{command} is not supported; ignored")),
            _ => self.out.diag(&format!("unknown command {:?}; ignored", truncate(line, QUOTE_MAX))),
        }
        Flow::Continue
    }

    fn setoption(&mut self, line: &str, args: &[&str]) {
        if args.first() != Some(&"name") || args.len() < 2 {
            self.out.warn(&format!(
                "setoption: expected `setoption name NAME [value VALUE]`, got {:?}",
                truncate(line, QUOTE_MAX)
            ));
            return;
        }
        let value_at = args.iter().position(|w| *w == "value");
        let name = args[1..value_at.unwrap_or(args.len())].join(" ");
        // The value is the rest of the raw line (file names may contain spaces).
        let value = match value_at {
            Some(i) if i + 1 < args.len() => {
                let offset = args[i + 1].as_ptr() as usize - line.as_ptr() as usize;
                line[offset..].trim()
            }
            _ => "",
        };
        match self.options.set(&name, value) {
            Ok(None) => {}
            Ok(Some(warning)) => self.out.warn(&warning),
            Err(e) => self.out.warn(&format!("setoption: {}", truncate(&e.to_string(), 2 * QUOTE_MAX))),
        }
    }

    /// `position startpos|sfen SFEN [moves …]`. A bad base position leaves the start position;
    /// moves are played up to the first one that is not legal, which is reported.
    fn position(&mut self, args: &[&str]) {
        let (mut pos, rest) = match args.first() {
            Some(&"startpos") => (Position::startpos(), &args[1..]),
            Some(&"sfen") => {
                let end = args.iter().position(|w| *w == "moves").unwrap_or(args.len());
                let sfen = args[1..end].join(" ");
                match Position::from_sfen(&sfen) {
                    Ok(pos) => (pos, &args[end..]),
                    Err(e) => {
                        self.out.warn(&format!(
                            "position: invalid SFEN {:?} ({e}); using the start position",
                            truncate(&sfen, QUOTE_MAX)
                        ));
                        self.pos = Position::startpos();
                        return;
                    }
                }
            }
            other => {
                self.out.warn(&format!(
                    "position: expected startpos or sfen, got {:?}; using the start position",
                    other.map(|w| truncate(w, QUOTE_MAX)).unwrap_or_default()
                ));
                self.pos = Position::startpos();
                return;
            }
        };
        match rest.first() {
            None => {}
            Some(&"moves") => {
                for (i, text) in rest[1..].iter().enumerate() {
                    match Move::from_usi(text).filter(|&m| pos.is_legal(m)) {
                        Some(m) => pos.do_move(m),
                        None => {
                            self.out.warn(&format!(
                                "position: move {} ({:?}) is not legal here; the position stops before it",
                                i + 1,
                                truncate(text, QUOTE_MAX)
                            ));
                            break;
                        }
                    }
                }
            }
            Some(other) => self
                .out
                .warn(&format!("position: expected `moves`, got {:?}; ignored the rest", truncate(other, QUOTE_MAX))),
        }
        self.pos = pos;
    }

    fn go(&mut self, args: &[&str], received: Instant) {
        if self.running.as_ref().is_some_and(|r| !r.control.answered.load(Ordering::Acquire)) {
            self.out.warn("go during a search: the running search is abandoned");
            self.stop_search(true);
        } else {
            self.stop_search(false);
        }
        let (go, warnings) = GoParams::parse(args);
        for w in warnings {
            self.out.diag(&w);
        }
        let key = LoadKey::from_options(&self.options);
        self.loader.ensure(&key, false);
        let control = Arc::new(Control::default());
        let job = Job {
            pos: self.pos.clone(),
            go,
            options: self.options.clone(),
            started: received,
            control: Arc::clone(&control),
            out: self.out.clone(),
            loader: Arc::clone(&self.loader),
            key,
            tree: Arc::clone(&self.tree),
            mate: Arc::clone(&self.mate),
        };
        // A large stack: `go mate` recurses one frame per ply of the mate (up to 1023).
        let thread = std::thread::Builder::new().name("koma-usi-search".into()).stack_size(SEARCH_STACK_BYTES);
        match thread.spawn(move || think::run(job)) {
            Ok(handle) => self.running = Some(Running { handle, control }),
            Err(e) => {
                self.out.warn(&format!("cannot start the search thread ({e}): answering at once"));
                let mut pos = self.pos.clone();
                match pos.mate_in_one().or_else(|| pos.legal_moves().first().copied()) {
                    Some(m) => self.out.line(&format!("bestmove {}", m.to_usi())),
                    None => self.out.line("bestmove resign"),
                }
            }
        }
    }

    /// Allocates the search's evaluation cache and the df-pn table before `readyok`, so that the
    /// first `go` does not spend its time in page faults (30–250 ms for 64 MiB on a loaded
    /// machine). Skipped while a search holds them.
    fn prepare_tables(&mut self) {
        match self.tree.try_lock() {
            Ok(mut tree) => {
                tree.prepare(&self.options, None);
            }
            Err(std::sync::TryLockError::Poisoned(poisoned)) => {
                self.tree.clear_poison();
                let mut tree = poisoned.into_inner();
                tree.forget_tree();
                tree.prepare(&self.options, None);
            }
            Err(std::sync::TryLockError::WouldBlock) => {}
        }
        if self.options.mate_root_plies > 0 {
            // `go mate` alone allocates it when first asked (a tsume GUI waits anyway).
            if let Ok(mut mate) = self.mate.try_lock() {
                mate.get(self.options.mate_hash_mib);
            }
        }
    }

    /// Stops the running search (if any) and waits for it; `quiet` suppresses its `bestmove`.
    fn stop_search(&mut self, quiet: bool) {
        if let Some(running) = self.running.take() {
            if quiet {
                running.control.quiet.store(true, Ordering::Relaxed);
            }
            running.control.stop.store(true, Ordering::Relaxed);
            if running.handle.join().is_err() {
                self.out.diag("the search thread panicked");
            }
        }
    }
}
