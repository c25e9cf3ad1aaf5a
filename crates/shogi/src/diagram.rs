//! A plain-text board diagram for people: Black at the bottom, files 9→1 left to right, ranks a–i
//! top to bottom, White's pieces in lower case, promoted pieces with `+`, and both hands; in
//! English (SFEN letters) or Vietnamese (piece names: Vua, Xe, Tượng, …).

use std::fmt::Write;

use crate::color::Color;
use crate::piece::PieceType;
use crate::position::Position;
use crate::record::notation::vietnamese_piece_name;
use crate::square::Square;

/// A Vietnamese piece name as the diagram prints it: White's in lower case.
fn vietnamese_cell(pt: PieceType, color: Color) -> String {
    let name = vietnamese_piece_name(pt);
    if color == Color::White {
        name.to_lowercase()
    } else {
        name.to_string()
    }
}

fn vietnamese_hand(pos: &Position, color: Color) -> String {
    let hand = pos.hand(color);
    let parts: Vec<String> = PieceType::HAND_WRITE_ORDER
        .iter()
        .filter(|&&pt| hand.has(pt))
        .map(|&pt| match hand.count(pt) {
            1 => vietnamese_piece_name(pt).to_string(),
            n => format!("{} {n}", vietnamese_piece_name(pt)),
        })
        .collect();
    if parts.is_empty() {
        "-".to_string()
    } else {
        parts.join(", ")
    }
}

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

impl Position {
    /// [`Position::diagram`] in Vietnamese: piece names (Vua, Xe, Tượng, Vàng, Bạc, Mã, Thương,
    /// Tốt, promoted `+Xe` …; White's in lower case) and Vietnamese labels.
    pub fn diagram_vietnamese(&self) -> String {
        const CELL: usize = 8;
        let mut out = String::new();
        let to_move = |c: Color| if self.side_to_move() == c { "  (đến lượt)" } else { "" };
        writeln!(out, "Trắng (hậu thủ) trên tay: {}{}", vietnamese_hand(self, Color::White), to_move(Color::White))
            .ok();
        out.push_str("   ");
        for file in (1..=9).rev() {
            write!(out, "{file:>CELL$}").ok();
        }
        out.push('\n');
        let rule = format!("   +{}+", "-".repeat(CELL * 9 + 1));
        writeln!(out, "{rule}").ok();
        for rank in 0..9u8 {
            out.push_str("   |");
            for file in (0..9u8).rev() {
                let sq = Square::new(file, rank).expect("on board");
                let cell = match self.piece_at(sq) {
                    None => ".".to_string(),
                    Some(p) => vietnamese_cell(p.piece_type(), p.color()),
                };
                // Pad by characters, not bytes: the names have diacritics.
                let pad = CELL.saturating_sub(cell.chars().count());
                write!(out, "{}{cell}", " ".repeat(pad)).ok();
            }
            writeln!(out, " | {}", (b'a' + rank) as char).ok();
        }
        writeln!(out, "{rule}").ok();
        writeln!(out, "Đen (tiên thủ) trên tay: {}{}", vietnamese_hand(self, Color::Black), to_move(Color::Black)).ok();
        let check = if self.in_check() { ", bị chiếu" } else { "" };
        writeln!(out, "Nước {}{check}", self.move_number()).ok();
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

    #[test]
    fn vietnamese_diagram() {
        let d = Position::from_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKG+SNL w 2Pb 1")
            .unwrap()
            .diagram_vietnamese();
        assert!(d.contains("  thương      mã     bạc    vàng     vua    vàng     bạc      mã  thương | a"), "{d}");
        assert!(d.contains("       .   Tượng       .       .       .       .       .      Xe       . | h"), "{d}");
        assert!(d.contains("    Vàng     Vua    Vàng    +Bạc      Mã  Thương | i"), "{d}");
        assert!(d.contains("Trắng (hậu thủ) trên tay: Tượng"), "{d}");
        assert!(d.contains("Đen (tiên thủ) trên tay: Tốt 2"), "{d}");
        assert!(d.contains("(đến lượt)") && d.contains("Nước 1"), "{d}");
    }
}
