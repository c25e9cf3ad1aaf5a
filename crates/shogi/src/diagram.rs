//! A plain-text board diagram for people: Black at the bottom, files 9→1 left to right, ranks a–i
//! top to bottom, White's pieces in lower case, promoted pieces with `+`, and both hands.

use std::fmt::Write;

use crate::color::Color;
use crate::piece::PieceType;
use crate::position::Position;
use crate::square::Square;

fn hand_text(pos: &Position, color: Color) -> String {
    let hand = pos.hand(color);
    let parts: Vec<String> = PieceType::HAND_WRITE_ORDER
        .iter()
        .filter(|&&pt| hand.has(pt))
        .map(|&pt| match hand.count(pt) {
            1 => pt.sfen_letter().to_string(),
            n => format!("{}{n}", pt.sfen_letter()),
        })
        .collect();
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(" ")
    }
}

impl Position {
    /// A multi-line diagram of the position with both hands, the side to move and the SFEN.
    pub fn diagram(&self) -> String {
        let mut out = String::new();
        let to_move = |c: Color| if self.side_to_move() == c { "  (to move)" } else { "" };
        writeln!(out, "White (gote) hand: {}{}", hand_text(self, Color::White), to_move(Color::White)).ok();
        writeln!(out, "    9  8  7  6  5  4  3  2  1").ok();
        writeln!(out, "  +---------------------------+").ok();
        for rank in 0..9u8 {
            out.push_str("  |");
            for file in (0..9u8).rev() {
                let sq = Square::new(file, rank).expect("on board");
                match self.piece_at(sq) {
                    None => out.push_str("  ."),
                    Some(p) => write!(out, "{:>3}", p.sfen()).expect("String write"),
                }
            }
            writeln!(out, " | {}", (b'a' + rank) as char).ok();
        }
        writeln!(out, "  +---------------------------+").ok();
        writeln!(out, "Black (sente) hand: {}{}", hand_text(self, Color::Black), to_move(Color::Black)).ok();
        let check = if self.in_check() { ", in check" } else { "" };
        writeln!(out, "Move {}{check}", self.move_number()).ok();
        write!(out, "SFEN: {}", self.to_sfen()).ok();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startpos_diagram() {
        let d = Position::startpos().diagram();
        assert!(d.contains("  |  l  n  s  g  k  g  s  n  l | a"), "{d}");
        assert!(d.contains("  |  .  B  .  .  .  .  .  R  . | h"), "{d}");
        assert!(d.contains("Black (sente) hand: -  (to move)"), "{d}");
    }
}
