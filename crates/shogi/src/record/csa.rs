//! CSA standard records (version 2.2, with the `%MAX_MOVES` and `T`-with-decimals extensions of
//! later versions): `N+`/`N-` names, `$` fields, `PI`/`P1`–`P9`/`P+`/`P-` positions, `+7776FU`
//! moves, `T` times, `%` endings, `'` comments, statements joined by commas, and several games
//! separated by `/`.

use std::fmt::Write;

use crate::color::Color;
use crate::mv::Move;
use crate::piece::{Piece, PieceType};
use crate::position::Position;
use crate::rules::{EndReason, GameResult};
use crate::sfen::write_sfen;
use crate::square::Square;

use super::error::{ParseError, ParseErrorKind as K, WriteError};
use super::{end_marker_name, end_marker_reason, one_line, parse_seconds, GameRecord, RecordMove, END_MARKER};

/// The CSA two-letter code of a piece type.
pub fn piece_code(pt: PieceType) -> &'static str {
    match pt {
        PieceType::Pawn => "FU",
        PieceType::Lance => "KY",
        PieceType::Knight => "KE",
        PieceType::Silver => "GI",
        PieceType::Gold => "KI",
        PieceType::Bishop => "KA",
        PieceType::Rook => "HI",
        PieceType::King => "OU",
        PieceType::ProPawn => "TO",
        PieceType::ProLance => "NY",
        PieceType::ProKnight => "NK",
        PieceType::ProSilver => "NG",
        PieceType::Horse => "UM",
        PieceType::Dragon => "RY",
    }
}

pub fn piece_from_code(code: &str) -> Option<PieceType> {
    PieceType::ALL.into_iter().find(|&pt| piece_code(pt) == code)
}

fn sign(c: Color) -> char {
    match c {
        Color::Black => '+',
        Color::White => '-',
    }
}

fn color_name(c: Color) -> &'static str {
    match c {
        Color::Black => "Black (+)",
        Color::White => "White (-)",
    }
}

/// `77` → 7g. Digits 1–9 only.
fn square_from_digits(s: &str) -> Option<Square> {
    let b = s.as_bytes();
    if b.len() != 2 || !(b'1'..=b'9').contains(&b[0]) || !(b'1'..=b'9').contains(&b[1]) {
        return None;
    }
    Square::new(b[0] - b'1', b[1] - b'1')
}

fn square_digits(sq: Square) -> String {
    format!("{}{}", sq.file_index() + 1, sq.rank_index() + 1)
}

/// Pieces of a full set, by unpromoted kind (for `00AL`).
const FULL_SET: [(PieceType, u32); 7] = [
    (PieceType::Pawn, 18),
    (PieceType::Lance, 4),
    (PieceType::Knight, 4),
    (PieceType::Silver, 4),
    (PieceType::Gold, 4),
    (PieceType::Bishop, 2),
    (PieceType::Rook, 2),
];

/// The board and hands being built from position lines.
struct Setup {
    board: [Option<Piece>; 81],
    hands: [[u32; 15]; 2],
    all_to: Option<Color>,
    any: bool,
}

impl Setup {
    fn new() -> Setup {
        Setup { board: [None; 81], hands: [[0; 15]; 2], all_to: None, any: false }
    }

    fn initial() -> Setup {
        let pos = Position::startpos();
        let mut s = Setup::new();
        for sq in Square::all() {
            s.board[sq.index()] = pos.piece_at(sq);
        }
        s.any = true;
        s
    }

    fn to_sfen(&self, side: Color) -> String {
        let mut hands = self.hands;
        if let Some(c) = self.all_to {
            for (pt, total) in FULL_SET {
                let on_board = self.board.iter().flatten().filter(|p| p.piece_type().unpromote() == pt).count() as u32;
                let held = hands[0][pt.index()] + hands[1][pt.index()];
                hands[c.index()][pt.index()] += total.saturating_sub(on_board + held);
            }
        }
        let board = &self.board;
        write_sfen(|sq| board[sq.index()], |color, pt| hands[color.index()][pt.index()], side, 1)
    }
}

/// One game being read.
struct GameReader {
    setup: Option<Setup>,
    side: Option<Color>,
    pos: Option<Position>,
    names: [Option<String>; 2],
    headers: Vec<(String, String)>,
    comments: Vec<String>,
    moves: Vec<RecordMove>,
    result: Option<GameResult>,
    end_text: Option<String>,
    marker: Option<EndReason>,
    content: bool,
}

impl GameReader {
    fn new() -> GameReader {
        GameReader {
            setup: None,
            side: None,
            pos: None,
            names: [None, None],
            headers: Vec::new(),
            comments: Vec::new(),
            moves: Vec::new(),
            result: None,
            end_text: None,
            marker: None,
            content: false,
        }
    }

    fn move_number(&self) -> u32 {
        self.moves.len() as u32 + 1
    }

    /// Builds the start position when the first move, ending or side line needs it.
    fn position(&mut self, line: usize, side_from_move: Option<Color>) -> Result<&mut Position, ParseError> {
        if self.pos.is_none() {
            let setup = self.setup.take().filter(|s| s.any).unwrap_or_else(Setup::initial);
            let side = match (self.side, side_from_move) {
                (Some(s), _) => s,
                (None, Some(s)) => s,
                (None, None) => return Err(ParseError::new(line, K::NoSideToMove)),
            };
            let sfen = setup.to_sfen(side);
            let pos = Position::from_sfen(&sfen).map_err(|e| ParseError::new(line, K::Position(e)))?;
            self.pos = Some(pos);
        }
        Ok(self.pos.as_mut().expect("set above"))
    }

    fn setup_mut(&mut self, line: usize) -> Result<&mut Setup, ParseError> {
        if self.pos.is_some() || self.side.is_some() {
            return Err(ParseError::new(line, K::PositionAfterMoves));
        }
        Ok(self.setup.get_or_insert_with(Setup::new))
    }

    fn statement(&mut self, st: &str, line: usize) -> Result<(), ParseError> {
        self.content = true;
        let bad_board =
            |reason: &str| ParseError::new(line, K::BoardLine { text: st.to_string(), reason: reason.to_string() });
        if let Some(name) = st.strip_prefix("N+") {
            self.names[0] = Some(name.to_string());
        } else if let Some(name) = st.strip_prefix("N-") {
            self.names[1] = Some(name.to_string());
        } else if let Some(field) = st.strip_prefix('$') {
            let (k, v) = field.split_once(':').unwrap_or((field, ""));
            self.headers.push((k.to_string(), v.to_string()));
        } else if st.starts_with('V') {
            // Version line (V2, V2.1, V2.2, V3.0).
        } else if let Some(rest) = st.strip_prefix("PI") {
            let setup = self.setup_mut(line)?;
            if setup.any {
                return Err(bad_board("PI after other position lines"));
            }
            *setup = Setup::initial();
            if rest.len() % 4 != 0 || !rest.is_ascii() {
                return Err(bad_board("expected square-piece pairs such as 82HI"));
            }
            for chunk in rest.as_bytes().chunks(4) {
                let chunk = std::str::from_utf8(chunk).unwrap_or("");
                let sq = square_from_digits(&chunk[..2]).ok_or_else(|| bad_board("bad square"))?;
                let pt = piece_from_code(&chunk[2..]).ok_or_else(|| bad_board("bad piece code"))?;
                match setup.board[sq.index()] {
                    Some(p) if p.piece_type() == pt => setup.board[sq.index()] = None,
                    _ => return Err(bad_board(&format!("no {} on {} to remove", &chunk[2..], &chunk[..2]))),
                }
            }
        } else if st.len() >= 2 && st.starts_with('P') && st.as_bytes()[1].is_ascii_digit() {
            let rank = st.as_bytes()[1] - b'0';
            if !(1..=9).contains(&rank) {
                return Err(bad_board("rank must be 1-9"));
            }
            let setup = self.setup_mut(line)?;
            setup.any = true;
            let cells: Vec<char> = st[2..].chars().collect();
            if cells.len() > 27 || cells.len() < 25 {
                return Err(bad_board("expected 9 cells of 3 characters"));
            }
            for i in 0..9 {
                let cell: String = (0..3).map(|j| cells.get(i * 3 + j).copied().unwrap_or(' ')).collect();
                let sq = Square::new(8 - i as u8, rank - 1).ok_or_else(|| bad_board("bad square"))?;
                let cell_t = cell.trim();
                if cell_t == "*" || cell_t.is_empty() {
                    setup.board[sq.index()] = None;
                    continue;
                }
                let color = match cell.chars().next() {
                    Some('+') => Color::Black,
                    Some('-') => Color::White,
                    _ => return Err(bad_board(&format!("bad cell {cell:?}"))),
                };
                let pt = piece_from_code(cell.get(1..3).unwrap_or(""))
                    .ok_or_else(|| bad_board(&format!("bad cell {cell:?}")))?;
                setup.board[sq.index()] = Some(Piece::new(color, pt));
            }
        } else if st.starts_with("P+") || st.starts_with("P-") {
            let color = if st.as_bytes()[1] == b'+' { Color::Black } else { Color::White };
            let rest = &st[2..];
            let setup = self.setup_mut(line)?;
            if !setup.any {
                setup.any = true;
            }
            if !rest.len().is_multiple_of(4) || !rest.is_ascii() {
                return Err(bad_board("expected square-piece pairs such as 00FU"));
            }
            for chunk in rest.as_bytes().chunks(4) {
                let chunk = std::str::from_utf8(chunk).unwrap_or("");
                let (sq, code) = (&chunk[..2], &chunk[2..]);
                if sq == "00" {
                    if code == "AL" {
                        if setup.all_to.is_some() {
                            return Err(bad_board("00AL given twice"));
                        }
                        setup.all_to = Some(color);
                        continue;
                    }
                    let pt = piece_from_code(code).ok_or_else(|| bad_board("bad piece code"))?;
                    if pt.is_promoted() || pt == PieceType::King {
                        return Err(bad_board("only unpromoted pieces other than the king can be in hand"));
                    }
                    setup.hands[color.index()][pt.index()] += 1;
                    if setup.hands[color.index()][pt.index()] > 31 {
                        return Err(bad_board("too many pieces in hand"));
                    }
                } else {
                    let sq = square_from_digits(sq).ok_or_else(|| bad_board("bad square"))?;
                    let pt = piece_from_code(code).ok_or_else(|| bad_board("bad piece code"))?;
                    setup.board[sq.index()] = Some(Piece::new(color, pt));
                }
            }
        } else if st == "+" || st == "-" {
            if self.pos.is_some() || self.side.is_some() {
                return Err(ParseError::new(line, K::PositionAfterMoves));
            }
            self.side = Some(if st == "+" { Color::Black } else { Color::White });
            self.position(line, None)?;
        } else if st.starts_with('+') || st.starts_with('-') {
            self.play(st, line)?;
        } else if let Some(t) = st.strip_prefix('T') {
            let time = parse_seconds(t).ok_or_else(|| ParseError::new(line, K::BadTime(st.to_string())))?;
            if self.end_text.is_none() {
                if let Some(m) = self.moves.last_mut() {
                    m.time = Some(time);
                }
            }
        } else if let Some(special) = st.strip_prefix('%') {
            self.special(special, line)?;
        } else {
            return Err(ParseError::new(line, K::UnknownLine(st.to_string())));
        }
        Ok(())
    }

    fn play(&mut self, st: &str, line: usize) -> Result<(), ParseError> {
        let n = self.move_number();
        let err = |kind| ParseError::at_move(line, n, kind);
        let bad = |reason: &str| err(K::BadMove { text: st.to_string(), reason: reason.to_string() });
        if let Some(end) = &self.end_text {
            return Err(err(K::MoveAfterEnd(end.clone())));
        }
        if st.len() != 7 || !st.is_ascii() {
            return Err(bad("expected a sign, 4 digits and a piece code, such as +7776FU"));
        }
        let color = if st.starts_with('+') { Color::Black } else { Color::White };
        let pos = self.position(line, Some(color))?;
        if color != pos.side_to_move() {
            return Err(err(K::WrongSide {
                text: st.to_string(),
                expected: color_name(pos.side_to_move()),
                found: color_name(color),
            }));
        }
        let to = square_from_digits(&st[3..5]).ok_or_else(|| bad("bad destination square"))?;
        let pt = piece_from_code(&st[5..7]).ok_or_else(|| bad("bad piece code"))?;
        let mv = if &st[1..3] == "00" {
            if !PieceType::HAND.contains(&pt) {
                return Err(bad("only unpromoted pieces other than the king can be dropped"));
            }
            Move::drop(pt, to)
        } else {
            let from = square_from_digits(&st[1..3]).ok_or_else(|| bad("bad origin square"))?;
            if from == to {
                return Err(bad("origin and destination are the same square"));
            }
            let moving = match pos.piece_at(from) {
                Some(p) if p.color() == color => p.piece_type(),
                _ => {
                    return Err(bad(&format!(
                        "no {} piece on {}",
                        if color == Color::Black { "Black" } else { "White" },
                        &st[1..3]
                    )))
                }
            };
            let promote = if pt == moving {
                false
            } else if moving.can_promote() && moving.promote() == pt {
                true
            } else {
                return Err(bad(&format!("the piece on {} is {}, not {}", &st[1..3], piece_code(moving), &st[5..7])));
            };
            Move::board(from, to, promote)
        };
        if !pos.is_legal(mv) {
            return Err(err(K::IllegalMove { text: st.to_string(), sfen: pos.to_sfen() }));
        }
        pos.do_move(mv);
        self.moves.push(RecordMove::new(mv));
        Ok(())
    }

    fn special(&mut self, special: &str, line: usize) -> Result<(), ParseError> {
        let n = self.move_number();
        if let Some(end) = &self.end_text {
            return Err(ParseError::at_move(line, n, K::MoveAfterEnd(end.clone())));
        }
        let stm = self.position(line, None).map(|p| p.side_to_move());
        let stm = match stm {
            Ok(c) => c,
            // No side line and no moves: the ending needs a position; assume Black to move.
            Err(_) => {
                self.side = Some(Color::Black);
                self.position(line, None)?.side_to_move()
            }
        };
        let result = special_result(special, stm)
            .ok_or_else(|| ParseError::at_move(line, n, K::UnsupportedSpecial(format!("%{special}"))))?;
        self.result = Some(result);
        self.end_text = Some(format!("%{special}"));
        Ok(())
    }

    fn comment(&mut self, text: &str) {
        self.content = true;
        if let Some(name) = text.strip_prefix(END_MARKER) {
            if let Some(reason) = end_marker_reason(name) {
                self.marker = Some(reason);
                return;
            }
        }
        match self.moves.last_mut() {
            Some(m) if self.end_text.is_none() => {
                if let Some(rest) = text.strip_prefix("**") {
                    let rest = rest.trim_start();
                    let (num, tail) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                    if let Ok(v) = num.parse::<i32>() {
                        m.eval = Some(v);
                        if tail.trim().is_empty() {
                            return;
                        }
                    }
                }
                let text = text.strip_prefix('*').unwrap_or(text);
                match &mut m.comment {
                    Some(c) => {
                        c.push('\n');
                        c.push_str(text);
                    }
                    None => m.comment = Some(text.to_string()),
                }
            }
            _ => self.comments.push(text.to_string()),
        }
    }

    fn finish(mut self, line: usize) -> Result<Option<GameRecord>, ParseError> {
        if !self.content {
            return Ok(None);
        }
        if self.pos.is_none() {
            if self.side.is_none() {
                self.side = Some(Color::Black);
            }
            self.position(line, None)?;
        }
        let pos = self.pos.take().expect("built above");
        let mut record = GameRecord::from_position(&pos);
        for (slot, m) in record.moves.iter_mut().zip(self.moves) {
            *slot = m;
        }
        record.result = self.result.map(|r| super::refine_result(r, &pos, self.marker));
        let [black, white] = self.names;
        record.black = black;
        record.white = white;
        record.headers = self.headers;
        record.comments = self.comments;
        Ok(Some(record))
    }
}

/// The result an ending (without `%`) states, `stm` being the side to move.
fn special_result(special: &str, stm: Color) -> Option<GameResult> {
    let (winner, reason) = match special {
        "TORYO" => (Some(!stm), EndReason::Resignation),
        "TSUMI" => (Some(!stm), EndReason::Checkmate),
        "CHUDAN" | "HIKIWAKE" => (None, EndReason::Abort),
        "SENNICHITE" => (None, EndReason::Repetition),
        "TIME_UP" => (Some(!stm), EndReason::TimeLoss),
        "ILLEGAL_MOVE" => (Some(!stm), EndReason::IllegalMove),
        "+ILLEGAL_ACTION" => (Some(Color::White), EndReason::IllegalMove),
        "-ILLEGAL_ACTION" => (Some(Color::Black), EndReason::IllegalMove),
        "JISHOGI" => (None, EndReason::Declaration),
        "KACHI" => (Some(stm), EndReason::Declaration),
        "MAX_MOVES" => (None, EndReason::MaxMoves),
        _ => return None,
    };
    Some(GameResult { winner, reason })
}

/// Reads every game of a CSA file (games separated by a `/` line).
pub fn parse_csa(text: &str) -> Result<Vec<GameRecord>, ParseError> {
    let mut games = Vec::new();
    let mut reader = GameReader::new();
    let mut last_line = 0;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        last_line = line;
        let raw = raw.trim_end_matches(['\r', '\n']);
        if raw.trim() == "/" {
            if let Some(g) = std::mem::replace(&mut reader, GameReader::new()).finish(line)? {
                games.push(g);
            }
            continue;
        }
        if let Some(comment) = raw.strip_prefix('\'') {
            reader.comment(comment);
            continue;
        }
        let trimmed = raw.trim_end();
        if trimmed.trim().is_empty() {
            continue;
        }
        // Position rows keep their spacing; other lines may join statements with commas.
        if trimmed.starts_with('P') || trimmed.starts_with('N') || trimmed.starts_with('$') {
            reader.statement(trimmed.trim_start(), line)?;
        } else {
            for st in trimmed.split(',') {
                let st = st.trim();
                if !st.is_empty() {
                    reader.statement(st, line)?;
                }
            }
        }
    }
    if let Some(g) = reader.finish(last_line.max(1))? {
        games.push(g);
    }
    Ok(games)
}

/// The CSA ending of a result, as other programs expect it.
fn natural_special(result: GameResult, stm: Color, mated: bool) -> String {
    let GameResult { winner, reason } = result;
    let illegal_action = |w: Color| format!("%{}ILLEGAL_ACTION", sign(!w));
    match reason {
        // %TORYO, as servers write it, reads back as checkmate when the position is mate; a
        // checkmate claimed elsewhere keeps the V2.2 %TSUMI.
        EndReason::Checkmate if !mated => "%TSUMI".to_string(),
        EndReason::Checkmate | EndReason::Resignation => "%TORYO".to_string(),
        EndReason::Repetition => "%SENNICHITE".to_string(),
        // Perpetual check is an illegal action of the checking side.
        EndReason::PerpetualCheck => match winner {
            Some(w) => illegal_action(w),
            None => "%SENNICHITE".to_string(),
        },
        EndReason::Declaration => match winner {
            Some(_) => "%KACHI".to_string(),
            None => "%JISHOGI".to_string(),
        },
        EndReason::Try => match winner {
            Some(w) if w == stm => "%KACHI".to_string(),
            Some(_) => "%TORYO".to_string(),
            None => "%CHUDAN".to_string(),
        },
        EndReason::MaxMoves => "%MAX_MOVES".to_string(),
        EndReason::TimeLoss => "%TIME_UP".to_string(),
        // CSA has no ending for a player that stopped answering; a loss by the rules is the
        // closest (the marker comment keeps the reason).
        EndReason::IllegalMove | EndReason::Forfeit => match winner {
            Some(w) if w == stm => illegal_action(w),
            _ => "%ILLEGAL_MOVE".to_string(),
        },
        EndReason::Abort => "%CHUDAN".to_string(),
    }
}

/// The ending to write and the marker comment (`'koma-end:try`) that restores what CSA cannot say.
fn special_for(result: GameResult, final_pos: &Position) -> (String, Option<EndReason>) {
    let stm = final_pos.side_to_move();
    let natural = natural_special(result, stm, !final_pos.has_legal_move());
    let read = |text: &String| special_result(&text[1..], stm).map(|r| super::refine_result(r, final_pos, None));
    let by_winner = |w: Option<Color>| match w {
        Some(w) if w == stm => "%KACHI".to_string(),
        Some(_) => "%TORYO".to_string(),
        None => "%CHUDAN".to_string(),
    };
    super::choose_ending(result, natural, read, by_winner)
}

fn write_time(out: &mut String, t: std::time::Duration) {
    if t.subsec_millis() == 0 {
        let _ = writeln!(out, "T{}", t.as_secs());
    } else {
        let _ = writeln!(out, "T{}.{:03}", t.as_secs(), t.subsec_millis());
    }
}

fn write_comment_lines(out: &mut String, prefix: &str, text: &str) {
    for l in text.split('\n') {
        out.push('\'');
        out.push_str(prefix);
        out.push_str(&one_line(l));
        out.push('\n');
    }
}

/// The `PI…`/`P1…` lines and the side-to-move line of a start position.
pub fn position_lines(pos: &Position) -> String {
    let mut out = String::new();
    let initial = Position::startpos();
    let hands_empty = pos.hand(Color::Black).is_empty() && pos.hand(Color::White).is_empty();
    let removals_only =
        hands_empty && Square::all().all(|sq| pos.piece_at(sq).is_none() || pos.piece_at(sq) == initial.piece_at(sq));
    if removals_only {
        out.push_str("PI");
        for file in (0..9u8).rev() {
            for rank in 0..9u8 {
                let Some(sq) = Square::new(file, rank) else { continue };
                if let (None, Some(p)) = (pos.piece_at(sq), initial.piece_at(sq)) {
                    out.push_str(&square_digits(sq));
                    out.push_str(piece_code(p.piece_type()));
                }
            }
        }
        out.push('\n');
    } else {
        for rank in 0..9u8 {
            let _ = write!(out, "P{}", rank + 1);
            for file in (0..9u8).rev() {
                match Square::new(file, rank).and_then(|sq| pos.piece_at(sq)) {
                    None => out.push_str(" * "),
                    Some(p) => {
                        out.push(sign(p.color()));
                        out.push_str(piece_code(p.piece_type()));
                    }
                }
            }
            out.push('\n');
        }
        for c in Color::ALL {
            let hand = pos.hand(c);
            if hand.is_empty() {
                continue;
            }
            let _ = write!(out, "P{}", sign(c));
            for pt in PieceType::HAND_WRITE_ORDER {
                for _ in 0..hand.count(pt) {
                    out.push_str("00");
                    out.push_str(piece_code(pt));
                }
            }
            out.push('\n');
        }
    }
    out.push(sign(pos.side_to_move()));
    out.push('\n');
    out
}

/// Writes one game as CSA V2.2 text.
pub fn write_csa(game: &GameRecord) -> Result<String, WriteError> {
    let mut out = String::from("V2.2\n");
    if let Some(n) = &game.black {
        let _ = writeln!(out, "N+{}", one_line(n));
    }
    if let Some(n) = &game.white {
        let _ = writeln!(out, "N-{}", one_line(n));
    }
    for (k, v) in &game.headers {
        let _ = writeln!(out, "${}:{}", one_line(k).replace(':', " "), one_line(v));
    }
    for c in &game.comments {
        write_comment_lines(&mut out, "", c);
    }
    out.push_str(&position_lines(&game.start));
    let mut pos = game.start.clone();
    for (i, m) in game.moves.iter().enumerate() {
        if !pos.is_legal(m.mv) {
            return Err(WriteError::IllegalMove { move_number: i as u32 + 1, usi: m.mv.to_usi(), sfen: pos.to_sfen() });
        }
        out.push(sign(pos.side_to_move()));
        match m.mv.drop_piece_type() {
            Some(pt) => {
                out.push_str("00");
                out.push_str(&square_digits(m.mv.to()));
                out.push_str(piece_code(pt));
            }
            None => {
                let piece = pos.piece_at(m.mv.from()).map_or(PieceType::Pawn, |p| p.piece_type());
                let after = if m.mv.is_promotion() { piece.promote() } else { piece };
                out.push_str(&square_digits(m.mv.from()));
                out.push_str(&square_digits(m.mv.to()));
                out.push_str(piece_code(after));
            }
        }
        out.push('\n');
        if let Some(t) = m.time {
            write_time(&mut out, t);
        }
        if let Some(e) = m.eval {
            let _ = writeln!(out, "'** {e}");
        }
        if let Some(c) = &m.comment {
            write_comment_lines(&mut out, "*", c);
        }
        pos.do_move(m.mv);
    }
    if let Some(result) = game.result {
        let (text, marker) = special_for(result, &pos);
        out.push_str(&text);
        out.push('\n');
        if let Some(reason) = marker {
            let _ = writeln!(out, "'{END_MARKER}{}", end_marker_name(reason));
        }
    }
    Ok(out)
}

/// Writes several games into one CSA file, separated by `/` lines.
pub fn write_csa_games(games: &[GameRecord]) -> Result<String, WriteError> {
    let mut out = String::new();
    for (i, g) in games.iter().enumerate() {
        if i > 0 {
            out.push_str("/\n");
        }
        out.push_str(&write_csa(g)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handicap_pi_and_moves() {
        let text =
            "V2.2\nN+Shitate\nN-Uwate\n$EVENT:test\nPI82HI22KA\n-\n-5142OU,T3\n+7776FU\nT1.5\n'** -120\n%TORYO\n";
        let games = parse_csa(text).unwrap();
        assert_eq!(games.len(), 1);
        let g = &games[0];
        assert_eq!(g.handicap(), Some(crate::Handicap::TwoPiece));
        assert_eq!(g.to_usi_position(), format!("position sfen {} moves 5a4b 7g7f", crate::Handicap::TwoPiece.sfen()));
        assert_eq!(g.moves[0].time, Some(std::time::Duration::from_secs(3)));
        assert_eq!(g.moves[1].time, Some(std::time::Duration::from_millis(1500)));
        assert_eq!(g.moves[1].eval, Some(-120));
        assert_eq!(g.result, Some(GameResult { winner: Some(Color::Black), reason: EndReason::Resignation }));
        let again = parse_csa(&write_csa(g).unwrap()).unwrap();
        assert_eq!(&again[0], g);
    }

    #[test]
    fn errors_name_line_and_move() {
        let e = parse_csa("PI\n+\n+7776FU\n-3334FU\n+7776FU\n").unwrap_err();
        assert_eq!((e.line, e.move_number), (5, Some(3)));
        let e = parse_csa("PI\n+\n-3334FU\n").unwrap_err();
        assert!(matches!(e.kind, K::WrongSide { .. }), "{e}");
        let e = parse_csa("PI\n+\n+7776KA\n").unwrap_err();
        assert!(e.to_string().starts_with("line 3, move 1: invalid move"), "{e}");
        let e = parse_csa("PI\n+\n%TORYO\n+7776FU\n").unwrap_err();
        assert!(matches!(e.kind, K::MoveAfterEnd(_)), "{e}");
    }
}
