//! KI2 records: the KIF header, then the moves in Japanese notation without numbers or times
//! (`▲７六歩    △３四歩`), read by the KIF reader ([`super::kif::parse_kif`]) and written here.

use std::fmt::Write;

use crate::color::Color;

use super::error::{ParseError, ParseErrorKind as K, WriteError};
use super::kif::{display_width, ending, write_end_marker, write_header, write_move_notes, KifReader};
use super::{GameRecord, RecordMove};

/// The marks that start a move in KI2 (Black: ▲☗▼, White: △☖▽).
pub(super) const KI2_MARKS: [char; 6] = ['▲', '☗', '▼', '△', '☖', '▽'];

impl KifReader {
    /// A KI2 line: one or more moves in Japanese notation, each starting with its side's mark.
    pub(super) fn ki2_line(&mut self, t: &str, line: usize) -> Result<(), ParseError> {
        let mut starts: Vec<usize> = t.char_indices().filter(|(_, c)| KI2_MARKS.contains(c)).map(|(i, _)| i).collect();
        starts.push(t.len());
        for w in starts.windows(2) {
            let token = t[w[0]..w[1]].trim_matches(|c: char| c.is_whitespace() || c == '　');
            let n = self.moves.len() as u32 + 1;
            let err = |kind| ParseError::at_move(line, n, kind);
            if let Some(end) = &self.end_word {
                return Err(err(K::MoveAfterEnd(end.clone())));
            }
            let pos = self.position()?;
            let color = if token.starts_with(['▲', '☗', '▼']) { Color::Black } else { Color::White };
            if color != pos.side_to_move() {
                let name = |c: Color| if c == Color::Black { "Black (▲)" } else { "White (△)" };
                return Err(err(K::WrongSide {
                    text: token.to_string(),
                    expected: name(pos.side_to_move()),
                    found: name(color),
                }));
            }
            let previous_to = pos.last_move().map(|m| m.to());
            let mv = super::notation::parse_japanese(pos, token, previous_to)
                .map_err(|reason| err(K::BadMove { text: token.to_string(), reason }))?;
            pos.do_move(mv);
            self.moves.push(RecordMove::new(mv));
        }
        Ok(())
    }
}

/// Writes a game as KI2 text (UTF-8; encode it for `.ki2`): the KIF header, then the moves in
/// Japanese notation (`▲７六歩    △３四歩`), six to a line, and the `まで…` summary. KI2 has no
/// times; comments and evaluations follow their move on lines of their own.
pub fn write_ki2(game: &GameRecord) -> Result<String, WriteError> {
    let mut out = String::new();
    let is_handicap = write_header(game, &mut out, false);
    let mut pos = game.start.clone();
    let mut previous_to = None;
    let mut on_line = 0;
    for (i, m) in game.moves.iter().enumerate() {
        if !pos.is_legal(m.mv) {
            return Err(WriteError::IllegalMove { move_number: i as u32 + 1, usi: m.mv.to_usi(), sfen: pos.to_sfen() });
        }
        let text = super::notation::japanese_with_mark(&pos, m.mv, previous_to);
        if on_line > 0 {
            out.push_str(&" ".repeat(12usize.saturating_sub(display_width(&text)).max(1)));
        }
        out.push_str(&text);
        on_line += 1;
        let notes = m.comment.is_some() || m.eval.is_some();
        if on_line == 6 || notes || i + 1 == game.moves.len() {
            out.push('\n');
            on_line = 0;
        }
        write_move_notes(&mut out, m);
        previous_to = Some(m.mv.to());
        pos.do_move(m.mv);
    }
    if let Some(result) = game.result {
        let (_, summary, marker) = ending(result, &pos, game.moves.len(), is_handicap, true);
        let _ = writeln!(out, "{summary}");
        write_end_marker(&mut out, marker);
    }
    Ok(out)
}
