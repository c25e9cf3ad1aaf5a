//! Protocol I/O: one shared, line-flushed output; bounded diagnostics on stderr; input lines of
//! bounded length that survive invalid UTF-8.

use std::io::{self, BufRead, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The engine's stdout, shared by the command loop, the search thread and the loader thread.
/// Every line is written whole and flushed. Once a write fails (the GUI went away) further
/// output is dropped.
#[derive(Clone)]
pub struct Output {
    inner: Arc<Mutex<Box<dyn Write + Send>>>,
    closed: Arc<AtomicBool>,
    diagnostics: Arc<AtomicUsize>,
}

/// Diagnostics written to stderr before the rest are suppressed: a GUI that never reads the
/// engine's stderr (cshogi pipes it and does not) must not see the engine block on a full pipe.
const MAX_DIAGNOSTICS: usize = 200;
/// Longest piece of user input quoted in a message.
pub(crate) const QUOTE_MAX: usize = 80;

impl Output {
    pub fn new(writer: impl Write + Send + 'static) -> Output {
        Output {
            inner: Arc::new(Mutex::new(Box::new(writer))),
            closed: Arc::new(AtomicBool::new(false)),
            diagnostics: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Writes one protocol line.
    pub fn line(&self, text: &str) {
        if self.closed.load(Ordering::Relaxed) {
            return;
        }
        let mut w = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if writeln!(w, "{text}").and_then(|_| w.flush()).is_err() {
            self.closed.store(true, Ordering::Relaxed);
        }
    }

    /// Whether output failed (nobody is listening any more).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// `info string TEXT` (one line; newlines in TEXT become spaces).
    pub fn info_string(&self, text: &str) {
        self.line(&format!("info string {}", text.replace(['\n', '\r'], " ")));
    }

    /// A diagnostic on stderr only (bounded in number).
    pub fn diag(&self, text: &str) {
        let n = self.diagnostics.fetch_add(1, Ordering::Relaxed);
        if n < MAX_DIAGNOSTICS {
            eprintln!("koma usi: {text}");
        } else if n == MAX_DIAGNOSTICS {
            eprintln!("koma usi: (more than {MAX_DIAGNOSTICS} messages; further ones are not shown)");
        }
    }

    /// A warning the user should see in the GUI: `info string` and stderr.
    pub fn warn(&self, text: &str) {
        self.info_string(text);
        self.diag(text);
    }
}

/// The longest input line the engine reads (a `position` of thousands of moves fits easily).
pub const MAX_LINE: usize = 1 << 20;

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// A line longer than [`MAX_LINE`] bytes (its length), skipped.
    TooLong(usize),
    Eof,
}

/// Reads one line of at most [`MAX_LINE`] bytes without ever holding more than that in memory;
/// invalid UTF-8 is replaced, `\r` dropped.
pub fn read_line(reader: &mut impl BufRead) -> io::Result<Line> {
    let mut bytes: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let buf = match reader.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            if !any {
                return Ok(Line::Eof);
            }
            break;
        }
        any = true;
        let (chunk, used, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], i + 1, true),
            None => (buf, buf.len(), false),
        };
        total += chunk.len();
        if total <= MAX_LINE {
            bytes.extend_from_slice(chunk);
        } else {
            bytes = Vec::new();
        }
        reader.consume(used);
        if done {
            break;
        }
    }
    if total > MAX_LINE {
        return Ok(Line::TooLong(total));
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    text.retain(|c| c != '\r' && c != '\0');
    Ok(Line::Text(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_lines_bounded_and_lossy() {
        let mut data = b"usi\r\nisready\n".to_vec();
        data.extend(vec![b'x'; MAX_LINE + 10]);
        data.extend(b"\n\xff\xfego\nlast");
        let mut r = io::BufReader::with_capacity(1000, &data[..]);
        assert_eq!(read_line(&mut r).unwrap(), Line::Text("usi".into()));
        assert_eq!(read_line(&mut r).unwrap(), Line::Text("isready".into()));
        assert_eq!(read_line(&mut r).unwrap(), Line::TooLong(MAX_LINE + 10));
        assert_eq!(read_line(&mut r).unwrap(), Line::Text("\u{fffd}\u{fffd}go".into()));
        assert_eq!(read_line(&mut r).unwrap(), Line::Text("last".into()));
        assert_eq!(read_line(&mut r).unwrap(), Line::Eof);
    }
}
