//! The board diagram (BOD, 盤面図) of KIF and KI2 records: the Japanese picture of a position with
//! both hands (`後手の持駒：…`, rows `|v香v桂 ・ …|一`, `後手番`), read when a record starts from a
//! position no 手合割 names, and written for such records.

use std::fmt::Write;

use crate::color::Color;
use crate::piece::{Piece, PieceType};
use crate::position::Position;
use crate::sfen::write_sfen;
use crate::square::Square;

use super::error::{ParseError, ParseErrorKind as K};
use super::notation::{
    japanese_piece_char, japanese_piece_name, kanji_number, parse_kanji_number, strip_piece_name, RANK_KANJI,
};

/// A hand line's pieces (`銀　歩二`, `なし`), counted by piece type.
pub(super) fn parse_hand(text: &str, line: usize) -> Result<[u32; 15], ParseError> {
    let bad = |reason: &str| ParseError::new(line, K::Hand { text: text.to_string(), reason: reason.to_string() });
    let mut hand = [0u32; 15];
    let text = text.trim_matches(|c: char| c == '　' || c.is_whitespace());
    if text.is_empty() || text == "なし" {
        return Ok(hand);
    }
    for item in text.split(|c: char| c == '　' || c.is_whitespace()) {
        if item.is_empty() {
            continue;
        }
        let (pt, rest) = strip_piece_name(item).ok_or_else(|| bad("unknown piece"))?;
        if !PieceType::HAND.contains(&pt) {
            return Err(bad("only unpromoted pieces other than the king can be in hand"));
        }
        let n = if rest.is_empty() { 1 } else { parse_kanji_number(rest).ok_or_else(|| bad("bad count"))? };
        hand[pt.index()] += n;
        if hand[pt.index()] > 31 {
            return Err(bad("count too large"));
        }
    }
    Ok(hand)
}

/// One board-diagram row `|v香v桂 ・ …|一`: the pieces from file 9 to file 1.
pub(super) fn parse_bod_row(text: &str, line: usize) -> Result<(Option<usize>, [Option<Piece>; 9]), ParseError> {
    let bad = |reason: &str| ParseError::new(line, K::BoardLine { text: text.to_string(), reason: reason.to_string() });
    let inner = text.strip_prefix('|').ok_or_else(|| bad("expected '|'"))?;
    let (cells, tail) = inner.split_once('|').ok_or_else(|| bad("expected a closing '|'"))?;
    let chars: Vec<char> = cells.chars().collect();
    if chars.len() != 18 {
        return Err(bad("expected 9 cells of 2 characters"));
    }
    let mut row = [None; 9];
    for (i, cell) in chars.chunks(2).enumerate() {
        let (mark, name) = (cell[0], cell[1]);
        if name == '・' {
            continue;
        }
        let color = match mark {
            'v' | 'V' => Color::White,
            ' ' | '　' | '^' | '+' => Color::Black,
            _ => return Err(bad(&format!("bad cell {:?}", cell.iter().collect::<String>()))),
        };
        let (pt, _) = strip_piece_name(&name.to_string()).ok_or_else(|| bad(&format!("unknown piece {name:?}")))?;
        row[i] = Some(Piece::new(color, pt));
    }
    let rank = tail.trim().chars().next().and_then(|c| RANK_KANJI.iter().position(|&k| k == c));
    Ok((rank, row))
}

/// The SFEN of a diagram's nine rows (file 9 to file 1, top to bottom), hands and side to move
/// (Black when the diagram does not say), at move 1.
pub(super) fn diagram_sfen(
    rows: &[[Option<Piece>; 9]; 9],
    hands: &[Option<[u32; 15]>; 2],
    side: Option<Color>,
) -> String {
    write_sfen(
        |sq| rows[sq.rank_index() as usize][8 - sq.file_index() as usize],
        |color, pt| hands[color.index()].map_or(0, |hand| hand[pt.index()]),
        side.unwrap_or(Color::Black),
        1,
    )
}

/// The board diagram (BOD) of a position, with both hands and, for White to move, `後手番`.
pub fn board_diagram(pos: &Position) -> String {
    let mut out = String::new();
    let hand_text = |c: Color| {
        let hand = pos.hand(c);
        let mut s = String::new();
        for pt in PieceType::HAND_WRITE_ORDER {
            let n = hand.count(pt);
            if n == 0 {
                continue;
            }
            s.push_str(japanese_piece_name(pt));
            if n > 1 {
                s.push_str(&kanji_number(n));
            }
            s.push('　');
        }
        if s.is_empty() {
            "なし".to_string()
        } else {
            s
        }
    };
    let _ = writeln!(out, "後手の持駒：{}", hand_text(Color::White));
    out.push_str("  ９ ８ ７ ６ ５ ４ ３ ２ １\n+---------------------------+\n");
    for rank in 0..9u8 {
        out.push('|');
        for file in (0..9u8).rev() {
            match Square::new(file, rank).and_then(|sq| pos.piece_at(sq)) {
                None => out.push_str(" ・"),
                Some(p) => {
                    out.push(if p.color() == Color::White { 'v' } else { ' ' });
                    out.push(japanese_piece_char(p.piece_type()));
                }
            }
        }
        out.push('|');
        out.push(RANK_KANJI[rank as usize]);
        out.push('\n');
    }
    out.push_str("+---------------------------+\n");
    let _ = writeln!(out, "先手の持駒：{}", hand_text(Color::Black));
    if pos.side_to_move() == Color::White {
        out.push_str("後手番\n");
    }
    out
}
