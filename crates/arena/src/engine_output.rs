//! An engine's standard output as lines, whatever bytes it prints: Japanese engines print
//! `info string`s in Shift_JIS, and nothing bounds how long a line may be. USI's own words are
//! ASCII, so a line is decoded as UTF-8 with U+FFFD for what is not, cut at [`MAX_LINE_BYTES`],
//! and stripped of a trailing CR; the engine keeps playing whatever it prints besides.

use std::io::{BufRead, ErrorKind};

/// The longest line kept: the rest of a longer line is read and dropped.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The next line of `reader` (without its newline), or `None` at the end of the output or on a
/// read error (the engine is gone either way). `buffer` is reused between calls.
pub fn next_line(reader: &mut impl BufRead, buffer: &mut Vec<u8>) -> Option<String> {
    buffer.clear();
    let mut read_any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return None,
        };
        if available.is_empty() {
            // The end: a last line without a newline still counts.
            if !read_any {
                return None;
            }
            break;
        }
        read_any = true;
        let (end, newline) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (available.len(), false),
        };
        let room = MAX_LINE_BYTES.saturating_sub(buffer.len());
        buffer.extend_from_slice(&available[..end.min(room)]);
        reader.consume(if newline { end + 1 } else { end });
        if newline {
            break;
        }
    }
    if buffer.last() == Some(&b'\r') {
        buffer.pop();
    }
    Some(String::from_utf8_lossy(buffer).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(bytes: &[u8]) -> Vec<String> {
        // A small buffer, so that lines span many refills.
        let mut reader = std::io::BufReader::with_capacity(7, bytes);
        let mut buffer = Vec::new();
        std::iter::from_fn(|| next_line(&mut reader, &mut buffer)).collect()
    }

    #[test]
    fn shift_jis_long_lines_crlf_and_a_last_line_without_newline() {
        // "info string 将棋" in Shift_JIS: not UTF-8.
        let mut bytes = b"id name x\r\ninfo string \x8f\xab\x8a\xfb\nreadyok\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 3 * MAX_LINE_BYTES + 5));
        bytes.extend_from_slice(b"\nbestmove 7g7f");
        let got = lines(&bytes);
        assert_eq!(got.len(), 5, "{:?}", got.iter().map(|l| l.len()).collect::<Vec<_>>());
        assert_eq!(got[0], "id name x");
        assert!(got[1].starts_with("info string ") && got[1].contains('\u{FFFD}'), "{:?}", got[1]);
        assert_eq!(got[2], "readyok");
        assert_eq!(got[3], "x".repeat(MAX_LINE_BYTES));
        assert_eq!(got[4], "bestmove 7g7f");
        assert!(lines(b"").is_empty());
        assert_eq!(lines(b"\n\n"), vec!["", ""]);
    }
}
