//! Standard handicap starts. The handicap giver (uwate) plays White and moves first; the pieces
//! are removed from White's side as the JSA rules list them.

use crate::position::Position;
use crate::sfen::STARTPOS_SFEN;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Handicap {
    Even,
    /// 香落ち: White's left lance (1a).
    Lance,
    /// 右香落ち: White's right lance (9a).
    RightLance,
    /// 角落ち
    Bishop,
    /// 飛車落ち
    Rook,
    /// 飛香落ち
    RookLance,
    /// 二枚落ち: rook and bishop.
    TwoPiece,
    /// 三枚落ち: rook, bishop and the left lance (1a).
    ThreePiece,
    /// 四枚落ち: rook, bishop, both lances.
    FourPiece,
    /// 五枚落ち: rook, bishop, both lances and the right knight (8a).
    FivePiece,
    /// 左五枚落ち: rook, bishop, both lances and the left knight (2a).
    LeftFivePiece,
    /// 六枚落ち: also both knights.
    SixPiece,
    /// 左七枚落ち: six-piece and the left silver (3a).
    LeftSevenPiece,
    /// 右七枚落ち: six-piece and the right silver (7a).
    RightSevenPiece,
    /// 八枚落ち: also both silvers.
    EightPiece,
    /// 十枚落ち: also both golds (king and pawns remain).
    TenPiece,
    /// 歩三兵: king alone on the board with three pawns in hand.
    ThreePawns,
    /// 裸玉: king alone.
    NakedKing,
}

impl Handicap {
    /// Every handicap, the even game first, in the order of the KIF 手合割 list.
    pub const ALL: [Handicap; 18] = [
        Handicap::Even,
        Handicap::Lance,
        Handicap::RightLance,
        Handicap::Bishop,
        Handicap::Rook,
        Handicap::RookLance,
        Handicap::TwoPiece,
        Handicap::ThreePiece,
        Handicap::FourPiece,
        Handicap::FivePiece,
        Handicap::LeftFivePiece,
        Handicap::SixPiece,
        Handicap::LeftSevenPiece,
        Handicap::RightSevenPiece,
        Handicap::EightPiece,
        Handicap::TenPiece,
        Handicap::ThreePawns,
        Handicap::NakedKing,
    ];

    pub const fn sfen(self) -> &'static str {
        match self {
            Handicap::Even => STARTPOS_SFEN,
            Handicap::Lance => "lnsgkgsn1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::RightLance => "1nsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::Bishop => "lnsgkgsnl/1r7/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::Rook => "lnsgkgsnl/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::RookLance => "lnsgkgsn1/7b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::TwoPiece => "lnsgkgsnl/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::ThreePiece => "lnsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::FourPiece => "1nsgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::FivePiece => "2sgkgsn1/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::LeftFivePiece => "1nsgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::SixPiece => "2sgkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::LeftSevenPiece => "2sgkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::RightSevenPiece => "3gkgs2/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::EightPiece => "3gkg3/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::TenPiece => "4k4/9/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
            Handicap::ThreePawns => "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w 3p 1",
            Handicap::NakedKing => "4k4/9/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1",
        }
    }

    /// A short ASCII name, for configs and the command line.
    pub const fn name(self) -> &'static str {
        match self {
            Handicap::Even => "even",
            Handicap::Lance => "lance",
            Handicap::RightLance => "right-lance",
            Handicap::Bishop => "bishop",
            Handicap::Rook => "rook",
            Handicap::RookLance => "rook-lance",
            Handicap::TwoPiece => "two-piece",
            Handicap::ThreePiece => "three-piece",
            Handicap::FourPiece => "four-piece",
            Handicap::FivePiece => "five-piece",
            Handicap::LeftFivePiece => "left-five-piece",
            Handicap::SixPiece => "six-piece",
            Handicap::LeftSevenPiece => "left-seven-piece",
            Handicap::RightSevenPiece => "right-seven-piece",
            Handicap::EightPiece => "eight-piece",
            Handicap::TenPiece => "ten-piece",
            Handicap::ThreePawns => "three-pawns",
            Handicap::NakedKing => "naked-king",
        }
    }

    /// The name KIF headers use (`手合割`).
    pub const fn japanese_name(self) -> &'static str {
        match self {
            Handicap::Even => "平手",
            Handicap::Lance => "香落ち",
            Handicap::RightLance => "右香落ち",
            Handicap::Bishop => "角落ち",
            Handicap::Rook => "飛車落ち",
            Handicap::RookLance => "飛香落ち",
            Handicap::TwoPiece => "二枚落ち",
            Handicap::ThreePiece => "三枚落ち",
            Handicap::FourPiece => "四枚落ち",
            Handicap::FivePiece => "五枚落ち",
            Handicap::LeftFivePiece => "左五枚落ち",
            Handicap::SixPiece => "六枚落ち",
            Handicap::LeftSevenPiece => "左七枚落ち",
            Handicap::RightSevenPiece => "右七枚落ち",
            Handicap::EightPiece => "八枚落ち",
            Handicap::TenPiece => "十枚落ち",
            Handicap::ThreePawns => "歩三兵",
            Handicap::NakedKing => "裸玉",
        }
    }

    /// Reads a name: the ASCII name (case-insensitive, `_` or a space for `-`) or the KIF name.
    pub fn from_name(name: &str) -> Option<Handicap> {
        let name = name.trim();
        let ascii = name.to_ascii_lowercase().replace(['_', ' '], "-");
        Handicap::ALL.into_iter().find(|h| h.name() == ascii || h.japanese_name() == name)
    }

    /// The accepted ASCII names, for error messages.
    pub fn names() -> String {
        Handicap::ALL.iter().map(|h| h.name()).collect::<Vec<_>>().join(", ")
    }

    pub fn position(self) -> Position {
        Position::from_sfen(self.sfen()).expect("handicap SFENs are valid")
    }

    /// The handicap whose start position this is, if any (move number ignored).
    pub fn of_position(pos: &Position) -> Option<Handicap> {
        let sfen = pos.to_sfen();
        let board_side_hands = |s: &str| s.rsplit_once(' ').map(|(head, _)| head.to_string());
        let key = board_side_hands(&sfen)?;
        Handicap::ALL.into_iter().find(|h| board_side_hands(h.sfen()).as_deref() == Some(key.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::color::Color;

    #[test]
    fn every_handicap_parses_and_white_moves_first() {
        for h in Handicap::ALL {
            let pos = h.position();
            let expected = if h == Handicap::Even { Color::Black } else { Color::White };
            assert_eq!(pos.side_to_move(), expected, "{h:?}");
            assert_eq!(Handicap::of_position(&pos), Some(h));
            assert_eq!(Handicap::from_name(h.name()), Some(h));
            assert_eq!(Handicap::from_name(h.japanese_name()), Some(h));
            assert!(!pos.legal_moves().is_empty());
        }
    }
}
