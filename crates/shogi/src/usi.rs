//! USI `position` arguments: `startpos [moves …]` or `sfen <sfen> [moves …]`, with or without the
//! leading `position` word, in and out.

use thiserror::Error;

use crate::mv::Move;
use crate::position::Position;
use crate::sfen::SfenError;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UsiPositionError {
    #[error("empty position command")]
    Empty,
    #[error("position must start with 'startpos' or 'sfen', found {0:?}")]
    Start(String),
    #[error("invalid SFEN: {0}")]
    Sfen(#[from] SfenError),
    #[error("expected 'moves' after the position, found {0:?}")]
    ExpectedMoves(String),
    #[error("move {index} ({text:?}) is not a USI move")]
    Syntax { index: usize, text: String },
    #[error("move {index} ({text:?}) is illegal in {sfen}")]
    Illegal { index: usize, text: String, sfen: String },
}

/// Parses USI position arguments and plays the moves, checking each for legality.
/// Move indices in errors count from 1.
pub fn parse_position(text: &str) -> Result<Position, UsiPositionError> {
    let mut words = text.split_ascii_whitespace().peekable();
    if words.peek() == Some(&"position") {
        words.next();
    }
    let mut pos = match words.next() {
        None => return Err(UsiPositionError::Empty),
        Some("startpos") => Position::startpos(),
        Some("sfen") => {
            let fields: Vec<&str> = std::iter::from_fn(|| words.next_if(|w| *w != "moves")).collect();
            Position::from_sfen(&fields.join(" "))?
        }
        Some(other) => return Err(UsiPositionError::Start(other.to_string())),
    };
    match words.next() {
        None => return Ok(pos),
        Some("moves") => {}
        Some(other) => return Err(UsiPositionError::ExpectedMoves(other.to_string())),
    }
    for (i, text) in words.enumerate() {
        let m =
            Move::from_usi(text).ok_or_else(|| UsiPositionError::Syntax { index: i + 1, text: text.to_string() })?;
        if !pos.is_legal(m) {
            return Err(UsiPositionError::Illegal { index: i + 1, text: text.to_string(), sfen: pos.to_sfen() });
        }
        pos.do_move(m);
    }
    Ok(pos)
}

/// The USI position arguments (`sfen <root> moves …`, or `startpos moves …`) that reproduce the
/// position with its history.
pub fn position_command(pos: &Position) -> String {
    let mut root = pos.clone();
    while root.plies_from_root() > 0 {
        root.undo_move();
    }
    let root_sfen = root.to_sfen();
    let mut out =
        if root_sfen == crate::sfen::STARTPOS_SFEN { "startpos".to_string() } else { format!("sfen {root_sfen}") };
    let mut first = true;
    for m in pos.moves_from_root() {
        out.push_str(if first { " moves " } else { " " });
        first = false;
        m.write_usi(&mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let pos = parse_position("position startpos moves 7g7f 3c3d 8h2b+").unwrap();
        assert_eq!(position_command(&pos), "startpos moves 7g7f 3c3d 8h2b+");
        assert!(matches!(parse_position("startpos moves 7g7f 7g7f"), Err(UsiPositionError::Illegal { index: 2, .. })));
        assert!(matches!(parse_position("startpos moves 7g7x"), Err(UsiPositionError::Syntax { index: 1, .. })));
        assert!(matches!(parse_position("sfen 9/9 b - 1"), Err(UsiPositionError::Sfen(_))));
        assert!(matches!(parse_position("foo"), Err(UsiPositionError::Start(_))));
        assert!(matches!(parse_position("startpos 7g7f"), Err(UsiPositionError::ExpectedMoves(_))));
        let pos =
            parse_position("sfen lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1 moves 5a4b").unwrap();
        assert_eq!(
            position_command(&pos),
            "sfen lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1 moves 5a4b"
        );
    }
}
