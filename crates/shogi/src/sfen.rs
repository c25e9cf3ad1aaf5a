//! SFEN in and out. Parsing validates everything a legal position needs: one king per side, no
//! piece on a square where it could never move, no two unpromoted pawns of a side on a file, no
//! more pieces of a kind than a hand can hold, and the side that just moved not left in check.

use std::fmt::Write;

use thiserror::Error;

use crate::color::Color;
use crate::hand::{Hand, CAPACITY};
use crate::piece::{Piece, PieceType};
use crate::position::Position;
use crate::square::Square;

/// The starting position of an even game.
pub const STARTPOS_SFEN: &str = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1";

/// What is wrong with an SFEN string.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SfenError {
    #[error("SFEN needs 3 or 4 space-separated fields (board, side, hands[, move number]), found {0}")]
    FieldCount(usize),
    #[error("SFEN board has {0} ranks, expected 9 separated by '/'")]
    RankCount(usize),
    #[error("SFEN board rank {rank} covers {files} files, expected 9")]
    RankWidth { rank: char, files: usize },
    #[error("SFEN board rank {rank}: unexpected character {found:?}")]
    BoardChar { rank: char, found: char },
    #[error("SFEN board rank {rank}: '+' must precede a piece that can promote, found {found:?}")]
    BadPromotion { rank: char, found: String },
    #[error("SFEN side to move must be 'b' or 'w', found {0:?}")]
    Side(String),
    #[error("SFEN hands: unexpected character {0:?} (expected '-' or counts and piece letters such as 2P, b, 10p)")]
    HandChar(char),
    #[error("SFEN hands: invalid count {0:?}")]
    HandCount(String),
    #[error("SFEN hands: piece letter {0:?} appears twice")]
    HandRepeated(char),
    #[error("SFEN move number must be a positive integer, found {0:?}")]
    MoveNumber(String),
    #[error("{color:?} has {count} kings on the board, expected exactly one")]
    KingCount { color: Color, count: usize },
    #[error("{piece} on {square} can never move again (dead square)")]
    DeadPiece { piece: String, square: Square },
    #[error("{color:?} has two unpromoted pawns on file {file} (nifu)")]
    Nifu { color: Color, file: u8 },
    #[error("too many {kind:?}: {count} on board and in hands, at most {max} are supported")]
    TooManyPieces { kind: PieceType, count: u32, max: u32 },
    #[error("the side not to move ({0:?}) is in check: its king could be captured")]
    OpponentInCheck(Color),
}

impl Position {
    /// The starting position of an even game.
    pub fn startpos() -> Position {
        Position::from_sfen(STARTPOS_SFEN).expect("the start position is valid")
    }

    /// Parses and validates an SFEN string (the move number may be omitted; it defaults to 1).
    pub fn from_sfen(sfen: &str) -> Result<Position, SfenError> {
        let fields: Vec<&str> = sfen.split_ascii_whitespace().collect();
        if fields.len() != 3 && fields.len() != 4 {
            return Err(SfenError::FieldCount(fields.len()));
        }
        let board = parse_board(fields[0])?;
        let side = match fields[1] {
            "b" => Color::Black,
            "w" => Color::White,
            other => return Err(SfenError::Side(other.to_string())),
        };
        let hands = parse_hands(fields[2])?;
        let move_number = match fields.get(3) {
            None => 1,
            Some(text) => match text.parse::<u32>() {
                Ok(n) if (1..u32::MAX / 2).contains(&n) => n,
                _ => return Err(SfenError::MoveNumber(text.to_string())),
            },
        };
        Position::from_board(board, hands, side, move_number)
    }

    /// Builds a position from a board (indexed by square), hands, side to move and move number,
    /// with the same validation as [`Position::from_sfen`].
    pub fn from_board(
        board: [Option<Piece>; 81],
        hands: [Hand; 2],
        side: Color,
        move_number: u32,
    ) -> Result<Position, SfenError> {
        validate(&board, &hands)?;
        let pos = Position::from_parts(board, hands, side, move_number);
        let waiting = !side;
        if pos.is_attacked_by(side, pos.king_square(waiting), pos.occupied()) {
            return Err(SfenError::OpponentInCheck(waiting));
        }
        Ok(pos)
    }

    /// The SFEN of the current position, with its move number. Hands are written in the usual
    /// order R B G S N L P, Black's first.
    pub fn to_sfen(&self) -> String {
        write_sfen(
            |sq| self.piece_at(sq),
            |color, pt| self.hand(color).count(pt),
            self.side_to_move(),
            self.move_number(),
        )
    }
}

/// An SFEN from its parts, unchecked: the piece on each square, the count of each piece type in
/// each hand, the side to move and the move number. Hands in the usual order R B G S N L P,
/// Black's first. [`Position::to_sfen`] and the record readers' set-ups (CSA `P` lines, KIF
/// diagrams) all write through it, and the readers parse the result as any SFEN.
pub(crate) fn write_sfen(
    piece_at: impl Fn(Square) -> Option<Piece>,
    in_hand: impl Fn(Color, PieceType) -> u32,
    side: Color,
    move_number: u32,
) -> String {
    let mut out = String::with_capacity(96);
    for rank in 0..9u8 {
        if rank > 0 {
            out.push('/');
        }
        let mut empty = 0;
        for file in (0..9u8).rev() {
            let sq = Square::new(file, rank).expect("on board");
            match piece_at(sq) {
                None => empty += 1,
                Some(p) => {
                    if empty > 0 {
                        write!(out, "{empty}").expect("writing to a String");
                        empty = 0;
                    }
                    out.push_str(&p.sfen());
                }
            }
        }
        if empty > 0 {
            write!(out, "{empty}").expect("writing to a String");
        }
    }
    out.push(' ');
    out.push(side.sfen_char());
    out.push(' ');
    let start = out.len();
    for color in Color::ALL {
        for pt in PieceType::HAND_WRITE_ORDER {
            let n = in_hand(color, pt);
            if n == 0 {
                continue;
            }
            if n > 1 {
                write!(out, "{n}").expect("writing to a String");
            }
            let c = pt.sfen_letter();
            out.push(if color == Color::Black { c } else { c.to_ascii_lowercase() });
        }
    }
    if out.len() == start {
        out.push('-');
    }
    write!(out, " {move_number}").expect("writing to a String");
    out
}

fn rank_char(rank: usize) -> char {
    (b'a' + rank as u8) as char
}

fn parse_board(text: &str) -> Result<[Option<Piece>; 81], SfenError> {
    let ranks: Vec<&str> = text.split('/').collect();
    if ranks.len() != 9 {
        return Err(SfenError::RankCount(ranks.len()));
    }
    let mut board = [None; 81];
    for (rank, row) in ranks.iter().enumerate() {
        let rc = rank_char(rank);
        let mut col = 0usize; // 0 = file 9
        let mut promoted = false;
        for c in row.chars() {
            if col >= 9 && c != '+' {
                return Err(SfenError::RankWidth { rank: rc, files: col + 1 });
            }
            if let Some(d) = c.to_digit(10) {
                if promoted || d == 0 {
                    return Err(SfenError::BoardChar { rank: rc, found: c });
                }
                col += d as usize;
                continue;
            }
            if c == '+' {
                if promoted {
                    return Err(SfenError::BoardChar { rank: rc, found: c });
                }
                promoted = true;
                continue;
            }
            let Some(pt) = PieceType::from_sfen_letter(c) else {
                return Err(SfenError::BoardChar { rank: rc, found: c });
            };
            let color = if c.is_ascii_uppercase() { Color::Black } else { Color::White };
            let pt = if promoted {
                if !pt.can_promote() {
                    return Err(SfenError::BadPromotion { rank: rc, found: format!("+{c}") });
                }
                pt.promote()
            } else {
                pt
            };
            promoted = false;
            let sq = Square::new(8 - col as u8, rank as u8).expect("column checked");
            board[sq.index()] = Some(Piece::new(color, pt));
            col += 1;
        }
        if promoted {
            return Err(SfenError::BadPromotion { rank: rc, found: "+".into() });
        }
        if col != 9 {
            return Err(SfenError::RankWidth { rank: rc, files: col });
        }
    }
    Ok(board)
}

fn parse_hands(text: &str) -> Result<[Hand; 2], SfenError> {
    let mut hands = [Hand::EMPTY; 2];
    if text == "-" {
        return Ok(hands);
    }
    let mut seen = [[false; 8]; 2];
    let mut digits = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let pt = match PieceType::from_sfen_letter(c) {
            Some(pt) if pt != PieceType::King => pt,
            _ => return Err(SfenError::HandChar(c)),
        };
        let color = if c.is_ascii_uppercase() { Color::Black } else { Color::White };
        let count = if digits.is_empty() {
            1
        } else {
            match digits.parse::<u32>() {
                Ok(n) if n >= 1 && n <= CAPACITY[pt.index()] => n,
                _ => return Err(SfenError::HandCount(format!("{digits}{c}"))),
            }
        };
        digits.clear();
        if std::mem::replace(&mut seen[color.index()][pt.index()], true) {
            return Err(SfenError::HandRepeated(c));
        }
        hands[color.index()].set(pt, count);
    }
    if !digits.is_empty() {
        return Err(SfenError::HandCount(digits));
    }
    Ok(hands)
}

fn validate(board: &[Option<Piece>; 81], hands: &[Hand; 2]) -> Result<(), SfenError> {
    let mut totals = [0u32; 9];
    let mut kings = [0usize; 2];
    let mut pawn_files = [[false; 9]; 2];
    for sq in Square::all() {
        let Some(p) = board[sq.index()] else { continue };
        let pt = p.piece_type();
        totals[pt.unpromote().index()] += 1;
        if pt == PieceType::King {
            kings[p.color().index()] += 1;
        }
        if Position::is_dead_square(p.color(), pt, sq) {
            return Err(SfenError::DeadPiece { piece: p.sfen(), square: sq });
        }
        if pt == PieceType::Pawn {
            let seen = &mut pawn_files[p.color().index()][sq.file_index() as usize];
            if *seen {
                return Err(SfenError::Nifu { color: p.color(), file: sq.file_index() + 1 });
            }
            *seen = true;
        }
    }
    for color in Color::ALL {
        if kings[color.index()] != 1 {
            return Err(SfenError::KingCount { color, count: kings[color.index()] });
        }
        for pt in PieceType::HAND {
            totals[pt.index()] += hands[color.index()].count(pt);
        }
    }
    for pt in PieceType::HAND {
        let max = CAPACITY[pt.index()];
        if totals[pt.index()] > max {
            return Err(SfenError::TooManyPieces { kind: pt, count: totals[pt.index()], max });
        }
    }
    Ok(())
}
